"""Same config and seed → byte-identical output: figures in every format
(no dates, no random SVG ids), ``python -m hvio run``'s files, and every
output that depends on the seed names it."""

from __future__ import annotations

import os
import re
import zlib

import hvio
import matplotlib
import pytest
from hvio import hdd_validation, plots
from hvio.__main__ import run
from PIL import Image

from .test_api import SMALL

FORMATS = ["png", "svg", "svgz", "pdf", "eps"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    rec = d / "rec.csv"
    r = hvio.simulate(SMALL.replace("seed = 3", f'seed = 3\n[output]\nrecords = "{rec}"'))
    cdf = d / "cdf.csv"
    cdf.write_text("quantile,measured_ms,simulated_ms\n0.1,1.0,1.2\n0.5,4.0,4.4\n0.9,9.0,8.1\n")
    return [r, hvio.simulate(SMALL, scheduler="noop")], rec, cdf


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_figure_is_byte_identical_when_drawn_twice(inputs, tmp_path, fmt):
    results, rec, cdf = inputs
    drawn = []
    for i in range(2):
        d = tmp_path / str(i)
        names = [d / f"{n}.{fmt}" for n in ("throughput", "bandwidth", "seek", "lba", "cdf")]
        paths = [
            plots.throughput_over_time(results[0], names[0]),
            plots.bandwidth_by_scheduler(results, names[1]),
            plots.seek_distribution(results, names[2]),
            plots.lba_scatter(rec, names[3]),
            hdd_validation.plot_cdfs(cdf, names[4]),
        ]
        drawn.append([p.read_bytes() for p in paths])
    for a, b, name in zip(drawn[0], drawn[1], ("throughput", "bandwidth", "seek", "lba", "cdf")):
        assert len(a) > 1000
        assert a == b, f"{name}.{fmt} differs between two drawings"


def test_figures_ignore_the_users_matplotlib_settings(inputs, tmp_path):
    results, _, cdf = inputs
    plain = plots.throughput_over_time(results[0], tmp_path / "plain.png").read_bytes()
    cdfs = hdd_validation.plot_cdfs(cdf, tmp_path / "plain-cdf.png").read_bytes()
    with matplotlib.rc_context(
        {"font.size": 17, "lines.linewidth": 4, "axes.grid": True, "savefig.dpi": 300}
    ):
        styled = plots.throughput_over_time(results[0], tmp_path / "styled.png").read_bytes()
        styled_cdfs = hdd_validation.plot_cdfs(cdf, tmp_path / "styled-cdf.png").read_bytes()
    assert plain == styled
    assert cdfs == styled_cdfs


def _pdf_text(data: bytes) -> bytes:
    """The PDF's bytes with its compressed streams inflated."""
    out = [data]
    for m in re.finditer(rb"stream\r?\n(.*?)endstream", data, re.S):
        try:
            out.append(zlib.decompress(m.group(1)))
        except zlib.error:
            pass
    return b"".join(out)


def test_figures_name_the_seed_and_schedulers(inputs, tmp_path):
    results, rec, _ = inputs
    p = plots.bandwidth_by_scheduler(results, tmp_path / "b.png")
    assert Image.open(p).text["Description"] == "hvio; scheduler deadline, noop; seed 3"
    p = plots.lba_scatter(rec, tmp_path / "lba.png")
    assert Image.open(p).text["Description"] == "hvio; records rec.csv; seed 3"
    svg = plots.throughput_over_time(results[0], tmp_path / "t.svg").read_text()
    assert "<dc:description>hvio; scheduler deadline; seed 3</dc:description>" in svg
    assert "<dc:date>" not in svg
    pdf = plots.seek_distribution(results, tmp_path / "s.pdf").read_bytes()
    assert b"/Subject (hvio; scheduler deadline, noop; seed 3)" in _pdf_text(pdf)
    assert b"/CreationDate" not in _pdf_text(pdf)
    before = os.environ.get("SOURCE_DATE_EPOCH")
    eps = plots.throughput_over_time(results[0], tmp_path / "t.eps").read_bytes()
    assert b"%%CreationDate: Thu Jan 01 00:00:00 1970" in eps
    assert b"t.eps" not in eps
    assert os.environ.get("SOURCE_DATE_EPOCH") == before


def test_main_run_writes_identical_files_that_name_the_seed(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    outs = []
    for i in range(2):
        d = tmp_path / f"out{i}"
        assert run(d, str(cfg), ["deadline", "cfq"]) == 0
        outs.append({p.name: p.read_bytes() for p in sorted(d.iterdir())})
    assert sorted(outs[0]) == [
        "bandwidth_by_scheduler.png",
        "compare.csv",
        "compare.json",
        "fairness.png",
        "p99_by_scheduler.png",
        "report.html",
        "seek_distribution.png",
        "throughput_over_time.png",
    ]
    for name, data in outs[0].items():
        assert data == outs[1][name], f"{name} differs between two runs"
    header, *rows = outs[0]["compare.csv"].decode().splitlines()
    assert header.endswith(",seed")
    # A row per scheduler and VM.
    assert [r.split(",")[-1] for r in rows] == ["3"] * 4
    # Another seed, another random workload.
    other = tmp_path / "seed4"
    cfg.write_text(SMALL.replace("seed = 3", "seed = 4"))
    run(other, str(cfg), ["deadline"])
    assert (other / "compare.json").read_bytes() != outs[0]["compare.json"]
    assert (other / "compare.csv").read_text().splitlines()[1].endswith(",4")


def test_reproduce_reports_its_seed():
    r = hvio.reproduce("htbs-rates", quick=True, seed=2)
    assert (r.seed, r.quick) == (2, True)
    assert r.raw == hvio.reproduce("htbs-rates", quick=True, seed=2).raw
    assert r.data != hvio.reproduce("htbs-rates", quick=True, seed=3).data
