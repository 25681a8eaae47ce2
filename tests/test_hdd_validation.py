"""The validate-disk CDF plot (the CSV is what `hvio validate-disk --out` writes)."""

from __future__ import annotations

import pytest
from hvio import hdd_validation
from hvio.__main__ import main


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


def _outv(path, values):
    """A DiskSim output file holding one simulated distribution over `values` ms."""
    rows, n = [], len(values)
    for k, v in enumerate(values, start=1):
        rows.append(f" {v:.3f}  \t      1  \t{1 / n:.6f}  \t{k / n:.6f}")
    path.write_text("\n".join(["junk", hdd_validation.OUTV_SIMULATED, *rows, "more junk"]) + "\n")


def test_hdd_cdfs_command_draws_every_disk(tmp_path):
    """`python -m hvio hdd-cdfs OUT --data DIR` on a scratch folder laid out
    as `hvio validate-disk --all DIR --out OUT` writes it: one panel per disk,
    a figure per disk, DiskSim's CDF only where NAME.outv is there, and the
    same bytes on a second run."""
    out, data = tmp_path / "out", tmp_path / "data"
    for name, shift in (("diskb", 0.1), ("diska", 0.3)):
        (out / name).mkdir(parents=True)
        (out / name / "cdf.csv").write_text(_csv(tmp_path, shift).read_text())
    data.mkdir()
    _outv(data / "diska.outv", [2.0, 5.0, 9.0])
    assert main(["hdd-cdfs", str(out), "--data", str(data)]) == 0
    written = [out / "cdfs.png", out / "diska" / "cdf.png", out / "diskb" / "cdf.png"]
    first = [p.read_bytes() for p in written]
    assert all(len(b) > 1000 for b in first)
    assert main(["hdd-cdfs", str(out), "--data", str(data)]) == 0
    assert [p.read_bytes() for p in written] == first
    ds = hdd_validation.read_outv_cdf(data / "diska.outv")
    assert list(ds["ms"]) == [2.0, 5.0, 9.0] and ds["cumulative"].iloc[-1] == 1.0
    # Without the DiskSim output the panel has two curves, so the figure differs.
    (data / "diska.outv").unlink()
    assert main(["hdd-cdfs", str(out), "--data", str(data)]) == 0
    assert (out / "diska" / "cdf.png").read_bytes() != first[1]


def test_hdd_cdfs_errors_name_the_folder_or_file(tmp_path, capsys):
    assert main(["hdd-cdfs", str(tmp_path / "missing")]) == 1
    assert "missing: not a folder" in capsys.readouterr().err
    assert main(["hdd-cdfs", str(tmp_path)]) == 1
    assert "no NAME/cdf.csv" in capsys.readouterr().err
    bad = tmp_path / "x.outv"
    bad.write_text(hdd_validation.OUTV_SIMULATED + "\n 1.0 2 0.5\n")
    with pytest.raises(ValueError, match=r"x.outv:2: expected"):
        hdd_validation.read_outv_cdf(bad)


def test_hdd_cdfs_takes_disksim_runs_from_their_own_folder(tmp_path, capsys):
    """`--disksim-out RUNS`: DiskSim's CDF from RUNS/NAME.outv, not from the
    data folder's; a RUNS that is not a folder is an error naming it."""
    out, data, runs = tmp_path / "out", tmp_path / "data", tmp_path / "runs"
    (out / "diska").mkdir(parents=True)
    (out / "diska" / "cdf.csv").write_text(_csv(tmp_path, 0.3).read_text())
    data.mkdir()
    runs.mkdir()
    _outv(data / "diska.outv", [2.0, 5.0, 9.0])
    assert main(["hdd-cdfs", str(out), "--data", str(data)]) == 0
    from_data = (out / "diska" / "cdf.png").read_bytes()
    assert main(["hdd-cdfs", str(out)]) == 0
    without = (out / "diska" / "cdf.png").read_bytes()
    _outv(runs / "diska.outv", [2.0, 5.0, 9.0])
    assert main(["hdd-cdfs", str(out), "--data", str(data), "--disksim-out", str(runs)]) == 0
    assert (out / "diska" / "cdf.png").read_bytes() == from_data
    (data / "diska.outv").unlink()
    assert main(["hdd-cdfs", str(out), "--disksim-out", str(runs)]) == 0
    assert (out / "diska" / "cdf.png").read_bytes() == from_data
    (runs / "diska.outv").unlink()
    _outv(data / "diska.outv", [2.0, 5.0, 9.0])
    assert main(["hdd-cdfs", str(out), "--data", str(data), "--disksim-out", str(runs)]) == 0
    assert (out / "diska" / "cdf.png").read_bytes() == without
    assert main(["hdd-cdfs", str(out), "--disksim-out", str(tmp_path / "nowhere")]) == 1
    assert "nowhere: not a folder" in capsys.readouterr().err
