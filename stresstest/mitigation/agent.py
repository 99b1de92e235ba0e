"""The evidence-grounded guard agent as a structuring variant (docs/spec.md §7, issue 6).

Per item: dual view → **Draft** (structure with mandatory verbatim quotes) →
**Guard** (deletes unsupported content; enforced in code by
:func:`~stresstest.mitigation.guard.enforce_guard`) → deterministic
:func:`~stresstest.mitigation.evidence.evidence_filter` against the raw text.

Backends:

* ``openai`` / ``vllm-offline``: Draft and Guard are two LLM calls (prompts
  ``mitigation/prompts/draft_vN.md`` and ``guard_vN.md``), temperature 0, the
  same model, server session and cache as the structuring stage.
* ``rules``: Draft = the deterministic extractor on the raw text (its quotes
  are exact spans already); there is no Guard call — the Guard is the
  deterministic filter alone. Envelopes say so in ``extra["guard"]``.

Each envelope's ``extra`` carries the counts the runner needs:
``fields_total`` (claims + flags in the Draft), ``fields_nulled`` (claims +
flags removed by Guard or filter), ``abstention_rate`` (their ratio for the
item, None when the Draft is empty; over a condition prefer Σ fields_nulled / Σ
fields_total), ``quotes_total`` / ``quotes_discarded`` (filter),
``values_nulled``, ``guard_removed``, ``guard_added_dropped``,
``guard_changes_reverted``, plus the Draft record and the filter report for
auditing. A failed Draft or Guard call makes a failed envelope (reason and raw
text of that call), never a default record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stresstest.cache import canonical_json, hash_obj
from stresstest.llm.config import LLMConfig
from stresstest.llm.engine import LLMEngine
from stresstest.llm.prompts import Prompt, load_prompt
from stresstest.llm.session import LLMCall, LLMSession, decoding_record, open_session
from stresstest.mitigation.evidence import DEFAULT_HIGH_STAKES, FILTER_VERSION, HighStakes, evidence_filter
from stresstest.mitigation.guard import GuardReport, enforce_guard
from stresstest.mitigation.views import CLEAN_RULE_VERSION, dual_view
from stresstest.records import revise
from stresstest.schema import ClinicalRecord, RecordEnvelope, RecordExtra, schema_hash
from stresstest.structure.contract import output_contract
from stresstest.structure.stage import StructureItem, rules_identity, structure_many, transcript_sha256

PROMPTS_PACKAGE = "stresstest.mitigation.prompts"


def role_prompts(config: LLMConfig) -> tuple[Prompt, Prompt]:
    """(Draft, Guard) instruction files for the configured prompt version."""
    v = config.prompt_version
    return load_prompt("draft", v, PROMPTS_PACKAGE), load_prompt("guard", v, PROMPTS_PACKAGE)


def mitigation_fingerprint(config: LLMConfig) -> dict[str, object]:
    """What froze the mitigation variant, for the run manifest.

    ``prompt_hash`` is the hash recorded in every mitigated envelope: it combines the Draft and Guard prompt
    hashes (or the rules fingerprint), the filter version and the cleaning rule.
    """
    if config.backend == "rules":
        _, fp = rules_identity()
        parts: dict[str, object] = {"draft": fp, "guard": None}
        s_hash = schema_hash()
    else:
        d, g = role_prompts(config)
        parts = {"draft": d.sha256, "guard": g.sha256, "draft_prompt_id": d.id, "guard_prompt_id": g.id}
        s_hash = output_contract(config.prompt_version).schema_hash
    parts.update(filter_version=FILTER_VERSION, clean_rule=CLEAN_RULE_VERSION)
    return {**parts, "prompt_hash": hash_obj("mitigation", parts), "schema_hash": s_hash}


def _extra(
    draft: ClinicalRecord,
    guard: GuardReport | None,
    final_report: Any,
    guard_kind: str,
    fp: dict[str, object],
) -> RecordExtra:
    guard_removed = guard.fields_removed if guard else 0
    total = len(draft.claims) + len(draft.safety_flags)
    nulled = guard_removed + final_report.fields_nulled
    # The reports and the Draft go in as their dumps, so every one of their fields counts as written.
    return RecordExtra.model_validate(
        {
            "mitigation": True,
            "guard": guard_kind,
            "filter_version": FILTER_VERSION,
            "clean_rule": CLEAN_RULE_VERSION,
            "draft_prompt_hash": fp["draft"],
            "guard_prompt_hash": fp["guard"],
            "fields_total": total,
            "fields_nulled": nulled,
            "abstention_rate": nulled / total if total else None,
            "high_stakes_total": final_report.high_stakes_total,
            "quotes_total": final_report.quotes_total,
            "quotes_discarded": final_report.quotes_discarded,
            "values_nulled": len(final_report.values_nulled) + (len(guard.nulled_values) if guard else 0),
            "guard_removed": guard_removed,
            "guard_added_dropped": len(guard.added_dropped) if guard else 0,
            "guard_changes_reverted": len(guard.changes_reverted) if guard else 0,
            "guard_report": guard.model_dump() if guard else None,
            "filter_report": final_report.model_dump(),
            "draft_record": draft.model_dump(mode="json"),
        }
    )


def _failed(
    base: dict[str, Any],
    stage: str,
    error: str | None,
    raw_text: str | None,
    attempts: int,
    elapsed_s: float,
    **extra: Any,
) -> RecordEnvelope:
    """The envelope of an item whose ``stage`` ("draft" or "guard") gave no valid answer (its error, its raw
    text; ``extra`` adds to the record's ``extra``: the draft a failed guard saw)."""
    return RecordEnvelope(
        **base,
        failed=True,
        error=f"{stage}: {error}",
        raw_text=raw_text,
        attempts=attempts,
        elapsed_s=elapsed_s,
        extra=RecordExtra.model_validate({"mitigation": True, "stage": stage, **extra}),
    )


def _rules_many(
    items: list[StructureItem], config: LLMConfig, cache_dir: Path, log_dir: Path, hs: HighStakes
) -> list[RecordEnvelope]:
    fp = mitigation_fingerprint(config)
    drafts = structure_many(items, config, cache_dir=cache_dir, log_dir=log_dir)
    out = []
    for it, env in zip(items, drafts, strict=True):
        if env.record is None:  # the extractor does not fail per item, but never invent a record if it did
            out.append(revise(env, extra=revise(env.extra, mitigation=True, stage="draft")))
            continue
        final, report = evidence_filter(env.record, it.transcript_text, hs)
        out.append(
            revise(
                env,
                record=final,
                prompt_hash=str(fp["prompt_hash"]),
                extra=_extra(env.record, None, report, "none (rules backend: deterministic filter only)", fp),
            )
        )
    return out


def mitigate_many(
    items: list[StructureItem],
    config: LLMConfig,
    *,
    cache_dir: str | Path,
    log_dir: str | Path,
    high_stakes: HighStakes = DEFAULT_HIGH_STAKES,
    engine: LLMEngine | None = None,
) -> list[RecordEnvelope]:
    """Structure items through Draft → Guard → evidence filter.

    Args:
        items: transcripts (the raw ASR text) with their ids.
        config: the run's ``structure`` config (same model, φ and server as the unmitigated rows).
        cache_dir: cache root (Draft and Guard calls are cached separately; failures are not cached).
        log_dir: where a managed server writes its log.
        high_stakes: which fields the filter removes when left without evidence.
        engine: the run's LLM engine (roles ``mitigation-draft`` and ``mitigation-guard``); None = a private
            one, stopped on return.

    Returns:
        One envelope per item in input order (see module docstring for ``extra``).
    """
    if not items:
        return []
    cache_dir, log_dir = Path(cache_dir), Path(log_dir)
    if config.backend == "rules":
        return _rules_many(items, config, cache_dir, log_dir, high_stakes)
    fp = mitigation_fingerprint(config)
    draft_p, guard_p = role_prompts(config)
    contract = output_contract(config.prompt_version)
    views = [dual_view(it.transcript_text) for it in items]
    shas = [transcript_sha256(it.transcript_text) for it in items]
    ids = [f"{it.encounter_id}/{it.condition}" for it in items]
    with (
        open_session(config, cache_dir=cache_dir, log_dir=log_dir, engine=engine, role="mitigation-draft") as session,
        LLMSession(session.engine, role="mitigation-guard") as guard_session,
    ):
        drafts = session.run(
            [
                LLMCall(
                    i, (sha, draft_p.sha256, CLEAN_RULE_VERSION), contract.messages(draft_p, raw=v.raw, clean=v.clean)
                )
                for i, sha, v in zip(ids, shas, views, strict=True)
            ],
            contract.model,
            namespace="mitigation-draft",
            schema_name=contract.schema_name,
            schema=contract.schema,
            desc="draft",
        )
        ok = [k for k, d in enumerate(drafts) if d.parsed is not None]
        guard_calls = []
        for k in ok:
            # The Guard sees the Draft in the schema it must answer in (v2: quotes inside the items).
            draft_json = canonical_json(drafts[k].parsed.model_dump(mode="json"))  # type: ignore[union-attr]
            guard_calls.append(
                LLMCall(
                    ids[k],
                    (shas[k], guard_p.sha256, hash_obj(draft_json)),
                    contract.messages(guard_p, raw=views[k].raw, draft=draft_json),
                )
            )
        guards = guard_session.run(
            guard_calls,
            contract.model,
            namespace="mitigation-guard",
            schema_name=contract.schema_name,
            schema=contract.schema,
            desc="guard",
        )
        model = session.model_id
    guard_of = dict(zip(ok, guards, strict=True))
    dec = decoding_record(config)
    out: list[RecordEnvelope] = []
    for k, it in enumerate(items):
        d = drafts[k]
        base: dict[str, Any] = dict(
            encounter_id=it.encounter_id,
            condition=it.condition,
            backend=config.backend,
            model=model,
            prompt_hash=str(fp["prompt_hash"]),
            schema_hash=contract.schema_hash,
            decoding=dec,
            transcript_sha256=shas[k],
        )
        if d.parsed is None:
            out.append(_failed(base, "draft", d.error, d.raw_text, d.attempts, round(d.elapsed_s, 4)))
            continue
        g = guard_of[k]
        attempts, elapsed = d.attempts + g.attempts, round(d.elapsed_s + g.elapsed_s, 4)
        if g.parsed is None:
            out.append(
                _failed(
                    base,
                    "guard",
                    g.error,
                    g.raw_text,
                    attempts,
                    elapsed,
                    draft_record=contract.to_record(d.parsed).model_dump(mode="json"),
                )
            )
            continue
        draft = contract.to_record(d.parsed)
        guarded, g_report = enforce_guard(draft, contract.to_record(g.parsed))
        final, f_report = evidence_filter(guarded, it.transcript_text, high_stakes)
        out.append(
            RecordEnvelope(
                **base,
                record=final,
                raw_text=g.raw_text,
                attempts=attempts,
                elapsed_s=elapsed,
                extra=_extra(draft, g_report, f_report, "llm", fp),
            )
        )
    return out
