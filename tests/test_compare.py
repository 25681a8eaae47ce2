"""The three-VM example (examples/three-vms: fio job files, weights 4:2:1)
through Python: ``python -m hvio run --config``'s tables, verdict, files and
figures, and figures that say what they show."""

from __future__ import annotations

from pathlib import Path

import hvio
import pytest
from hvio import plots
from hvio.__main__ import main
from PIL import Image

from .test_api import SMALL

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "three-vms" / "three-vms.toml"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    out = tmp_path_factory.mktemp("three-vms")
    return out


def test_the_three_vm_example_gives_a_verdict_and_figures(example, capsys):
    assert main(["run", "--config", str(EXAMPLE), "--out", str(example)]) == 0
    text = capsys.readouterr().out
    assert "paper 000" not in text
    assert text.startswith(f"{EXAMPLE} under {len(hvio.schedulers())} host schedulers")
    for needle in (
        "fairness (Jain)",
        "p99.9 ms",
        "alone MB/s",
        "\nverdict\n  throughput: ",
        "\n  worst-case latency: ",
        "\n  weighted fairness: ",
        "starved: mq-deadline gives db 0.08 MB/s",
    ):
        assert needle in text, needle
    c = hvio.load_comparison(example / "compare.json")
    assert c.scheduler_names == hvio.schedulers()
    assert c.vm_names == ["reader", "db", "backup"]
    assert len(c.vms) == 3 * len(c.scheduler_names)
    assert ((c.schedulers["jain"] > 1 / 3) & (c.schedulers["jain"] <= 1)).all()
    # Disk shares add up to the whole disk under every scheduler.
    assert (c.vms.groupby("scheduler")["disk_share"].sum() - 1).abs().max() < 1e-9
    csv = (example / "compare.csv").read_text().splitlines()
    assert len(csv) == 1 + len(c.vms) and csv[0].endswith(",seed")
    for name in (
        "p99_by_scheduler.png",
        "fairness.png",
        "throughput_over_time.png",
        "bandwidth_by_scheduler.png",
        "seek_distribution.png",
    ):
        desc = Image.open(example / name).text["Description"]
        assert desc.endswith("seed 1"), (name, desc)
        if name in ("p99_by_scheduler.png", "fairness.png"):
            assert "config three-vms.toml" in desc, desc


def test_figures_command_draws_a_cli_comparison(example, tmp_path, capsys):
    assert main(["figures", str(example / "compare.json"), "--out", str(tmp_path), "--format", "svg"]) == 0
    svg = (tmp_path / "p99_by_scheduler.svg").read_text()
    assert "three-vms.toml" in svg and "log scale" in svg


def test_throughput_drops_the_bucket_each_vm_ended_in():
    r = hvio.simulate(SMALL)
    interval = r.raw["series"]["interval_s"]
    whole = plots._whole_buckets(r)
    for vm, g in whole.groupby("vm"):
        end = r.jobs[r.jobs["vm"] == vm]["end_s"].max()
        assert (g["time_s"] + interval <= end + 1e-9).all()
    # Both VMs end inside their fourth second: that bucket is dropped.
    assert len(whole) < len(r.series)
    assert (whole["mb_per_s"] > 0).all()


def test_bandwidth_stack_is_the_total(tmp_path):
    rs = [hvio.simulate(SMALL), hvio.simulate(SMALL, scheduler="noop")]
    p = plots.bandwidth_by_scheduler(rs, tmp_path / "b.svg")
    svg = p.read_text()
    assert "stacked by VM = total" in svg
    for r in rs:
        parts = r.vms["mb"] / r.vms["mb"].sum() * r.total_mb_per_s
        assert abs(parts.sum() - r.total_mb_per_s) < 1e-9


def test_lba_scatter_names_its_records_not_a_paper(tmp_path):
    rec = tmp_path / "rec.csv"
    hvio.simulate(SMALL.replace("seed = 3", f'seed = 3\n[output]\nrecords = "{rec}"'))
    svg = plots.lba_scatter(rec, tmp_path / "lba.svg").read_text()
    assert "paper 000" not in svg
    assert "rec.csv, seed 3" in svg
