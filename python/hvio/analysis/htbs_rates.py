"""HTBS's rate guarantees at the host (pClock's token buckets, paper 004's
scheduler): three overloaded VMs with token rates 1:2:4 get throughput in
that proportion (±15 %), and a fourth VM under its rate keeps its latency
beside them.

The study (``experiments/htbs-rates.study.toml``) runs in two stages: a
calibration run gives the IOPS the disk delivers to the three busy VMs
under noop, C; :func:`rates` sizes the contracts from it (0.7·C·(1, 2, 4)/7,
and 0.1·C for the light VM with a think time that keeps it near half of
that) for the second stage, which :func:`analyse` tabulates.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import Sweep

BUSY = ["vm1x1", "vm2x2", "vm3x4"]
SHARES = [1.0, 2.0, 4.0]
LIGHT = "light"


def _add(xs: list[float]) -> float:
    """The sum of ``xs`` added left to right (as the report's numbers are)."""
    total = 0.0
    for x in xs:
        total += x
    return total


def _iops(r: dict[str, Any]) -> dict[str, float]:
    return {v["vm"]: v["iops"] for v in r["vms"]}


def capacity(stages: dict[str, Sweep]) -> float:
    """The IOPS the disk gives the three busy VMs under noop (the calibration run)."""
    iops = _iops(stages["calibration"].results[0])
    return _add([iops[vm] for vm in BUSY])


def contracts(cap: float) -> tuple[list[float], float, int]:
    """The busy VMs' token rates, the light VM's and its think time (µs): one
    read every 2/rate s, about half its contract."""
    share_sum = _add(SHARES)
    rates = [0.7 * cap * s / share_sum for s in SHARES]
    light = 0.1 * cap
    return rates, light, math.floor(2.0 / light * 1e6 + 0.5)


def rates(stages: dict[str, Sweep]) -> dict[str, Any]:
    """The second stage's matrix entries: every VM's contract, the light VM's think time."""
    busy, light, think_us = contracts(capacity(stages))
    entries: dict[str, Any] = {f"vm.{vm}.attrs.rate_iops": r for vm, r in zip(BUSY, busy)}
    entries[f"vm.{LIGHT}.attrs.rate_iops"] = light
    entries[f"vm.{LIGHT}.job.rr.thinktime_us"] = think_us
    return entries


def analyse(stages: dict[str, Sweep], paper: dict[str, Any], where: Path) -> Analysis:
    cap = capacity(stages)
    busy_rates, light_rate, think_us = contracts(cap)
    runs = stages["rates"]
    by_setup = {r.params["setup"]: res for r, res in zip(runs.runs, runs.results)}
    share_sum = _add(SHARES)
    data: dict[str, Any] = {}

    # Part 1: shares under overload.
    rows = []
    within = True
    for host in ("htbs", "noop"):
        r = by_setup[host]
        vms = {v["vm"]: v for v in r["vms"]}
        total = _add([vms[vm]["iops"] for vm in BUSY])
        for i, vm in enumerate(BUSY):
            share = vms[vm]["iops"] / total
            want = SHARES[i] / share_sum
            if host == "htbs" and abs(share / want - 1.0) > 0.15:
                within = False
            rows.append(
                {
                    "scheduler": host,
                    "vm": vm,
                    "rate_iops": busy_rates[i],
                    "IOPS": vms[vm]["iops"],
                    "share %": 100.0 * share,
                    "rate share %": 100.0 * want,
                    "share / rate share": share / want,
                    "mean ms": vms[vm]["latency"]["mean_ms"],
                }
            )
        data[f"shares_{host}"] = [vms[vm]["iops"] for vm in BUSY]
        if host == "htbs":
            data["htbs_counters"] = r["host"]["counters"]
    shares = Table(
        f"three overloaded VMs, token rates 1:2:4 (disk: {cap:.1f} IOPS under noop)",
        pd.DataFrame(rows),
        digits={
            "rate_iops": 1,
            "IOPS": 1,
            "share %": 1,
            "rate share %": 1,
            "share / rate share": 3,
            "mean ms": 1,
        },
    )
    notes = [
        "rates 1:2:4 under overload: HTBS throughput "
        f"{'within' if within else 'NOT within'} the ±15 % band of the rate proportion"
    ]

    # Part 2: a light VM (contract 0.1·C, sending about half of it).
    rows = []
    light_ms: dict[str, float] = {}
    for setup, host, busy in (
        ("htbs alone", "htbs", False),
        ("htbs+light", "htbs", True),
        ("noop+light", "noop", True),
        ("cfq+light", "cfq", True),
    ):
        r = by_setup[setup]
        vms = {v["vm"]: v for v in r["vms"]}
        light = vms[LIGHT]
        rows.append(
            {
                "scheduler": host,
                "others busy": "yes" if busy else "no",
                "light IOPS": light["iops"],
                "light mean ms": light["latency"]["mean_ms"],
                "light p95 ms": light["latency"]["p95_ms"],
                "light p99 ms": light["latency"]["p99_ms"],
                "busy VMs' IOPS": _add([vms[vm]["iops"] for vm in BUSY]) if busy else None,
            }
        )
        light_ms[host if busy else f"{host}_alone"] = light["latency"]["mean_ms"]
    light_table = Table(
        f"a light VM (rate_iops {light_rate:.1f}, one read every ~{think_us / 1e3:.0f} ms)"
        " beside three overloaded VMs",
        pd.DataFrame(rows),
        digits={
            "light IOPS": 1,
            "light mean ms": 2,
            "light p95 ms": 2,
            "light p99 ms": 2,
            "busy VMs' IOPS": 1,
        },
    )
    notes.append(
        f"the light VM's mean latency under HTBS: {light_ms['htbs_alone']:.2f} ms alone,"
        f" {light_ms['htbs']:.2f} ms beside three overloaded VMs (noop: {light_ms['noop']:.2f} ms)"
    )
    data.update(light_mean_ms=light_ms, rates=busy_rates, capacity_iops=cap)
    return Analysis(tables=[shares, light_table], notes=notes, data=data)
