"""Figures: the LBA-over-time scatter of paper 000 Fig. 1, throughput over
time (Fig. 7), per-VM bandwidth by scheduler (Fig. 6b), seek distances.

Every figure is byte-identical for the same results (no dates, fixed SVG ids,
matplotlib's default style whatever a matplotlibrc says) in any format
matplotlib writes, and its metadata names the seed and the schedulers it
shows."""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from .api import Result  # noqa: E402


def reproducible(draw):
    """Draw and save under matplotlib's default style, with SVG ids salted
    by a constant instead of a random UUID: the figure depends on its data
    only, not on the user's matplotlibrc or on the run."""

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with plt.style.context("default"), matplotlib.rc_context({"svg.hashsalt": "hvio"}):
            return draw(*args, **kwargs)

    return wrapper


@reproducible
def lba_scatter(records_csv: str | Path, out: str | Path, *, max_points: int = 200_000) -> Path:
    """Paper 000 Fig. 1: arrival time vs sector of every host request, by VM.

    ``records_csv`` is the per-request file of ``hvio sim --records``.
    """
    df = pd.read_csv(records_csv, usecols=lambda c: c in ("vm", "sector", "arrival_ns", "seed"))
    if len(df) > max_points:
        df = df.iloc[:: len(df) // max_points + 1]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for vm, g in df.groupby("vm", sort=True):
        ax.scatter(g["arrival_ns"] / 1e9, g["sector"], s=1, label=vm, rasterized=True)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("LBA (sector)")
    ax.set_title("Disk access pattern of the VMs (paper 000 Fig. 1)")
    ax.legend(markerscale=8, loc="best")
    seeds = sorted(df["seed"].unique()) if "seed" in df else []
    return _save(fig, out, description=_describe(seeds, [], f"records {Path(records_csv).name}"))


@reproducible
def throughput_over_time(result: Result, out: str | Path, *, metric: str = "iops") -> Path:
    """Paper 000 Fig. 7: per-VM throughput every interval."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for vm, g in result.series.groupby("vm", sort=False):
        ax.plot(g["time_s"], g[metric], label=vm, linewidth=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("IOPS" if metric == "iops" else "MB/s")
    ax.set_title(f"Throughput of the VMs under {result.scheduler}")
    ax.legend(loc="best")
    return _save(fig, out, description=_describe_results([result]))


@reproducible
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
    return _save(fig, out, description=_describe_results(results))


@reproducible
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
    return _save(fig, out, description=_describe_results(results))


def _describe(seeds: list, schedulers: list[str], source: str | None = None) -> str:
    parts = ["hvio"]
    if source:
        parts.append(source)
    if schedulers:
        parts.append("scheduler " + ", ".join(schedulers))
    if seeds:
        parts.append("seed " + ", ".join(str(int(s)) for s in seeds))
    return "; ".join(parts)


def _describe_results(results: list[Result]) -> str:
    seeds = sorted({r.raw["seed"] for r in results})
    return _describe(seeds, [r.scheduler for r in results])


# What matplotlib writes by default that changes from run to run: the date
# (PDF, SVG; PS and EPS take theirs from SOURCE_DATE_EPOCH only) and, in
# SVG, ids salted with a random UUID (fixed by `reproducible`). Figures are
# rendered into memory, so PS/EPS carry no file name either, and SVGZ is
# gzipped here without the time of matplotlib's gzip header.
_VOLATILE = {
    "png": {},
    "svg": {"Date": None},
    "pdf": {"CreationDate": None, "ModDate": None},
}
# Where each format keeps a free-text description.
_DESCRIPTION_KEY = {"png": "Description", "svg": "Description", "pdf": "Subject"}


@contextlib.contextmanager
def _epoch_zero():
    """PostScript's ``%%CreationDate`` at 1970-01-01, as reproducible builds do."""
    old = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["SOURCE_DATE_EPOCH"]
        else:
            os.environ["SOURCE_DATE_EPOCH"] = old


def _save(fig, out: str | Path, *, description: str | None = None) -> Path:
    """Write ``fig`` to ``out`` (format from the suffix) with no date and with
    ``description`` (what the figure shows: seed, schedulers) in its metadata.
    The caller draws under :func:`reproducible`."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fmt = out.suffix.lstrip(".").lower() or matplotlib.rcParams["savefig.format"]
    inner = "svg" if fmt == "svgz" else fmt
    kwargs = {}
    if inner in _VOLATILE:
        meta = dict(_VOLATILE[inner])
        if description and inner in _DESCRIPTION_KEY:
            meta[_DESCRIPTION_KEY[inner]] = description
        kwargs["metadata"] = meta
    fig.tight_layout()
    buf = io.BytesIO()
    with _epoch_zero():
        fig.savefig(buf, dpi=120, format=inner, **kwargs)
    data = buf.getvalue()
    out.write_bytes(gzip.compress(data, mtime=0) if fmt == "svgz" else data)
    plt.close(fig)
    return out
