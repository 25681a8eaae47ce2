"""The validate-disk CDF plot (the CSV is what `hvio validate-disk --out` writes)."""

from __future__ import annotations

import pytest
from hvio import hdd_validation


def _csv(tmp_path, shift):
    lines = ["quantile,measured_ms,simulated_ms"]
    for k in range(1, 10_001):
        q = k / 10_000
        lines.append(f"{q:.4f},{10 * q:.6f},{10 * q + shift:.6f}")
    p = tmp_path / "cdf.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_plot_and_demerit(tmp_path):
    p = _csv(tmp_path, 0.25)
    df = hdd_validation.read_cdfs(p)
    assert len(df) == 10_000
    assert hdd_validation.demerit(df) == pytest.approx(0.25)
    out = hdd_validation.plot_cdfs(p, tmp_path / "fig" / "cdf.png", title="test")
    assert out.exists() and out.stat().st_size > 1000


def test_not_a_cdf_file(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="missing columns"):
        hdd_validation.read_cdfs(p)
