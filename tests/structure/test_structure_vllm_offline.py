"""The vllm-offline backend's plumbing against a stand-in ``vllm`` module (real vLLM needs a GPU).

These tests check what our code asks of vLLM's API (LLM(...) once per run engine, one batched LLM.chat call
with the conversations themselves — no pre-rendered text, so no second BOS —, SamplingParams with the whole φ
and a JSON-schema structured-output constraint) and how it turns outputs into records / recorded failures.
They do not prove vLLM itself behaves; ``make check-vllm`` builds the same objects against the real package.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stresstest.llm import offline as vllm_offline
from stresstest.llm.config import LLMConfig
from stresstest.schema import ClinicalRecord, output_json_schema
from stresstest.structure.stage import StructureItem, structure_many


class _FakeLLM:
    instances: list[_FakeLLM] = []
    outputs: list[tuple[str, str]] = []

    def __init__(self, **kw: Any) -> None:
        self.kw = kw
        self.generate_calls: list[tuple[list[str], Any]] = []
        _FakeLLM.instances.append(self)

    def chat(
        self, conversations: list[list[dict[str, str]]], params: Any, use_tqdm: bool, add_generation_prompt: bool
    ) -> list[Any]:
        assert add_generation_prompt is True and isinstance(conversations[0], list)
        self.generate_calls.append((conversations, params))
        return [
            SimpleNamespace(
                prompt_token_ids=[1, 2, 3], outputs=[SimpleNamespace(text=t, finish_reason=f, token_ids=[7] * 5)]
            )
            for t, f in self.outputs
        ]


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> type[_FakeLLM]:
    vllm = types.ModuleType("vllm")
    sp = types.ModuleType("vllm.sampling_params")

    class StructuredOutputsParams:
        def __init__(self, json: dict[str, Any]) -> None:
            self.json = json

    def sampling_params(**kw: Any) -> SimpleNamespace:
        return SimpleNamespace(**kw)

    sp.StructuredOutputsParams = StructuredOutputsParams  # type: ignore[attr-defined]
    vllm.LLM = _FakeLLM  # type: ignore[attr-defined]
    vllm.SamplingParams = sampling_params  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sp)
    monkeypatch.setattr("stresstest.llm.gpu.measure_gpu_memory", lambda: (100_000.0, 140_000.0))
    _FakeLLM.instances.clear()
    yield _FakeLLM


def test_batch_generate_with_structured_outputs(
    tmp_path: Path, fake_vllm: type[_FakeLLM], record: ClinicalRecord, output_json: str
) -> None:
    fake_vllm.outputs = [(output_json, "stop"), ('{"triage": {"lev', "length"), ("{]", "stop")]
    items = [StructureItem(encounter_id=f"E{i}", condition="clean", transcript_text=f"t{i}") for i in range(3)]
    cfg = LLMConfig(backend="vllm-offline", server={"model": "Qwen/Qwen2.5-7B-Instruct", "n_ctx": 8192})
    from stresstest.llm.engine import LLMEngine

    engine = LLMEngine(cfg, cache_dir=tmp_path, log_dir=tmp_path)
    envs = structure_many(items, cfg, cache_dir=tmp_path, log_dir=tmp_path, engine=engine)

    (llm,) = fake_vllm.instances
    assert llm.kw == {
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "seed": 1234,
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.65,  # 0.92 * 100/140 GB free, rounded down
        "generation_config": "vllm",
        "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
    }
    ((convs, params),) = llm.generate_calls  # one batched call for all items
    assert len(convs) == 3 and convs[0][0]["role"] == "system"
    assert convs[0][0]["content"].startswith("You are a clinical documentation assistant")
    assert params.temperature == 0.0 and params.seed == 1234 and params.max_tokens == 1536
    assert params.repetition_penalty == 1.1 and params.top_k == -1 and params.min_p == 0.0
    assert params.presence_penalty == 0.0 and params.frequency_penalty == 0.0 and params.top_p == 1.0
    assert params.structured_outputs.json == output_json_schema()
    info = engine.info()
    assert info["engine"] == "vllm-offline" and info["roles"] == ["structure"] and info["starts"] == 1
    assert info["gpu_memory"] == {
        "gpu_memory_utilization": 0.65,
        "source": "measured",
        "free_mib": 100_000.0,
        "total_mib": 140_000.0,
    }
    assert info["phi_sent"] == {k: getattr(params, k) for k in info["phi_sent"]}
    assert envs[0].extra.cached is False

    assert envs[0].record == record and envs[0].backend == "vllm-offline"
    assert envs[0].model == "Qwen/Qwen2.5-7B-Instruct" and envs[0].decoding["response_format"] == (
        "vllm_structured_outputs"
    )
    assert envs[1].failed and "truncated output" in envs[1].error and envs[1].raw_text == '{"triage": {"lev'
    assert "not retried" in envs[1].error
    assert envs[2].failed and "invalid JSON" in envs[2].error

    # re-run: only the two failures go to the engine again
    fake_vllm.outputs = [(output_json, "stop")] * 2
    again = structure_many(items, cfg, cache_dir=tmp_path, log_dir=tmp_path, engine=engine)
    assert len(llm.generate_calls[1][0]) == 2 and all(not e.failed for e in again)
    assert len(fake_vllm.instances) == 1  # the same engine: built once per run
    engine.close()


def test_offline_needs_a_model_id() -> None:
    from stresstest.errors import StructureError

    with pytest.raises(StructureError, match="needs an HF model id"):
        vllm_offline.offline_model_id(LLMConfig(backend="vllm-offline"))


def test_the_offline_engine_spawns_its_workers(monkeypatch: pytest.MonkeyPatch, fake_vllm: type[_FakeLLM]) -> None:
    """After in-process CTranslate2 ASR has touched CUDA, a forked vLLM worker inherits a context it cannot use;
    vLLM picks spawn itself only when torch initialised CUDA, so the engine is built with spawn set."""
    import os

    seen: list[str | None] = []
    monkeypatch.delenv("VLLM_WORKER_MULTIPROC_METHOD", raising=False)
    monkeypatch.setattr(
        fake_vllm, "__init__", lambda self, **kw: seen.append(os.environ.get("VLLM_WORKER_MULTIPROC_METHOD"))
    )
    vllm_offline.build_llm(LLMConfig(backend="vllm-offline", server={"model": "m", "n_ctx": 4096}))
    assert seen == ["spawn"]
