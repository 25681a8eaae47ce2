"""Figures: the LBA-over-time scatter of paper 000 Fig. 1, throughput over
time (Fig. 7), per-VM bandwidth by scheduler (Fig. 6b), seek distances."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from .api import Result  # noqa: E402


def lba_scatter(records_csv: str | Path, out: str | Path, *, max_points: int = 200_000) -> Path:
    """Paper 000 Fig. 1: arrival time vs sector of every host request, by VM.

    ``records_csv`` is the per-request file of ``hvio sim --records``.
    """
    df = pd.read_csv(records_csv, usecols=["vm", "sector", "arrival_ns"])
    if len(df) > max_points:
        df = df.iloc[:: len(df) // max_points + 1]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for vm, g in df.groupby("vm", sort=True):
        ax.scatter(g["arrival_ns"] / 1e9, g["sector"], s=1, label=vm, rasterized=True)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("LBA (sector)")
    ax.set_title("Disk access pattern of the VMs (paper 000 Fig. 1)")
    ax.legend(markerscale=8, loc="best")
    return _save(fig, out)


def throughput_over_time(result: Result, out: str | Path, *, metric: str = "iops") -> Path:
    """Paper 000 Fig. 7: per-VM throughput every interval."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for vm, g in result.series.groupby("vm", sort=False):
        ax.plot(g["time_s"], g[metric], label=vm, linewidth=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("IOPS" if metric == "iops" else "MB/s")
    ax.set_title(f"Throughput of the VMs under {result.scheduler}")
    ax.legend(loc="best")
    return _save(fig, out)


def bandwidth_by_scheduler(results: list[Result], out: str | Path) -> Path:
    """Paper 000 Fig. 6(b): per-VM and total bandwidth under each scheduler."""
    rows = []
    for r in results:
        for _, v in r.vms.iterrows():
            rows.append({"scheduler": r.scheduler, "vm": v["vm"], "mb_per_s": v["mb_per_s"]})
    df = pd.DataFrame(rows).pivot(index="scheduler", columns="vm", values="mb_per_s")
    df = df.loc[[r.scheduler for r in results]]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    df.plot(kind="bar", stacked=True, ax=ax)
    ax.set_ylabel("MB/s")
    ax.set_title("Per-VM bandwidth by host scheduler (stacked = total)")
    ax.tick_params(axis="x", rotation=30)
    return _save(fig, out)


def seek_distribution(results: list[Result], out: str | Path) -> Path:
    """Paper 000 Table 4 as bars: zero / within ±image / beyond."""
    rows = {
        r.scheduler: [
            r.host["seek"]["zero_frac"],
            r.host["seek"]["within_image_frac"] - r.host["seek"]["zero_frac"],
            r.host["seek"]["beyond_image_frac"],
        ]
        for r in results
    }
    df = pd.DataFrame(rows, index=["zero", "within ±image (non-zero)", "beyond image"]).T
    fig, ax = plt.subplots(figsize=(9, 4.5))
    (100 * df).plot(kind="bar", stacked=True, ax=ax)
    ax.set_ylabel("% of dispatches")
    ax.set_title("Seek distance between consecutive dispatches")
    ax.tick_params(axis="x", rotation=30)
    return _save(fig, out)


def _save(fig, out: str | Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
