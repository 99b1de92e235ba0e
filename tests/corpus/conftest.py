"""Shared fixtures for the corpus loader tests."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from stresstest.corpus import load_corpus
from stresstest.records import Encounter

# The project reads the shared corpora at ../shared/corpora relative to the repo root.
CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"


@pytest.fixture(scope="session")
def corpora() -> Path:
    """The real corpora folder; skips the test when it is not on this machine."""
    if not CORPORA.is_dir():
        pytest.skip(f"real corpora not found at {CORPORA} (they live in ../shared/corpora next to the repo)")
    return CORPORA


@pytest.fixture(scope="session")
def real(corpora: Path) -> Callable[[str, str], list[Encounter]]:
    """Load a real corpus once per session (several tests look at the same one)."""

    @cache
    def _load(kind: str, sub: str) -> list[Encounter]:
        return load_corpus(kind, corpora / sub)

    return _load
