"""The vllm-offline backend's plumbing against a stand-in ``vllm`` module (real vLLM needs a GPU).

These tests check what our code asks of vLLM's API (LLM(...), get_tokenizer().apply_chat_template,
SamplingParams with a JSON-schema structured-output constraint, one batched generate call) and how it
turns outputs into records / recorded failures. They do not prove vLLM itself behaves.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stresstest.schema import ClinicalRecord, record_json_schema
from stresstest.structure import vllm_offline
from stresstest.structure.config import StructureConfig
from stresstest.structure.stage import StructureItem, structure_many


class _FakeLLM:
    instances: list[_FakeLLM] = []
    outputs: list[tuple[str, str]] = []

    def __init__(self, **kw: Any) -> None:
        self.kw = kw
        self.generate_calls: list[tuple[list[str], Any]] = []
        _FakeLLM.instances.append(self)

    def get_tokenizer(self) -> Any:
        def apply_chat_template(
            messages: list[dict[str, str]], tokenize: bool, add_generation_prompt: bool
        ) -> str:
            assert tokenize is False and add_generation_prompt is True
            return "|".join(f"{m['role']}:{m['content']}" for m in messages) + "|assistant:"

        return SimpleNamespace(apply_chat_template=apply_chat_template)

    def generate(self, prompts: list[str], params: Any, use_tqdm: bool = True) -> list[Any]:
        self.generate_calls.append((prompts, params))
        return [SimpleNamespace(outputs=[SimpleNamespace(text=t, finish_reason=f)]) for t, f in self.outputs]


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
    vllm_offline._engine.cache_clear()
    _FakeLLM.instances.clear()
    yield _FakeLLM
    vllm_offline._engine.cache_clear()


def test_batch_generate_with_structured_outputs(
    tmp_path: Path, fake_vllm: type[_FakeLLM], record: ClinicalRecord
) -> None:
    fake_vllm.outputs = [(record.model_dump_json(), "stop"), ('{"triage": {"lev', "length"), ("{]", "stop")]
    items = [
        StructureItem(encounter_id=f"E{i}", condition="clean", transcript_text=f"t{i}") for i in range(3)
    ]
    cfg = StructureConfig(backend="vllm-offline", server={"model": "Qwen/Qwen2.5-7B-Instruct", "n_ctx": 8192})
    envs = structure_many(items, cfg, cache_dir=tmp_path, log_dir=tmp_path)

    (llm,) = fake_vllm.instances
    assert llm.kw == {
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "seed": 1234,
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.85,
    }
    ((prompts, params),) = llm.generate_calls  # one batched call for all items
    assert len(prompts) == 3 and prompts[0].startswith("system:You are a clinical documentation assistant")
    assert params.temperature == 0.0 and params.seed == 1234 and params.max_tokens == 1536
    assert params.structured_outputs.json == record_json_schema()

    assert envs[0].record == record and envs[0].backend == "vllm-offline"
    assert envs[0].model == "Qwen/Qwen2.5-7B-Instruct" and envs[0].decoding["response_format"] == (
        "vllm_structured_outputs"
    )
    assert envs[1].failed and "truncated output" in envs[1].error and envs[1].raw_text == '{"triage": {"lev'
    assert envs[2].failed and "invalid JSON" in envs[2].error

    # re-run: only the two failures go to the engine again
    fake_vllm.outputs = [(record.model_dump_json(), "stop")] * 2
    again = structure_many(items, cfg, cache_dir=tmp_path, log_dir=tmp_path)
    assert len(llm.generate_calls[1][0]) == 2 and all(not e.failed for e in again)


def test_offline_needs_a_model_id() -> None:
    from stresstest.errors import StructureError

    with pytest.raises(StructureError, match="needs an HF model id"):
        vllm_offline.offline_model_id(StructureConfig(backend="vllm-offline"))
