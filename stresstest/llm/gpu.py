"""GPU memory for a vLLM engine: the fraction it may take, from the free memory measured when it starts.

The engine starts after the ASR stage released its model, so what is free then is what the LLM may use.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

from stresstest.llm.config import LLMConfig
from stresstest.records import revise

log = logging.getLogger(__name__)

GPU_MEMORY_FALLBACK = 0.85  # used (and recorded as such) when the free memory cannot be measured
GPU_MEMORY_SHARE_OF_FREE = 0.92
GPU_MEMORY_MAX = 0.90
GPU_MEMORY_MIN = 0.05


def default_gpu_memory_utilization(free_mib: float, total_mib: float) -> float:
    """vLLM's ``gpu_memory_utilization`` from the measured free memory.

    Rule: 92% of the free fraction (headroom for the CUDA context and allocator fragmentation), capped at 0.90
    and floored at 0.05, rounded down to two decimals. vLLM's fraction is of the card's *total* memory and it
    refuses to start when less than that is free, so the fraction must not exceed what is free.
    """
    if total_mib <= 0:
        raise ValueError(f"total GPU memory must be positive, got {total_mib}")
    frac = GPU_MEMORY_SHARE_OF_FREE * max(0.0, free_mib) / total_mib
    return max(GPU_MEMORY_MIN, min(GPU_MEMORY_MAX, int(frac * 100) / 100))


def measure_gpu_memory() -> tuple[float, float] | None:
    """(free MiB, total MiB) of the first visible GPU via ``nvidia-smi``, or None when it cannot be measured."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    cmd = [exe, "--query-gpu=memory.free,memory.total", "--format=csv,noheader,nounits"]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if visible.isdigit():
        cmd += ["-i", visible]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout  # noqa: S603
        free, total = (float(x) for x in out.strip().splitlines()[0].split(","))
    except (subprocess.SubprocessError, OSError, ValueError, IndexError):
        return None
    return free, total


def cuda_visible() -> bool:
    """True when a CUDA device can be seen (``nvidia-smi`` answers with its memory)."""
    return measure_gpu_memory() is not None


def needs_gpu_memory(config: LLMConfig) -> bool:
    """True for the engines that take a share of the card (offline vLLM, a managed ``vllm serve``)."""
    srv = config.server
    return config.backend == "vllm-offline" or (srv.mode == "managed" and srv.engine == "vllm")


def resolve_concurrency(config: LLMConfig) -> tuple[int, str]:
    """:meth:`LLMConfig.resolved_concurrency` with the GPU looked for only where it matters (a vLLM this run
    starts); ``nvidia-smi`` is not called for llama.cpp, external servers or a set ``concurrency``."""
    if config.concurrency is not None or not needs_gpu_memory(config):
        return config.resolved_concurrency(gpu=False)
    return config.resolved_concurrency(gpu=cuda_visible())


def resolve_gpu_memory(config: LLMConfig) -> tuple[LLMConfig, dict[str, float | str] | None]:
    """``config`` with ``server.gpu_memory_utilization`` filled (vLLM), and what the manifest records about it.

    Returns ``(config, None)`` unchanged for engines that take no GPU memory; a configured fraction is kept
    (source 'config'); otherwise the fraction comes from :func:`measure_gpu_memory` (source 'measured') or,
    when nothing can be measured, :data:`GPU_MEMORY_FALLBACK` (source 'fallback ...', with a warning).
    """
    srv = config.server
    if not needs_gpu_memory(config):
        return config, None
    if srv.gpu_memory_utilization is not None:
        return config, {"gpu_memory_utilization": srv.gpu_memory_utilization, "source": "config"}
    measured = measure_gpu_memory()
    info: dict[str, float | str]
    if measured is None and shutil.which("nvidia-smi") is None:
        # No NVIDIA driver at all: vLLM's CPU build, which sizes its KV cache by VLLM_CPU_KVCACHE_SPACE
        # (server.cpu_kv_cache_gib) and ignores the fraction. Nothing to warn about.
        frac = GPU_MEMORY_FALLBACK
        info = {"gpu_memory_utilization": frac, "source": "no GPU (nvidia-smi absent; a CPU engine ignores it)"}
    elif measured is None:
        frac = GPU_MEMORY_FALLBACK
        info = {"gpu_memory_utilization": frac, "source": "fallback (nvidia-smi unavailable)"}
        log.warning("GPU memory could not be measured (nvidia-smi); gpu_memory_utilization=%s", frac)
    else:
        free, total = measured
        frac = default_gpu_memory_utilization(free, total)
        info = {"gpu_memory_utilization": frac, "source": "measured", "free_mib": free, "total_mib": total}
    return revise(config, server=revise(srv, gpu_memory_utilization=frac)), info
