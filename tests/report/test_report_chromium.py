"""The HTML report renders in headless Chromium (screenshot + DOM)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from chromium import BROWSER_TEST, run_chromium

from stresstest.report import ReportPaths

WIDTH, HEIGHT = 1400, 2400

pytestmark = BROWSER_TEST


def test_html_renders_in_chromium(report: ReportPaths, tmp_path: Path) -> None:
    import matplotlib.image as mpimg

    url = report.html.resolve().as_uri()
    shot = report.report_dir / "screenshot.png"  # kept next to the report for a human look
    res = run_chromium([f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", url], tmp_path / "p1")
    assert res.returncode == 0, res.stderr[-2000:]
    img = mpimg.imread(shot)
    assert img.shape[:2] == (HEIGHT, WIDTH)
    rgb = img[..., :3]
    # Rendered, not blank: many distinct colours and a real share of non-white pixels.
    nonwhite = float((rgb.min(axis=2) < 0.9).mean())
    assert nonwhite > 0.05, nonwhite
    assert len(np.unique((rgb[::4, ::4] * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 50

    dom = run_chromium(["--enable-logging=stderr", "--v=0", "--dump-dom", url], tmp_path / "p2")
    assert dom.returncode == 0, dom.stderr[-2000:]
    # The page has no script: any console message (a JS error, a blocked resource) is a defect.
    console = [ln for ln in dom.stderr.splitlines() if ":CONSOLE" in ln]
    assert not console, console
    html = dom.stdout
    assert 'id="table2"' in html and "Reference (clean-ASR)" in html
    assert html.count("<img") >= 10 and "data:image/png;base64," in html
    assert 'id="examples"' in html and 'id="wer-vs-safety"' in html
    shutil.copy(shot, tmp_path / "screenshot.png")
