"""Paper 000 (Pregather) §5.1, Fig. 5: two sequential readers in one VM,
Pregather with zone sizes B from 10 to 10⁷ sectors against CFQ and AS, for
each guest model of the study: the readers' execution times, the share of
zero seek distances, Pregather's waits, and the fastest B per guest model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import StudyError, Sweep
from .pregather import DISK, MISSING, check_claims, counter, exec_time, guest_label

COLUMNS = [
    "guests",
    "scheduler",
    "B (sectors)",
    "SR-M-1 s",
    "SR-M-2 s",
    "mean s",
    "zero seek %",
    "waits",
    "wait success %",
    "paper mean s",
    "paper zero seek %",
]
DIGITS = {
    "SR-M-1 s": 2,
    "SR-M-2 s": 2,
    "mean s": 2,
    "zero seek %": 2,
    "waits": 0,
    "wait success %": 2,
    "paper mean s": 2,
    "paper zero seek %": 1,
}


def _scheduler(config: dict[str, Any]) -> tuple[str, int | None]:
    """A run's row label and zone size: "pregather", "pregather (Eq. 7
    literal)" (intervals from arrival to arrival) or the scheduler's name."""
    host = config["host"]
    params = host.get("params", {})
    if host["scheduler"] != "pregather":
        return host["scheduler"], None
    literal = params.get("interval_from_completion", 1) == 0
    return ("pregather (Eq. 7 literal)" if literal else "pregather"), params.get("zone_sectors")


def analyse(s: Sweep, paper: dict[str, Any], where: Path) -> Analysis:
    check_claims(paper, where, ["Fig. 5"])
    if "fig5" not in paper or "cfq" not in paper:
        raise StudyError(f"{where}: needs [[fig5]] rows and [cfq]")
    rows, data = [], []
    notes = [
        f"disk: {DISK}; λ = 2, window 20 ms; each reader: sysbench seqrd over 128 files of 2 GiB in total, "
        "160 MB"
    ]
    best: dict[str, tuple[float, int]] = {}
    for run, r in zip(s.runs, s.results):
        g = run.params["guests"]
        label, b = _scheduler(run.config)
        a, c = exec_time(r, "vm1", "SR-M-1"), exec_time(r, "vm1", "SR-M-2")
        mean = ((a or 0.0) + (c or 0.0)) / 2.0
        ours = label.startswith("pregather")
        said = (
            next((p for p in paper["fig5"] if p["zone_sectors"] == b), None) if label == "pregather" else None
        )
        paper_mean = said.get("mean_s") if said else (paper["cfq"]["mean_s"] if label == "cfq" else None)
        rows.append(
            [
                g,
                label,
                b if b is not None else MISSING,
                a,
                c,
                mean,
                100.0 * r["host"]["seek"]["zero_frac"],
                counter(r, "waits_started") if ours else None,
                100.0 * counter(r, "wait_success_ratio") if ours else None,
                paper_mean,
                said.get("zero_seek_pct") if said else None,
            ]
        )
        data.append(
            {
                "guests": g,
                "scheduler": label,
                "B": b,
                "exec_s": [a, c],
                "mean_s": mean,
                "zero_seek": r["host"]["seek"]["zero_frac"],
                "counters": r["host"]["counters"],
            }
        )
        if label == "pregather" and (g not in best or mean < best[g][0]):
            best[g] = (mean, b)
    for g in s.study.matrix["guests"]:
        if g in best:
            m, b = best[g]
            notes.append(f"{guest_label(g)}: the fastest B is {b} ({m:.2f} s mean)")
    claim = next(c for c in paper["claims"] if c["figure"] == "Fig. 5")
    notes.append(f"paper: {claim['text']}")
    table = Table(
        "Fig. 5: two sequential readers in one VM",
        pd.DataFrame(rows, columns=COLUMNS),
        digits=DIGITS,
        missing=MISSING,
    )
    return Analysis(tables=[table], notes=notes, data=data)
