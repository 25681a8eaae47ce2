"""``hvio report``'s page, looked at as a person would: headless Chromium
opens it, a screenshot is taken, every figure has drawn and the page logged
no error. The page is the same bytes for the same results."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import hvio
import pytest
from hvio import htmlreport
from hvio import sweeps as sw
from PIL import Image, ImageStat

from .test_api import SMALL

ROOT = Path(__file__).resolve().parent.parent


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A comparison, a sweep and an experiment report, as make run,
    hvio sweep and hvio reproduce leave them in out/."""
    out = tmp_path_factory.mktemp("out")
    cfg = out / "small.toml"
    cfg.write_text(SMALL)
    c = hvio.comparison(str(cfg), ["deadline", "cfq", "bfq"])
    (out / "compare.json").write_text(json.dumps(c.raw))
    sw.sweep(ROOT / "experiments" / "small-sweep.study.toml", out=out)
    (out / "htbs-paper004-quick.json").write_text(json.dumps(hvio.reproduce("htbs-paper004", quick=True).raw))
    return out


def test_the_page_holds_every_result_and_is_the_same_bytes_again(results, tmp_path):
    a, n = htmlreport.write(results, tmp_path / "a.html")
    b, _ = htmlreport.write(results, tmp_path / "b.html")
    assert a.read_bytes() == b.read_bytes()
    text = a.read_text()
    # The comparison's five figures, the sweep's three (two keys: a heat map).
    assert n == 8 and text.count('class="figure"') == 8
    for needle in (
        "Host schedulers compared: small.toml",
        "Sweep: small-sweep",
        "htbs-paper004 (quick)",
        "paper HTBS",
        "every run: seed, config, hvio version",
        f"hvio {hvio._hvio.version()}",
    ):
        assert needle in text, needle
    # Self-contained: no script or style is fetched from elsewhere.
    assert not re.search(r"<script[^>]+src=", text) and not re.search(r"<link[^>]+href=", text)


@pytest.mark.skipif(chromium() is None, reason="needs chromium (scripts/deps.sh installs it)")
def test_chromium_draws_every_figure_without_console_errors(results, tmp_path):
    page, n = htmlreport.write(results, tmp_path / "report.html")
    common = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--virtual-time-budget=30000",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dom.stdout).group(1)
    attrs = dict(re.findall(r'data-([a-z]+)="([^"]*)"', body))
    assert attrs.get("figures") == str(n), attrs
    assert attrs.get("drawn") == str(n), f"{attrs.get('drawn')} of {n} figures drawn"
    assert attrs.get("errors") == "", attrs.get("errors")
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line and "Uncaught" in line]
    assert not console, console
    shot = tmp_path / "report.png"
    r = subprocess.run(
        [*common, "--window-size=1280,2400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    img = Image.open(shot).convert("L")
    assert img.size == (1280, 2400)
    # Not a blank page: the figures and tables put ink on it.
    assert ImageStat.Stat(img).stddev[0] > 10
