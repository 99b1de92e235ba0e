"""Headless Chromium for the browser tests (Debian's package; `.ci/run` installs it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
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
#: Skipped, with one line, where Chromium is not installed.
NEEDS_CHROMIUM = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium not installed at /usr/bin/chromium (Debian: apt-get install -y chromium)",
)
#: Marks for a browser test module.
BROWSER_TEST = [pytest.mark.integration, NEEDS_CHROMIUM]


def run_chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    """One headless Chromium call with its own profile folder."""
    profile.mkdir(parents=True, exist_ok=True)
    return subprocess.run(  # noqa: S603 - fixed binary, arguments built here
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
