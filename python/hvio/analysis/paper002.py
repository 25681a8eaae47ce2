"""What the analyses of paper 002 (Ibrahim et al., ICPP 2011: adaptive disk
I/O scheduling for MapReduce) share: its four schedulers, the 16 (host,
guest) pairs host-major as its Table I's columns, and the job times of a
sweep of ``kind = "mapreduce"`` runs by pair.
"""

from __future__ import annotations

from typing import Any

from ..sweeps import StudyError, Sweep

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


class Tuned:
    """A ``kind = "mapreduce-tune"`` run's result, read: its pairs, profile,
    Algorithm 1's plan (``heuristic``), the fastest plan run (``fastest``)
    and the brute force's (``brute``, or ``None``), with the arithmetic of
    the search's own (``tune::search``) on it."""

    def __init__(self, r: dict[str, Any]):
        self.pairs = [(p["host"], p["guest"]) for p in r["pairs"]]
        self.phases = r["phases"]
        self.profile = r["profile"]
        self.best_single = r["best_single"]
        self.heuristic = r["heuristic"]
        self.fastest = r["fastest_run"]
        self.brute = r["brute_force"]
        self.default = r["default"]
        self._backlogs = {tuple(p["plan"]): p["backlog"] for p in r["plans"]}

    def label(self, p: int) -> str:
        return label(self.pairs[p])

    def plan_label(self, plan: list[int]) -> str:
        return " -> ".join(self.label(p) for p in plan)

    @staticmethod
    def total(phase_s: list[float]) -> float:
        """A run's job time as the search adds it: its phases, then its switches (none here)."""
        return add(phase_s) + 0.0

    def found_s(self, found: dict[str, Any]) -> float:
        o = found["outcome"]
        return add(o["phase_s"]) + add(o["switch_s"])

    def backlog(self, plan: list[int]) -> dict[str, int]:
        """The backlog the plan's second pair inherited (zeros for a plan not run)."""
        zero = {"dirty_bytes": 0, "writeback_bytes": 0, "guest_queued": 0, "host_queued": 0}
        return self._backlogs.get(tuple(plan), zero)

    @staticmethod
    def mib(b: dict[str, int]) -> float:
        return (b["dirty_bytes"] + b["writeback_bytes"]) / float(1 << 20)

    @staticmethod
    def over(value: float, reference: float) -> float:
        """How much longer ``value`` is than ``reference``, in percent."""
        return (value - reference) / reference * 100.0 if reference > 0.0 else 0.0

    @staticmethod
    def under(value: float, reference: float) -> float:
        """How much shorter ``value`` is than ``reference``, in percent."""
        return (reference - value) / reference * 100.0 if reference > 0.0 else 0.0


def tuned(r: dict[str, Any], where: Any) -> Tuned:
    """A ``mapreduce-tune`` result whose config's own pair is a candidate (the gains' reference)."""
    if r.get("default") is None:
        raise StudyError(
            f"{where}: the run's [host] scheduler and guest_scheduler must be one of the candidate pairs"
        )
    return Tuned(r)
