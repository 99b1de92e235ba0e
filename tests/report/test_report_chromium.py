"""The HTML report renders in headless Chromium (screenshot + DOM)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from stresstest.report import ReportPaths

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, HEIGHT = 1400, 2400
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="headless Chromium not installed at /usr/bin/chromium (Debian: apt-get install -y chromium)",
    ),
]


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    profile.mkdir(parents=True, exist_ok=True)
    return subprocess.run(  # noqa: S603 - fixed binary, arguments built here
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_html_renders_in_chromium(report: ReportPaths, tmp_path: Path) -> None:
    import matplotlib.image as mpimg

    url = report.html.resolve().as_uri()
    shot = report.report_dir / "screenshot.png"  # kept next to the report for a human look
    res = _chromium([f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", url], tmp_path / "p1")
    assert res.returncode == 0, res.stderr[-2000:]
    img = mpimg.imread(shot)
    assert img.shape[:2] == (HEIGHT, WIDTH)
    rgb = img[..., :3]
    # Rendered, not blank: many distinct colours and a real share of non-white pixels.
    nonwhite = float((rgb.min(axis=2) < 0.9).mean())
    assert nonwhite > 0.05, nonwhite
    assert len(np.unique((rgb[::4, ::4] * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 50

    dom = _chromium(["--enable-logging=stderr", "--v=0", "--dump-dom", url], tmp_path / "p2")
    assert dom.returncode == 0, dom.stderr[-2000:]
    # The page has no script: any console message (a JS error, a blocked resource) is a defect.
    console = [ln for ln in dom.stderr.splitlines() if ":CONSOLE" in ln]
    assert not console, console
    html = dom.stdout
    assert 'id="table2"' in html and "Reference (clean-ASR)" in html
    assert html.count("<img") >= 10 and "data:image/png;base64," in html
    assert 'id="examples"' in html and 'id="wer-vs-safety"' in html
    shutil.copy(shot, tmp_path / "screenshot.png")
