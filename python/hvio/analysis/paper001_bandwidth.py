"""Paper 001 §IV.B, Fig. 5 (and §IV.E, Fig. 9 for the NVMe drive): fio's
sequential and random 4 KiB writes on bare metal, baseline and reshaped
QEMU: bandwidth, reshaped against baseline QEMU and against bare metal
with the paper's gains beside, and the write amplification of the drive and
of reshaping that explains them. The goals: random writes ≥ +50 % over
baseline QEMU on the SATA preset (≥ +80 % on NVMe), sequential within ±5 %.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import Sweep
from .paper001 import (
    DASH,
    PCT,
    SYSTEMS,
    WORKLOADS,
    by_system,
    check_paper,
    gain,
    paper_bandwidth,
    paper_baseline_vs_metal,
    points,
    result,
    rounds_note,
    scale_note,
    workload_goal,
)

COLUMNS = [
    "workload",
    "bare metal MB/s",
    "baseline MB/s",
    "reshaped MB/s",
    "reshaped vs baseline",
    "paper",
    "reshaped vs bare metal",
    "paper",
    "baseline vs bare metal",
    "paper (derived)",
    "QEMU thread busy, baseline / reshaped",
    "device WA baseline",
    "device WA reshaped",
    "host WA reshaped",
]
DIGITS: dict[str, int | str] = {
    "bare metal MB/s": 1,
    "baseline MB/s": 1,
    "reshaped MB/s": 1,
    "reshaped vs baseline": PCT,
    "paper": PCT,
    "reshaped vs bare metal": PCT,
    "baseline vs bare metal": PCT,
    "paper (derived)": PCT,
    "device WA baseline": 2,
    "device WA reshaped": 2,
    "host WA reshaped": 3,
}
# The table's title by drive preset.
TITLES = {
    "samsung-850-pro-256": "fio bandwidth, SATA SSD (850 PRO preset), host noop",
    "intel-p3700-400": "fio bandwidth, NVMe SSD (P3700 preset), host noop",
}


def busy(base: pd.Series, resh: pd.Series) -> str:
    """The share of the run QEMU's thread was busy under baseline and
    reshaped QEMU (a dash without ``qemu_path``)."""
    return " / ".join(f"{r['qemu_busy']:.0%}" if r["qemu_host_per_guest"] > 0 else DASH for r in (base, resh))


def analyse(s: Sweep, paper: dict[str, Any], where: Path | None) -> Analysis:
    check_paper(paper, where, ["bandwidth"])
    p = points(s)
    preset = p["preset"].iloc[0]
    rows, data, goals = [], [], []
    for w in WORKLOADS:
        sys = by_system(p, workload=w)
        metal, base, resh = (sys[x] for x in SYSTEMS)
        g = gain(resh["mb_per_s"], base["mb_per_s"])
        rows.append(
            [
                w,
                metal["mb_per_s"],
                base["mb_per_s"],
                resh["mb_per_s"],
                g,
                paper_bandwidth(paper, preset, w, "baseline QEMU"),
                gain(resh["mb_per_s"], metal["mb_per_s"]),
                paper_bandwidth(paper, preset, w, "bare metal"),
                gain(base["mb_per_s"], metal["mb_per_s"]),
                paper_baseline_vs_metal(paper, preset, w),
                busy(base, resh),
                base["device_wa"],
                resh["device_wa"],
                resh["host_wa"],
            ]
        )
        goals.append(workload_goal(preset, w, g))
        data.append(
            {
                "workload": w,
                "systems": [{"system": x, "result": result(sys[x])} for x in SYSTEMS],
            }
        )
    rand = by_system(p, workload="random write")
    notes = [
        scale_note(s),
        "random writes: the drive copied {:.2f} pages per page written under baseline QEMU and {:.2f} "
        "under reshaping (reshaping's own write amplification {:.3f}, its cleaning {:.1f} MB)".format(
            rand["baseline QEMU"]["device_wa"] - 1.0,
            rand["reshaped QEMU"]["device_wa"] - 1.0,
            rand["reshaped QEMU"]["host_wa"],
            rand["reshaped QEMU"]["cleaning_mb"],
        ),
        "paper (derived): baseline QEMU against bare metal from the paper's two numbers for reshaped QEMU, "
        "(1 + against bare metal) / (1 + against baseline) − 1",
        *goals,
    ]
    note = rounds_note(p)
    if note:
        notes.append(note)
    table = Table(
        TITLES.get(preset, f"fio bandwidth, {preset}, host noop"),
        pd.DataFrame(rows, columns=COLUMNS),
        DIGITS,
        DASH,
    )
    return Analysis(tables=[table], notes=notes, data=data)
