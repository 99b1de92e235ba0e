"""Draft a gold record from a clean *human* transcript with the configured LLM (``stresstest gold draft``).

Uses the instruction ``prompts/gold_draft_vN.md`` (exhaustive atomic facts,
verbatim quotes) and the output contract of that prompt version (schema S, shown in the instruction from v2
on), through the same client, cache and φ as the
structuring stage. The result is only a *draft*: the gold workflow writes it to
an editable file that a clinician audits.
"""

from __future__ import annotations

from pathlib import Path

from stresstest.cache import default_cache_dir
from stresstest.errors import StructureError
from stresstest.llm.config import LLMConfig
from stresstest.llm.prompts import load_prompt
from stresstest.llm.session import LLMCall, open_session
from stresstest.schema import ClinicalRecord
from stresstest.structure.contract import output_contract
from stresstest.structure.stage import PROMPTS_PACKAGE, transcript_sha256

GOLD_DRAFT_PROMPT = "gold_draft"


def draft_gold_with_llm(
    transcript: str,
    config: LLMConfig,
    *,
    cache_dir: str | Path | None = None,
    log_dir: str | Path,
    item_id: str = "gold",
) -> ClinicalRecord:
    """Decompose a human transcript into a draft gold record.

    Args:
        transcript: the clean human transcript.
        config: structure config of the drafting model (backend 'openai' or 'vllm-offline').
        cache_dir: cache root (default: the documented cache directory, ``$STRESSTEST_CACHE``).
        log_dir: where a managed server writes its log.
        item_id: id for log lines (e.g. the encounter id).

    Raises:
        StructureError: backend 'rules', or the model gave no valid record after retries (the message
            carries the reason and the start of the raw text).
    """
    if config.backend == "rules":
        raise StructureError(
            "gold draft with an LLM: structure backend is 'rules'; expected 'openai' or 'vllm-offline'"
        )
    prompt = load_prompt(GOLD_DRAFT_PROMPT, config.prompt_version, PROMPTS_PACKAGE)
    contract = output_contract(config.prompt_version)
    call = LLMCall(
        item_id, (transcript_sha256(transcript), prompt.sha256), contract.messages(prompt, transcript=transcript)
    )
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    with open_session(config, cache_dir=root, log_dir=log_dir, role="gold-draft") as session:
        (res,) = session.run(
            [call],
            contract.model,
            namespace="gold-draft",
            schema_name=contract.schema_name,
            schema=contract.schema,
            desc="gold draft",
        )
    if res.parsed is None:
        raw = (res.raw_text or "")[:200]
        raise StructureError(f"gold draft for {item_id}: no valid record: {res.error}; raw text starts {raw!r}")
    return contract.to_record(res.parsed)
