"""Offline batch backend: ``vllm.LLM.generate`` with JSON-schema structured outputs (GPU).

Same instruction I (the chat messages, rendered with the model's own chat
template), same schema S (enforced by vLLM's structured-output decoding) and
same φ (temperature, top_p, seed, max_tokens) as the served path; all pending
items go to the engine in one ``generate`` call so vLLM can batch them. The
engine is built once per process per (model, seed, context, memory fraction).

There are no retries here: with a local engine there is no transient transport
fault to recover from, and at temperature 0 a retry would reproduce the same
text. An invalid or truncated output is a failed result with the raw text.

vLLM is imported lazily; without it the backend fails with an install hint.
vLLM ≥ 0.10.2 names the option ``structured_outputs=StructuredOutputsParams(json=...)``;
older releases (≥ 0.6) ``guided_decoding=GuidedDecodingParams(json=...)``. Both are supported.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel

from stresstest.errors import StructureError
from stresstest.structure.client import CallResult, parse_output
from stresstest.structure.config import StructureConfig

M = TypeVar("M", bound=BaseModel)

INSTALL_HINT = "install the GPU extra on a CUDA machine: pip install 'stresstest[gpu]' (or pip install vllm)"


def offline_model_id(config: StructureConfig) -> str:
    """Model id of the offline backend (``server.model``, required)."""
    if not config.server.model:
        raise StructureError(
            "structure.server.model: backend 'vllm-offline' needs an HF model id or directory"
        )
    return config.server.model


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise StructureError(
            f"backend 'vllm-offline' needs vLLM, which is not installed; {INSTALL_HINT}"
        ) from exc
    return vllm


@lru_cache(maxsize=2)
def _engine(
    model: str, seed: int, max_model_len: int, gpu_memory_utilization: float, tensor_parallel_size: int = 1
) -> Any:
    vllm = _import_vllm()
    return vllm.LLM(
        model=model,
        seed=seed,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        tensor_parallel_size=tensor_parallel_size,
    )


def sampling_params(config: StructureConfig, schema: dict[str, Any]) -> Any:
    """``vllm.SamplingParams`` for φ with the JSON Schema as a structured-output constraint."""
    vllm = _import_vllm()
    d = config.decoding
    common: dict[str, Any] = {
        "temperature": d.temperature,
        "top_p": d.top_p,
        "seed": d.seed,
        "max_tokens": d.max_tokens,
    }
    try:
        from vllm.sampling_params import StructuredOutputsParams

        return vllm.SamplingParams(structured_outputs=StructuredOutputsParams(json=schema), **common)
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        return vllm.SamplingParams(guided_decoding=GuidedDecodingParams(json=schema), **common)


def generate_offline(
    conversations: list[list[dict[str, str]]],
    model_cls: type[M],
    schema: dict[str, Any],
    config: StructureConfig,
) -> list[CallResult[M]]:
    """Generate one constrained JSON object per conversation in a single batched call.

    Args:
        conversations: chat messages per item.
        model_cls: pydantic model each output must validate against.
        schema: the JSON Schema enforced during decoding.
        config: structure config (``server.model``, ``server.n_ctx``, ``server.gpu_memory_utilization``, φ).

    Returns:
        Results in input order; invalid or truncated outputs are failed results with their raw text.
    """
    if not conversations:
        return []
    srv = config.server
    llm = _engine(offline_model_id(config), config.decoding.seed, srv.n_ctx, srv.gpu_memory_utilization,
                  srv.tensor_parallel_size)
    tokenizer = llm.get_tokenizer()
    prompts = [
        tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in conversations
    ]
    t0 = time.monotonic()
    outputs = llm.generate(prompts, sampling_params(config, schema), use_tqdm=True)
    per_item = (time.monotonic() - t0) / len(prompts)
    results: list[CallResult[M]] = []
    for out in outputs:
        comp = out.outputs[0]
        text: str = comp.text
        if comp.finish_reason == "length":
            results.append(
                CallResult(
                    None,
                    text,
                    f"truncated output (finish_reason=length at max_tokens={config.decoding.max_tokens}; "
                    "vllm-offline)",
                    1,
                    per_item,
                )
            )
            continue
        try:
            results.append(CallResult(parse_output(text, model_cls), text, None, 1, per_item))
        except ValueError as exc:
            results.append(CallResult(None, text, f"{exc} (vllm-offline)", 1, per_item))
    return results
