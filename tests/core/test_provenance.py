"""The run's environment record (stresstest.provenance): CPU, instruction set, GPU, engine versions."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from stresstest.provenance import ENGINE_PACKAGES, cpu_info, cpu_isa, environment, environment_differences


def test_cpu_model_and_best_instruction_set_from_cpuinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: Test CPU  9000\nflags\t\t: fpu sse4_1 avx avx2 fma\n\n"
        "processor\t: 1\nmodel name\t: Test CPU  9000\nflags\t\t: fpu sse4_1 avx avx2 fma\n"
    )
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    monkeypatch.delenv("CT2_FORCE_CPU_ISA", raising=False)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    got = cpu_info(info)
    assert got["model"] == "Test CPU 9000" and got["isa"] == "AVX2"
    assert got["engines_isa"] == {
        "ctranslate2": "AVX2 (runtime dispatch)",
        "onnxruntime": "AVX2 (runtime dispatch)",
        "torch": "default",
    }  # forced by its variable
    assert cpu_isa({"avx512f", "avx2"}, "x86_64") == "AVX512" and cpu_isa(set(), "aarch64") == "NEON"


def test_environment_names_every_engine_package_and_is_stable() -> None:
    env = environment()
    assert list(env["packages"]) == list(ENGINE_PACKAGES)
    assert env["packages"]["ctranslate2"] == importlib.metadata.version("ctranslate2")
    assert env["cpu"]["isa"] and env["cpu"]["machine"]
    assert json.dumps(env, sort_keys=True) == json.dumps(environment.__wrapped__(), sort_keys=True)  # recomputed


def test_environment_differences_is_one_line_or_none() -> None:
    a = {"cpu": {"model": "X", "isa": "AVX2"}, "gpu": None, "packages": {"torch": "2.13.0", "vllm": None}}
    b = {
        "cpu": {"model": "X", "isa": "AVX512"},
        "gpu": {"name": "H100", "driver": "580"},
        "packages": {"torch": "2.14.0", "vllm": None},
    }
    line = environment_differences(a, b)
    assert line is not None and "\n" not in line
    assert "cpu.isa (A: AVX2, B: AVX512)" in line and "packages.torch (A: 2.13.0, B: 2.14.0)" in line
    assert "gpu.name (A: None, B: H100)" in line and "vllm" not in line
    assert environment_differences(a, a) is None and environment_differences(a, {}) is None
