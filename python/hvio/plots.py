"""Figures: the LBA-over-time scatter of paper 000 Fig. 1, throughput over
time (Fig. 7), per-VM bandwidth by scheduler (Fig. 6b), seek distances, and
the figures of a scheduler comparison (``hvio compare``): per-VM p99 by
scheduler, fairness with share of disk time against weight share, and
throughput over time under every scheduler on one shared axis.

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

from .api import Comparison, Result  # noqa: E402


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
    """Arrival time vs sector of every host request, by VM (the figure of
    paper 000 Fig. 1, for any config).

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
    seeds = sorted(df["seed"].unique()) if "seed" in df else []
    seed_text = f", seed {', '.join(str(int(x)) for x in seeds)}" if seeds else ""
    ax.set_title(f"Host requests by VM: {Path(records_csv).name}{seed_text}")
    ax.legend(markerscale=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, out, description=_describe(seeds, [], f"records {Path(records_csv).name}"))


def _seed_text(results: list[Result]) -> str:
    seeds = sorted({r.raw["seed"] for r in results})
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(x) for x in seeds)


def _whole_buckets(result: Result) -> pd.DataFrame:
    """The time series of each VM up to the last bucket it was busy for
    whole: the bucket its last job ended inside is left out (its rate would
    be a part-bucket's bytes over a whole bucket), and so are the empty
    ones after it."""
    s = result.series
    if s.empty:
        return s
    interval = result.raw["series"]["interval_s"]
    ends = result.jobs.groupby("vm")["end_s"].max()
    end = s["vm"].map(ends).fillna(result.raw["sim_time_s"])
    return s[s["time_s"] + interval <= end + 1e-9]


@reproducible
def throughput_over_time(
    results: Result | list[Result], out: str | Path, *, metric: str = "mb_per_s", config: str | None = None
) -> Path:
    """Per-VM throughput every interval (paper 000 Fig. 7), one panel per
    scheduler on a shared time and throughput axis (MB/s by default:
    requests of 8 KiB and 1 MiB are not comparable in IOPS). A last
    bucket the run ended inside is left out."""
    if isinstance(results, Result):
        results = [results]
    n = len(results)
    cols = 1 if n < 4 else 2
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(9 if cols == 1 else 12, 1.0 + 2.2 * rows),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    unit = "IOPS" if metric == "iops" else "MB/s"
    handles = {}
    for ax, r in zip(axes.flat, results):
        for vm, g in _whole_buckets(r).groupby("vm", sort=False):
            (line,) = ax.plot(g["time_s"], g[metric], label=vm, linewidth=1)
            handles.setdefault(vm, line)
        ax.set_title(r.scheduler, fontsize=10)
        ax.set_ylabel(unit)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    # The lowest shown panel of each column carries the time axis.
    for c in range(cols):
        shown = [ax for ax in axes[:, c] if ax.get_visible()]
        if shown:
            shown[-1].set_xlabel("time (s)")
            shown[-1].xaxis.set_tick_params(labelbottom=True)
    what = f"{config}, " if config else ""
    fig.suptitle(f"Throughput of each VM over time ({what}{_seed_text(results)})")
    axes[0, -1].legend(list(handles.values()), list(handles), loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, out, description=_describe_results(results))


@reproducible
def bandwidth_by_scheduler(results: list[Result], out: str | Path, *, config: str | None = None) -> Path:
    """The run's total MB/s under each scheduler, split between the VMs by
    the bytes each moved: the stack is the total. (Paper 000 Fig. 6(b) sums
    per-VM MB/s over each VM's own active time instead, which is no total.)"""
    rows = []
    for r in results:
        all_mb = r.vms["mb"].sum()
        for _, v in r.vms.iterrows():
            part = v["mb"] / all_mb if all_mb > 0 else 0.0
            rows.append({"scheduler": r.scheduler, "vm": v["vm"], "mb_per_s": part * r.total_mb_per_s})
    df = pd.DataFrame(rows).pivot(index="scheduler", columns="vm", values="mb_per_s")
    df = df.loc[[r.scheduler for r in results], list(results[0].vms["vm"])]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    df.plot(kind="bar", stacked=True, ax=ax)
    ax.set_ylabel("MB/s (total, split by each VM's bytes)")
    what = f"{config}, " if config else ""
    ax.set_title(f"Bandwidth by host scheduler, stacked by VM = total ({what}{_seed_text(results)})")
    ax.tick_params(axis="x", rotation=30)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, out, description=_describe_results(results))


@reproducible
def p99_by_scheduler(c: Comparison, out: str | Path) -> Path:
    """Each VM's p99 latency under each scheduler, log scale (mean over the
    seeds, with the spread as error bars when there are several)."""
    v = c.vms
    p = v.pivot(index="scheduler", columns="vm", values="p99_ms").loc[c.scheduler_names, c.vm_names]
    sd = v.pivot(index="scheduler", columns="vm", values="p99_ms_sd").loc[c.scheduler_names, c.vm_names]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    p.plot(kind="bar", ax=ax, yerr=sd if len(c.seeds) > 1 else None, logy=True)
    ax.set_ylabel("p99 latency (ms, log scale)")
    ax.set_title(f"p99 latency of each VM by host scheduler ({c.config_name}, {c.seed_text})")
    ax.tick_params(axis="x", rotation=30)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, out, description=_describe_comparison(c))


@reproducible
def fairness(c: Comparison, out: str | Path) -> Path:
    """Two panels: Jain's index over weight-normalised progress per
    scheduler, and each VM's share of the disk's time beside its weight
    share (the dashed lines)."""
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(10, 8))
    s = c.schedulers.set_index("scheduler").loc[c.scheduler_names]
    a1.bar(s.index, s["jain"], yerr=s["jain_sd"] if len(c.seeds) > 1 else None, color="tab:gray")
    a1.set_ylim(0, 1.05)
    a1.set_ylabel("Jain's index")
    a1.set_title(f"Weighted fairness by host scheduler ({c.config_name}, {c.seed_text})")
    a1.tick_params(axis="x", rotation=30)
    share = c.vms.pivot(index="scheduler", columns="vm", values="disk_share").loc[
        c.scheduler_names, c.vm_names
    ]
    (100 * share).plot(kind="bar", ax=a2)
    weights = c.vms.drop_duplicates("vm").set_index("vm").loc[c.vm_names, "weight_share"]
    for i, (vm, w) in enumerate(weights.items()):
        color = a2.containers[i].patches[0].get_facecolor()
        a2.axhline(100 * w, color=color, linestyle="--", linewidth=1, label=f"{vm} weight share")
    a2.set_ylabel("% of the disk's busy time")
    a2.set_title("Share of disk time (bars) against weight share (dashed)")
    a2.tick_params(axis="x", rotation=30)
    a2.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, out, description=_describe_comparison(c))


def comparison_figures(c: Comparison, out_dir: str | Path, fmt: str = "png") -> list[Path]:
    """Every figure of a comparison into ``out_dir``."""
    out_dir = Path(out_dir)
    first = [r for r in c.runs if r.raw["seed"] == c.seeds[0]]
    return [
        p99_by_scheduler(c, out_dir / f"p99_by_scheduler.{fmt}"),
        fairness(c, out_dir / f"fairness.{fmt}"),
        throughput_over_time(first, out_dir / f"throughput_over_time.{fmt}", config=c.config_name),
        bandwidth_by_scheduler(first, out_dir / f"bandwidth_by_scheduler.{fmt}", config=c.config_name),
        seek_distribution(first, out_dir / f"seek_distribution.{fmt}"),
    ]


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
    return _describe(seeds, list(dict.fromkeys(r.scheduler for r in results)))


def _describe_comparison(c: Comparison) -> str:
    return _describe(c.seeds, c.scheduler_names, f"config {c.config_name}")


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
