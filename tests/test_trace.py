"""Trace replay through Python: DataFrames out, errors name the file and line."""

from __future__ import annotations

from pathlib import Path

import hvio
import pytest

DATA = Path(__file__).resolve().parent.parent / "crates" / "hvio-trace" / "tests" / "data"


def test_replay_blkparse_under_two_schedulers():
    for s in ["noop", "deadline"]:
        r = hvio.replay(DATA / "sda.blkparse", scheduler=s)
        assert r.scheduler == s
        assert list(r.vms["vm"]) == ["8,0", "8,16"]
        assert int(r.vms["reads"].sum() + r.vms["writes"].sum()) == 5


def test_replay_closed_loop_and_mapping():
    r = hvio.replay(DATA / "alibaba.csv", closed=2, map="4*=tenant,3=other")
    assert list(r.vms["vm"]) == ["tenant", "other"]
    r = hvio.replay(DATA / "mqsim.trace", vms=1, time_scale=0.5)
    assert list(r.vms["vm"]) == ["vm0"]


def test_replay_errors_name_the_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,W,0,4096,10\n1,Q,0,4096,11\n")
    with pytest.raises(hvio.HvioError, match="line 2"):
        hvio.replay(bad, format="alibaba")
    r = hvio.replay(bad, format="alibaba", skip_bad=True)
    assert int(r.vms["writes"].sum()) == 1
