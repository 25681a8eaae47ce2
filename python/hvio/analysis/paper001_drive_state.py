"""Paper 001's Fig. 5 and 9 under the drive states the paper does not
state: fio's sequential and random 4 KiB writes on both SSD presets at the
workload's own steady state (SNIA PTS; the reshaped image fresh for each
run or kept across rounds), fresh, filled in order, at steady state under
random overwrites of the whole drive, or at that steady state with the
image file's range trimmed; reshaped against baseline QEMU with the paper's gain for the
drive beside, and the goals met or missed in each state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import Sweep
from .paper001 import (
    PCT,
    RANDOM_GOAL,
    WORKLOADS,
    by_system,
    capacity,
    check_paper,
    config,
    fio_scale,
    gain,
    paper_bandwidth,
    points,
    result,
    rounds_note,
)

COLUMNS = [
    "drive",
    "state",
    "workload",
    "baseline MB/s",
    "reshaped MB/s",
    "reshaped vs baseline",
    "paper",
    "device WA baseline",
    "device WA reshaped",
    "host WA reshaped",
    "cleaning MB reshaped",
    "rounds baseline / reshaped",
]
DIGITS: dict[str, int | str] = {
    "baseline MB/s": 1,
    "reshaped MB/s": 1,
    "reshaped vs baseline": PCT,
    "paper": PCT,
    "device WA baseline": 2,
    "device WA reshaped": 2,
    "host WA reshaped": 3,
    "cleaning MB reshaped": 1,
}
STATES_NOTE = (
    "states: workload steady state = as SNIA's PTS preconditions: filled in order twice, then the run's own "
    "fio job repeated in rounds until its bandwidth and the drive's write amplification settle, the reshaped "
    "image created afresh for each round and the run (fig5–fig9's state); image kept = the same with one "
    "reshaped image from round to round; fresh = no page written; filled in order = every logical page "
    "written once, in order; steady state = every logical page written, then random overwrites of the whole "
    "drive until write amplification settles; image trimmed = steady state, then the image file's range "
    "trimmed, as a freshly created image file on a host file system that discards"
)


def analyse(s: Sweep, paper: dict[str, Any], where: Path | None) -> Analysis:
    check_paper(paper, where, ["bandwidth"])
    p = points(s)
    rows, data, met = [], [], []
    for drive in s.study.matrix["drive"]:
        for state in s.study.matrix["state"]:
            for w in WORKLOADS:
                sys = by_system(p, drive=drive, state=state, workload=w)
                base, resh = sys["baseline QEMU"], sys["reshaped QEMU"]
                preset = base["preset"]
                g = gain(resh["mb_per_s"], base["mb_per_s"])
                rows.append(
                    [
                        drive,
                        state,
                        w,
                        base["mb_per_s"],
                        resh["mb_per_s"],
                        g,
                        paper_bandwidth(paper, preset, w, "baseline QEMU"),
                        base["device_wa"],
                        resh["device_wa"],
                        resh["host_wa"],
                        resh["cleaning_mb"],
                        f"{base['precondition_rounds']} / {resh['precondition_rounds']}",
                    ]
                )
                data.append(
                    {
                        "drive": preset,
                        "state": state,
                        "workload": w,
                        "baseline": result(base),
                        "reshaped": result(resh),
                    }
                )
                if w == "random write" and g >= RANDOM_GOAL.get(preset, float("inf")):
                    met.append(f"{drive}, {state}")
    c = config(s)
    threads, mib = fio_scale(c)
    rounds = rounds_note(p)
    notes = [
        f"scale: {threads} threads × {mib} MiB, 4 KiB O_DIRECT writes at iodepth 64, each drive scaled to "
        f"{capacity(c)} GiB; the fio files are written once in each run or round",
        STATES_NOTE,
        "goal (random writes ≥ +50 % over baseline QEMU on the SATA preset, ≥ +80 % on NVMe): "
        + (f"met in {', '.join(met)}" if met else "met in no drive state"),
        *([rounds] if rounds else []),
    ]
    table = Table("fio bandwidth by drive state, host noop", pd.DataFrame(rows, columns=COLUMNS), DIGITS)
    return Analysis(tables=[table], notes=notes, data=data)
