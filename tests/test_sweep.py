"""Sweeps: a study's matrix expanded, run on threads or a Dask cluster with
the same results as one by one, cached, written as long-form Parquet; a
two-worker Dask cluster on loopback that loses a worker mid-sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import hvio
import pandas as pd
import pytest
from hvio import sweeps as sw
from hvio.__main__ import main

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "experiments" / "small-sweep.study.toml"


def study(tmp_path: Path, matrix: str, keep: str = "", base: str | None = None) -> Path:
    """A study file in tmp_path over a copy of small-two-vms.toml."""
    (tmp_path / "base.toml").write_text((ROOT / "experiments" / "small-two-vms.toml").read_text())
    if base is not None:
        (tmp_path / "base.toml").write_text(base)
    p = tmp_path / "s.study.toml"
    p.write_text(f'[study]\nname = "s"\nbase = "base.toml"\n[matrix]\n{matrix}\n{keep}')
    return p


def test_the_matrix_is_the_cartesian_product_in_the_matrix_order(tmp_path):
    p = study(
        tmp_path, 'scheduler = ["deadline", "cfq"]\n"vm.*.virtio_depth" = {from = 8, to = 24, step = 8}\n'
    )
    runs = sw.plan(sw.load_study(p))
    assert [(r.params["scheduler"], r.params["vm.*.virtio_depth"]) for r in runs] == [
        (s, d) for s in ("deadline", "cfq") for d in (8, 16, 24)
    ]
    assert all(vm["virtio_depth"] == r.params["vm.*.virtio_depth"] for r in runs for vm in r.config["vm"])
    assert len({r.key for r in runs}) == 6


def test_special_keys_set_the_scheduler_guests_and_seed(tmp_path):
    p = study(
        tmp_path,
        'scheduler = "bfq"\nguest = ["noop", "cfq"]\nseed = {from = 5, count = 2}\n"vm.b.weight" = 3\n',
    )
    runs = sw.plan(sw.load_study(p))
    assert len(runs) == 4
    c = runs[-1].config
    assert c["host"]["scheduler"] == "bfq" and c["seed"] == 6
    assert [vm["guest_scheduler"] for vm in c["vm"]] == ["cfq", "cfq"]
    assert [vm.get("weight") for vm in c["vm"]] == [None, 3]


@pytest.mark.parametrize(
    "matrix, needle",
    [
        ('scheduler = ["deadline", "nope"]', "unknown scheduler 'nope'"),
        ("seed = {from = 1, to = 0}", "range to (0) is below from (1)"),
        ("seed = {from = 1}", "a range is {from, to, step} or {from, count, step}"),
        ("seed = []", "an empty list runs nothing"),
        ('"vm.c.weight" = [1]', "`vm.c.weight`: no element 'c'"),
        ("seed = {from = 1, count = 2, step = 0}", "range step must be > 0"),
    ],
)
def test_a_bad_matrix_names_the_study_and_the_key(tmp_path, matrix, needle):
    p = study(tmp_path, matrix)
    with pytest.raises(hvio.HvioError) as e:
        sw.plan(sw.load_study(p))
    assert str(p) in str(e.value) and needle in str(e.value)


def test_a_bad_config_value_names_the_run_and_the_base(tmp_path):
    p = study(tmp_path, '"vm.*.virtio_depth" = [8, "deep"]')
    with pytest.raises(hvio.HvioError) as e:
        sw.sweep(p, out=tmp_path / "out", workers=2)
    msg = str(e.value)
    assert "run 1 (vm.*.virtio_depth = 'deep')" in msg and str(tmp_path / "base.toml") in msg
    assert not (tmp_path / "out" / "sweep" / "s").exists()


def test_threads_give_the_results_of_running_one_by_one(tmp_path):
    serial = sw.sweep(SMALL, out=None, workers=1)
    parallel = sw.sweep(SMALL, out=None, workers=4)
    assert len(serial.runs) == 24
    assert [json.dumps(r) for r in serial.results] == [json.dumps(r) for r in parallel.results]
    # Each run is the simulator's answer for its config, as hvio.simulate gives it.
    r = serial.runs[5]
    assert serial.results[5] == hvio.simulate(r.config).raw


def test_the_cache_computes_only_what_changed(tmp_path):
    out = tmp_path / "out"
    p = study(tmp_path, 'scheduler = ["deadline", "cfq"]\nseed = [1, 2]')
    first = sw.sweep(p, out=out)
    assert first.computed == 4
    again = sw.sweep(p, out=out)
    assert again.computed == 0 and again.results == first.results
    p.write_text(p.read_text().replace("seed = [1, 2]", "seed = [1, 2, 3]"))
    more = sw.sweep(p, out=out)
    assert more.computed == 2 and more.results[:2] == first.results[:2]
    assert sw.sweep(p, out=out, cache=False).computed == 6


def test_another_build_of_hvio_misses_the_cache(tmp_path, monkeypatch):
    out = tmp_path / "out"
    p = study(tmp_path, 'scheduler = ["deadline", "cfq"]')
    first = sw.sweep(p, out=out)
    assert first.computed == 2
    assert sw.build_identity().startswith(hvio._hvio.version() + "+")
    assert json.loads((first.out / "runs.json").read_text())["build"] == sw.build_identity()
    # The same package version, other code: every run is computed again.
    monkeypatch.setattr(sw, "build_identity", lambda: hvio._hvio.version() + "+0000000000000000")
    rebuilt = sw.sweep(p, out=out)
    assert rebuilt.computed == 2 and rebuilt.results == first.results
    assert {r.key for r in rebuilt.runs}.isdisjoint(r.key for r in first.runs)


def test_the_build_identity_is_the_extension_modules_bytes(tmp_path, monkeypatch):
    ext = Path(hvio._hvio.__file__)
    same, changed = tmp_path / "same.so", tmp_path / "changed.so"
    same.write_bytes(ext.read_bytes())
    changed.write_bytes(ext.read_bytes() + b"\0")
    identity = sw.build_identity.__wrapped__
    monkeypatch.setattr(hvio._hvio, "__file__", str(same))
    assert identity() == sw.build_identity()
    monkeypatch.setattr(hvio._hvio, "__file__", str(changed))
    assert identity() != sw.build_identity()


def test_the_long_form_table_has_a_row_per_run_vm_and_job(tmp_path):
    s = sw.sweep(SMALL, out=tmp_path)
    where = tmp_path / "sweep" / "small-sweep"
    df = pd.read_parquet(where / "results.parquet")
    assert len(df) == 24 * 2  # two VMs of one job each
    for col in (
        "run",
        "scheduler",
        "guest",
        "vm.*.job.*.iodepth",
        "seed",
        "vm",
        "job",
        "mb_per_s",
        "vm_mb_per_s",
    ):
        assert col in df.columns, col
    # [keep] chose the figures: numbers, not text.
    assert "latency_p99_ms" in df.columns and "reads" not in df.columns
    assert df["mb_per_s"].dtype.kind == "f" and df["vm.*.job.*.iodepth"].dtype.kind == "i"
    pd.testing.assert_frame_equal(df, s.frame)
    index = json.loads((where / "runs.json").read_text())
    assert len(index["runs"]) == 24
    one = index["runs"][7]
    assert json.loads((where / one["result"]).read_text()) == s.results[7]


def test_the_command_line_prints_a_summary(tmp_path, capsys):
    assert main(["sweep", str(SMALL), "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("small-sweep: 24 runs on ")
    assert "total MB/s" in text and "24 run(s) computed" in text
    assert main(["sweep", str(SMALL), "--out", str(tmp_path)]) == 0
    assert "0 run(s) computed in" in capsys.readouterr().out


def test_an_unreachable_cluster_is_an_error_that_names_it(tmp_path, capsys):
    pytest.importorskip("dask.distributed")
    assert main(["sweep", str(SMALL), "--out", str(tmp_path), "--cluster", "tcp://127.0.0.1:9"]) == 1
    assert "--cluster tcp://127.0.0.1:9: cannot reach the Dask scheduler" in capsys.readouterr().err


class Cluster:
    """A Dask scheduler and two single-threaded workers on loopback, as
    separate processes (`dask scheduler`, `dask worker`)."""

    def __init__(self, tmp: Path):
        dask = Path(sys.executable).parent / "dask"
        file = tmp / "scheduler.json"
        env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
        quiet = {"stdout": subprocess.DEVNULL, "stderr": (tmp / "dask.log").open("w"), "env": env}
        self.procs = [
            subprocess.Popen(
                [
                    dask,
                    "scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--no-dashboard",
                    "--scheduler-file",
                    file,
                ],
                **quiet,
            )
        ]
        deadline = time.time() + 60
        while not file.exists() and time.time() < deadline:
            time.sleep(0.2)
        self.address = json.loads(file.read_text())["address"]
        self.workers = [
            subprocess.Popen(
                [
                    dask,
                    "worker",
                    self.address,
                    "--nthreads",
                    "1",
                    "--no-nanny",
                    "--no-dashboard",
                    "--host",
                    "127.0.0.1",
                ],
                **quiet,
            )
            for _ in range(2)
        ]
        self.procs += self.workers
        from dask.distributed import Client

        with Client(self.address, timeout="30s") as c:
            c.wait_for_workers(2, timeout=60)

    def close(self):
        # Workers are killed outright (they would wait for the scheduler to
        # say goodbye); the scheduler is asked to stop.
        for p in self.workers:
            p.kill()
        self.procs[0].terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    pytest.importorskip("dask.distributed")
    c = Cluster(tmp_path_factory.mktemp("dask"))
    yield c
    c.close()


def test_a_sweep_on_a_dask_cluster_gives_the_local_results(cluster, tmp_path):
    local = sw.sweep(SMALL, out=None)
    remote = sw.sweep(SMALL, out=tmp_path, cluster=cluster.address)
    assert remote.computed == 24
    assert remote.results == local.results
    pd.testing.assert_frame_equal(remote.frame, local.frame)


def test_a_worker_killed_mid_sweep_and_the_sweep_still_completes(tmp_path):
    pytest.importorskip("dask.distributed")
    c = Cluster(tmp_path)
    try:
        # Runs of a few tenths of a second each, so the kill lands mid-sweep.
        p = study(
            tmp_path,
            "seed = {from = 1, count = 16}",
            base=(ROOT / "experiments" / "small-two-vms.toml")
            .read_text()
            .replace("requests = 400", "requests = 20000")
            .replace('"64MiB"', '"512MiB"'),
        )
        local = sw.sweep(p, out=None)
        done: dict[str, object] = {}

        def go():
            try:
                done["sweep"] = sw.sweep(p, out=tmp_path / "out", cluster=c.address)
            except BaseException as e:  # noqa: BLE001 - reported by the assert below
                done["error"] = e

        t = threading.Thread(target=go)
        t.start()
        cache = tmp_path / "out" / "cache"
        deadline = time.time() + 120
        while not any(cache.glob("*/*.json")) and time.time() < deadline:
            time.sleep(0.05)
        assert any(cache.glob("*/*.json")), "no run finished"
        finished_before_kill = len(list(cache.glob("*/*.json")))
        victim = c.workers[0]
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=20)
        t.join(timeout=300)
        assert not t.is_alive(), "the sweep did not complete"
        assert "error" not in done, done.get("error")
        s = done["sweep"]
        assert finished_before_kill < 16
        assert s.computed == 16 and s.results == local.results
    finally:
        c.close()


def test_long_commands_show_a_bar_with_count_and_eta_only_when_asked_or_on_a_terminal(tmp_path, capsys):
    p = study(tmp_path, 'scheduler = ["deadline", "cfq"]')
    sw.sweep(p, out=None, progress=True)
    bar = capsys.readouterr().err
    assert "2/2" in bar and "<" in bar, bar  # count and tqdm's elapsed<remaining (ETA)
    small = ROOT / "experiments" / "small-two-vms.toml"
    hvio.comparison(small, ["noop", "deadline"], progress=True)
    bar = capsys.readouterr().err
    assert "compare" in bar and "6/6" in bar and "<" in bar, bar
    # Not a terminal (pytest's captured stderr): quiet by default.
    sw.sweep(p, out=None)
    hvio.comparison(small, ["noop"])
    assert capsys.readouterr().err == ""
