"""A 3-second sample of the load command (bench/serve-load.py; `make load`
runs it for 60 s): two exports with two verified fio connections each, no
errors, the daemon's RSS printed at the start and the end."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _hvio() -> str:
    """The CLI `cargo test` builds (make test runs it first), else built here."""
    debug = ROOT / "target" / "debug" / "hvio"
    if not debug.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "hvio-cli"], cwd=ROOT, check=True)
    return str(debug)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (scripts/deps.sh installs it)")
def test_a_short_load_passes_with_verify_and_reports_rss_and_p99():
    cmd = [sys.executable, str(ROOT / "bench" / "serve-load.py"), "--hvio", _hvio()]
    cmd += ["--exports", "2", "--conns", "2", "--seconds", "3"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "daemon RSS at the start" in r.stdout and "daemon RSS at the end" in r.stdout
    rows = [line for line in r.stdout.splitlines() if line.startswith("vm")]
    assert [row.split()[0] for row in rows[1:]] == ["vm0", "vm1"], r.stdout
    assert all(row.split()[-1] == "0" for row in rows[1:]), r.stdout
    assert "ok: no errors" in r.stdout
