"""The suite's own plumbing (tests/conftest.py, issue 35): `demo_scale` tests are left out of the default run, and
on two xdist workers the engine tests all run on one worker, one after another, while the other takes the rest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

SUITE = """
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
"""


def _pytest(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - fixed argument list
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-p",
            "no:cov",
            "-W",
            "ignore::pytest.PytestUnknownMarkWarning",
            *args,
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
        env=env or dict(os.environ),
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


ENGINES_SUITE = """
import os
import time
from pathlib import Path

import pytest

LOG = Path(os.environ["SUITE_LOG"])


def _note(kind):
    t0 = time.monotonic()
    time.sleep(0.2)
    with LOG.open("a") as fh:
        fh.write(f"{kind} {os.environ['PYTEST_XDIST_WORKER']} {t0} {time.monotonic()}\\n")


@pytest.mark.integration
@pytest.mark.parametrize("i", range(4))
def test_engine(i, llama_server):
    _note("engine")


@pytest.mark.parametrize("i", range(30))
def test_unit(i):
    _note("unit")


@pytest.mark.integration
@pytest.mark.parametrize("i", range(3))
def test_light_integration(i):
    _note("light")
"""


def test_engine_tests_run_on_one_worker_one_at_a_time_beside_the_rest(tmp_path: Path) -> None:
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_suite.py").write_text(ENGINES_SUITE)
    log = tmp_path / "log.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("STRESSTEST_DEMO_SCALE", "CI")}
    proc = subprocess.run(  # noqa: S603 - fixed argument list
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:cov",
            "-n",
            "2",
            "-W",
            "ignore::pytest.PytestUnknownMarkWarning",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
        env={**env, "SUITE_LOG": str(log)},
    )
    assert proc.returncode == 0 and "37 passed" in proc.stdout, proc.stdout[-2000:]
    rows = [ln.split() for ln in log.read_text().splitlines()]
    engines = [r for r in rows if r[0] == "engine"]
    assert len(engines) == 4 and len({r[1] for r in engines}) == 1, engines  # one worker ran every engine test
    spans = sorted((float(r[2]), float(r[3])) for r in engines)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))  # one after another
    others = {r[1] for r in rows if r[0] != "engine"}
    assert others - {engines[0][1]}, rows  # the other worker took unit / light tests meanwhile
