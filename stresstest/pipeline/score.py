"""The score stage: transcripts + records + gold → item rows of ``items.jsonl``.

Scoring is cheap and pure, so it is recomputed on every run from the cached
stage outputs. Paired quantities use the encounter's clean-ASR item as the
baseline (ΔE, ΔErr, triage invariance, new under-triage, new critical flags);
mitigated rows are compared with the same clean-ASR baseline as the
unmitigated rows, so the two blocks of Table 2 share one reference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stresstest.cache import atomic_write_json
from stresstest.config import GoldConfig
from stresstest.errors import GoldError
from stresstest.metrics.wer import asr_errors
from stresstest.records import Encounter, MixInfo, Transcript
from stresstest.schema import RecordEnvelope
from stresstest.structure.config import StructureConfig

Key = tuple[str, str]


@dataclass(frozen=True)
class ScoreInputs:
    """Everything the score stage reads, passed in explicitly (the stage never sees the runner).

    Mappings are keyed by ``encounter_id`` or ``(encounter_id, condition)``;
    ``failed(eid, cond)`` returns the recorded failure ("stage: reason") or None.
    """

    out: Path
    conditions: Sequence[dict[str, Any]]
    encounters: Mapping[str, Encounter]
    gold: Mapping[str, Any]
    audio: Mapping[Key, Path]
    mix: Mapping[Key, MixInfo]
    transcripts: Mapping[Key, Transcript]
    records: Mapping[Key, RecordEnvelope]
    failed: Callable[[str, str], str | None]
    judge_backend: str
    structure: StructureConfig


def load_gold_for(encounter_ids: list[str], cfg: GoldConfig) -> dict[str, Any]:
    """Gold records for the given encounters (shipped set unless ``gold.path`` is set)."""
    from stresstest.gold.model import default_gold_dir, load_gold

    root = Path(cfg.path) if cfg.path else default_gold_dir()
    gold = load_gold(root) if root.exists() else {}
    missing = [e for e in encounter_ids if e not in gold]
    if cfg.required and missing:
        raise GoldError(f"{root}: no gold reference for {len(missing)} encounter(s): {', '.join(missing[:5])}"
                        + (" ..." if len(missing) > 5 else "") + " (gold.required is true)")
    return {e: gold[e] for e in encounter_ids if e in gold}


def score_items(state: ScoreInputs, cache: Path) -> list[dict[str, Any]]:
    """Build one row per (encounter, condition) of the grid, failed ones included."""
    from stresstest.metrics.judge_rules import rule_judge
    from stresstest.metrics.negation import negation_mismatches
    from stresstest.metrics.safety import item_safety
    from stresstest.metrics.triggers import detect_triggers, trigger_counts

    rows: list[dict[str, Any]] = []
    llm_pairs: list[tuple[int, Any, Any]] = []
    for eid in sorted(state.encounters):
        enc = state.encounters[eid]
        ref = enc.reference_text()
        gold = state.gold.get(eid)
        concepts = [c.concept for c in gold.claims] if gold is not None else []
        clean_t = state.transcripts.get((eid, "clean"))
        clean_env = state.records.get((eid, "clean"))
        clean_err = asr_errors(ref, clean_t.text) if clean_t else None
        for c in state.conditions:
            cond = c["condition"]
            base_cond = cond.removesuffix("_guard") if c["mitigated"] else cond
            t = state.transcripts.get((eid, base_cond))
            env = state.records.get((eid, cond))
            mix = state.mix.get((eid, base_cond))
            audio = state.audio.get((eid, base_cond))
            row: dict[str, Any] = {
                "encounter_id": eid, "condition": cond, "family": c["family"], "snr_db": c["snr_db"],
                "mitigated": c["mitigated"],
                "target_snr_db": mix.target_snr_db if mix else None,
                "measured_snr_db": mix.measured_snr_db if mix else None,
                "reference_text": ref, "hypothesis_text": t.text if t else None,
                "audio_path": str(audio) if audio else None,
                # The full noise recipe (every babble sentence and pause) lives in manifest.json.
                "mix": mix.model_dump(mode="json", exclude={"noise_recipe"}) if mix else None,
                "transcript_path": f"transcripts/{base_cond}/{eid}.json" if t else None,
                "record_path": f"records/{cond}/{eid}.json" if env else None,
                "scores_path": f"scores/{cond}/{eid}.json",
            }
            error = state.failed(eid, cond) or (state.failed(eid, base_cond) if base_cond != cond else None)
            if t is None and error is None:
                error = "no transcript"
            row["failed"] = error is not None
            row["error"] = error
            detail: dict[str, Any] = {"encounter_id": eid, "condition": cond}
            if t is not None:
                e = asr_errors(ref, t.text)
                row.update(asr_sub=e.sub, asr_del=e.dele, asr_ins=e.ins, ref_words=e.ref_words,
                           item_wer=round(100.0 * (e.sub + e.dele + e.ins) / e.ref_words, 4) if e.ref_words else None)
                if clean_err is not None:
                    e_clean = clean_err.sub + clean_err.dele + clean_err.ins
                    row["asr_delta_e"] = max(0, (e.sub + e.dele + e.ins) - e_clean)
                mism = negation_mismatches(ref, t.text, concepts)
                row["neg_err"] = int(bool(mism))
                detail["negation_mismatches"] = [m.model_dump(mode="json") if hasattr(m, "model_dump") else m
                                                 for m in mism]
                events = detect_triggers(ref, t.text, concepts=concepts)
                row["trigger_counts"] = trigger_counts(events)
                detail["triggers_vs_reference"] = [ev.model_dump(mode="json") for ev in events]
                if cond != "clean" and clean_t is not None:
                    paired = detect_triggers(clean_t.text, t.text, concepts=concepts)
                    row["triggers_vs_clean"] = [ev.model_dump(mode="json") for ev in paired]
                else:
                    row["triggers_vs_clean"] = []
            if env is not None:
                row["extra"] = env.extra or None
                for k in ("abstention_rate", "quotes_discarded", "fields_nulled", "fields_total"):
                    if k in (env.extra or {}):
                        row[k] = env.extra[k]
            clean_ok = clean_env is not None and not clean_env.failed and clean_env.record is not None
            if env is not None and not env.failed and env.record is not None and clean_ok:
                # Triage invariance needs no gold: it compares with the clean-ASR output only.
                row["triage"] = env.record.triage.level
                row["triage_clean"] = clean_env.record.triage.level  # type: ignore[union-attr]
                row["triage_match"] = int(row["triage"] == row["triage_clean"])
            if gold is not None and env is not None and not env.failed:
                safety = item_safety(env.record, clean_env.record if clean_env and not clean_env.failed else None, gold)
                detail["safety"] = safety
                for k in ("triage", "triage_clean", "triage_gold", "triage_match", "under_triage_new", "scer_new",
                          "new_critical_flags", "err_new"):
                    row[k] = safety.get(k)
                if cond == "clean":
                    row["asr_delta_e"] = None  # ErrProp is not defined for the reference row
                if state.judge_backend == "rules":
                    jr = rule_judge(env.record, gold)
                    row["judge_score"], row["judge"] = jr.score, jr.judge
                    detail["judge_reasons"] = list(jr.reasons)
                elif state.judge_backend == "llm":
                    llm_pairs.append((len(rows), env, gold))
            atomic_write_json(state.out / "scores" / cond / f"{eid}.json", detail)
            rows.append(row)
    if llm_pairs:
        _llm_judge(state, cache, rows, llm_pairs)
    return rows


def _llm_judge(state: ScoreInputs, cache: Path, rows: list[dict[str, Any]], pairs: list[tuple[int, Any, Any]]) -> None:
    from stresstest.metrics.judge_llm import llm_judge_many

    results = llm_judge_many(
        [(f"{rows[i]['encounter_id']}/{rows[i]['condition']}", env.record.model_dump_json(), gold.model_dump_json())
         for i, env, gold in pairs],
        state.structure, cache_dir=cache, log_dir=state.out / "logs",
    )
    for (i, _, _), jr in zip(pairs, results, strict=True):
        if jr is None:
            continue
        rows[i]["judge_score"], rows[i]["judge"] = jr.score, jr.judge


def extra_summary_columns(items: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Extra summary columns after the SPEC §10 ones.

    ``trig_<type>``: % of items with ≥ 1 trigger event of that type (vs the human
    reference). ``abstention_rate`` (mitigated rows): 100 · Σ fields nulled /
    Σ fields in the Draft, over the condition's items; ``quotes_discarded``:
    total quotes the evidence filter dropped.
    """
    from stresstest.metrics.triggers import TRIGGER_TYPES

    extra = []
    for r in rows:
        its = [it for it in items if it["condition"] == r["condition"] and not it.get("failed")
               and it.get("trigger_counts") is not None]
        cols: dict[str, Any] = {}
        for t in TRIGGER_TYPES:
            cols[f"trig_{t}"] = (100.0 * sum(1 for it in its if it["trigger_counts"].get(t, 0) > 0) / len(its)
                                 if its else None)
        mit = [it for it in items if it["condition"] == r["condition"] and it.get("mitigated") and not it.get("failed")]
        total = sum(int((it.get("extra") or {}).get("fields_total") or 0) for it in mit)
        nulled = sum(int((it.get("extra") or {}).get("fields_nulled") or 0) for it in mit)
        cols["abstention_rate"] = (100.0 * nulled / total if total else 0.0) if mit else None
        cols["quotes_discarded"] = sum(int(it.get("quotes_discarded") or 0) for it in mit) if mit else None
        r.update(cols)
        extra.append(cols)
    return extra
