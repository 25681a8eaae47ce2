"""Paper 002, §IV.C and Fig. 7-a: Algorithm 1's two-phase plan for sort
against the brute force, the default pair and the best single pair, from
one ``kind = "mapreduce-tune"`` run (``experiments/paper002-adaptive.study.toml``):
the plans' job times with the paper's gains beside hvio's
(``paper002-adaptive.paper.toml``), each switching plan phase by phase
beside its pairs' single runs with the backlog the second pair inherits,
the profile, and the paper's goals met or missed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import StudyError, Sweep
from .paper002 import goal, tuned

# hvio's goals for the paper's gains (25 % and 10 %): the direction with a
# margin, and Algorithm 1 near the optimum within its bound of runs.
OVER_DEFAULT_PCT, OVER_BEST_SINGLE_PCT, GAP_PCT = 15.0, 5.0, 2.0


def check_paper(paper: dict[str, Any], where: Path) -> dict[str, dict[str, Any]]:
    plans = {p.get("plan"): p for p in paper.get("plan", [])}
    for name in ("default", "best single pair", "Algorithm 1"):
        if not {"pct", "source"} <= set(plans.get(name, {})):
            raise StudyError(f"{where}: [[plan]] {name!r} needs pct and source")
    if not {"over_default_pct", "over_best_single_pct", "source"} <= set(paper.get("gains", {})):
        raise StudyError(f"{where}: [gains] needs over_default_pct, over_best_single_pct and source")
    return plans


def phase_by_phase(t: Any) -> tuple[Table, list[str]]:
    """Each switching plan (Algorithm 1's, the brute force's) phase by phase
    beside the single-pair runs of its two pairs: a single pair's phase-2
    time is measured after its own map phase, and a plan's second pair
    inherits the first pair's backlog instead (the guests' dirty pages and
    queued requests as the map ends), which the profile does not see."""
    rows, notes = [], []
    plans: list[tuple[str, dict[str, Any]]] = [("Algorithm 1", t.heuristic)]
    if t.brute is not None:
        plans.append(("brute force", t.brute))
    for name, found in plans:
        plan = found["plan"]
        if len(plan) != 2 or plan[0] == plan[1]:
            continue

        def row(who: str, p: list[int], phase_s: list[float]) -> None:
            b = t.backlog(p)
            rows.append(
                {
                    "run": who,
                    "pairs": t.plan_label(p),
                    "map s": phase_s[0],
                    "shuffle+reduce s": phase_s[1],
                    "job s": t.total(phase_s),
                    "dirty + write-back MiB": t.mib(b),
                    "queued requests": b["guest_queued"] + b["host_queued"],
                }
            )

        row(f"{name}'s plan", plan, found["outcome"]["phase_s"])
        for s in plan:
            row("single pair", [s, s], t.profile["single"][s]["phase_s"])
        a, b = plan
        predicted = t.profile["phase_s"][0][a] + t.profile["phase_s"][1][b]
        notes.append(
            f"hvio: {name}'s plan {t.label(a)} -> {t.label(b)}: its shuffle+reduce under {t.label(b)}"
            f" took {found['outcome']['phase_s'][1]:.2f} s, {t.profile['phase_s'][1][b]:.2f} s in"
            f" {t.label(b)}'s own run; the profile's phases add up to {predicted:.2f} s, the plan ran"
            f" {t.found_s(found):.2f} s. {t.label(a)} left {t.mib(t.backlog([a, a])):.0f} MiB dirty or"
            f" under write-back in the guests as the map ended, {t.label(b)} left"
            f" {t.mib(t.backlog([b, b])):.0f} MiB."
        )
    digits: dict[str, int | str] = {
        "map s": 2,
        "shuffle+reduce s": 2,
        "job s": 2,
        "dirty + write-back MiB": 0,
    }
    table = Table(
        "switching plans phase by phase beside the single-pair runs of their pairs (s);"
        " the cluster's backlog as the map ended",
        pd.DataFrame(rows, columns=["run", "pairs", *digits, "queued requests"]),
        digits,
    )
    return table, notes


def analyse(s: Sweep, paper: dict[str, Any], where: Path) -> Analysis:
    plans = check_paper(paper, where)
    if len(s.results) != 1:
        runs = len(s.results)
        raise StudyError(f"{s.study.path}: paper002-adaptive analyses one mapreduce-tune run, not {runs}")
    t = tuned(s.results[0], s.study.path)
    if t.brute is None:
        raise StudyError(f"{s.study.path}: paper002-adaptive needs the brute force: tune.brute_force = true")
    total = t.profile["total_s"]
    default_s = total[t.default]

    def gain(secs: float) -> float:
        return (default_s - secs) / default_s * 100.0

    def paper_pct(name: str) -> Any:
        p = plans[name]
        return f"{p['pct']} ({p['from']})" if "from" in p else p["pct"]

    single = t.best_single
    heuristic_s, fastest_s, brute_s = t.found_s(t.heuristic), t.found_s(t.fastest), t.found_s(t.brute)
    profile_runs = t.profile["runs"]
    rows = [
        ["default", t.label(t.default), default_s, None, 0.0, paper_pct("default")],
        [
            "best single pair",
            t.label(single),
            total[single],
            profile_runs,
            gain(total[single]),
            paper_pct("best single pair"),
        ],
        [
            "Algorithm 1",
            t.plan_label(t.heuristic["plan"]),
            heuristic_s,
            f"{profile_runs} + {t.heuristic['runs']}",
            gain(heuristic_s),
            paper_pct("Algorithm 1"),
        ],
        ["fastest run", t.plan_label(t.fastest["plan"]), fastest_s, 0, gain(fastest_s), None],
        ["brute force", t.plan_label(t.brute["plan"]), brute_s, t.brute["runs"], gain(brute_s), None],
    ]
    vs = f"vs {t.label(t.default)} %"
    plans_table = Table(
        "sort: two-phase plans (map | shuffle+reduce), the switch at the shuffle with drain",
        pd.DataFrame(rows, columns=["plan", "pairs", "job s", "runs", vs, "paper %"]),
        {"job s": 1, vs: 1},
    )
    profile = Table(
        "profile: each pair's time per phase (s)",
        pd.DataFrame(
            {
                "pair": [t.label(p) for p in range(len(t.pairs))],
                "map": t.profile["phase_s"][0],
                "shuffle+reduce": t.profile["phase_s"][1],
                "job": total,
            }
        ),
        {"map": 1, "shuffle+reduce": 1, "job": 1},
    )
    by_phase, notes = phase_by_phase(t)
    gap = t.over(heuristic_s, brute_s)
    fastest_gap = t.over(fastest_s, brute_s)
    over_best = t.under(heuristic_s, total[single])
    over_default = t.under(heuristic_s, default_s)
    bound = len(t.phases) * len(t.pairs)
    runs = t.heuristic["runs"]
    gains = paper["gains"]
    notes += [
        f"hvio: the fastest of the runs the profile and Algorithm 1 made, {t.plan_label(t.fastest['plan'])},"
        f" is {fastest_gap:.2f} % over the brute-force optimum (no run of its own: Algorithm 1 stops at the"
        " first pair that does not help, so its plan can be slower than a pair it already ran).",
        f"Algorithm 1 is {gap:.2f} % over the brute-force optimum with {runs} runs beyond the {profile_runs}"
        f" profiling runs (bound: P x S = {bound}); the brute force ran {t.brute['runs']}.",
        f"Algorithm 1's plan is {over_best:.1f} % faster than the best single pair (paper:"
        f" {gains['over_best_single_pct']} %) and {over_default:.1f} % faster than {t.label(t.default)}"
        f" (paper: {gains['over_default_pct']} %).",
        goal(
            over_default >= OVER_DEFAULT_PCT,
            f"the adaptive plan beats {t.label(t.default)} by {OVER_DEFAULT_PCT:g} % or more",
            f"{over_default:.1f} %",
        ),
        goal(
            over_best >= OVER_BEST_SINGLE_PCT,
            f"the adaptive plan beats the best single pair by {OVER_BEST_SINGLE_PCT:g} % or more",
            f"{over_best:.1f} %",
        ),
        goal(
            gap <= GAP_PCT and runs <= bound,
            f"Algorithm 1 within {GAP_PCT:g} % of the brute-force optimum with at most P x S = {bound} runs"
            " beyond the profile",
            f"{gap:.2f} % over it with {runs} runs",
        ),
    ]
    return Analysis(tables=[plans_table, by_phase, profile], notes=notes, data=s.results[0])
