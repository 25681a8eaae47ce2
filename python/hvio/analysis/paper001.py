"""What the analyses of paper 001 (Kim, Eom and Son, "Improving Spatial
Locality in Virtual Machine for Flash Storage", IEEE Access 2018, §IV)
share: one numeric row per run (bandwidth, latency, the drive's and the
reshaper's write amplification), the paper's numbers by drive and workload,
the goals hvio holds its results to, and the notes on a run's scale.

Bare metal is the guest with no virtualization path, baseline QEMU the
direct host path, reshaped QEMU the sequentializer stage
(``crates/hvio-sim/src/engine/stage/reshape.rs``); the drives are the SSD
model's presets scaled down. The studies' matrix keys name them: ``drive``,
``state``, ``workload`` and ``system`` cases, the host ``scheduler``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import number_text
from ..sweeps import StudyError, Sweep

SYSTEMS = ["bare metal", "baseline QEMU", "reshaped QEMU"]
WORKLOADS = ["sequential write", "random write"]
# A signed percentage, and a missing paper number.
PCT = "{:+.1f} %"
DASH = "–"

# hvio's goals for reshaping (what paper 001 reports, rounded down): random
# writes at least this much above baseline QEMU, by drive preset, percent;
# sequential writes within ±5 % or better (no more than 5 % slower: a gain
# is better, and the paper itself reports +2 to +15 %); fileserver reads at most 10 % slower and
# writes at least 50 % faster.
RANDOM_GOAL = {"samsung-850-pro-256": 50.0, "intel-p3700-400": 80.0}
SEQUENTIAL_BAND = 5.0
FILESERVER_READ_FLOOR, FILESERVER_WRITE_GOAL = -10.0, 50.0

_UNITS = {"k": 1 << 10, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def size_bytes(v: Any) -> int:
    """A size of a study's config (bytes, or ``"64MiB"``, ``"4k"``) in bytes."""
    if isinstance(v, int):
        return v
    for unit, scale in _UNITS.items():
        if isinstance(v, str) and v.endswith(unit) and v[: -len(unit)].isdigit():
            return int(v[: -len(unit)]) * scale
    raise StudyError(f"size {v!r}: give bytes or a whole number of k, KiB, MiB or GiB")


def gain(new: float, old: float) -> float:
    """``new`` over ``old``, percent."""
    return (new / max(old, 1e-12) - 1.0) * 100.0


def device_counter(r: dict[str, Any], key: str) -> float:
    """A counter of the run's device (0 when the device does not report it)."""
    return next((v for k, v in r["host"]["device"] if k == key), 0.0)


def host_counter(r: dict[str, Any], key: str) -> float:
    """A counter of the run's host path (0 when it does not report it)."""
    return next((v for k, v in r["host"]["counters"] if k == key), 0.0)


def points(s: Sweep) -> pd.DataFrame:
    """One row per run: its matrix values, the drive preset, and what it
    measured: the VM's MB/s, the job's mean latency, read and write MB/s
    over its execution time, the drive's write amplification, reshaping's
    own (1 without it), the host reads a guest read took, and QEMU's
    thread (``qemu_path``): its busy time over the job's execution time
    and the host requests it submitted per guest request (0 without one)."""
    rows = []
    for run, r in zip(s.runs, s.results):
        job, reshape = r["jobs"][0], r.get("reshape")
        exec_s = max(job["exec_time_s"], 1e-9)
        rows.append(
            {
                "run": run.index,
                **run.params,
                "scheduler": r["scheduler"],
                "preset": run.config["disk"]["preset"],
                "mb_per_s": r["vms"][0]["mb_per_s"],
                "mean_latency_ms": job["latency"]["mean_ms"],
                "read_mb_per_s": job["read_mb"] / exec_s,
                "write_mb_per_s": job["write_mb"] / exec_s,
                "device_wa": device_counter(r, "ssd_write_amplification"),
                "host_wa": reshape["write_amplification"] if reshape else 1.0,
                "host_reads_per_guest_read": (
                    reshape["guest_read_requests"] / max(job["reads"], 1) if reshape else 1.0
                ),
                "cleaning_mb": reshape["clean_write_bytes"] / 1e6 if reshape else 0.0,
                "qemu_busy": host_counter(r, "qemu_busy_s") / exec_s,
                "qemu_host_per_guest": host_counter(r, "qemu_host_requests")
                / max(host_counter(r, "qemu_guest_requests"), 1.0),
                "precondition_rounds": len(r.get("precondition", {}).get("rounds", [])),
                "precondition_settled": r.get("precondition", {}).get("settled", True),
            }
        )
    return pd.DataFrame(rows)


def drive_state(c: dict[str, Any]) -> str:
    """The drive's state before the run in config ``c``, in words."""
    pc = c["disk"].get("precondition")
    if pc is None:
        return "fresh (no page written)"
    w = pc.get("workload")
    if w is not None:
        image = (
            "the reshaped image created afresh for each round and the run"
            if w.get("reshaped_image") == "fresh"
            else "the reshaped image kept from round to round"
        )
        window, cap = w.get("window", 5), w.get("max_rounds", 25)
        excursion, slope = w.get("excursion", 0.2), w.get("slope", 0.1)
        return (
            "preconditioned as SNIA's PTS does: filled in order twice, then the run's own workload repeated "
            f"in rounds until its bandwidth and the drive's write amplification settle (a window of {window} "
            f"rounds, range ≤ {excursion:.0%} and fit ≤ {slope:.0%} of the average, at most {cap} rounds), "
            + image
        )
    if pc.get("max_drive_writes") == 0:
        return "filled in order"
    return "filled, then overwritten at random until write amplification settled"


def rounds_note(p: pd.DataFrame) -> str | None:
    """How many rounds the runs' workload-dependent preconditioning took, if any did."""
    rounds = p[p["precondition_rounds"] > 0]
    if rounds.empty:
        return None
    unsettled = rounds[~rounds["precondition_settled"].astype(bool)]
    n = rounds["precondition_rounds"]
    text = f"workload preconditioning: {n.min()}–{n.max()} rounds per run before the measured one"
    if unsettled.empty:
        return text + ", every run settled"
    keys = ("drive", "state", "workload", "system", "utilisation")
    which = (" / ".join(str(v) for k, v in row.items() if k in keys) for _, row in unsettled.iterrows())
    return text + f"; {len(unsettled)} run(s) reached the round cap without settling: " + ", ".join(which)


def result(row: pd.Series) -> dict[str, float]:
    """What one fio run measured, for a report's data."""
    return {k: float(row[k]) for k in ("mb_per_s", "mean_latency_ms", "host_wa", "device_wa")}


def by_system(p: pd.DataFrame, **where: Any) -> dict[str, pd.Series]:
    """The one run of each system among the rows matching ``where``."""
    sel = p
    for k, v in where.items():
        sel = sel[sel[k] == v]
    out = {}
    for _, row in sel.iterrows():
        if row["system"] in out:
            raise StudyError(f"two runs of {row['system']} where {where}: vary one key at a time")
        out[row["system"]] = row
    return out


def paper_bandwidth(paper: dict[str, Any], preset: str, workload: str, against: str) -> float | None:
    """The paper's bandwidth of reshaped QEMU against ``against``, percent, if it gives one."""
    return next(
        (
            b["percent"]
            for b in paper.get("bandwidth", [])
            if (b["drive"], b["workload"], b["against"]) == (preset, workload, against)
        ),
        None,
    )


def paper_baseline_vs_metal(paper: dict[str, Any], preset: str, workload: str) -> float | None:
    """Baseline QEMU against bare metal, percent, from the paper's two
    numbers for reshaped QEMU (against each), if it gives both."""
    base = paper_bandwidth(paper, preset, workload, "baseline QEMU")
    metal = paper_bandwidth(paper, preset, workload, "bare metal")
    if base is None or metal is None:
        return None
    return gain(1.0 + metal / 100.0, 1.0 + base / 100.0)


def check_paper(paper: dict[str, Any], where: Path | None, keys: list[str]) -> None:
    """The paper file has the tables ``keys``, each row with its source."""
    for key in keys:
        rows = paper.get(key)
        if not rows:
            raise StudyError(f"{where}: no [[{key}]] rows")
        for r in rows if isinstance(rows, list) else [rows]:
            if "source" not in r:
                raise StudyError(f"{where}: a [[{key}]] row has no source")


def config(s: Sweep) -> dict[str, Any]:
    """The config of the study's first run (the scale its notes quote)."""
    return s.runs[0].config


def fio_scale(c: dict[str, Any]) -> tuple[int, int]:
    """fio's threads and MiB per thread in config ``c``."""
    job = c["vm"][0]["job"][0]
    threads = job["numjobs"]
    return threads, size_bytes(job["size"]) // threads >> 20


def capacity(c: dict[str, Any]) -> str:
    return number_text(float(c["disk"]["capacity_gib"]))


def scale_note(s: Sweep) -> str:
    c = config(s)
    threads, mib = fio_scale(c)
    job = c["vm"][0]["job"][0]
    return (
        f"scale: {threads} threads × {mib} MiB (the paper: 8 × 1 GiB), {job['bs'].removesuffix('k')} KiB "
        f"O_DIRECT writes at iodepth {job['iodepth']}, on the {c['disk']['preset']} preset scaled to "
        f"{capacity(c)} GiB; the drive {drive_state(c)}"
    )


def goal(text: str, met: bool, measured: str) -> str:
    return f"goal: {text}: {'met' if met else 'missed'} ({measured})"


def workload_goal(preset: str, workload: str, g: float) -> str:
    """The goal of reshaped over baseline QEMU for ``workload`` on ``preset``, met or missed."""
    if workload == "random write":
        want = RANDOM_GOAL.get(preset)
        if want is None:
            return f"no goal for random writes on {preset}"
        return goal(f"random writes ≥ {want:+.0f} % over baseline QEMU on {preset}", g >= want, PCT.format(g))
    return goal(
        f"sequential writes within ±{SEQUENTIAL_BAND:.0f} % of baseline QEMU or better on {preset}",
        g >= -SEQUENTIAL_BAND,
        PCT.format(g),
    )
