"""HDD model validation plots: the measured and simulated service-time CDFs
written by ``hvio validate-disk SPEC TRACE --out DIR`` (``DIR/cdf.csv``)."""

from __future__ import annotations

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


@reproducible
def plot_cdfs(cdf_csv: str | Path, out: str | Path, *, title: str | None = None) -> Path:
    """Both service-time CDFs in one figure, the demerit in the legend."""
    df = read_cdfs(cdf_csv)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(df["measured_ms"], df["quantile"], label="measured (real disk)", linewidth=1.5)
    ax.plot(
        df["simulated_ms"],
        df["quantile"],
        label=f"hvio (demerit {demerit(df):.3f} ms)",
        linewidth=1,
        linestyle="--",
    )
    ax.set_xlabel("service time (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(title or "Service-time distribution: real disk vs hvio")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    return _save(fig, out, description=f"hvio validate-disk; {Path(cdf_csv).name}")
