"""The ``structure`` stage: transcripts → :class:`RecordEnvelope` (docs/spec.md §4).

``structure_many`` is what the runner calls. With backend ``rules`` it runs the
deterministic extractor; with ``openai`` it asks a served LLM (managed
llama.cpp / vLLM server, or an external one) through the OpenAI-compatible
client; with ``vllm-offline`` it batches everything through ``vllm.LLM``. All
three return envelopes in input order, one per item: a failed item is an
envelope with ``failed=True``, the reason and the raw model text — never
dropped, never replaced by a default record.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from stresstest.cache import KeyValueCache, hash_obj
from stresstest.llm.config import LLMConfig
from stresstest.llm.engine import LLMEngine
from stresstest.llm.offline import offline_model_id
from stresstest.llm.prompts import Prompt, load_prompt
from stresstest.llm.served import model_identity
from stresstest.llm.session import LLMCall, decoding_record, open_session
from stresstest.schema import ClinicalRecord, RecordEnvelope, RecordExtra, schema_hash
from stresstest.structure import rules
from stresstest.structure.contract import OutputContract, output_contract

STRUCTURE_PROMPT = "structure"
PROMPTS_PACKAGE = "stresstest.structure.prompts"


class StructureItem(BaseModel):
    """One transcript to structure."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    encounter_id: str = Field(description="Encounter id.")
    condition: str = Field(description="Condition label, e.g. 'clean', 'babble_5db'.")
    transcript_text: str = Field(description="The (ASR) transcript x(c).")


def transcript_sha256(text: str) -> str:
    """sha256 of the transcript's UTF-8 bytes (recorded in every envelope)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def structure_prompt(config: LLMConfig) -> Prompt:
    """The instruction I for the configured prompt version."""
    return load_prompt(STRUCTURE_PROMPT, config.prompt_version, PROMPTS_PACKAGE)


def rules_identity() -> tuple[str, str]:
    """(model id, fingerprint) of the deterministic extractor."""
    return f"rules-{rules.RULES_VERSION}", rules.rules_fingerprint()


def structure_fingerprint(config: LLMConfig) -> dict[str, object]:
    """What froze the structuring step, for the run manifest (model id, prompt/schema hashes and versions, φ).

    For backend 'openai' in external mode without ``server.model`` this asks the server for its model. The
    rules extractor writes ``ClinicalRecord`` itself: its schema is that record's.
    """
    if config.backend == "rules":
        model, fp = rules_identity()
        return {
            "backend": "rules",
            "model": model,
            "prompt_hash": fp,
            "schema_hash": schema_hash(),
            "decoding": {"deterministic": True},
        }
    prompt = structure_prompt(config)
    model = offline_model_id(config) if config.backend == "vllm-offline" else model_identity(config)
    return {
        "backend": config.backend,
        "model": model,
        "prompt_id": prompt.id,
        "prompt_hash": prompt.sha256,
        **output_contract(config.prompt_version).fingerprint(),
        "decoding": decoding_record(config),
        "engine": config.server.engine if config.backend == "openai" else "vllm",
    }


def _rules_many(items: list[StructureItem], cache_dir: Path) -> list[RecordEnvelope]:
    model, fp = rules_identity()
    s_hash = schema_hash()
    cache = KeyValueCache(cache_dir, "structure-rules")
    out: list[RecordEnvelope] = []
    for it in items:
        sha = transcript_sha256(it.transcript_text)
        key = hash_obj("rules", sha, fp, s_hash)
        t0 = time.monotonic()
        # A damaged or foreign entry is a miss (with a warning naming the file): recomputed and overwritten.
        record = cache.get(key, validate=lambda v: ClinicalRecord.model_validate(v["record"]))
        if record is None:
            record = rules.extract_record(it.transcript_text)
            cache.put(key, {"record": record.model_dump(mode="json")})
        out.append(
            RecordEnvelope(
                encounter_id=it.encounter_id,
                condition=it.condition,
                backend="rules",
                model=model,
                prompt_hash=fp,
                schema_hash=s_hash,
                decoding={"deterministic": True},
                transcript_sha256=sha,
                record=record,
                elapsed_s=round(time.monotonic() - t0, 4),
            )
        )
    return out


def llm_structure_calls(items: list[StructureItem], prompt: Prompt, contract: OutputContract) -> list[LLMCall]:
    """The structuring requests for items (key = transcript hash + prompt hash; the session adds the schema's)."""
    return [
        LLMCall(
            item_id=f"{it.encounter_id}/{it.condition}",
            key_parts=(transcript_sha256(it.transcript_text), prompt.sha256),
            messages=contract.messages(prompt, transcript=it.transcript_text),
        )
        for it in items
    ]


def structure_many(
    items: list[StructureItem],
    config: LLMConfig,
    *,
    cache_dir: str | Path,
    log_dir: str | Path,
    engine: LLMEngine | None = None,
) -> list[RecordEnvelope]:
    """Structure every item with the configured backend.

    Args:
        items: transcripts with their (encounter, condition) ids.
        config: the ``structure`` config.
        cache_dir: stage cache root (records cached by transcript, I, S, φ and model id).
        log_dir: where a managed server writes its log.
        engine: the run's LLM engine (role ``structure``); None = a private one, stopped on return.

    Returns:
        One envelope per item, in input order; failures have ``failed=True``, ``error`` and ``raw_text``.

    Raises:
        StructureError: the backend cannot be used at all (server does not start, missing install...).
    """
    cache_dir = Path(cache_dir)
    if not items:
        return []
    if config.backend == "rules":
        return _rules_many(items, cache_dir)
    prompt = structure_prompt(config)
    contract = output_contract(config.prompt_version)
    with open_session(config, cache_dir=cache_dir, log_dir=log_dir, engine=engine, role="structure") as session:
        results = session.run(
            llm_structure_calls(items, prompt, contract),
            contract.model,
            namespace="structure",
            schema_name=contract.schema_name,
            schema=contract.schema,
            desc="structure",
        )
        model = session.model_id
    dec = decoding_record(config)
    return [
        RecordEnvelope(
            encounter_id=it.encounter_id,
            condition=it.condition,
            backend=config.backend,
            model=model,
            prompt_hash=prompt.sha256,
            schema_hash=contract.schema_hash,
            decoding=dec,
            transcript_sha256=transcript_sha256(it.transcript_text),
            record=None if res.parsed is None else contract.to_record(res.parsed),
            failed=res.failed,
            error=res.error,
            raw_text=res.raw_text,
            attempts=res.attempts,
            elapsed_s=round(res.elapsed_s, 4),
            extra=RecordExtra(prompt_id=prompt.id, cached=res.cached),
        )
        for it, res in zip(items, results, strict=True)
    ]
