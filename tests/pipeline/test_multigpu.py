"""Multi-GPU settings reach the engines: vLLM tensor/data parallelism, ASR workers per GPU."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from support.llm_stub import VLLM_032

from stresstest.llm import served as server_mod
from stresstest.llm.config import LLMConfig


def test_vllm_serve_gets_tensor_and_data_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    real = server_mod.importlib.util.find_spec

    def find_spec(name: str, *a: Any) -> Any:
        return SimpleNamespace(name=name) if name == "vllm" else real(name, *a)

    monkeypatch.setattr(server_mod.importlib.util, "find_spec", find_spec)
    cfg = LLMConfig(
        backend="openai",
        server={
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "tensor_parallel_size": 2,
            "data_parallel_size": 2,
        },
    )
    cmd = server_mod.server_command(cfg, 8000, VLLM_032)
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2"
    assert cmd[cmd.index("--data-parallel-size") + 1] == "2"
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    single = LLMConfig(backend="openai", server={"engine": "vllm", "model": "m"})
    assert "--tensor-parallel-size" not in server_mod.server_command(single, 8000, VLLM_032)


def test_asr_workers_follow_the_gpus() -> None:
    from stresstest.config import RunSettings
    from stresstest.pipeline.runner import _asr_workers

    class _Ex:
        def __init__(self, gpus: int) -> None:
            self.gpus = gpus

        def gpu_count(self) -> int:
            return self.gpus

    def workers(gpus: int, **executor: Any) -> tuple[int, float]:
        state = SimpleNamespace(cfg=SimpleNamespace(run=RunSettings(executor=executor)), executor=_Ex(gpus))
        return _asr_workers(state)  # type: ignore[arg-type]

    assert workers(0) == (1, 0.0)  # no GPU: one worker on the CPU
    assert workers(4) == (4, 1.0)  # one ASR actor per GPU
    assert workers(4, asr_gpus_per_worker=0.5) == (8, 0.5)  # two models per card
    assert workers(4, asr_workers=2) == (2, 1.0)
