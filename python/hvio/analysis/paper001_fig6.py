"""Paper 001 §IV.B, Fig. 6: fio's mean latency of sequential and random
4 KiB writes on bare metal, baseline and reshaped QEMU, reshaped against
baseline with the paper's figure beside (a percentage, or its word where it
gives none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import Sweep
from .paper001 import PCT, SYSTEMS, WORKLOADS, by_system, check_paper, gain, points, result, scale_note

COLUMNS = ["workload", "bare metal ms", "baseline ms", "reshaped ms", "reshaped vs baseline", "paper"]
DIGITS: dict[str, int | str] = {
    "bare metal ms": 2,
    "baseline ms": 2,
    "reshaped ms": 2,
    "reshaped vs baseline": PCT,
    "paper": PCT,
}


def analyse(s: Sweep, paper: dict[str, Any], where: Path | None) -> Analysis:
    check_paper(paper, where, ["latency"])
    p = points(s)
    said = {r["workload"]: r.get("percent", r.get("said")) for r in paper["latency"]}
    rows, data = [], []
    for w in WORKLOADS:
        sys = by_system(p, workload=w)
        metal, base, resh = (sys[x]["mean_latency_ms"] for x in SYSTEMS)
        rows.append([w, metal, base, resh, gain(resh, base), said.get(w)])
        data.append({"workload": w, "systems": [{"system": x, "result": result(sys[x])} for x in SYSTEMS]})
    table = Table(
        "fio mean latency, SATA SSD (850 PRO preset), host noop",
        pd.DataFrame(rows, columns=COLUMNS),
        DIGITS,
        "–",
    )
    return Analysis(tables=[table], notes=[scale_note(s)], data=data)
