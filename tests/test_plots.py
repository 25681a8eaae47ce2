"""Figures are written and are real PNGs."""

from __future__ import annotations

import hvio
from hvio import plots

from .test_api import SMALL


def test_figures(tmp_path):
    r = hvio.simulate(SMALL)
    p = plots.throughput_over_time(r, tmp_path / "t.png")
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    p = plots.bandwidth_by_scheduler([r, hvio.simulate(SMALL, scheduler="noop")], tmp_path / "b.png")
    assert p.stat().st_size > 1000


def test_lba_scatter_from_records(tmp_path):
    rec = tmp_path / "rec.csv"
    cfg = SMALL.replace("seed = 3", f'seed = 3\n[output]\nrecords = "{rec}"')
    hvio.simulate(cfg)
    lines = rec.read_text().splitlines()
    assert lines[0].startswith("vm,op,sector")
    assert len(lines) == 1 + 600
    p = plots.lba_scatter(rec, tmp_path / "lba.png")
    assert p.stat().st_size > 1000
