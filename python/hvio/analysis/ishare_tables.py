"""Paper 003 (iShare) §3.2 and §5.1-5.2, Tables II-IV: two VMs weighted
2:1 run the same workload of Table I under CFQ, Blkio and iShare, on each
disk of the study; per-VM and total bandwidth beside the paper's, the
totals side by side, and the goals: overloaded (O-*), iShare within 5 % of
Blkio with VM1:VM2 near 2:1; underloaded (U-*), iShare's total at least
Blkio's (1.3× on U-SW, 1.2× on U-SRW, 0.95× on the others).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table, number_text
from ..sweeps import StudyError, Sweep

SCHEDULERS = ["cfq", "blkio", "ishare"]
PAPER_TABLE = {"cfq": "Table II", "blkio": "Table II", "ishare": "Tables III–IV"}
WORKLOAD = "vm.*.job.*.preset"


def paper_mb_s(paper: dict[str, Any], where: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """(workload, scheduler) -> the paper's (VM1, VM2) in MB/s (KB/s ÷ 1000)."""
    out = {}
    for r in paper.get("bandwidth", []):
        try:
            out[(r["workload"], r["scheduler"])] = (r["vm1_kb_s"] / 1000.0, r["vm2_kb_s"] / 1000.0)
        except KeyError as e:
            raise StudyError(f"{where}: a [[bandwidth]] row lacks {e}") from None
    return out


def bandwidth(r: dict[str, Any]) -> dict[str, Any]:
    """A run's VM1 and VM2 MB/s, and the share of the busy time iShare's
    detector saw the disk underloaded (iShare runs only)."""
    counters = dict((k, v) for k, v in r["host"]["counters"])
    under, over = counters.get("state.underloaded_s"), counters.get("state.overloaded_s")
    return {
        "vm1": r["vms"][0]["mb_per_s"],
        "vm2": r["vms"][1]["mb_per_s"],
        "underloaded": under / max(under + over, 1e-9) if under is not None and over is not None else None,
    }


def _total(b: dict[str, Any]) -> float:
    return b["vm1"] + b["vm2"]


def _ratio(b: dict[str, Any]) -> float:
    return b["vm1"] / max(b["vm2"], 1e-9)


def goals(workloads: list[str], m: dict[str, dict[str, dict[str, Any]]]) -> list[tuple[str, bool]]:
    """What hvio asks of iShare, checked on the measured bandwidths ``m[workload][scheduler]``."""
    lines = []
    for w in workloads:
        b, i = m[w]["blkio"], m[w]["ishare"]
        gain = _total(i) / max(_total(b), 1e-9)
        if w.startswith("O-"):
            lines.append(
                (
                    f"{w}: iShare total within 5 % of Blkio ({100.0 * (gain - 1.0):+.1f} %)",
                    abs(gain - 1.0) <= 0.05,
                )
            )
            for name, x in (("Blkio", b), ("iShare", i)):
                lines.append((f"{w}: {name} VM1:VM2 in 1.7..2.3 ({_ratio(x):.2f})", 1.7 <= _ratio(x) <= 2.3))
        else:
            need, what = {"U-SW": (1.3, "≥ 1.3× Blkio"), "U-SRW": (1.2, "≥ 1.2× Blkio")}.get(
                w, (0.95, "≥ 0.95× Blkio")
            )
            lines.append((f"{w}: iShare total {what} ({gain:.2f}×)", gain >= need))
    return lines


def disk_tables(
    label: str, workloads: list[str], m: dict[str, Any], said: dict[tuple[str, str], Any]
) -> list[Table]:
    """The tables of one disk: per scheduler beside the paper, totals, goals."""
    tables = []
    cols = [
        "workload",
        "VM1",
        "VM2",
        "total",
        "VM1:VM2",
        "paper VM1",
        "paper VM2",
        "paper total",
        "paper VM1:VM2",
    ]
    digits = {"VM1": 2, "VM2": 2, "total": 2, "VM1:VM2": 2, "paper VM1": 1, "paper VM2": 1, "paper total": 1}
    digits["paper VM1:VM2"] = 2
    for s in SCHEDULERS:
        rows = []
        for w in workloads:
            x = m[w][s]
            p1, p2 = said[(w, s)]
            rows.append([w, x["vm1"], x["vm2"], _total(x), _ratio(x), p1, p2, p1 + p2, p1 / p2])
        tables.append(
            Table(
                f"{label} — {s}: bandwidth, MB/s (paper: {PAPER_TABLE[s]}, KB/s ÷ 1000)",
                pd.DataFrame(rows, columns=cols),
                digits=digits,
            )
        )
    rows = []
    for w in workloads:
        r = [m[w][s] for s in SCHEDULERS]
        pt = [sum(said[(w, s)]) for s in SCHEDULERS]
        rows.append(
            [
                w,
                *(f"{_total(x):.2f} [{p:.1f}]" for x, p in zip(r, pt)),
                f"{_total(r[1]) / max(_total(r[0]), 1e-9):.2f} [{pt[1] / pt[0]:.2f}]",
                f"{_total(r[2]) / max(_total(r[1]), 1e-9):.2f} [{pt[2] / pt[1]:.2f}]",
                100.0 * r[2]["underloaded"] if r[2]["underloaded"] is not None else None,
            ]
        )
    cols = ["workload", "CFQ", "Blkio", "iShare", "Blkio/CFQ", "iShare/Blkio", "iShare underloaded %"]
    tables.append(
        Table(
            f"{label} — totals side by side, MB/s (paper in brackets)",
            pd.DataFrame(rows, columns=cols),
            digits={"iShare underloaded %": 1},
        )
    )
    rows = [[line, "yes" if ok else "NO"] for line, ok in goals(workloads, m)]
    tables.append(Table(f"{label} — goals", pd.DataFrame(rows, columns=["goal", "met"])))
    return tables


def measured(s: Sweep) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """m[disk][workload][scheduler]: each run's bandwidths."""
    m: dict[str, Any] = {}
    for run, r in zip(s.runs, s.results):
        m.setdefault(run.params["disk"], {}).setdefault(run.params[WORKLOAD], {})[run.params["scheduler"]] = (
            bandwidth(r)
        )
    return m


def analyse(s: Sweep, paper: dict[str, Any], where: Path) -> Analysis:
    said = paper_mb_s(paper, where)
    workloads = s.study.matrix[WORKLOAD]
    for w in workloads:
        for sched in SCHEDULERS:
            if (w, sched) not in said:
                raise StudyError(f"{where}: no [[bandwidth]] row for workload {w}, scheduler {sched}")
    m = measured(s)
    tables, data = [], []
    for label in s.study.matrix["disk"]:
        tables += disk_tables(label, workloads, m[label], said)
        data.append(
            {"disk": label, "measured": [[m[label][w][sched] for sched in SCHEDULERS] for w in workloads]}
        )
    runtime_s = s.study.matrix["vm.*.job.*.runtime_s"][0]
    base = s.runs[0].config
    weights = [vm["weight"] for vm in base["vm"]]
    idle_ms = s.study.cases["disk"].get("controller write cache", {}).get("disk.destage_idle_ms")
    runtime = number_text(float(runtime_s))
    notes = [
        f"two VMs, weights {weights[0]}:{weights[1]}, 30 GiB images, {runtime} s of each "
        "workload per run, guests running cfq (slice_idle 8 ms) on a non-rotational virtual disk (Xen "
        "blkfront), on the HDD model write-through and behind a controller cache (256 MiB write-back "
        "destaged in CSCAN order, 60 s age bound, destaging after "
        f"{number_text(float(idle_ms))} ms of quiet, destaged data kept clean until LRU eviction; adaptive "
        "read-ahead of 64 KiB per sequential read, 64 segments)",
        "MB/s = 10^6 bytes/s of the VM's application I/O; the paper's KB/s are divided by 1000",
        "U-* are 32 fio threads on one file (fio's shared filename: each thread its own offset from the "
        "file's start); their direct writes take the file's inode lock one at a time, as ext4 in 2.6.32 "
        "does (see docs/ishare.md)",
        "iShare underloaded % = share of busy time its disk-state detector saw an active VM without "
        "pending requests",
    ]
    return Analysis(
        tables=tables, notes=notes, data={"workloads": workloads, "schedulers": SCHEDULERS, "runs": data}
    )
