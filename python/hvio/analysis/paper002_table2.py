"""Paper 002, Table II: the shuffle after the last map as a share of sort's
job time, by the number of map waves, under (cfq, cfq): hvio's beside the
paper's (``experiments/paper002-table2.paper.toml``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import StudyError, Sweep


def analyse(s: Sweep, paper: dict[str, Any], where: Path) -> Analysis:
    rows_paper = paper.get("table2", [])
    if not rows_paper or not all({"waves", "share_pct", "source"} <= set(r) for r in rows_paper):
        raise StudyError(f"{where}: [[table2]] rows need waves, share_pct and source")
    by_waves = {r.params["input_waves"]: res for r, res in zip(s.runs, s.results)}
    missing = [r["waves"] for r in rows_paper if r["waves"] not in by_waves]
    if missing:
        raise StudyError(f"{where}: no run of the study has input_waves = {missing[0]}")
    rows, shares = [], []
    for p in rows_paper:
        run = by_waves[p["waves"]]
        shares.append(run["non_concurrent_shuffle_pct"])
        rows.append(
            {
                "waves": run["waves"],
                "MiB per VM": p["waves"] * float(run["wave_bytes"] >> 20),
                "job s": run["job_s"],
                "hvio %": run["non_concurrent_shuffle_pct"],
                "paper %": float(p["share_pct"]),
            }
        )
    t = Table(
        "sort under (cfq, cfq): the shuffle after the last map, as a share of the job",
        pd.DataFrame(rows),
        {"waves": 1, "MiB per VM": 0, "job s": 1, "hvio %": 1, "paper %": 1},
    )
    first, last = rows_paper[0], rows_paper[-1]
    notes = [
        f"hvio: {shares[0]:.1f} % at {first['waves']:g} wave, {shares[-1]:.1f} % at {last['waves']:g}"
        f" (paper: {first['share_pct']} % and {last['share_pct']} %)."
    ]
    return Analysis(tables=[t], notes=notes, data=shares)
