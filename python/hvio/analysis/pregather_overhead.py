"""Paper 000 (Pregather) §5.3, Fig. 12: what Pregather costs in memory and CPU.

The study (``experiments/pregather-overhead.study.toml``) has two stages:
``memory``, the four-VM run under Pregather, whose host counters give each
VM's vNavigator size (its zone map, Pregather's only state beyond CFQ-like
queues); and ``cpu``, ``bench-scheduler`` runs that time each scheduler's
own calls on a closed loop of Table 1's access patterns. This module puts
them in two tables with the paper's figures (``pregather-overhead.paper.toml``)
beside them. The paper measures the whole hypervisor's free memory and CPU
utilisation; hvio measures the scheduler itself, a finer measure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import StudyError, Sweep
from .pregather import DISK, MISSING, counter


def check_paper(paper: dict[str, Any], where: Path) -> None:
    """The paper file has Fig. 12's memory and CPU figures, each with its source."""
    for table, keys in (("memory", ["more_than_cfq_kib"]), ("cpu", ["pregather_peak_pct", "cfq_peak_pct"])):
        missing = [k for k in keys + ["source"] if k not in paper.get(table, {})]
        if missing:
            raise StudyError(f"{where}: [{table}] lacks {', '.join(missing)}")


def memory_table(r: dict[str, Any], paper: dict[str, Any]) -> tuple[Table, float]:
    """Each VM's zone count and model size at its peak and at the end; the peaks' total."""
    rows = []
    total = 0.0
    for v in r["vms"]:
        vm = v["vm"]
        peak = counter(r, f"model_peak_bytes.{vm}")
        total += peak
        rows.append(
            {
                "VM": vm,
                "zones at the end": counter(r, f"zones.{vm}"),
                "peak KiB": peak / 1024.0,
                "KiB at the end": counter(r, f"model_bytes.{vm}") / 1024.0,
                "paper": None,
            }
        )
    kib = paper["memory"]["more_than_cfq_kib"]
    rows.append(
        {
            "VM": "all VMs",
            "zones at the end": "",
            "peak KiB": total / 1024.0,
            "KiB at the end": "",
            "paper": f"< {kib} KiB more free memory used than CFQ",
        }
    )
    t = Table(
        "Memory: Pregather's prediction state per VM (four-VM run, page-cache guests)",
        pd.DataFrame(rows),
        digits={"zones at the end": 0, "peak KiB": 2, "KiB at the end": 2},
        missing=MISSING,
    )
    return t, total


def cpu_table(s: Sweep) -> tuple[Table, dict[str, float]]:
    """Each scheduler's time per request and per dispatch call, against CFQ's."""

    def per_request(res: dict[str, Any]) -> float:
        return res["busy_ns"] / max(res["requests"], 1)

    cfq = next((per_request(res) for res in s.results if res["scheduler"] == "cfq"), None)
    rows = []
    for res in s.results:
        ratio = dict(res["counters"]).get("wait_success_ratio")
        rows.append(
            {
                "scheduler": res["scheduler"],
                "requests": res["requests"],
                "dispatch calls": res["dispatch_calls"],
                "ns / request": per_request(res),
                "ns / dispatch call": res["busy_ns"] / max(res["dispatch_calls"], 1),
                "vs CFQ": None if cfq is None else per_request(res) / cfq,
                "wait success %": None if ratio is None else 100.0 * ratio,
            }
        )
    t = Table(
        "CPU: scheduler time per request (closed-loop replay of Table 1's patterns)",
        pd.DataFrame(rows),
        digits={"ns / request": 0, "ns / dispatch call": 0, "vs CFQ": 2, "wait success %": 2},
        missing=MISSING,
        units={"vs CFQ": "×"},
    )
    return t, {res["scheduler"]: per_request(res) for res in s.results}


def analyse(stages: dict[str, Sweep], paper: dict[str, Any], where: Path) -> Analysis:
    check_paper(paper, where)
    mem, total = memory_table(stages["memory"].results[0], paper)
    cpu, per_request = cpu_table(stages["cpu"])
    m, c = paper["memory"], paper["cpu"]
    more = c["pregather_peak_pct"] - c["cfq_peak_pct"]
    notes = [
        f"disk: {DISK} (its seek curve feeds Pregather's estimates)",
        f"paper, Fig. 12: the hypervisor's free memory falls by less than {m['more_than_cfq_kib']} KB more"
        f" under Pregather than under CFQ; its CPU utilisation peaks at {c['pregather_peak_pct']} %"
        f" against CFQ's {c['cfq_peak_pct']} % ({more} % more)",
        "hvio measures the scheduler itself: the vNavigator's zone map (Pregather's only state beyond"
        " CFQ-like queues) and the CPU time spent in the scheduler's calls, a finer measure than the"
        " paper's whole-hypervisor utilisation; timings vary with the machine and its load",
    ]
    data = {"cpu_ns_per_request": dict(sorted(per_request.items())), "model_peak_bytes_total": total}
    return Analysis(tables=[mem, cpu], notes=notes, data=data)
