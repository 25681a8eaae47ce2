"""Paper 002, Fig. 2: wordcount, wordcount without its combiner and sort
under the 16 (host, guest) pairs: each benchmark's spread across the pairs,
its best pair and that pair's gain over (cfq, cfq), beside the paper's
words (``experiments/paper002-fig2.paper.toml``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import StudyError, Sweep
from .paper002 import PAIRS, best, by_pair, label, worst


def analyse(s: Sweep, paper: dict[str, Any], where: Path) -> Analysis:
    said = paper.get("fig2", [])
    if not said or not all({"benchmark", "text", "source"} <= set(x) for x in said):
        raise StudyError(f"{where}: [[fig2]] rows need benchmark, text and source")
    benchmarks = [x["benchmark"] for x in said]
    secs = {b: [r["job_s"] for r in by_pair(s, b)] for b in benchmarks}
    rows = [{"pair": label(p), **{b: secs[b][i] for b in benchmarks}} for i, p in enumerate(PAIRS)]
    t = Table("job time (s) per benchmark and pair", pd.DataFrame(rows), {b: 1 for b in benchmarks})
    notes = []
    for x in said:
        t_b = secs[x["benchmark"]]
        lo, hi = best(t_b), worst(t_b)
        spread = (t_b[hi] - t_b[lo]) / t_b[lo] * 100.0
        gain = (t_b[0] - t_b[lo]) / t_b[0] * 100.0
        notes.append(
            f"{x['benchmark']}: hvio spread {spread:.1f} %; best {label(PAIRS[lo])},"
            f" {gain:.1f} % faster than (cfq, cfq) (paper: {x['text']})."
        )
    data = [{"benchmark": b, "job_s": secs[b]} for b in benchmarks]
    return Analysis(tables=[t], notes=notes, data=data)
