"""Paper 003 (iShare) §5.3, Fig. 4: two VMs weighted 2:1 whose workload
changes every phase (O-SW, U-SR, U-SR, O-SR, U-SW, O-SW, O-RW) under CFQ,
Blkio and iShare, on each disk of the study: each VM's mean bandwidth per
phase (from the runs' series, leaving out the first tenth of each phase,
while the previous phase's requests drain and the new jobs start) and the
goals §5.3 describes: iShare keeps VM1:VM2 in 1.7..2.3 in an overloaded
phase and reaches 0.9× CFQ's total in an underloaded one.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table, number_text
from ..sweeps import Sweep
from .ishare_tables import SCHEDULERS

COLUMNS = ["phase", "workload", "CFQ", "Blkio", "iShare", "iShare VM1:VM2", "iShare/CFQ total"]


def _total(b: dict[str, Any]) -> float:
    return b["vm1"] + b["vm2"]


def _ratio(b: dict[str, Any]) -> float:
    return b["vm1"] / max(b["vm2"], 1e-9)


def phase_means(
    series: list[list[float]], interval_s: float, phase_s: float, phases: int
) -> list[dict[str, Any]]:
    """Each VM's mean MB/s per phase, leaving out the first tenth of each phase."""
    per = max(math.floor(phase_s / interval_s + 0.5), 1)
    skip = per // 10

    def mean(v: list[float], p: int) -> float:
        return sum(v[p * per + skip : p * per + per]) / (per - skip)

    return [
        {"vm1": mean(series[0], p), "vm2": mean(series[1], p), "underloaded": None} for p in range(phases)
    ]


def phase_goal(p: int, workloads: list[str], phases: list[list[dict[str, Any]]]) -> tuple[str, bool]:
    """The goal of phase ``p`` of ``phases[scheduler][phase]``."""
    w = workloads[p]
    c, i = phases[0][p], phases[2][p]
    if w.startswith("O-"):
        return f"phase {p} {w}: iShare VM1:VM2 in 1.7..2.3 ({_ratio(i):.2f})", 1.7 <= _ratio(i) <= 2.3
    g = _total(i) / max(_total(c), 1e-9)
    return f"phase {p} {w}: iShare total ≥ 0.9× CFQ's ({g:.2f}×)", g >= 0.9


def analyse(s: Sweep, paper: dict[str, Any], where: Path) -> Analysis:
    config = s.runs[0].config
    jobs = config["vm"][0]["job"]
    workloads = [j["preset"] for j in jobs]
    phase_s = float(jobs[0]["runtime_s"])
    interval_s = float(config["output"]["interval_s"])
    by = {(run.params["disk"], run.params["scheduler"]): r for run, r in zip(s.runs, s.results)}
    tables, data = [], []
    for label in s.study.matrix["disk"]:
        runs = [by[(label, sched)] for sched in SCHEDULERS]
        phases = [phase_means(r["series"]["mb_per_s"], interval_s, phase_s, len(workloads)) for r in runs]
        rows, goals = [], []
        for p, w in enumerate(workloads):
            c, i = phases[0][p], phases[2][p]
            cells = [f"{b['vm1']:.1f} / {b['vm2']:.1f} / {_total(b):.1f}" for b in (x[p] for x in phases)]
            when = f"{number_text(p * phase_s)}–{number_text((p + 1) * phase_s)} s"
            rows.append([when, w, *cells, _ratio(i), _total(i) / max(_total(c), 1e-9)])
            line, ok = phase_goal(p, workloads, phases)
            goals.append([line, "yes" if ok else "NO"])
        tables.append(
            Table(
                f"{label} — mean bandwidth per phase, MB/s (VM1 / VM2 / total)",
                pd.DataFrame(rows, columns=COLUMNS),
                digits={"iShare VM1:VM2": 2, "iShare/CFQ total": 2},
            )
        )
        tables.append(Table(f"{label} — goals", pd.DataFrame(goals, columns=["goal", "met"])))
        data.append(
            {
                "disk": label,
                "series": [r["series"] for r in runs],
                "phase_means": phases,
                "run_means": [{"vm1": r["vms"][0]["mb_per_s"], "vm2": r["vms"][1]["mb_per_s"]} for r in runs],
            }
        )
    notes = [
        f"{number_text(phase_s)} s per phase; series at {number_text(interval_s)} s intervals in the JSON "
        "(data.runs[disk].series[scheduler].mb_per_s[vm][bucket]), schedulers in the order CFQ, Blkio, "
        "iShare",
        "Fig. 4 is a plot without numbers: the goals are the behaviour §5.3 describes",
    ]
    return Analysis(
        tables=tables,
        notes=notes,
        data={"phases": workloads, "phase_s": phase_s, "schedulers": SCHEDULERS, "runs": data},
    )
