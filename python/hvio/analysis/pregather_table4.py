"""Paper 000 (Pregather) §5.2.1: the four VMs of Table 1 under Pregather,
CFQ, AS and Deadline, for each guest model of the study: execution time per
application (Fig. 6a), per-VM and total bandwidth (Fig. 6b), the
seek-distance distribution (Table 4), host requests per VM, per-VM
throughput over time (Fig. 7), Pregather's slices (Eq. 8) and the goals.

The study (``experiments/pregather-table4.study.toml``) runs every
scheduler under every guest model (its ``guests`` cases); this module reads
each run's result (per-VM and per-job figures, the host's seek distances and
counters, the time series) and puts the paper's numbers
(``pregather-table4.paper.toml``) beside hvio's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table, number_text
from ..sweeps import StudyError, Sweep
from .pregather import DISK, MISSING, check_claims, claim, counter, exec_time, guest_label

SCHEDULERS = ["pregather", "cfq", "anticipatory", "deadline"]
LABELS = ["Pregather", "CFQ", "AS", "Deadline"]
# hvio's goals: (name, target, as a percentage).
GOALS = [
    ("total bandwidth vs CFQ", 1.3, False),
    ("total bandwidth vs AS", 1.4, False),
    ("total bandwidth vs Deadline", 2.0, False),
    ("zero seek distances", 0.70, True),
    ("VM4 throughput vs its CFQ throughput", 0.90, True),
]


def load_paper(paper: dict[str, Any], where: Path) -> dict[str, Any]:
    """Table 4's (zero, within ± image, beyond) per scheduler in LABELS'
    order, Fig. 6(b)'s ratio over each of the other three, VM4's gain and
    the claims; errors name the file and what is missing."""
    seek = []
    for label in LABELS:
        c = next((c for c in paper.get("table4", []) if c.get("scheduler") == label), None)
        if c is None:
            raise StudyError(f'{where}: table4 has no scheduler = "{label}"')
        seek.append([c["zero_pct"], c["within_image_pct"], c["beyond_image_pct"]])
    ratio = []
    for label in LABELS[1:]:
        r = next((r for r in paper.get("fig6b", []) if r.get("over") == label), None)
        if r is None:
            raise StudyError(f'{where}: fig6b has no over = "{label}"')
        ratio.append(r["ratio"])
    if "vm4_vs_cfq" not in paper:
        raise StudyError(f"{where}: no [vm4_vs_cfq]")
    check_claims(paper, where, ["Fig. 6(a)", "Fig. 7"])
    return {"seek": seek, "ratio": ratio, "vm4": paper["vm4_vs_cfq"], "claims": paper["claims"]}


def _sum_vm_bandwidth(r: dict[str, Any]) -> float:
    """The sum of the VMs' bandwidths, each over its own active period (the bars of Fig. 6b)."""
    return sum(v["mb_per_s"] for v in r["vms"])


def _per_window(series: dict[str, Any]) -> int:
    """Buckets per 10-s window (Fig. 7's axis)."""
    return max(math.floor(10.0 / series["interval_s"] + 0.5), 1)


def _first_100_s(title: str, series: dict[str, Any], column: list[list[float]], unit: str, cell) -> Table:
    """The first 100 s of a run's series in 10-s windows: a row per window,
    a column per VM headed "VM unit", each cell ``cell(vm, buckets)``."""
    per = _per_window(series)
    n = min(len(column[0]) if column else 0, 10 * per)
    rows = []
    for start in range(0, n, per):
        row: dict[str, Any] = {"time (s)": f"{start // per * 10}–{start // per * 10 + 10}"}
        for vm, name in enumerate(series["vms"]):
            row[f"{name} {unit}"] = cell(vm, range(start, min(start + per, n)))
        rows.append(row)
    cols = ["time (s)"] + [f"{v} {unit}" for v in series["vms"]]
    return Table(title, pd.DataFrame(rows, columns=cols), digits={c: 1 for c in cols[1:]}, missing=MISSING)


def _frame(title: str, columns: list[str], rows: list[list[Any]], digits: dict[str, Any]) -> Table:
    return Table(title, pd.DataFrame(rows, columns=columns), digits=digits, missing=MISSING)


def tables_for(g: str, rs: list[dict[str, Any] | None], paper: dict[str, Any]) -> list[Table]:
    """The figures and tables of one guest model's four runs (``None`` for a missing one)."""
    present = [r for r in rs if r is not None]
    r0 = present[0] if present else None
    vms = [v["vm"] for v in r0["vms"]] if r0 else []

    rows = [
        [j["vm"], j["job"]] + [exec_time(r, j["vm"], j["job"]) for r in rs]
        for j in (r0["jobs"] if r0 else [])
    ]
    t6a = _frame(
        f"Fig. 6(a): execution time per application (s), {g} guests",
        ["VM", "application"] + LABELS,
        rows,
        {c: 2 for c in LABELS},
    )

    def ratio(i: int, metric) -> float | None:
        return metric(rs[0]) / metric(rs[i]) if rs[0] is not None and rs[i] is not None else None

    rows = [[vm] + [r["vms"][i]["mb_per_s"] if r else None for r in rs] for i, vm in enumerate(vms)]
    rows.append(["total (sum of VMs)"] + [_sum_vm_bandwidth(r) if r else None for r in rs])
    rows.append(["all bytes / makespan"] + [r["total_mb_per_s"] if r else None for r in rs])
    row: list[Any] = ["Pregather total ÷ this (paper)", "1"]
    for i in range(1, 4):
        x = ratio(i, _sum_vm_bandwidth)
        p = number_text(paper["ratio"][i - 1])
        row.append(f"{x:.2f} ({p})" if x is not None else f"{MISSING} ({p})")
    rows.append(row)
    t6b = _frame(f"Fig. 6(b): bandwidth (MB/s), {g} guests", ["VM"] + LABELS, rows, {c: 2 for c in LABELS})

    cols = ["seek distance"]
    for label in LABELS:
        cols += [label, "paper"]
    image = r0["host"]["seek"]["image_sectors"] if r0 else 0

    def pct(r: dict[str, Any] | None, value) -> float | None:
        if r is None:
            return None
        x = value(r)
        return None if x is None else 100.0 * x

    rows = []
    for k, (label, key) in enumerate(
        [
            ("0", "zero_frac"),
            (f"[-{image}, {image}]", "within_image_frac"),
            ("beyond ± image", "beyond_image_frac"),
        ]
    ):
        row = [label]
        for i, r in enumerate(rs):
            row += [pct(r, lambda r, key=key: r["host"]["seek"][key]), paper["seek"][i][k]]
        rows.append(row)
    # btt's zero (above) also counts overlapping and backward-adjacent
    # requests; this row is the head's own travel, start = previous end.
    # The next: the most zero seeks any order of the same dispatches could
    # give (the locality bound): what there was to exploit.
    for label, key in (
        ("0, head travel only", "zero_head_frac"),
        ("0, most any order gives", "zero_bound_frac"),
    ):
        row = [label]
        for r in rs:
            row += [pct(r, lambda r, key=key: r["host"]["seek"][key]), None]
        rows.append(row)
    # blktap: the same shares over the bios in the order they reach the
    # dom0 block layer (blktrace's Q events), before the elevator merges.
    if any(k == "blktap_queued_zero_frac" for r in present for k, _ in r["host"]["counters"]):
        for k, (label, name) in enumerate(
            [
                ("0, bio arrival order", "blktap_queued_zero_frac"),
                ("[± image], bio arrival order", "blktap_queued_within_image_frac"),
            ]
        ):
            row = [label]
            for i, r in enumerate(rs):
                row += [pct(r, lambda r, name=name: counter(r, name)), paper["seek"][i][k]]
            rows.append(row)
    t4 = _frame(
        f"Table 4: distribution of seek distances (%), {g} guests", cols, rows, {c: 2 for c in cols[1:]}
    )

    rows = [[vm] + [r["vms"][i]["host_requests"] if r else None for r in rs] for i, vm in enumerate(vms)]
    mix = _frame(f"Host requests per VM, {g} guests", ["VM"] + LABELS, rows, {})

    tables = [t6a, t6b, t4, mix]
    # Fig. 7: IOPS per VM in 10-s windows over the first 100 s, under
    # Pregather and CFQ (the paper's Fig. 7a-b).
    for i, r in enumerate(rs[:2]):
        if r is None:
            continue
        iops = r["series"]["iops"]
        tables.append(
            _first_100_s(
                f"Fig. 7: throughput over time under {LABELS[i]}, {g} guests",
                r["series"],
                iops,
                "IOPS",
                lambda vm, b, iops=iops: sum(iops[vm][i] for i in b) / max(len(b), 1),
            )
        )

    # Pregather's slices over the same windows: the mean length it granted
    # each VM (Eq. 8, maybe halved) and the share of the window the VM held
    # the disk in them.
    p = rs[0]
    if p is not None and p["series"]["slices"]:
        s = p["series"]
        # A whole 10-s window, also for a shorter last one.
        window_ms = 1000.0 * s["interval_s"] * _per_window(s)

        def slice_cell(vm: int, b: range) -> str:
            count = granted = used = 0.0
            for i in b:
                k = s["slices"][vm][i]
                count += k
                granted += k * s["slice_ms"][vm][i]
                used += k * s["slice_used_ms"][vm][i]
            return MISSING if count == 0.0 else f"{granted / count:.0f}, {100.0 * used / window_ms:.0f} %"

        tables.append(
            _first_100_s(
                f"Pregather's slices over time: mean granted length, share of disk time, {g} guests",
                s,
                s["slices"],
                "ms, share",
                slice_cell,
            )
        )

    cols = ["VM", "slices", "mean slice ms", "last slice ms", "SI %", "RI", "model KiB (peak)"]
    rows = []
    if p is not None:
        for vm in vms:

            def c(k: str, vm: str = vm) -> float:
                return counter(p, f"{k}.{vm}")

            rows.append(
                [
                    vm,
                    c("slices"),
                    c("slice_mean_ms"),
                    c("slice_ms"),
                    100.0 * c("si"),
                    c("ri"),
                    c("model_peak_bytes") / 1024.0,
                ]
            )
    digits = {
        "slices": 0,
        "mean slice ms": 1,
        "last slice ms": 1,
        "SI %": 2,
        "RI": "e2",
        "model KiB (peak)": 1,
    }
    tables.append(_frame(f"Pregather's adaptive time slices (Eq. 8), {g} guests", cols, rows, digits))

    vm4 = len(vms) - 1
    got = [
        ratio(1, _sum_vm_bandwidth),
        ratio(2, _sum_vm_bandwidth),
        ratio(3, _sum_vm_bandwidth),
        rs[0]["host"]["seek"]["zero_frac"] if rs[0] is not None else None,
        rs[0]["vms"][vm4]["mb_per_s"] / rs[1]["vms"][vm4]["mb_per_s"]
        if rs[0] is not None and rs[1] is not None and vm4 >= 0
        else None,
    ]
    v = paper["vm4"]
    said = [f"{number_text(x)}×" for x in paper["ratio"]] + [
        f"{number_text(paper['seek'][0][0])} %",
        f"{v['pct']} % (RR +{v['rr_gain_pct']} %, RW +{v['rw_gain_pct']} %)",
    ]
    rows = []
    for (name, target, as_pct), x, p_text in zip(GOALS, got, said):

        def show(y: float, as_pct: bool = as_pct) -> str:
            return f"{100.0 * y:.1f} %" if as_pct else f"{y:.2f}×"

        met = None if x is None else ("yes" if x >= target else "no")
        rows.append([name, f"≥ {show(target)}", None if x is None else show(x), p_text, met])
    tables.append(_frame(f"Goals, {g} guests", ["goal", "target", "hvio", "paper", "met"], rows, {}))
    return tables


def analyse(s: Sweep, paper_file: dict[str, Any], where: Path) -> Analysis:
    paper = load_paper(paper_file, where)
    by = {(run.params["guests"], run.params["scheduler"]): res for run, res in zip(s.runs, s.results)}
    guests = s.study.matrix["guests"]
    tables: list[Table] = []
    data = []
    for g in guests:
        rs = [by.get((g, sched)) for sched in SCHEDULERS]
        tables += tables_for(g, rs, paper)
        data.append({"guests": g, "runs": [r for r in rs if r is not None]})
    notes = [
        f"disk: {DISK}; 12 GiB images; each application moves 160 MB (16 MB when quick); guests: "
        + " / ".join(guest_label(g) for g in guests),
        "total bandwidth = the sum of the VMs' bandwidths, each VM's bytes over its own active period "
        '(the bars of Fig. 6b); "all bytes / makespan" is dominated by the slowest VM',
        claim(paper, "Fig. 6(a)"),
        "seek distance between consecutive dispatches as blktrace's btt computes it (seek_dist in "
        "btt/seek.c): 0 when a request overlaps or touches the previous one at either end, else from "
        'its end (forward) or its start (backward); "0, head travel only" counts only a start at the '
        'previous end; "0, most any order gives" is the most zero seeks any dispatch order of the same '
        "requests could have (n requests in c groups of overlapping or touching ranges: (n − c) of them)",
        claim(paper, "Fig. 7"),
    ]
    missing = [sched for sched in SCHEDULERS if sched not in s.study.matrix.get("scheduler", [])]
    if missing:
        notes.append(f'not run, left out: {", ".join(missing)} (their columns show "{MISSING}")')
    return Analysis(tables=tables, notes=notes, data=data)
