"""The score stage: transcripts + records + gold → item rows of ``items.jsonl``.

Scoring is cheap and pure, so it is recomputed on every run from the cached
stage outputs. Paired quantities use the encounter's clean-ASR item as the
baseline (ΔE, ΔErr, triage invariance, new under-triage, new critical flags);
mitigated rows are compared with the same clean-ASR baseline as the
unmitigated rows, so the two blocks of Table 2 share one reference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from stresstest.cache import atomic_write_json
from stresstest.config import GoldConfig, NoteQualityConfig
from stresstest.errors import GoldError
from stresstest.gold.model import GoldRecord
from stresstest.grid import ConditionGrid
from stresstest.ids import id_path
from stresstest.llm.config import LLMConfig
from stresstest.llm.engine import LLMEngine
from stresstest.llm.session import open_session
from stresstest.metrics.align import AlignedPair, align
from stresstest.metrics.judge_llm import llm_judge_many
from stresstest.metrics.quality_stage import QualityItem, score_note_quality
from stresstest.metrics.silence import (
    Probes,
    ProbeWords,
    probe_detail,
    probe_scores,
    probe_stretches,
    probe_words,
    traced_fields,
)
from stresstest.metrics.split_wer import SplitErrors, asr_scores, split_errors
from stresstest.metrics.summary import SummaryRow, TriggerRates, abstention, trigger_rate
from stresstest.metrics.wer import AsrErrors
from stresstest.records import Encounter, MixInfo, Transcript, Turn, revise
from stresstest.results import (
    TRIGGER_TYPES,
    AsrScores,
    GuardScores,
    ItemScore,
    JudgeScores,
    ProbeField,
    SafetyScores,
    TriggerCounts,
    TriggerEvent,
    TriggerScores,
)
from stresstest.schema import RecordEnvelope

if TYPE_CHECKING:
    from stresstest.metrics.negation import NegationMismatch

Key = tuple[str, str]


@dataclass(frozen=True)
class ConditionOutputs:
    """One (encounter, condition)'s stage outputs; None: the stage produced none.

    Attributes:
        transcript: the ASR transcript (a condition with audio).
        record: the structuring outcome (guard rows included).
        mix: the mixture facts (a noisy condition).
        audio: the audio path.
        failure: ``"stage: reason"`` when the item failed (a guard row's base failure included).
    """

    transcript: Transcript | None = None
    record: RecordEnvelope | None = None
    mix: MixInfo | None = None
    audio: str | None = None
    failure: str | None = None


@dataclass(frozen=True)
class EncounterOutputs:
    """One encounter's stage outputs: the unit the score stage works on.

    Attributes:
        encounter: the (truncated) encounter; its reference text is r_i.
        gold: the encounter's gold record, if any.
        conditions: the outputs of every condition of the grid, keyed by condition id (a guard row has its own
            record and failure; its transcript, mix and audio are its base condition's).
    """

    encounter: Encounter
    gold: GoldRecord | None = None
    conditions: Mapping[str, ConditionOutputs] = field(default_factory=dict)


@dataclass(frozen=True)
class ScoredItem:
    """What scoring one (encounter, condition) gives: the ``items.jsonl`` row and the audit detail."""

    row: ItemScore
    detail: dict[str, Any]


@dataclass(frozen=True)
class PairScores:
    """Everything read off ONE alignment of (reference, hypothesis) — jiwer's ``process_words`` idea.

    Attributes:
        errors: S, D, I, hits of the hypothesis against the reference.
        negation: NegErr mismatches.
        triggers: trigger events vs the reference.
        trigger_counts: the events counted by type.
        split: the clinical and per-speaker counts.
        probe: the words written inside the inserted stretches (audio with silence probes).
    """

    errors: AsrErrors
    negation: list[NegationMismatch]
    triggers: list[TriggerEvent]
    trigger_counts: TriggerCounts
    split: SplitErrors | None = None
    probe: ProbeWords | None = None

    def trigger_scores(self, vs_clean: Sequence[TriggerEvent]) -> TriggerScores:
        """The item's trigger part: NegErr, the events vs the reference by type, and ``vs_clean`` (the events
        against the clean ASR; empty on the clean row)."""
        return TriggerScores(
            neg_err=int(bool(self.negation)), trigger_counts=self.trigger_counts, triggers_vs_clean=list(vs_clean)
        )


def score_pair(
    pair: AlignedPair, concepts: Sequence[str], turns: Sequence[Turn] | None = None, probes: Probes | None = None
) -> PairScores:
    """Read WER counts, NegErr mismatches, trigger events, the clinical/speaker split and (audio with silence
    probes) the words written inside the inserted stretches off one aligned pair."""
    from stresstest.metrics.negation import negation_mismatches
    from stresstest.metrics.triggers import detect_in_pair, trigger_counts

    errors = AsrErrors.from_pair(pair)
    mism = negation_mismatches(pair.ref.original, pair.hyp.original, concepts, pair=pair)
    events = detect_in_pair(pair, concepts)
    return PairScores(
        errors=errors,
        negation=list(mism),
        triggers=list(events),
        trigger_counts=TriggerCounts.model_validate(trigger_counts(events)),
        split=split_errors(pair, turns),
        probe=probe_words(pair, turns, probes) if probes is not None and turns is not None else None,
    )


def _dumps(models: Sequence[BaseModel]) -> list[dict[str, Any]]:
    """The audit detail's form of a list of models."""
    return [m.model_dump(mode="json") for m in models]


def score_encounter(x: EncounterOutputs, grid: ConditionGrid, judge_backend: str) -> list[ScoredItem]:
    """Score every condition of one encounter (pure: reads only ``x``, writes nothing).

    Each distinct (reference, hypothesis) pair is aligned once: r_i against each
    transcript, and the clean transcript against each noisy one. A guard row
    shares its base's transcript, so it shares its base's alignments too.
    Paired quantities use the clean-ASR item as the baseline (ΔE, ΔErr, triage
    invariance, new under-triage, new critical flags); mitigated rows are compared
    with the same clean-ASR baseline as unmitigated rows. Each metric makes its part of the item
    (:data:`stresstest.results.SCORE_PARTS`); the item is composed of them.
    """
    from stresstest.metrics.judge_rules import rule_judge
    from stresstest.metrics.safety import item_safety, safety_scores, triage_invariance
    from stresstest.metrics.triggers import detect_in_pair

    eid = x.encounter.encounter_id
    ref = x.encounter.reference_text()
    gold = x.gold
    concepts = [c.concept for c in gold.claims] if gold is not None else []
    clean = x.conditions.get("clean", ConditionOutputs())  # a grid may have no clean row: no paired baseline
    clean_t, clean_env = clean.transcript, clean.record
    vs_ref: dict[str, PairScores] = {}  # base condition -> scores against r_i (one alignment each)
    vs_clean: dict[str, list[TriggerEvent]] = {}  # base condition -> trigger events against the clean ASR

    def against_ref(base: str, text: str, mix: MixInfo | None = None) -> PairScores:
        if base not in vs_ref:
            vs_ref[base] = score_pair(align(ref, text), concepts, x.encounter.turns, probe_stretches(mix))
        return vs_ref[base]

    clean_err = against_ref("clean", clean_t.text).errors if clean_t else None
    out: list[ScoredItem] = []
    for c in grid:
        cond, base_cond = c.id, c.base
        own, base = x.conditions[cond], x.conditions[base_cond]
        t, env, mix, audio = base.transcript, own.record, base.mix, base.audio
        error = own.failure
        if t is None and error is None:
            error = "no transcript"
        detail: dict[str, Any] = {"encounter_id": eid, "condition": cond}
        asr: AsrScores | None = None
        triggers: TriggerScores | None = None
        guard: GuardScores | None = None
        safety: SafetyScores | None = None
        judged: JudgeScores | None = None
        probed: ProbeWords | None = None
        twin: tuple[str, int] | None = None
        traced: list[ProbeField] | None = None
        if t is not None:
            ps = against_ref(base_cond, t.text, mix)
            asr = asr_scores(ps.errors, ps.split, clean_err)
            if ps.probe is not None:
                detail["silence_probes"] = probe_detail(ps.probe)
                if ps.probe.mapped:
                    probed = ps.probe
                    twin = _twin_words(x, grid, base_cond, ref, mix, detail["silence_probes"])
            detail["negation_mismatches"] = _dumps(ps.negation)
            detail["triggers_vs_reference"] = _dumps(ps.triggers)
            if not c.is_clean and clean_t is not None:
                if base_cond not in vs_clean:
                    vs_clean[base_cond] = detect_in_pair(align(clean_t.text, t.text), concepts)
                triggers = ps.trigger_scores(vs_clean[base_cond])
            else:
                triggers = ps.trigger_scores([])
        if env is not None:
            guard = GuardScores.of_envelope(env.extra)
        clean_rec = clean_env.record if clean_env is not None and not clean_env.failed else None
        if env is not None and not env.failed and env.record is not None and clean_rec is not None:
            # Triage invariance needs no gold: it compares with the clean-ASR output only.
            safety = triage_invariance(env.record, clean_rec)
        if probed is not None and env is not None and not env.failed and env.record is not None:
            traced = traced_fields(env.record, t.text if t is not None else "", probed.spans)
            detail["silence_probe_fields"] = _dumps(traced)
        if gold is not None and env is not None and not env.failed:
            found = item_safety(env.record, clean_rec, gold)
            detail["safety"] = found
            safety = safety_scores(found)  # every safety field, the invariance ones included
            if c.is_clean:  # ErrProp is not defined for the reference row
                asr = revise(asr, asr_delta_e=None) if asr is not None else AsrScores(asr_delta_e=None)
            if judge_backend == "rules":
                jr = rule_judge(env.record, gold)
                judged = jr.scores()
                detail["judge_reasons"] = list(jr.reasons)
        item = ItemScore.compose(
            asr,
            triggers,
            guard,
            safety,
            judged,
            probe_scores(probed, twin, traced),
            encounter_id=eid,
            condition=cond,
            family=c.family,
            snr_db=c.snr_db,
            mitigated=c.mitigated,
            target_snr_db=mix.target_snr_db if mix else None,
            measured_snr_db=mix.measured_snr_db if mix else None,
            reference_text=ref,
            hypothesis_text=t.text if t else None,
            audio_path=str(audio) if audio else None,
            # The full noise recipe (every babble sentence and pause) lives in manifest.json.
            mix=revise(mix, unset=("noise_recipe",)) if mix else None,
            transcript_path=f"transcripts/{base_cond}/{eid}.json" if t else None,
            record_path=f"records/{cond}/{eid}.json" if env else None,
            scores_path=f"scores/{cond}/{eid}.json",
            failed=error is not None,
            error=error,
        )
        out.append(ScoredItem(row=item, detail=detail))
    return out


@dataclass(frozen=True)
class ScoreInputs:
    """Everything the score stage reads, passed in explicitly (the stage never sees the runner).

    Mappings are keyed by ``encounter_id`` or ``(encounter_id, condition)``;
    ``failures`` maps a failed ``(encounter_id, condition)`` to ``"stage: reason"``
    (a guard row's base failure included, see ``FailureLedger.failed``).
    """

    out: Path
    grid: ConditionGrid
    encounters: Mapping[str, Encounter]
    gold: Mapping[str, GoldRecord]
    audio: Mapping[Key, Path]
    mix: Mapping[Key, MixInfo]
    transcripts: Mapping[Key, Transcript]
    records: Mapping[Key, RecordEnvelope]
    failures: Mapping[Key, str]
    judge_backend: str
    structure: LLMConfig
    engine: LLMEngine | None = None  # the run's LLM engine (LLM judge, note-quality judges); None for 'rules'

    def per_encounter(self) -> dict[str, EncounterOutputs]:
        """The outputs of every encounter, one :class:`ConditionOutputs` per condition of the grid."""
        found = {(eid, c.id): ConditionOutputs() for eid in self.encounters for c in self.grid}
        for k, t in self.transcripts.items():
            if k in found:
                found[k] = replace(found[k], transcript=t)
        for k, env in self.records.items():
            if k in found:
                found[k] = replace(found[k], record=env)
        for k, mix in self.mix.items():
            if k in found:
                found[k] = replace(found[k], mix=mix)
        for k, path in self.audio.items():
            if k in found:
                found[k] = replace(found[k], audio=str(path))
        for k, why in self.failures.items():
            if k in found:
                found[k] = replace(found[k], failure=why)
        return {
            eid: EncounterOutputs(
                encounter=enc, gold=self.gold.get(eid), conditions={c.id: found[(eid, c.id)] for c in self.grid}
            )
            for eid, enc in self.encounters.items()
        }


def _twin_words(
    x: EncounterOutputs, grid: ConditionGrid, cond: str, ref: str, mix: MixInfo | None, detail: dict[str, Any]
) -> tuple[str, int] | None:
    """``(probe_twin, probe_words_twin)``: the words the same chain without its silence step wrote at the
    probed pauses (the same turn boundaries), when the grid has that twin and it has a transcript."""
    twin = grid.probe_twin(cond)
    probes = probe_stretches(mix)
    t = x.conditions[twin.id].transcript if twin is not None else None
    if twin is None or t is None or probes is None:
        return None
    pw = probe_words(align(ref, t.text), x.encounter.turns, probes)
    if not pw.mapped:
        return None
    detail["twin"] = {"condition": twin.id, **{k: v for k, v in probe_detail(pw).items() if k != "seconds"}}
    return twin.id, pw.words


def load_gold_for(encounter_ids: list[str], cfg: GoldConfig) -> dict[str, GoldRecord]:
    """Gold records for the given encounters (shipped set unless ``gold.path`` is set)."""
    from stresstest.gold.model import default_gold_dir, load_gold

    root = Path(cfg.path) if cfg.path else default_gold_dir()
    gold = load_gold(root) if root.exists() else {}
    missing = [e for e in encounter_ids if e not in gold]
    if cfg.required and missing:
        raise GoldError(
            f"{root}: no gold reference for {len(missing)} encounter(s): {', '.join(missing[:5])}"
            + (" ..." if len(missing) > 5 else "")
            + " (gold.required is true)"
        )
    return {e: gold[e] for e in encounter_ids if e in gold}


def score_items(
    inputs: ScoreInputs, cache: Path, *, executor: Any = None, progress: Callable[[int], None] | None = None
) -> list[ItemScore]:
    """One validated row per (encounter, condition) of the grid, failed ones included.

    Encounters are scored independently (:func:`score_encounter`), through
    ``executor`` when given (a :class:`~stresstest.pipeline.executor.Executor`);
    the audit detail of each item is written to ``scores/<condition>/<id>.json``
    and the LLM judge (when configured) runs once over all items afterwards. ``progress(n)`` is called
    with each encounter's item count as it is scored.
    """
    eids = sorted(inputs.encounters)
    outputs = inputs.per_encounter()
    per_enc = [outputs[e] for e in eids]

    def done(i: int, scored: list[ScoredItem]) -> None:
        if progress is not None:
            progress(len(scored))

    if executor is None:
        results = []
        for i, x in enumerate(per_enc):
            results.append(score_encounter(x, inputs.grid, inputs.judge_backend))
            done(i, results[-1])
    else:
        results = executor.map_tasks("score", _score_task, (inputs.grid, inputs.judge_backend), per_enc, on_result=done)
    rows: list[ItemScore] = []
    llm_pairs: list[tuple[int, RecordEnvelope, GoldRecord]] = []
    for x, scored in zip(per_enc, results, strict=True):
        for it in scored:
            cond = it.row.condition
            env = x.conditions[cond].record
            if inputs.judge_backend == "llm" and x.gold is not None and env is not None and not env.failed:
                llm_pairs.append((len(rows), env, x.gold))
            atomic_write_json(id_path(inputs.out, "scores", cond, x.encounter.encounter_id, suffix=".json"), it.detail)
            rows.append(it.row)
    if llm_pairs:
        rows = _llm_judge(inputs, cache, rows, llm_pairs)
    return rows


def judge_note_quality(
    state: ScoreInputs, rows: Sequence[ItemScore], config: NoteQualityConfig, cache: Path
) -> tuple[list[ItemScore], dict[str, Any]]:
    """docs/spec.md §8 note-quality judges over every item row with a record.

    Returns:
        The rows with their note-quality fields set (copies; ``rows`` is not changed) and the manifest entry
        (see :func:`stresstest.metrics.quality_stage.score_note_quality`).
    """
    items = []
    for k, row in enumerate(rows):
        env = state.records.get(row.key)
        if row.failed or env is None or env.failed or env.record is None or row.hypothesis_text is None:
            continue
        items.append(
            QualityItem(
                k,
                row.encounter_id,
                row.condition,
                env.record,
                row.hypothesis_text,
                row.reference_text or "",
                state.gold.get(row.encounter_id),
            )
        )
    with open_session(state.structure, cache_dir=cache, log_dir=state.out / "logs", engine=state.engine) as session:
        updates, manifest = score_note_quality(items, state.grid, config, session, state.out)
    return [row.revise(updates[k]) if k in updates else row for k, row in enumerate(rows)], manifest


def _score_task(ctx: tuple[ConditionGrid, str], x: EncounterOutputs) -> list[ScoredItem]:
    grid, judge_backend = ctx
    return score_encounter(x, grid, judge_backend)


def _llm_judge(
    inputs: ScoreInputs, cache: Path, rows: list[ItemScore], pairs: list[tuple[int, RecordEnvelope, GoldRecord]]
) -> list[ItemScore]:
    results = llm_judge_many(
        [
            (f"{rows[i].encounter_id}/{rows[i].condition}", _record_json(env), gold.model_dump_json())
            for i, env, gold in pairs
        ],
        inputs.structure,
        cache_dir=cache,
        log_dir=inputs.out / "logs",
        engine=inputs.engine,
    )
    out = list(rows)
    for (i, _, _), jr in zip(pairs, results, strict=True):
        if jr is not None:
            out[i] = out[i].revise(jr.scores())
    return out


def _record_json(env: RecordEnvelope) -> str:
    assert env.record is not None  # only records that did not fail are judged
    return env.record.model_dump_json()


def extra_summary_columns(items: Sequence[ItemScore], rows: Sequence[SummaryRow]) -> list[SummaryRow]:
    """The rows with their columns after the docs/spec.md §10 ones (copies; ``rows`` are not changed).

    ``trig_<type>``: % of items with ≥ 1 trigger event of that type (vs the human
    reference). ``abstention_rate`` (mitigated rows): :func:`~stresstest.metrics.summary.abstention`
    over the condition's items; ``quotes_discarded``: total quotes the evidence filter dropped.
    """
    out = []
    for r in rows:
        its = [it for it in items if it.condition == r.condition]
        mit = [it for it in its if it.mitigated and not it.failed]
        out.append(
            revise(
                r,
                triggers=TriggerRates.model_validate({t: trigger_rate(its, t) for t in TRIGGER_TYPES}),
                abstention_rate=abstention(mit).rate_pct,
                quotes_discarded=sum(int(it.quotes_discarded or 0) for it in mit) if mit else None,
            )
        )
    return out
