"""Shared fixtures: synthetic run directories and reports built from them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from synthetic_run import REPORT_RESAMPLES, REPORT_SEED, make_run  # noqa: E402

from stresstest.report import ReportPaths, build_report  # noqa: E402


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "synthetic", n_encounters=14, seed=7)


@pytest.fixture(scope="session")
def report(run_dir: Path) -> ReportPaths:
    return build_report(run_dir, n_resamples=REPORT_RESAMPLES, seed=REPORT_SEED)
