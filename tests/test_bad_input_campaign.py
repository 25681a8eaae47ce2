"""A sample of the bad-input campaign (scripts/bad-input-campaign.py): every
case exits 1 with a message naming the place, within the timeout, leaving
nothing behind and overwriting nothing. `make bad-input` runs every case."""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _campaign():
    spec = importlib.util.spec_from_file_location("campaign", ROOT / "scripts" / "bad-input-campaign.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["campaign"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _hvio() -> str:
    """The CLI `cargo test` builds (make test runs it first), else built here."""
    debug = ROOT / "target" / "debug" / "hvio"
    if not debug.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "hvio-cli"], cwd=ROOT, check=True)
    return str(debug)


def test_a_sample_of_the_campaign_passes():
    campaign = _campaign()
    hvio = _hvio()
    groups, failures = campaign.run(hvio, quick=True, timeout=60)
    assert sum(n for n, _ in groups.values()) >= 50
    assert set(groups) == {c.group for c in campaign.all_cases(hvio)}, groups
    assert not failures, "\n".join(f"{c.group}: {c.name}: {why}" for c, why in failures)


def test_the_campaign_catches_a_command_that_overwrites_its_input(tmp_path):
    # A stand-in hvio that exits 0 having overwritten its first argument.
    fake = tmp_path / "hvio"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do case "$a" in *.toml) echo x > "$a";; esac; done\nexit 1\n')
    fake.chmod(0o755)
    campaign = _campaign()
    case = campaign.case("outputs", "x", ["sim", "c.toml"], {"c.toml": "seed = 1\n"}, [])
    assert campaign.run_case(str(fake), case, 10).startswith("overwrote ['c.toml']")
