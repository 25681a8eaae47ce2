"""What the analyses of paper 002 (Ibrahim et al., ICPP 2011: adaptive disk
I/O scheduling for MapReduce) share: its four schedulers, the 16 (host,
guest) pairs host-major as its Table I's columns, and the job times of a
sweep of ``kind = "mapreduce"`` runs by pair.
"""

from __future__ import annotations

from typing import Any

from ..sweeps import Sweep

# The paper's four schedulers, in Table I's column order.
SCHEDULERS = ["cfq", "deadline", "anticipatory", "noop"]
# The 16 pairs, host-major: pair h * 4 + g is (SCHEDULERS[h], SCHEDULERS[g]).
PAIRS = [(h, g) for h in SCHEDULERS for g in SCHEDULERS]


def label(pair: tuple[str, str]) -> str:
    return f"({pair[0]}, {pair[1]})"


def by_pair(s: Sweep, benchmark: str | None = None) -> list[dict[str, Any]]:
    """The results of the 16 pairs in :data:`PAIRS` order (of ``benchmark``, if given)."""
    found = {
        (r["host"], r["guest"]): r for r in s.results if benchmark is None or r["benchmark"] == benchmark
    }
    return [found[p] for p in PAIRS]


def add(xs: list[float]) -> float:
    """The sum of ``xs`` added left to right."""
    total = 0.0
    for x in xs:
        total += x
    return total


def best(secs: list[float]) -> int:
    """The index of the shortest time (the first of equals)."""
    return min(range(len(secs)), key=lambda i: (secs[i], i))


def worst(secs: list[float]) -> int:
    """The index of the longest time (the last of equals)."""
    top = 0
    for i in range(len(secs)):
        if secs[i] >= secs[top]:
            top = i
    return top


def goal(met: bool, what: str, hvio: str) -> str:
    """A goal of the paper's (the direction of its effect), met or missed, with hvio's numbers."""
    return f"goal {'met' if met else 'missed'}: {what} (hvio: {hvio})."
