"""Paper 001 §IV.D, Fig. 8: fio's sequential and random 4 KiB writes on the
SATA SSD under each host scheduler, baseline and reshaped QEMU, and how far
apart the schedulers leave reshaped QEMU (the paper: "similar").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import StudyError, Sweep
from .paper001 import PCT, WORKLOADS, by_system, gain, points, scale_note

COLUMNS = ["scheduler", "workload", "baseline MB/s", "reshaped MB/s", "reshaped vs baseline"]
DIGITS: dict[str, int | str] = {"baseline MB/s": 1, "reshaped MB/s": 1, "reshaped vs baseline": PCT}
NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five"}


def analyse(s: Sweep, paper: dict[str, Any], where: Path | None) -> Analysis:
    claim = next((c for c in paper.get("claims", []) if c.get("figure") == "Fig. 8"), None)
    if claim is None:
        raise StudyError(f'{where}: no [[claims]] with figure = "Fig. 8" and its text')
    p = points(s)
    schedulers = list(dict.fromkeys(p["scheduler"]))
    rows, data = [], []
    reshaped: dict[str, list[float]] = {w: [] for w in WORKLOADS}
    for sched in schedulers:
        grid = []
        for w in WORKLOADS:
            sys = by_system(p, scheduler=sched, workload=w)
            base, resh = sys["baseline QEMU"]["mb_per_s"], sys["reshaped QEMU"]["mb_per_s"]
            rows.append([sched, w, base, resh, gain(resh, base)])
            reshaped[w].append(resh)
            grid.append({"workload": w, "baseline": {"mb_per_s": base}, "reshaped": {"mb_per_s": resh}})
        data.append({"scheduler": sched, "grid": grid})

    def spread(w: str) -> float:
        v = reshaped[w]
        return (max(v) / max(min(v), 1e-12) - 1.0) * 100.0

    n = NUMBERS.get(len(schedulers), str(len(schedulers)))
    notes = [
        scale_note(s),
        f"reshaped QEMU across the {n} host schedulers: sequential writes within "
        f"{spread(WORKLOADS[0]):.1f} %, random writes within {spread(WORKLOADS[1]):.1f} % of each other "
        f'(the paper: "similar" under all {n})',
    ]
    table = Table(
        "fio bandwidth by host scheduler, SATA SSD (850 PRO preset)",
        pd.DataFrame(rows, columns=COLUMNS),
        DIGITS,
    )
    return Analysis(tables=[table], notes=notes, data=data)
