"""The suite's own plumbing (tests/conftest.py, issue 35): `demo_scale` tests are left out of the default run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

SUITE = '''
import pytest


def test_unit():
    pass


@pytest.mark.integration
def test_engine():
    pass


@pytest.mark.integration
@pytest.mark.demo_scale
def test_whole_demo():
    pass
'''


def _pytest(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - fixed argument list
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:cov",
         "-W", "ignore::pytest.PytestUnknownMarkWarning", *args, str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path, env=env or dict(os.environ),
    )


def test_demo_scale_is_deselected_unless_asked_for(tmp_path: Path) -> None:
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_suite.py").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if k not in ("STRESSTEST_DEMO_SCALE", "CI")}
    default = _pytest(tmp_path, env=env)
    assert default.returncode == 0, default.stdout[-2000:]
    assert "2 passed, 1 deselected" in default.stdout, default.stdout[-2000:]
    selected = _pytest(tmp_path, env={**env, "STRESSTEST_DEMO_SCALE": "1"})  # or pytest --demo-scale
    assert selected.returncode == 0 and "3 passed" in selected.stdout, selected.stdout[-2000:]
