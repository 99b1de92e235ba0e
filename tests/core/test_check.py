"""`stresstest check CONFIG`: every problem is one line naming what to do; a ready config exits 0."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from stresstest.cli import main

REPO = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, **over: object) -> Path:
    cfg: dict[str, object] = {
        "corpus": {"kind": "osce", "path": str(REPO / "data/osce/transcripts"), "ids": ["CAR0001"]},
        "noise": {"ambient": {"family": "ambient", "kind": "builtin"}},
        "snr_db": [5],
        "asr": {"backend": "faster-whisper"},
        "structure": {"backend": "rules"},
        "judge": {"backend": "rules"},
        "run": {"cache_dir": str(tmp_path / "cache")},
    }
    cfg.update(over)
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], cfg: Path, *extra: str) -> tuple[int, list[str]]:
    """Exit status and the problem lines (stderr); findings that are fine go to stdout."""
    rc = main(["check", str(cfg), "--out", str(tmp_path / "run"), *extra])
    captured = capsys.readouterr()
    _check.stdout = captured.out  # type: ignore[attr-defined]
    return rc, [ln for ln in captured.err.splitlines() if ln.strip()]


def test_a_ready_config_passes_quickly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.monotonic()
    rc, problems = _check(tmp_path, capsys, _config(tmp_path))
    assert rc == 0 and problems == []
    assert time.monotonic() - t0 < 60
    out = _check.stdout  # type: ignore[attr-defined]
    # the deep checks ran: a window was decoded and the grid estimated
    assert "asr decode: one 30-s window" in out and "estimate: ~" in out and out.rstrip().endswith("c.yaml")


def test_a_missing_asr_model_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = "Systran/faster-whisper-not-downloaded-anywhere"
    rc, problems = _check(tmp_path, capsys, _config(tmp_path, asr={"model": missing}), "--quick")
    assert rc == 2 and len(problems) == 1
    assert "asr model" in problems[0] and f"huggingface-cli download {missing}" in problems[0]


def test_a_missing_asr_model_path_says_no_such_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "no-whisper-here")
    rc, problems = _check(tmp_path, capsys, _config(tmp_path, asr={"model": missing}), "--quick")
    assert rc == 2 and len(problems) == 1
    assert f"asr.model: no such file or directory: {missing}" in problems[0] and "huggingface" not in problems[0]


def test_an_unwritable_cache_dir_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a file where the cache folder's parent should be: nothing can be created under it
    cfg = _config(tmp_path, run={"cache_dir": str(blocker / "cache")})
    rc, problems = _check(tmp_path, capsys, cfg, "--quick")
    assert rc == 2 and len(problems) == 1 and "cache dir writable" in problems[0] and "not writable" in problems[0]
    assert "--user" in problems[0]  # the Docker hint (a read-only folder cannot be shown as root, which CI is)


def test_a_dead_proxy_before_a_remote_server_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # nothing listens there
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    cfg = _config(tmp_path, asr={"backend": "openai-api", "base_url": "http://asr.example.com/v1", "model": "w"})
    rc, problems = _check(tmp_path, capsys, cfg, "--quick")
    assert rc == 2 and len(problems) == 1
    assert "network" in problems[0] and "127.0.0.1:9" in problems[0] and "NO_PROXY" in problems[0]


def test_a_missing_corpus_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path, corpus={"kind": "osce", "path": str(tmp_path / "corpora/osce")})
    rc, problems = _check(tmp_path, capsys, cfg, "--quick")
    assert rc == 2 and len(problems) == 1 and "OSCE folder not found" in problems[0] and "download" in problems[0]
