"""HDD model validation plots: the measured and simulated service-time CDFs
written by ``hvio validate-disk SPEC TRACE --out DIR`` (``DIR/cdf.csv``) and
by ``hvio validate-disk --all DATA --out OUT`` (``OUT/NAME/cdf.csv`` per
disk), with DiskSim's own simulated distribution beside them where its
output (``DATA/NAME.outv``) is there.

The demerit is Ruemmler and Wilkes' RMS horizontal distance between the
measured and simulated CDFs, the figure DiskSim's validation reports."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from .plots import _save, reproducible  # noqa: E402


def read_cdfs(cdf_csv: str | Path) -> pd.DataFrame:
    """The CDFs as a DataFrame: ``quantile``, ``measured_ms``, ``simulated_ms``."""
    df = pd.read_csv(cdf_csv)
    missing = {"quantile", "measured_ms", "simulated_ms"} - set(df.columns)
    if missing:
        raise ValueError(f"{cdf_csv}: not a validate-disk CDF file (missing columns {sorted(missing)})")
    return df


def demerit(df: pd.DataFrame) -> float:
    """RMS horizontal distance between the two CDFs, ms (the demerit figure)."""
    return float(((df["measured_ms"] - df["simulated_ms"]) ** 2).mean() ** 0.5)


def _draw_measured_and_hvio(ax, df: pd.DataFrame, measured: str, hvio: str) -> None:
    ax.plot(df["measured_ms"], df["quantile"], label=measured, linewidth=1.5)
    ax.plot(df["simulated_ms"], df["quantile"], label=hvio, linewidth=1, linestyle="--")


@reproducible
def plot_cdfs(cdf_csv: str | Path, out: str | Path, *, title: str | None = None) -> Path:
    """Both service-time CDFs in one figure, the demerit in the legend."""
    df = read_cdfs(cdf_csv)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _draw_measured_and_hvio(ax, df, "measured (real disk)", f"hvio (demerit {demerit(df):.3f} ms)")
    ax.set_xlabel("service time (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(title or "Service-time distribution: real disk vs hvio")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    return _save(fig, out, description=f"hvio validate-disk; {Path(cdf_csv).name}")


#: The two distributions of a DiskSim ``.outv`` that its validation compares.
OUTV_MEASURED = "VALIDATE Trace access time distribution"
OUTV_SIMULATED = "IOdriver Physical access time distribution"


def read_outv_cdf(outv: str | Path, title: str = OUTV_SIMULATED) -> pd.DataFrame:
    """One distribution of a DiskSim output file as a CDF: ``ms``, ``cumulative``.

    The block titled ``title`` holds rows ``value count fraction cumulative``
    up to the first cumulative of 1 (the same reading as hvio's
    ``validate::read_outv_distribution``)."""
    lines = Path(outv).read_text(errors="replace").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip() == title)
    except StopIteration:
        raise ValueError(f"{outv}: no distribution `{title}`") from None
    ms, cum = [], []
    for i, line in enumerate(lines[start + 1 :], start=start + 2):
        fields = line.split()
        try:
            value, _count, _fraction, c = (float(f) for f in fields)
        except ValueError:
            msg = f"expected `value count fraction cumulative`, found `{line}`"
            raise ValueError(f"{outv}:{i}: {msg}") from None
        ms.append(value)
        cum.append(c)
        if c >= 1.0:
            return pd.DataFrame({"ms": ms, "cumulative": cum})
    raise ValueError(f"{outv}: distribution `{title}` never reaches 1")


def disk_cdfs(out_dir: str | Path) -> dict[str, Path]:
    """The per-disk CDF files under ``out_dir`` (``NAME/cdf.csv``), by name, sorted."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise ValueError(f"{out_dir}: not a folder (expected `hvio validate-disk --all DIR --out {out_dir}`)")
    found = {p.parent.name: p for p in sorted(out_dir.glob("*/cdf.csv"))}
    if not found:
        hint = f"write them with `hvio validate-disk --all DIR --out {out_dir}`"
        raise ValueError(f"{out_dir}: no NAME/cdf.csv ({hint})")
    return found


def _draw_disk(ax, name: str, df: pd.DataFrame, outv: Path | None) -> None:
    _draw_measured_and_hvio(ax, df, "measured", f"hvio ({demerit(df):.3f} ms)")
    if outv is not None:
        ds = read_outv_cdf(outv)
        ax.step(ds["ms"], ds["cumulative"], where="post", label="DiskSim 4.0", linewidth=1, linestyle=":")
    mean = df["measured_ms"].mean()
    ax.set_title(f"{name} (demerit {100 * demerit(df) / mean:.2f}% of the mean)", fontsize=9)
    ax.set_xlabel("service time (ms)", fontsize=8)
    ax.set_ylabel("fraction of requests", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(loc="lower right", fontsize=7)
    ax.grid(alpha=0.3)


@reproducible
def plot_disks(
    out_dir: str | Path,
    figure: str | Path,
    *,
    data_dir: str | Path | None = None,
    disksim_out: str | Path | None = None,
) -> list[Path]:
    """Every disk's CDFs: one panel per disk in ``figure`` and
    ``OUT/NAME/cdf.png`` per disk; measured vs hvio, and DiskSim's own
    simulated CDF where its run is there: ``disksim_out/NAME.outv`` (DiskSim's
    runs kept by ``bench/disksim-runs.sh``), else ``data_dir/NAME.outv``.
    Returns the paths written, the combined figure first. Deterministic: the
    same inputs give the same bytes."""
    disks = disk_cdfs(out_dir)
    if disksim_out is not None and not Path(disksim_out).is_dir():
        hint = "bench/disksim-runs.sh --out DIR writes DiskSim's runs there"
        raise ValueError(f"{disksim_out}: not a folder ({hint})")
    frames = {name: read_cdfs(p) for name, p in disks.items()}
    outvs = {}
    for name in disks:
        folder = disksim_out if disksim_out is not None else data_dir
        outv = Path(folder) / f"{name}.outv" if folder is not None else None
        outvs[name] = outv if outv is not None and outv.is_file() else None
    cols = min(3, len(disks))
    rows = math.ceil(len(disks) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    for ax, name in zip(axes.flat, disks):
        _draw_disk(ax, name, frames[name], outvs[name])
    for ax in list(axes.flat)[len(disks) :]:
        ax.set_visible(False)
    written = [_save(fig, figure, description=f"hvio validate-disk --all; {', '.join(disks)}")]
    for name, csv in disks.items():
        fig, ax = plt.subplots(figsize=(6, 4.2))
        _draw_disk(ax, name, frames[name], outvs[name])
        written.append(_save(fig, csv.with_name("cdf.png"), description=f"hvio validate-disk; {name}"))
    return written
