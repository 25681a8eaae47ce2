"""Paper 002, §IV.B and Fig. 5: the cost of switching between (host, guest)
pairs, ``Cost(a → b) = T_ab − ½ (T_a + T_b)``, from one ``kind =
"switch-cost"`` run (``experiments/paper002-fig5.study.toml``): the cost of
every ordered pair, dd's time under each pair alone, and the paper's goals:
the costs are not symmetric, a switch to the same pair is not free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import StudyError, Sweep
from .paper002 import add, goal, label


def code(pair: dict[str, str]) -> str:
    """The paper's two-letter name of a pair: host then guest, c/d/a/n."""
    return pair["host"][:1] + pair["guest"][:1]


def asymmetry(cost: list[list[float]]) -> tuple[float, int, int]:
    """The largest ``|cost(a → b) − cost(b → a)|`` and its pair (the first of equals)."""
    worst = (0.0, 0, 0)
    for a in range(len(cost)):
        for b in range(a + 1, len(cost)):
            d = abs(cost[a][b] - cost[b][a])
            if d > worst[0]:
                worst = (d, a, b)
    return worst


def analyse(s: Sweep, paper: dict[str, Any], where: Path) -> Analysis:
    for k in ("costs", "asymmetry", "to_self"):
        if not {"text", "source"} <= set(paper.get(k, {})):
            raise StudyError(f"{where}: [{k}] needs text and source")
    if len(s.results) != 1:
        raise StudyError(f"{s.study.path}: paper002-fig5 analyses one switch-cost run, not {len(s.results)}")
    r = s.results[0]
    codes = [code(p) for p in r["pairs"]]
    cost = r["cost_s"]
    ms = [[c * 1000.0 for c in row] for row in cost]
    t = Table(
        "switch cost (ms): T(from, switched to `to` halfway) - (T(from) + T(to)) / 2",
        pd.DataFrame([[codes[a], *row] for a, row in enumerate(ms)], columns=["from \\ to", *codes]),
        {c: 1 for c in codes},
    )
    alone = Table(
        "dd alone under each pair (s)",
        pd.DataFrame({"pair": [label((p["host"], p["guest"])) for p in r["pairs"]], "T": r["alone_s"]}),
        {"T": 2},
    )
    flat = [c for row in cost for c in row]
    lo, hi = min(flat), max(flat)
    mean = add(flat) / len(flat)
    gap, a, b = asymmetry(cost)
    to_self = [cost[i][i] for i in range(len(cost))]
    self_lo, self_hi = min(to_self), max(to_self)
    notes = [
        f"hvio: costs from {lo * 1000.0:.1f} to {hi * 1000.0:.1f} ms, mean {mean * 1000.0:.1f} ms"
        f" (paper: {paper['costs']['text']}).",
        f"hvio: the most asymmetric ordered pair: {codes[a]} -> {codes[b]} costs"
        f" {cost[a][b] * 1000.0:.1f} ms, {codes[b]} -> {codes[a]} {cost[b][a] * 1000.0:.1f} ms"
        f" (paper: {paper['asymmetry']['text']}).",
        f"hvio: the largest difference between the two directions is {gap * 1000.0:.1f} ms.",
        f"hvio: a pair switched to itself costs {self_lo * 1000.0:.1f} to {self_hi * 1000.0:.1f} ms"
        f" (paper: {paper['to_self']['text']}).",
        goal(
            gap > 0.1 * max(abs(mean), 1e-3),
            "switch costs differ by ordered pair and are not symmetric",
            f"the two directions differ by up to {gap * 1000.0:.1f} ms against a mean cost of"
            f" {mean * 1000.0:.1f} ms",
        ),
        goal(
            self_lo > 0.0,
            "a switch to the same pair is not free",
            f"{self_lo * 1000.0:.1f} to {self_hi * 1000.0:.1f} ms",
        ),
        f"setup: one node, {r['vms']} VMs each writing {r['bytes'] >> 20} MiB in {r['block'] >> 20} MiB"
        f" blocks through a {r['page_cache_bytes'] >> 20} MiB guest page cache (dd returns when its last"
        " block is in the cache), the switch halfway through T(from) with drain, host and guests both"
        f" re-assigned; {r['runs']} runs.",
    ]
    data = {"pairs": codes, "costs": {k: r[k] for k in ("alone_s", "switched_s", "cost_s", "runs")}}
    return Analysis(tables=[t, alone], notes=notes, data=data)
