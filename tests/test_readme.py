"""The README's two commands: present in its quick start, and runnable from a
fresh clone (checked as a dry run: `make -n` resolves every step; the real
runs are what CI does with `make test`)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_quick_start_has_exactly_the_two_commands():
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", quick, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make run", "make test"]


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout"
)
def test_fresh_clone_resolves_both_targets(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    for target in ("run", "test"):
        out = subprocess.run(["make", "-n", target], cwd=clone, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert "cargo" in out.stdout or "maturin" in out.stdout
    assert (clone / ".ci" / "run").read_text().count("make test") == 1
