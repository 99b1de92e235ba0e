"""The user's Hugging Face cache is found although every run confines third-party caches to its own dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stresstest.asr.backends import bundled_tiny_en_path

REPO = Path(__file__).resolve().parents[2]
REVISION = "0123456789abcdef0123456789abcdef01234567"


def _hf_cache_holding_tiny_en(hub: Path) -> Path:
    """A real Hugging Face hub cache layout (blobs ← snapshot symlinks, refs/main) with the bundled tiny.en
    under the name faster-whisper resolves ``tiny.en`` to (``Systran/faster-whisper-tiny.en``)."""
    repo = hub / "models--Systran--faster-whisper-tiny.en"
    snap = repo / "snapshots" / REVISION
    (repo / "blobs").mkdir(parents=True)
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    for f in bundled_tiny_en_path().iterdir():
        blob = repo / "blobs" / f"blob-{f.name}"
        os.symlink(f, blob)  # a blob is the file's content; a link keeps the test from copying 75 MB
        os.symlink(os.path.relpath(blob, snap), snap / f.name)
    return snap


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # A fresh interpreter: huggingface_hub reads its cache location from the environment once, at import.
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE", "XDG_", "STRESSTEST_"))}
    env.update(
        PYTHONPATH=str(REPO),
        HOME=str(tmp_path / "home"),
        HF_HUB_OFFLINE="1",
        STRESSTEST_CACHE=str(tmp_path / "stresstest-cache"),
        **extra,
    )
    return env


LOAD = (
    "from stresstest.cache import confine_tool_dirs; confine_tool_dirs()\n"
    "from stresstest.asr.backends import FasterWhisperBackend\n"
    "be = FasterWhisperBackend('tiny.en'); be._model(); print('LOADED', be.model_path)\n"
)


@pytest.mark.integration
def test_a_model_in_the_users_xdg_hugging_face_cache_is_found_by_name(tmp_path: Path) -> None:
    user_cache = tmp_path / "user-cache"
    _hf_cache_holding_tiny_en(user_cache / "huggingface" / "hub")
    r = _run(LOAD, _env(tmp_path, XDG_CACHE_HOME=str(user_cache)))
    assert "LOADED tiny.en" in r.stdout, r.stderr[-2000:]
    # Nothing was written into the user's cache, and the run's own tool caches stay under its cache dir.
    assert not (tmp_path / "stresstest-cache" / "tools" / "xdg-cache" / "huggingface").exists()


@pytest.mark.integration
def test_a_model_in_the_default_home_cache_is_found_and_the_managed_server_sees_the_same_hf_home(
    tmp_path: Path,
) -> None:
    _hf_cache_holding_tiny_en(tmp_path / "home" / ".cache" / "huggingface" / "hub")
    code = LOAD + "import os; print('HF_HOME', os.environ['HF_HOME'])\n"
    r = _run(code, _env(tmp_path))
    assert "LOADED tiny.en" in r.stdout, r.stderr[-2000:]
    # Child processes (the managed vLLM / llama.cpp server) inherit HF_HOME pointing at the user's cache.
    assert f"HF_HOME {tmp_path / 'home' / '.cache' / 'huggingface'}" in r.stdout


def test_an_explicit_hf_home_is_left_alone(tmp_path: Path) -> None:
    code = (
        "from stresstest.cache import confine_tool_dirs; confine_tool_dirs(); import os; print(os.environ['HF_HOME'])"
    )
    r = _run(code, _env(tmp_path, HF_HOME=str(tmp_path / "mine")))
    assert r.stdout.strip() == str(tmp_path / "mine"), r.stderr
