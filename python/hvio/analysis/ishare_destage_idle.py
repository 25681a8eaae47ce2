"""Paper 003 (iShare): iShare's goals behind the controller write cache by
the cache's idle delay before it destages (``disk.destage_idle_ms``): for
each delay, the twelve workloads' totals and ratios (Tables II-IV) and
Fig. 4's per-phase totals, then iShare/Blkio and every goal of
ishare-tables and ishare-fig4 side by side across the delays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table, number_text
from ..sweeps import StudyError, Sweep, load_study
from .ishare_fig4 import COLUMNS as PHASE_COLUMNS
from .ishare_fig4 import phase_goal, phase_means
from .ishare_tables import SCHEDULERS, _ratio, _total, bandwidth, goals

IDLE, FIG4 = "disk.destage_idle_ms", "Fig. 4"


def split_goal(line: str) -> tuple[str, str]:
    """A goal line "what (value)" split into its label and its value."""
    what, sep, value = line.rpartition(" (")
    return (what, value.removesuffix(")")) if sep else (line, "")


def _used_ms(study: Path) -> str:
    """The delay the other iShare studies use (ishare-tables' controller cache)."""
    try:
        cases = load_study(study.parent / "ishare-tables.study.toml").cases["disk"]
        return number_text(float(cases["controller write cache"]["disk.destage_idle_ms"]))
    except (StudyError, KeyError):
        return "?"


def analyse(s: Sweep, paper: dict[str, Any], where: Path) -> Analysis:
    delays = s.study.matrix[IDLE]
    workloads = [w for w in s.study.matrix["workload"] if w != FIG4]
    by = {
        (run.params[IDLE], run.params["workload"], run.params["scheduler"]): (run, r)
        for run, r in zip(s.runs, s.results)
    }
    tables, data = [], []
    matrix: dict[str, list[str]] = {}
    ratios = {w: [] for w in workloads}
    phases_of: list[str] = []
    for ms in delays:
        m = {w: {sched: bandwidth(by[(ms, w, sched)][1]) for sched in SCHEDULERS} for w in workloads}
        figs = [by[(ms, FIG4, sched)] for sched in SCHEDULERS]
        config = figs[0][0].config
        jobs = config["vm"][0]["job"]
        phases_of = [j["preset"] for j in jobs]
        phase_s, interval_s = float(jobs[0]["runtime_s"]), float(config["output"]["interval_s"])
        phases = [phase_means(r["series"]["mb_per_s"], interval_s, phase_s, len(jobs)) for _, r in figs]
        rows = [
            [
                w,
                _total(m[w]["cfq"]),
                _total(m[w]["blkio"]),
                _total(m[w]["ishare"]),
                _total(m[w]["ishare"]) / max(_total(m[w]["blkio"]), 1e-9),
                _ratio(m[w]["blkio"]),
                _ratio(m[w]["ishare"]),
            ]
            for w in workloads
        ]
        cols = ["workload", "CFQ", "Blkio", "iShare", "iShare/Blkio", "Blkio VM1:VM2", "iShare VM1:VM2"]
        tables.append(
            Table(
                f"destage_idle_ms = {number_text(float(ms))}: totals, MB/s",
                pd.DataFrame(rows, columns=cols),
                digits={c: 2 for c in cols[1:]},
            )
        )
        rows = []
        for p, w in enumerate(phases_of):
            c, b, i = phases[0][p], phases[1][p], phases[2][p]
            rows.append([p, w, _total(c), _total(b), _total(i), _ratio(i), _total(i) / max(_total(c), 1e-9)])
        tables.append(
            Table(
                f"destage_idle_ms = {number_text(float(ms))}: Fig. 4, mean total per phase, MB/s",
                pd.DataFrame(rows, columns=PHASE_COLUMNS),
                digits={"CFQ": 1, "Blkio": 1, "iShare": 1, "iShare VM1:VM2": 2, "iShare/CFQ total": 2},
            )
        )
        lines = goals(workloads, m) + [phase_goal(p, phases_of, phases) for p in range(len(phases_of))]
        for line, ok in lines:
            what, v = split_goal(line)
            matrix.setdefault(what, []).append(f"{v} {'yes' if ok else 'NO'}")
        for w in workloads:
            ratios[w].append(_total(m[w]["ishare"]) / max(_total(m[w]["blkio"]), 1e-9))
        data.append(
            {
                "destage_idle_ms": ms,
                "measured": [[m[w][sched] for sched in SCHEDULERS] for w in workloads],
                "fig4_phase_means": phases,
            }
        )
    head = [f"{number_text(float(ms))} ms" for ms in delays]
    tables.append(
        Table(
            "iShare/Blkio total by destage_idle_ms",
            pd.DataFrame([[w, *ratios[w]] for w in workloads], columns=["workload", *head]),
            digits={h: 2 for h in head},
        )
    )
    tables.append(
        Table(
            "goals by destage_idle_ms",
            pd.DataFrame([[what, *cells] for what, cells in matrix.items()], columns=["goal", *head]),
        )
    )
    runtime = number_text(
        float(by[(delays[0], workloads[0], SCHEDULERS[0])][0].config["vm"][0]["job"][0]["runtime_s"])
    )
    notes = [
        "controller cache (256 MiB write-back, CSCAN destage, 60 s age bound, destaged data kept clean; "
        f"adaptive read-ahead of 64 KiB, 64 segments) with each destage_idle_ms; {runtime} s per workload, "
        f"Fig. 4 as in ishare-fig4; the experiments use {_used_ms(s.study.path)} ms",
        "the cache destages at once, whatever the delay, when half of it is dirty, a run is due by age, "
        "a flush waits or a write waits for room",
    ]
    return Analysis(
        tables=tables,
        notes=notes,
        data={"sweep_ms": delays, "workloads": workloads, "phases": phases_of, "runs": data},
    )
