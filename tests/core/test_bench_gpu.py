"""``scripts/bench_gpu.py --device cpu --tiny``: the GPU benchmark's smoke mode runs and prints its table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("whisper", reason="openai-whisper not installed (make install-whisper)")


def _run(*extra: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_gpu.py"), "--device", "cpu", "--tiny", *extra],
                       capture_output=True, text=True, env=env, timeout=1200, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return p.stdout


def _rows(out: str) -> dict[str, list[str]]:
    rows = {}
    for line in out.splitlines():
        if line.startswith("| ") and not line.startswith("| implementation"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.integration
def test_bench_gpu_cpu_tiny_smoke_prints_rtf_for_each_implementation():
    out = _run()
    rows = _rows(out)
    names = ["openai-whisper as written (b16)", "openai-whisper reference (b16)", "faster-whisper int8 (b16)",
             "faster-whisper int8 (b32)"]
    for n in names:
        assert n in rows, out
        assert re.fullmatch(r"[\d,]+\.\d", rows[n][0]), (n, rows[n])  # × real time
        assert float(rows[n][0].replace(",", "")) > 0
    assert "transformers sdpa (b16)" in rows  # measured, or says why not
    assert "vLLM offline no-ts (seqs 64)" in rows  # measured where vllm imports, else "not importable"
    assert rows["openai-whisper reference (b16)"][5] == "1.000"  # agreement with itself
    assert "3 fixed 30-s windows" in out


@pytest.mark.integration
@pytest.mark.slow
def test_bench_gpu_random_init_path_forces_decode_lengths():
    out = _run("--random", "--windows", "1")
    rows = _rows(out)
    assert "THROUGHPUT ONLY" in out
    for length in (150, 224):
        ref = rows[f"openai-whisper reference (b16) [random, {length} tok]"]
        assert ref[2] == str(length) and ref[3] == "100.0%", ref  # every decode ran to the forced length
        assert rows[f"faster-whisper int8 (b16) [random, {length} tok]"][0] != ""
