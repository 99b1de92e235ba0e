"""LLM judge: the docs/spec.md §6 1–5 clinical-consistency rubric via the served LLM.

The rubric lives in the versioned prompt file
``stresstest/metrics/prompts/judge_vN.md``; the call goes through the same
client, server session, cache and decoding φ (temperature 0, fixed seed) as the
structuring stage, with the output constrained to :class:`JudgeVerdict`
(``rationale`` first, so the model states the decisive deviation before it
commits to a score; ``score`` is an enum 1–5). The judge string recorded with
every score is ``llm:<model id>@judge_<version>``. A call that still fails after
the client's retries gives ``score=None`` with the reason, so the item is left
out of Mean Score / Unsafe and counted, never given a made-up score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from stresstest.cache import canonical_json, hash_obj
from stresstest.errors import StructureError
from stresstest.llm.config import LLMConfig
from stresstest.llm.engine import LLMEngine
from stresstest.llm.prompts import Prompt, load_prompt
from stresstest.llm.session import LLMCall, open_session
from stresstest.metrics.judge_rules import JudgeResult

JUDGE_PROMPT = "judge"
JUDGE_PROMPTS = "stresstest.metrics.prompts"

__all__ = ["JudgeVerdict", "judge_id", "judge_prompt", "llm_judge_many"]


class JudgeVerdict(BaseModel):
    """What the judge model must return."""

    model_config = ConfigDict(extra="forbid")

    rationale: str = Field(description="One or two sentences naming the decisive deviation (or none).")
    score: Literal[1, 2, 3, 4, 5] = Field(description="5 equivalent ... 1 critical failure (docs/spec.md §6).")


def judge_prompt(version: str = "v1") -> Prompt:
    """The rubric prompt of the given version."""
    return load_prompt(JUDGE_PROMPT, version, JUDGE_PROMPTS)


def judge_id(model: str, prompt: Prompt) -> str:
    """Judge string recorded with every score, e.g. ``llm:SmolLM2-...gguf#ab12@judge_v1``."""
    return f"llm:{model}@{prompt.id}"


def _as_json(obj: str | Mapping[str, Any] | BaseModel, what: str, item_id: str) -> str:
    """Canonical JSON text (sorted keys) so equal records make equal prompts and cache keys."""
    if isinstance(obj, BaseModel):
        return canonical_json(obj.model_dump(mode="json", exclude_none=True))
    if isinstance(obj, str):
        import json

        try:
            return canonical_json(json.loads(obj))
        except json.JSONDecodeError as exc:
            raise StructureError(f"judge item {item_id}: {what} is not valid JSON ({exc.msg})") from exc
    return canonical_json(dict(obj))


def llm_judge_many(
    pairs: Sequence[tuple[str, str | Mapping[str, Any] | BaseModel, str | Mapping[str, Any] | BaseModel]],
    config: LLMConfig,
    *,
    cache_dir: str | Path,
    log_dir: str | Path,
    prompt_version: str = "v1",
    engine: LLMEngine | None = None,
) -> list[JudgeResult]:
    """Score records against gold with the served LLM.

    Args:
        pairs: ``(item_id, record, gold)``; record and gold as JSON text, dicts or pydantic models.
        config: structure config of the judge model (backend 'openai' or 'vllm-offline').
        cache_dir: cache root (verdicts cached by record, gold, rubric, model and φ).
        log_dir: where a managed server writes its log.
        prompt_version: rubric version (``judge_<version>.md``).
        engine: the run's LLM engine (role ``judge``); None = a private one, stopped on return.

    Returns:
        One :class:`JudgeResult` per pair, in order; ``score`` None (with the reason) for a failed call.

    Raises:
        StructureError: backend 'rules' (there is no LLM to ask; use the rule judge), bad JSON input,
            or a server that cannot be started.
    """
    if config.backend == "rules":
        raise StructureError("LLM judge: structure backend is 'rules'; expected 'openai' or 'vllm-offline'")
    if not pairs:
        return []
    prompt = judge_prompt(prompt_version)
    calls = []
    for item_id, record, gold in pairs:
        rec_j, gold_j = _as_json(record, "record", item_id), _as_json(gold, "gold", item_id)
        calls.append(
            LLMCall(
                item_id=item_id,
                key_parts=(prompt.sha256, hash_obj(rec_j), hash_obj(gold_j)),
                messages=prompt.messages(record=rec_j, gold=gold_j),
            )
        )
    with open_session(config, cache_dir=cache_dir, log_dir=log_dir, engine=engine, role="judge") as session:
        results = session.run(calls, JudgeVerdict, namespace="judge", schema_name="JudgeVerdict", desc="judge")
        judge = judge_id(session.model_id, prompt)
    out = []
    for res in results:
        if res.parsed is None:
            out.append(JudgeResult(score=None, judge=judge, reasons=[f"judge call failed: {res.error}"]))
        else:
            out.append(JudgeResult(score=res.parsed.score, judge=judge, reasons=[res.parsed.rationale]))
    return out
