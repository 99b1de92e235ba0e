"""Shared fixtures for the corpus loader tests."""

from __future__ import annotations

from pathlib import Path

import pytest

# The project reads the shared corpora at ../shared/corpora relative to the repo root.
CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"


@pytest.fixture(scope="session")
def corpora() -> Path:
    """The real corpora folder; skips the test when it is not on this machine."""
    if not CORPORA.is_dir():
        pytest.skip(f"real corpora not found at {CORPORA} (they live in ../shared/corpora next to the repo)")
    return CORPORA
