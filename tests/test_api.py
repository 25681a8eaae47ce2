"""The Python API end to end: DataFrames out, errors that name the key."""

from __future__ import annotations

import hvio
import pytest

SMALL = """
seed = 3
[host]
scheduler = "deadline"
[[vm]]
name = "a"
image_size = "1GiB"
[[vm.job]]
rw = "randread"
bs = "4k"
size = "64MiB"
numjobs = 2
requests = 300
[[vm]]
name = "b"
image_size = "1GiB"
[[vm.job]]
rw = "read"
bs = "16k"
size = "64MiB"
numjobs = 2
requests = 300
"""


def test_simulate_returns_dataframes():
    r = hvio.simulate(SMALL)
    assert list(r.vms["vm"]) == ["a", "b"]
    assert (r.jobs["reads"] == 300).all()
    assert r.total_mb_per_s > 0
    assert set(r.series["vm"]) == {"a", "b"}
    assert abs(r.seek_table()["fraction"].iloc[1:].sum() - 1.0) < 1e-9


def test_dict_config_and_overrides_are_deterministic():
    a = hvio.simulate(SMALL, scheduler="noop", seed=5)
    b = hvio.simulate(SMALL, scheduler="noop", seed=5)
    assert a.scheduler == "noop"
    assert a.raw == b.raw
    d = {
        "vm": [{"name": "x", "image_size": "1GiB", "job": [{"rw": "write", "size": "8MiB", "requests": 50}]}]
    }
    r = hvio.simulate(d)
    assert r.jobs["writes"].iloc[0] == 50


def test_bad_config_error_names_the_file_and_line(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text('[[vm]]\nname = "a"\nweight = 0\n')
    with pytest.raises(hvio.HvioError, match=r"w\.toml:3: vm \"a\": invalid value 0 for `weight`"):
        hvio.simulate(path)
    with pytest.raises(hvio.HvioError, match=r"^<string>: .*`vm`"):
        hvio.simulate("seed = 1\n")
    garbage = tmp_path / "garbage.toml"
    garbage.write_bytes(b"\x00\xff\xfe binary")
    with pytest.raises(hvio.HvioError, match=r"garbage\.toml: not a UTF-8 text file"):
        hvio.simulate(garbage)
    with pytest.raises(hvio.HvioError, match=r"/dev/zero: larger than 64 MiB"):
        hvio.simulate("/dev/zero")
    # Overrides keep the file's name and lines (they used to go through JSON).
    with pytest.raises(hvio.HvioError, match=r"w\.toml:3: vm \"a\""):
        hvio.simulate(path, scheduler="noop", seed=3)
    with pytest.raises(hvio.HvioError, match=r"scheduler=\"nope\": unknown scheduler"):
        hvio.simulate(path, scheduler="nope")
    with pytest.raises(hvio.HvioError, match=r"name at least one scheduler"):
        hvio.compare(path, [])
    # A dict with a nan names its key (JSON has no nan: the JSON parser named a column).
    d = {"max_time_s": 10.0, "vm": [{"name": "a", "job": [{"rw": "read", "runtime_s": float("nan")}]}]}
    with pytest.raises(hvio.HvioError, match=r"`vm\[0\]\.job\[0\]\.runtime_s`: must be a finite"):
        hvio.simulate(d)


def test_bad_config_raises_with_key():
    with pytest.raises(hvio.HvioError, match="imagesize"):
        hvio.simulate('[[vm]]\nname = "a"\nimagesize = 3\n')
    with pytest.raises(hvio.HvioError, match="fifo_batch"):
        hvio.simulate(
            SMALL.replace('scheduler = "deadline"', 'scheduler = "deadline"\nparams = { fifo_batch = 0 }')
        )


def test_scheduler_table_lists_linux_tunables():
    t = hvio.scheduler_table()
    row = t[(t.scheduler == "deadline") & (t.name == "read_expire")].iloc[0]
    assert row["default"] == 500 and row["unit"] == "ms"
    assert "noop" in hvio.schedulers()


def test_pregather_reports_its_slices_over_time():
    cfg = (
        'seed = 1\nmax_time_s = 60\n[host]\nscheduler = "pregather"\n'
        '[[vm]]\nname = "a"\n[[vm.job]]\nrw = "read"\nbs = "64KiB"\nsize = "32MiB"\n'
        '[[vm]]\nname = "b"\n[[vm.job]]\nrw = "randread"\nbs = "4KiB"\nsize = "64MiB"\nrequests = 400\n'
    )
    r = hvio.simulate(cfg)
    s = r.series
    assert {"slices", "slice_ms", "slice_used_ms"} <= set(s.columns)
    # Every slice that ended is in the series, once.
    counters = dict(r.host["counters"])
    ended = s.groupby("vm")["slices"].sum()
    for vm in ("a", "b"):
        assert 0 < ended[vm] <= counters[f"slices.{vm}"]
    busy = s[s["slices"] > 0]
    assert (busy["slice_used_ms"] > 0).all()
    # A slice-less scheduler leaves the columns out.
    assert "slices" not in hvio.simulate(cfg.replace("pregather", "deadline")).series.columns


PHASED = """
seed = 4
[disk]
model = "simple"
[[vm]]
name = "a"
image_size = "1GiB"
[[vm.job]]
phase = "scan"
rw = "read"
bs = "128k"
size = "16MiB"
numjobs = 2
[[vm.job]]
phase = "update"
rw = "randrw"
bs = "16k"
size = "64MiB"
iodepth = 4
requests = 200
"""


def test_tune_finds_a_plan_that_runs_in_the_predicted_time():
    t = hvio.tune(PHASED, hosts=["noop", "deadline"], guests=["noop", "cfq"], brute_force=True)
    assert [p for p, _, _ in t.algorithm1] == ["scan", "update"]
    # The plan written is the fastest run measured: here the optimum's time.
    assert t.chosen_from in {"algorithm1", "single-pair", "walk-run", "brute-force", "as-written"}
    if t.chosen_from != "as-written":
        assert [p for p, _, _ in t.plan] == ["scan", "update"]
    assert list(t.profile.columns) == ["host", "guest", "scan", "update", "total"]
    assert len(t.profile) == 4
    # The optimum is the fastest of the 16 plans; Algorithm 1 is not faster.
    assert t.optimum is not None
    assert t.raw["comparison"]["brute_force"]["outcome"]["phase_s"]
    assert t.predicted_s <= sum(t.raw["comparison"]["brute_force"]["outcome"]["phase_s"]) + 1e-9
    r = hvio.simulate(t.config)
    assert sum(p["duration_s"] for p in r.raw["phases"]) == pytest.approx(t.predicted_s, rel=1e-12)


def test_tune_names_a_bad_scheduler():
    with pytest.raises(hvio.HvioError, match="fifo"):
        hvio.tune(PHASED, hosts=["fifo"])
