"""Paper 001 §IV.E, Fig. 9(b), against the CPU cost of QEMU's I/O path:
fio's random 4 KiB writes on the NVMe preset under baseline and reshaped
QEMU, with QEMU's event-loop thread (``qemu_path``,
``crates/hvio-sim/src/engine/stage/qemu.rs``) costing more or less per host
request. Reshaping's in-order writes leave QEMU as far fewer host requests,
so the dearer each one, the more it gains where the thread, not the drive,
is the limit: the table shows at what cost the ≥ +80 % goal would be met.
Rows with a cost per guest request (the virtqueue's work, which no merge
saves) show what that does to both QEMUs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import StudyError, Sweep
from .paper001 import (
    PCT,
    RANDOM_GOAL,
    by_system,
    check_paper,
    gain,
    paper_bandwidth,
    points,
    scale_note,
)

COLUMNS = [
    "µs per guest request",
    "µs per host request",
    "baseline MB/s",
    "reshaped MB/s",
    "reshaped vs baseline",
    "thread busy, baseline",
    "thread busy, reshaped",
    "host requests per guest request, reshaped",
]
DIGITS: dict[str, int | str] = {
    "µs per guest request": 2,
    "µs per host request": 2,
    "baseline MB/s": 1,
    "reshaped MB/s": 1,
    "reshaped vs baseline": PCT,
    "thread busy, baseline": "{:.0%}",
    "thread busy, reshaped": "{:.0%}",
    "host requests per guest request, reshaped": 3,
}


def path_costs(s: Sweep, index: int) -> tuple[float, float]:
    """The per-guest-request and per-host-request costs of run ``index``'s
    QEMU path, µs."""
    path = s.runs[index].config["vm"][0].get("qemu_path")
    if path is None:
        raise StudyError(f"run {index} has no qemu_path: every case of this study sets one")
    return float(path.get("guest_request_us", 0.0)), float(path.get("request_us", 0.0))


def analyse(s: Sweep, paper: dict[str, Any], where: Path | None) -> Analysis:
    check_paper(paper, where, ["bandwidth"])
    p = points(s)
    costs = [path_costs(s, int(i)) for i in p["run"]]
    p["guest_us"], p["request_us"] = [c[0] for c in costs], [c[1] for c in costs]
    preset = p["preset"].iloc[0]
    rows, data = [], []
    for guest_us, cost in sorted(set(costs)):
        sys = by_system(p, guest_us=guest_us, request_us=cost)
        base, resh = sys["baseline QEMU"], sys["reshaped QEMU"]
        g = gain(resh["mb_per_s"], base["mb_per_s"])
        rows.append(
            [
                guest_us,
                cost,
                base["mb_per_s"],
                resh["mb_per_s"],
                g,
                base["qemu_busy"],
                resh["qemu_busy"],
                resh["qemu_host_per_guest"],
            ]
        )
        data.append(
            {
                "guest_request_us": guest_us,
                "request_us": cost,
                "baseline_mb_per_s": base["mb_per_s"],
                "reshaped_mb_per_s": resh["mb_per_s"],
            }
        )
    want = RANDOM_GOAL.get(preset)
    notes = [scale_note(s)]
    paper_gain = paper_bandwidth(paper, preset, "random write", "baseline QEMU")
    if paper_gain is not None:
        notes.append(f"the paper's gain on its i7-4790 and P3700: {PCT.format(paper_gain)}")
    if want is not None:
        # Without a cost per guest request: where the goal is first met.
        alone = [r for r in rows if r[0] == 0.0]
        met = [r for r in alone if r[4] >= want]
        if met:
            notes.append(
                f"the {want:+.0f} % goal is reached from {met[0][1]:g} µs per host request "
                f"({PCT.format(met[0][4])}) in this sweep, with nothing per guest request"
            )
        elif alone:
            notes.append(
                f"the {want:+.0f} % goal is not reached up to {alone[-1][1]:g} µs per host request "
                f"(at most {PCT.format(max(r[4] for r in alone))}), with nothing per guest request"
            )
    table = Table(
        f"fio random 4 KiB writes, {preset} preset: reshaped against baseline QEMU "
        "by the cost of QEMU's path",
        pd.DataFrame(rows, columns=COLUMNS),
        DIGITS,
    )
    return Analysis(tables=[table], notes=notes, data=data)
