"""What a run writes for other tools to read: item rows, failures and the manifest.

* :class:`ItemScore` — one row of ``items.jsonl`` per (encounter, condition),
  failed items included. A field that was not computed for an item is absent
  from its row (or None); :mod:`stresstest.metrics.summary` leaves such items
  out of that metric, never counts them as zero. Rows are written with
  :meth:`ItemScore.to_row` (only the fields that were set), so adding a field
  here never changes the bytes of rows that do not set it. An item is composed of
  its own fields and typed parts (:data:`SCORE_PARTS`), each made and validated by
  the metric that owns it; the row is their flat view, and an item is changed only
  with :meth:`ItemScore.revise`.
* :class:`FailureRecord` — one failed (stage, encounter, condition) with its reason.
* :class:`RunManifest` — ``manifest.json``: versions, seeds, grid, noise choices,
  failures, stage times; the sections the report reads are models of their own
  (:class:`CorpusInfo`, :class:`AsrInfo`, :class:`StructureInfo`, :class:`SpeechInfo`,
  :class:`PairingInfo`, :class:`NoteQualityInfo`). It carries ``schema_version`` (of the manifest) and
  ``items_schema_version`` (of the ``items.jsonl`` rows; rows do not repeat it so
  that they stay byte-stable across releases that do not change them).

:func:`read_run` reads a whole run directory back into these models (:class:`RunDir`; every file is
described in docs/run-format.md); the report, ``compare`` and users' own tools read a run through it, and
unknown keys are errors there, so a writer and its reader cannot drift apart silently.
A manifest of an older schema is migrated by :func:`migrate_manifest`, which says
what it did; a newer one is refused.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from stresstest.cache import read_jsonl
from stresstest.errors import RunDirError
from stresstest.grid import Condition, ConditionGrid
from stresstest.records import MixInfo, Transcript, revise
from stresstest.schema import AsWritten, RecordEnvelope
from stresstest.schema import RecordExtra as RecordExtra  # re-exported

#: Version of the item-row schema (bump when a field changes meaning or type).
ITEM_SCHEMA_VERSION = 1
#: Version of the manifest schema. 2: conditions carry ``base``; ``items_schema_version``; ``executor``.
#: 3: the sections the report reads (corpus, asr, structure, speech, pairing, note_quality) are typed models
#: (same JSON as 2; see :func:`migrate_manifest`).
MANIFEST_SCHEMA_VERSION = 3

Num = int | float  # kept apart so a value is written back exactly as it was computed (3 stays 3, 3.0 stays 3.0)

TriggerType = Literal[
    "negation_flip",
    "number_unit_conflict",
    "temporal_distortion",
    "nonspeech_pollution",
    "entity_substitution",
    "clinical_omission",
]
#: The six trigger types, in the order reports list them (read off the Literal: one place for the list).
TRIGGER_TYPES: tuple[TriggerType, ...] = get_args(TriggerType)


#: The report's folders, relative to the run directory: each must stay inside it (``ids.confined_path``).
REPORT_DIRS: tuple[tuple[str, ...], ...] = (
    ("report",),
    ("report", "plots"),
    ("report", "tables"),
    ("report", "items"),
    ("report", "items", "audio"),
)


class TriggerEvent(BaseModel):
    """One typed cause-side distortion with quotes of both texts.

    Attributes:
        type: one of :data:`TRIGGER_TYPES`.
        ref_span: quote of the reference (original text).
        hyp_span: quote of the hypothesis (original text).
        explanation: one sentence saying what changed.
        ref_start, ref_end: character offsets of ``ref_span`` in the reference.
        hyp_start, hyp_end: character offsets of ``hyp_span`` in the hypothesis.
        concept: the clinical concept involved (lexicon concept, generic drug,
            ``laterality``, a canonical unit...), or None when there is none.
    """

    model_config = ConfigDict(frozen=True)

    type: TriggerType
    ref_span: str
    hyp_span: str
    explanation: str
    ref_start: int
    ref_end: int
    hyp_start: int
    hyp_end: int
    concept: str | None = None
    weight: float = 1.0

    @model_validator(mode="after")
    def _whole(self) -> TriggerEvent:
        # An event is written whole (defaults included) however a detector made it, so a row that carries
        # events (``triggers_vs_clean``, dumped with exclude_unset) has the same keys for every event.
        object.__setattr__(self, "__pydantic_fields_set__", set(type(self).model_fields))
        return self


#: A manifest section: the keys the report reads are typed; any other key is kept as written (see
#: :class:`stresstest.schema.AsWritten`).
_Section = AsWritten


class TriggerCounts(BaseModel):
    """``trigger_counts``: trigger events vs the human reference, one count per :data:`TRIGGER_TYPES` type.

    The fields are the members of :data:`TriggerType` (checked below), so a new type is a new field.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    negation_flip: int = 0
    number_unit_conflict: int = 0
    temporal_distortion: int = 0
    nonspeech_pollution: int = 0
    entity_substitution: int = 0
    clinical_omission: int = 0

    def count(self, ttype: TriggerType) -> int:
        """The number of ``ttype`` events."""
        n: int = getattr(self, ttype)
        return n


if tuple(TriggerCounts.model_fields) != TRIGGER_TYPES:  # pragma: no cover - a definition error
    raise TypeError("TriggerCounts must have one field per TriggerType, in its order")


PairSide = Literal["win", "tie", "loss"]


class ItemPairwise(BaseModel):
    """``pairwise``: this item's note against the same encounter's note of a baseline condition (docs/spec.md §8)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vs: str = Field(description="The baseline condition.")
    outcomes: dict[str, PairSide] | None = Field(default=None, description="dimension -> win|tie|loss (None: failed).")
    consistent: int | None = Field(default=None, description="Dimensions on which both presentation orders agreed.")
    identical: bool | None = Field(default=None, description="The two notes were identical (no judge call).")
    failed: bool | None = Field(default=None, description="The judge call failed.")


class JudgeInfo(_Section):
    """An item's judge written as an object (``{model, ...}``) rather than an id."""

    model: str | None = None


class ProbeField(BaseModel):
    """A record field traced to a silence probe: its evidence quote lies in words the ASR wrote inside an
    inserted stretch of non-speech (:mod:`stresstest.metrics.silence`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field_id: str = Field(description="The field's id in the record ('c3', 'f1', 'triage').")
    kind: Literal["claim", "flag", "triage"]
    name: str = Field(description="The claim's concept, the flag's name or the triage level.")
    quote: str = Field(description="The evidence quote found inside the stretch's words.")


class _Part(BaseModel):
    """A part of an item's scores: the ``items.jsonl`` fields one metric owns, validated when the metric makes it.

    A field the metric did not compute for the item is left unset (absent from the row); one it computed as
    "not defined" is set to None (written as null), exactly as the flat row has it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def fields(self) -> dict[str, Any]:
        """The fields that were set, as values (what the part contributes to the flat row)."""
        return {k: getattr(self, k) for k in type(self).model_fields if k in self.model_fields_set}


class AsrScores(_Part):
    """ASR errors (docs/spec.md §6: WER, InsRate, ErrProp denominator; :mod:`stresstest.metrics.wer`) and the counts a
    clinician reads (:mod:`stresstest.metrics.split_wer`), all on the one alignment of r_i and the hypothesis."""

    asr_sub: int | None = None
    asr_del: int | None = None
    asr_ins: int | None = None
    ref_words: int | None = Field(default=None, description="N_i, words in the normalised reference.")
    item_wer: Num | None = Field(default=None, description="100·(S+D+I)/N_i of this item.")
    asr_delta_e: int | None = Field(default=None, description="ΔE_i = max(0, E^(c) − E^(0)); None on clean.")
    clin_words: int | None = Field(default=None, description="Reference tokens inside a clinical term.")
    clin_errors: int | None = Field(default=None, description="Of those, substituted or deleted.")
    ref_words_clinician: int | None = Field(default=None, description="Reference tokens of doctor turns.")
    errors_clinician: int | None = Field(default=None, description="S+D+I attributed to doctor turns.")
    clin_words_clinician: int | None = Field(default=None, description="Clinical tokens of doctor turns.")
    clin_errors_clinician: int | None = Field(default=None, description="Of those, substituted or deleted.")
    ref_words_patient: int | None = Field(default=None, description="Reference tokens of patient turns.")
    errors_patient: int | None = Field(default=None, description="S+D+I attributed to patient turns.")
    clin_words_patient: int | None = Field(default=None, description="Clinical tokens of patient turns.")
    clin_errors_patient: int | None = Field(default=None, description="Of those, substituted or deleted.")


class TriggerScores(_Part):
    """The cause side (:mod:`stresstest.metrics.negation`, :mod:`stresstest.metrics.triggers`)."""

    neg_err: int | None = Field(default=None, description="0/1 negation mismatch vs r_i.")
    trigger_counts: TriggerCounts | None = Field(default=None, description="Trigger events vs r_i, by type.")
    triggers_vs_clean: list[TriggerEvent] | None = Field(default=None, description="Events vs the clean ASR.")


class GuardScores(_Part):
    """The record's backend facts and the guard's counts (:mod:`stresstest.mitigation`), read off its envelope."""

    extra: RecordExtra | None = Field(default=None, description="Backend facts of the record (guard counts...).")
    abstention_rate: Num | None = None
    quotes_discarded: int | None = None
    fields_nulled: int | None = None
    fields_total: int | None = None

    @classmethod
    def of_envelope(cls, extra: RecordExtra) -> GuardScores:
        """The part of a record envelope's ``extra``: the facts (None when empty) and the guard's counts it has."""
        counts = {
            k: getattr(extra, k)
            for k in ("abstention_rate", "quotes_discarded", "fields_nulled", "fields_total")
            if k in extra.model_fields_set
        }
        return cls(extra=extra if extra.model_fields_set else None, **counts)


class SafetyScores(_Part):
    """The effect side (docs/spec.md §6 safety; :mod:`stresstest.metrics.safety`)."""

    triage: str | None = None
    triage_clean: str | None = None
    triage_gold: str | None = None
    triage_match: int | None = None
    under_triage_new: int | None = None
    scer_new: int | None = None
    new_critical_flags: list[str] | None = None
    err_new: int | None = None


class JudgeScores(_Part):
    """The judge's 1–5 score (:mod:`stresstest.metrics.judge_rules`, :mod:`stresstest.metrics.judge_llm`)."""

    judge_score: Num | None = None
    judge: str | JudgeInfo | None = Field(default=None, description="Judge id (or {model, ...}).")


class NoteQualityScores(_Part):
    """Note quality (docs/spec.md §8; :mod:`stresstest.metrics.quality_stage`): percent per item, absent when not
    computed."""

    completeness: Num | None = Field(default=None, description="Entailment of the gold statements by the record.")
    conciseness: Num | None = Field(default=None, description="Entailment of the record's statements by gold.")
    groundedness: Num | None = Field(default=None, description="Entailment of the record's statements by x(c).")
    halluc_lexical: Num | None = Field(default=None, description="% statements a literal judge calls unsupported.")
    halluc_inference: Num | None = Field(default=None, description="% unsupported under the inference-aware judge.")
    pairwise: ItemPairwise | None = Field(
        default=None, description="Against a baseline condition's note (docs/spec.md §8)."
    )
    quality_path: str | None = Field(default=None, description="quality/<condition>/<encounter>.json (verdicts).")
    quality_errors: list[str] | None = Field(default=None, description="Failed judge calls ('measure: reason').")


class ProbeScores(_Part):
    """Silence probes (:mod:`stresstest.metrics.silence`)."""

    probe_s: Num | None = Field(default=None, description="Seconds of non-speech inserted by a silence step.")
    probe_words: int | None = Field(default=None, description="ASR words attributed to the inserted stretches.")
    probe_fields: list[ProbeField] | None = Field(
        default=None, description="Record fields whose evidence lies in those words."
    )
    probe_twin: str | None = Field(default=None, description="The same chain without its silence step (baseline).")
    probe_words_twin: int | None = Field(default=None, description="ASR words the twin wrote at the same pauses.")


ScorePart = AsrScores | TriggerScores | GuardScores | SafetyScores | JudgeScores | NoteQualityScores | ProbeScores
#: The parts an item is composed of, in the order :meth:`ItemScore.compose` applies them.
SCORE_PARTS: tuple[type[_Part], ...] = (
    AsrScores,
    TriggerScores,
    GuardScores,
    SafetyScores,
    JudgeScores,
    NoteQualityScores,
    ProbeScores,
)
P = TypeVar("P", bound=_Part)


class ItemScore(BaseModel):
    """One ``items.jsonl`` row: an (encounter, condition) with its provenance and item-level metrics.

    Only ``encounter_id`` and ``condition`` are required; every other field is
    absent when the stage that computes it did not run for this item.

    The metrics are the fields of the item's parts (:data:`SCORE_PARTS`: ASR errors, triggers, guard, safety
    endpoints, judge, note quality, probe), each made and validated by the metric that owns it; the item's own
    fields are its identity, provenance, outcome and pairing (:data:`ITEM_OWN_FIELDS`). The flat fields below
    are the ``items.jsonl`` view of both (checked after the class: every field belongs to exactly one of them,
    with the same type). An item is made with :meth:`compose` and changed only with :meth:`revise`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # identity and grid (docs/spec.md §10)
    encounter_id: str
    condition: str
    family: str | None = Field(default=None, description="'clean' or the noise family.")
    snr_db: float | None = Field(default=None, description="The condition's target SNR (None for clean).")
    mitigated: bool | None = Field(default=None, description="A guard row.")
    target_snr_db: float | None = Field(default=None, description="Target SNR of this item's mixture.")
    measured_snr_db: float | None = Field(default=None, description="SNR measured back from the written files.")
    # texts and artefacts
    reference_text: str | None = Field(default=None, description="Human reference transcript r_i.")
    hypothesis_text: str | None = Field(default=None, description="ASR transcript of the base condition.")
    audio_path: str | None = None
    mix: MixInfo | None = Field(
        default=None, description="The mixture facts without the noise recipe (in the manifest)."
    )
    transcript_path: str | None = None
    record_path: str | None = None
    scores_path: str | None = None
    # outcome
    failed: bool | None = Field(default=None, description="True when some stage failed for this item.")
    error: str | None = Field(default=None, description="'stage: reason' of the first failure.")
    paired: bool | None = Field(default=None, description="In the paired comparison (docs/spec.md §11 pairing rule).")
    unpaired_reason: str | None = Field(default=None, description="Why a non-failed item left the pairing.")
    # ASR (docs/spec.md §6: WER, InsRate, ErrProp denominator)
    asr_sub: int | None = None
    asr_del: int | None = None
    asr_ins: int | None = None
    ref_words: int | None = Field(default=None, description="N_i, words in the normalised reference.")
    item_wer: Num | None = Field(default=None, description="100·(S+D+I)/N_i of this item.")
    asr_delta_e: int | None = Field(default=None, description="ΔE_i = max(0, E^(c) − E^(0)); None on clean.")
    # error rates a clinician reads (stresstest.metrics.split_wer): counts on the same alignment as WER
    clin_words: int | None = Field(default=None, description="Reference tokens inside a clinical term.")
    clin_errors: int | None = Field(default=None, description="Of those, substituted or deleted.")
    ref_words_clinician: int | None = Field(default=None, description="Reference tokens of doctor turns.")
    errors_clinician: int | None = Field(default=None, description="S+D+I attributed to doctor turns.")
    clin_words_clinician: int | None = Field(default=None, description="Clinical tokens of doctor turns.")
    clin_errors_clinician: int | None = Field(default=None, description="Of those, substituted or deleted.")
    ref_words_patient: int | None = Field(default=None, description="Reference tokens of patient turns.")
    errors_patient: int | None = Field(default=None, description="S+D+I attributed to patient turns.")
    clin_words_patient: int | None = Field(default=None, description="Clinical tokens of patient turns.")
    clin_errors_patient: int | None = Field(default=None, description="Of those, substituted or deleted.")
    # cause side
    neg_err: int | None = Field(default=None, description="0/1 negation mismatch vs r_i.")
    trigger_counts: TriggerCounts | None = Field(default=None, description="Trigger events vs r_i, by type.")
    triggers_vs_clean: list[TriggerEvent] | None = Field(default=None, description="Events vs the clean ASR.")
    # structuring / mitigation
    extra: RecordExtra | None = Field(default=None, description="Backend facts of the record (guard counts...).")
    abstention_rate: Num | None = None
    quotes_discarded: int | None = None
    fields_nulled: int | None = None
    fields_total: int | None = None
    # effect side (docs/spec.md §6 safety)
    triage: str | None = None
    triage_clean: str | None = None
    triage_gold: str | None = None
    triage_match: int | None = None
    under_triage_new: int | None = None
    scer_new: int | None = None
    new_critical_flags: list[str] | None = None
    err_new: int | None = None
    judge_score: Num | None = None
    judge: str | JudgeInfo | None = Field(default=None, description="Judge id (or {model, ...}).")
    # note quality (docs/spec.md §8; stresstest.metrics.quality_stage): percent per item, absent when not computed
    completeness: Num | None = Field(default=None, description="Entailment of the gold statements by the record.")
    conciseness: Num | None = Field(default=None, description="Entailment of the record's statements by gold.")
    groundedness: Num | None = Field(default=None, description="Entailment of the record's statements by x(c).")
    halluc_lexical: Num | None = Field(default=None, description="% statements a literal judge calls unsupported.")
    halluc_inference: Num | None = Field(default=None, description="% unsupported under the inference-aware judge.")
    pairwise: ItemPairwise | None = Field(
        default=None, description="Against a baseline condition's note (docs/spec.md §8)."
    )
    probe_s: Num | None = Field(default=None, description="Seconds of non-speech inserted by a silence step.")
    probe_words: int | None = Field(default=None, description="ASR words attributed to the inserted stretches.")
    probe_fields: list[ProbeField] | None = Field(
        default=None, description="Record fields whose evidence lies in those words."
    )
    probe_twin: str | None = Field(default=None, description="The same chain without its silence step (baseline).")
    probe_words_twin: int | None = Field(default=None, description="ASR words the twin wrote at the same pauses.")
    quality_path: str | None = Field(default=None, description="quality/<condition>/<encounter>.json (verdicts).")
    quality_errors: list[str] | None = Field(default=None, description="Failed judge calls ('measure: reason').")

    def to_row(self) -> dict[str, Any]:
        """The ``items.jsonl`` form: the fields that were set, JSON-ready."""
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def compose(cls, *parts: ScorePart | None, **own: Any) -> ItemScore:
        """The item of its own fields (identity, provenance, outcome: :data:`ITEM_OWN_FIELDS`) and its parts.

        A part's fields that were set are the item's (None parts are skipped); a later part of the same kind
        overrides an earlier one field by field. The item is validated as a whole.

        Raises:
            ValueError: ``own`` names a field that is not the item's own (a metric belongs to its part), or a
                value is refused.
        """
        stray = sorted(set(own) - set(ITEM_OWN_FIELDS))
        if stray:
            raise ValueError(f"ItemScore.compose: {', '.join(stray)} belong to a part, not to the item itself")
        data = dict(own)
        for part in parts:
            if part is not None:
                data.update(part.fields())
        return cls.model_validate(data)

    def revise(self, *parts: ScorePart, unset: Iterable[str] = (), **changes: Any) -> ItemScore:
        """A validated copy with the parts' set fields and ``changes`` applied and ``unset`` fields absent again.

        The only way an item is changed (:func:`stresstest.records.revise` underneath): an unknown field, or a
        value the item refuses, raises :class:`ValueError` here.
        """
        merged: dict[str, Any] = {}
        for part in parts:
            merged.update(part.fields())
        merged.update(changes)
        return revise(self, unset=unset, **merged)

    def part(self, kind: type[P]) -> P | None:
        """The item's ``kind`` part, read back from its fields; None when none of them is set."""
        got = {k: getattr(self, k) for k in kind.model_fields if k in self.model_fields_set}
        return kind.model_validate(got) if got else None

    @property
    def asr(self) -> AsrScores | None:
        """ASR errors."""
        return self.part(AsrScores)

    @property
    def triggers(self) -> TriggerScores | None:
        """Negation mismatch and trigger events."""
        return self.part(TriggerScores)

    @property
    def guard(self) -> GuardScores | None:
        """The record's backend facts and the guard's counts."""
        return self.part(GuardScores)

    @property
    def safety(self) -> SafetyScores | None:
        """Safety endpoints."""
        return self.part(SafetyScores)

    @property
    def judged(self) -> JudgeScores | None:
        """The judge's score (``judge`` is the judge's id field)."""
        return self.part(JudgeScores)

    @property
    def note_quality(self) -> NoteQualityScores | None:
        """Note quality."""
        return self.part(NoteQualityScores)

    @property
    def probe(self) -> ProbeScores | None:
        """Silence probes."""
        return self.part(ProbeScores)

    @property
    def failed_stage(self) -> str | None:
        """The stage named in ``error`` ('stage: reason') of a failed item; None otherwise."""
        if not self.failed or not self.error or ":" not in self.error:
            return None
        return self.error.split(":", 1)[0].strip() or None

    @property
    def key(self) -> tuple[str, str]:
        """(encounter_id, condition)."""
        return self.encounter_id, self.condition


#: The item's own fields: identity, grid, texts and artefacts, outcome, pairing (no metric owns them).
ITEM_OWN_FIELDS: tuple[str, ...] = (
    "encounter_id",
    "condition",
    "family",
    "snr_db",
    "mitigated",
    "target_snr_db",
    "measured_snr_db",
    "reference_text",
    "hypothesis_text",
    "audio_path",
    "mix",
    "transcript_path",
    "record_path",
    "scores_path",
    "failed",
    "error",
    "paired",
    "unpaired_reason",
)


def _check_parts() -> None:
    """The flat fields are exactly the own fields and the parts' fields, each once, with the part's type."""
    owner: dict[str, str] = dict.fromkeys(ITEM_OWN_FIELDS, "ItemScore")
    for part in SCORE_PARTS:
        for name, f in part.model_fields.items():
            if name in owner:
                raise TypeError(f"{part.__name__}.{name} is also a field of {owner[name]}")
            flat = ItemScore.model_fields.get(name)
            if flat is None or flat.annotation != f.annotation:
                raise TypeError(f"{part.__name__}.{name} has no ItemScore field of its type")
            owner[name] = part.__name__
    if set(owner) != set(ItemScore.model_fields):
        raise TypeError(f"ItemScore fields without an owner: {sorted(set(ItemScore.model_fields) - set(owner))}")


_check_parts()


class FailureRecord(BaseModel):
    """One failed item at one stage (counted against ``run.max_failures``, never dropped)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    encounter_id: str
    condition: str
    stage: str = Field(description="speech, mix, asr, structure, score...")
    error: str = Field(description="One-line reason.")


class CorpusInfo(_Section):
    """``corpus``: which corpus and which encounters."""

    kind: str | None = None
    path: str | None = None
    n_encounters: int | None = None
    encounter_ids: list[str] = Field(default_factory=list)


class AsrInfo(_Section):
    """``asr``: the configured backend and model, its decoding options, and the models that ran."""

    backend: str | None = None
    model: str | None = None
    decoding: dict[str, Any] | None = None
    models_used: list[str] = Field(default_factory=list)


class StructureInfo(_Section):
    """``structure``: the structuring backend's fingerprint (backend-specific keys kept as written)."""

    backend: str | None = None
    model: str | None = None
    decoding: dict[str, Any] | None = None
    prompt_hash: str | None = None
    schema_hash: str | None = None
    error: str | None = Field(default=None, description="Why the stage could not describe itself.")


class NoiseInfo(_Section):
    """``noise[family]``: where a family's noise came from (a :class:`stresstest.noise.factory.NoiseSpec` dump)."""

    family: str | None = None
    kind: str | None = Field(default=None, description="builtin, demand, musan.")
    root: str | None = None
    subsets: list[str] | None = Field(default=None, description="Corpus subsets drawn from.")
    ambient_recipes: list[str] | None = Field(default=None, description="Built-in ambient recipes.")
    n_talkers_min: int | None = None
    n_talkers_max: int | None = None
    # Older manifests described a corpus source with these keys.
    corpus: Any = None
    source: Any = None
    generator: Any = None


class SpeechRecipe(_Section):
    """How an encounter's speech was made; ``warnings`` are what the speech stage noted about its inputs."""

    warnings: list[str] = Field(default_factory=list)


class SpeechInfo(_Section):
    """``speech[encounter_id]``: the clean recording of one encounter."""

    duration_s: Num | None = None
    segments_source: str | None = None
    recipe: SpeechRecipe | None = None


class PairingInfo(_Section):
    """``pairing``: docs/spec.md §11 coverage (see :class:`stresstest.pipeline.pairing.Pairing`)."""

    rule: str | None = None
    n_encounters: int | None = None
    n_paired: int | None = None
    n_dropped: int | None = None
    dropped: dict[str, list[str]] = Field(default_factory=dict, description="encounter -> failures that dropped it.")


class CalibrationCheck(_Section):
    """One judge calibration check: a control case with known acceptable answers."""

    check: str | None = None
    expected: list[Any] = Field(default_factory=list)
    got: Any = None
    passed: bool | None = None


class Calibration(_Section):
    """The judge's calibration on the built-in control (:func:`stresstest.metrics.quality_stage.calibrate`)."""

    passed: bool | None = None
    checks: list[CalibrationCheck] = Field(default_factory=list)


class NoteQualityInfo(_Section):
    """``note_quality``: the docs/spec.md §8 judges of the run (see :mod:`stresstest.metrics.quality_stage`)."""

    judge_model: str | None = None
    prompts: dict[str, Any] = Field(default_factory=dict)
    calibration: Calibration | None = None
    adequate: bool | None = None
    adequacy: str | None = None
    n_failures: int | None = None


class Invocation(_Section):
    """One invocation of ``stresstest run`` on the run directory (``invocations[i]``)."""

    started: str | None = Field(default=None, description="Local ISO time the invocation started.")
    seconds: Num | None = Field(default=None, description="Its wall seconds (how far a killed one got).")
    completed: bool | None = Field(default=None, description="True when it finished the run.")


class RunManifest(BaseModel):
    """``manifest.json``: everything needed to know how a run was made.

    Every field has a default so that partial or older manifests still read back
    (their ``schema_version`` says which fields to expect); unknown keys are errors.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(default=1, description="Manifest schema (see MANIFEST_SCHEMA_VERSION).")
    items_schema_version: int = Field(default=ITEM_SCHEMA_VERSION, description="Schema of items.jsonl rows.")
    run_id: str | None = None
    created: str | None = Field(default=None, description="UTC ISO time the manifest was written.")
    stresstest_version: str | None = None
    python: str | None = None
    seed: int | None = None
    corpus: CorpusInfo = Field(default_factory=CorpusInfo)
    asr: AsrInfo = Field(default_factory=AsrInfo)
    structure: StructureInfo = Field(default_factory=StructureInfo)
    judge: str | dict[str, Any] | None = None
    llm_engines: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The run's LLM engine(s): engine, model, revision, started_at, ready_s, roles, phi_sent, "
        "server_args / engine_kwargs, log, gpu_memory (stresstest.llm.engine.LLMEngine.info).",
    )
    asr_released_at: str | None = Field(
        default=None, description="UTC time the ASR model was released, before any LLM engine started."
    )
    executor: dict[str, Any] = Field(default_factory=dict, description="How the stage tasks ran (kind, workers).")
    environment: dict[str, Any] = Field(
        default_factory=dict,
        description="What produced the numbers besides the config: CPU model and the "
        "instruction set the engines dispatch to, GPU / driver / CUDA / cuBLAS, engine package versions "
        "(stresstest.provenance; empty in manifests written before it).",
    )
    conditions: list[Condition] = Field(default_factory=list, description="The grid, in order.")
    noise: dict[str, NoiseInfo | str] = Field(default_factory=dict, description="Noise source per family.")
    mixtures: list[dict[str, Any]] = Field(default_factory=list, description="Per-item MixInfo (with recipes).")
    speech: dict[str, SpeechInfo] = Field(default_factory=dict)
    failures: list[FailureRecord] = Field(default_factory=list)
    n_failures: int | None = None
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    invocations: list[Invocation] = Field(default_factory=list, description="Wall time of each invocation.")
    completed: bool | None = Field(default=None, description="True once the run finished (report included).")
    pairing: PairingInfo | None = Field(
        default=None, description="docs/spec.md §11 coverage: paired/dropped encounters."
    )
    cache_rejected: dict[str, int] = Field(
        default_factory=dict,
        description="Cache entries this invocation read and refused (damaged, or the answer "
        "to another question), by reason; each was recomputed and warned about (stresstest.cache.REJECTED).",
    )
    note_quality: NoteQualityInfo | None = Field(
        default=None,
        description="docs/spec.md §8 judges: model, prompt/ontology hashes, calibration, adequacy, failures.",
    )

    def to_json(self) -> dict[str, Any]:
        """The ``manifest.json`` form (conditions with their ``condition`` key)."""
        return self.model_dump(mode="json", by_alias=True)


def read_manifest(path: Path) -> RunManifest | None:
    """The ``manifest.json`` at ``path`` as a (migrated) :class:`RunManifest`; None when it is missing or unreadable.

    For the run directory's own housekeeping (ownership, carried-over wall time), which treats a manifest it cannot
    read as no manifest; :func:`read_run` says why instead.
    """
    try:
        raw = json.loads(path.read_text("utf-8"))
        if not isinstance(raw, dict):
            return None
        return RunManifest.model_validate(migrate_manifest(raw)[0])
    except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
        return None


def migrate_manifest(raw: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Bring a ``manifest.json`` of an older schema to :data:`MANIFEST_SCHEMA_VERSION`.

    Returns:
        The manifest to validate as :class:`RunManifest`, and a sentence saying what was migrated (None when
        the manifest is already current). Versions 1 and 2 wrote the same JSON for every section that 3 types,
        so their data is kept; a version 1 manifest has no ``base`` on its guard conditions (the grid derives it).

    Raises:
        ValueError: the manifest names a schema newer than this code reads, or one that is not a version.
    """
    version = raw.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"schema_version must be a positive integer, got {version!r}")
    if version > MANIFEST_SCHEMA_VERSION:
        raise ValueError(
            f"written by a newer stresstest (manifest schema {version}); this one reads schema "
            f"{MANIFEST_SCHEMA_VERSION} and migrates 1..{MANIFEST_SCHEMA_VERSION - 1}"
        )
    if version == MANIFEST_SCHEMA_VERSION:
        return raw, None
    return (
        {**raw, "schema_version": MANIFEST_SCHEMA_VERSION},
        f"manifest schema {version} migrated to {MANIFEST_SCHEMA_VERSION} (same sections, now typed)",
    )


def items_jsonl(items: Iterable[ItemScore]) -> str:
    """The text of ``items.jsonl``: one :meth:`ItemScore.to_row` per line, keys sorted, UTF-8 as is."""
    return "".join(json.dumps(it.to_row(), sort_keys=True, ensure_ascii=False) + "\n" for it in items)


# --- Reading a run directory (docs/run-format.md) ----------------------------------------------------------


class SummaryLine(BaseModel):
    """One row of ``summary.csv`` as written: its condition and every cell as text ("" = not computed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    condition: str
    cells: dict[str, str] = Field(description="Column -> cell text, the condition column included.")

    def number(self, column: str) -> float | None:
        """The cell as a number; None when the column is missing or the cell is empty (not computed)."""
        cell = self.cells.get(column, "")
        return float(cell) if cell != "" else None


@dataclass
class RunDir:
    """A run directory read through the models (:func:`read_run`; every file is described in docs/run-format.md).

    ``manifest``, ``items`` and ``summary`` are read and validated at once; the per-item stage files (transcripts,
    records, score and note-quality details) are read on first use, one at a time, so a large run costs nothing
    it does not need.
    """

    path: Path
    manifest: RunManifest
    items: list[ItemScore]  # the rows of items.jsonl, in file order
    conditions: ConditionGrid  # the manifest's grid (older manifests without one: the items' conditions)
    summary: list[SummaryLine] | None  # summary.csv's rows; None when the run wrote none
    summary_columns: list[str]
    notes: list[str] = field(default_factory=list)  # what reading it had to do (a migrated manifest)
    _records: dict[str, RecordEnvelope | None] = field(default_factory=dict, repr=False)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id or self.path.name

    def summary_line(self, condition: str) -> SummaryLine | None:
        """The ``summary.csv`` row of a condition (None: no summary or no such row)."""
        return next((s for s in reversed(self.summary or []) if s.condition == condition), None)

    def item(self, encounter_id: str, condition: str) -> ItemScore | None:
        return next((it for it in self.items if it.key == (encounter_id, condition)), None)

    def envelope(self, item: ItemScore) -> RecordEnvelope | None:
        """The structuring outcome of an item (``records/<condition>/<id>.json``); None when missing or unreadable.

        A missing record is not fatal to a reader: the report's example miner says it cannot tell what changed.
        """
        rel = item.record_path or f"records/{item.condition}/{item.encounter_id}.json"
        if rel not in self._records:
            self._records[rel] = _read_model(self.path / rel, RecordEnvelope)
        return self._records[rel]

    def transcript(self, item: ItemScore) -> Transcript | None:
        """The ASR output an item was scored on (its ``transcript_path``: a guard row shares its base condition's,
        ``transcripts/<base>/<id>.json``); None when missing (a failed ASR item) or unreadable."""
        rel = item.transcript_path or f"transcripts/{item.condition}/{item.encounter_id}.json"
        return _read_model(self.path / rel, Transcript)

    def score_detail(self, item: ItemScore) -> dict[str, Any] | None:
        """``scores/<condition>/<id>.json``: the score stage's audit detail (negation mismatches, trigger events,
        safety, judge reasons, silence probes) as JSON; None when missing."""
        return _read_json(self.path / (item.scores_path or f"scores/{item.condition}/{item.encounter_id}.json"))

    def quality_detail(self, item: ItemScore) -> dict[str, Any] | None:
        """``quality/<condition>/<id>.json``: the note-quality judges' statements and verdicts; None when missing."""
        return _read_json(self.path / (item.quality_path or f"quality/{item.condition}/{item.encounter_id}.json"))


_M = TypeVar("_M", bound=BaseModel)


def _read_model(path: Path, model: type[_M]) -> _M | None:
    if not path.is_file():
        return None
    try:
        return model.model_validate_json(path.read_text("utf-8"))
    except (ValidationError, ValueError, OSError):
        return None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def read_run(run_dir: str | Path) -> RunDir:
    """Read a run directory that ``stresstest run`` wrote into typed objects (docs/run-format.md).

    ``manifest.json`` becomes a :class:`RunManifest` (an older schema is migrated and :attr:`RunDir.notes` says
    so; a newer one is refused), every ``items.jsonl`` row an :class:`ItemScore`, ``summary.csv`` a list of
    :class:`SummaryLine`. The report, ``stresstest compare`` and your own tools read a run through this.

    Raises:
        RunDirError: the directory, ``manifest.json`` or ``items.jsonl`` is missing or malformed; the message
            names the file (and line or key).
    """
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is a file, not a run directory (expected the DIR written by 'stresstest run')")
    if not run_dir.is_dir():
        raise RunDirError(f"run directory {run_dir} does not exist (expected the DIR written by 'stresstest run')")
    man_path = run_dir / "manifest.json"
    items_path = run_dir / "items.jsonl"
    for p in (man_path, items_path):
        if not p.is_file():
            raise RunDirError(f"{p} is missing: expected a finished run directory with manifest.json and items.jsonl")
    manifest, notes = _read_run_manifest(man_path)
    items = _read_items(items_path)
    summary, columns = _read_summary(run_dir / "summary.csv")
    return RunDir(
        path=run_dir,
        manifest=manifest,
        items=items,
        conditions=_conditions(manifest, items, man_path),
        summary=summary,
        summary_columns=columns,
        notes=notes,
    )


def _validation_message(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {err['msg']}{more}" if loc else f"{err['msg']}{more}"


def _read_run_manifest(path: Path) -> tuple[RunManifest, list[str]]:
    try:
        raw = json.loads(path.read_text("utf-8"))
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(raw, dict):
        raise RunDirError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    try:
        raw, note = migrate_manifest(raw)
    except ValueError as exc:
        raise RunDirError(f"{path}: {exc}") from exc
    try:
        meta = RunManifest.model_validate(raw)
    except ValidationError as exc:
        raise RunDirError(f"{path}: not a stresstest manifest: {_validation_message(exc)}") from exc
    if meta.items_schema_version > ITEM_SCHEMA_VERSION:
        raise RunDirError(
            f"{path}: written by a newer stresstest (items schema {meta.items_schema_version}); "
            f"this one reads items schema up to {ITEM_SCHEMA_VERSION}"
        )
    return meta, [f"manifest.json: {note}"] if note else []


def _read_items(path: Path) -> list[ItemScore]:
    try:
        rows = list(read_jsonl(path))
    except ValueError as exc:
        raise RunDirError(str(exc)) from exc
    items = []
    for n, row in enumerate(rows, start=1):
        for key in ("encounter_id", "condition"):
            if key not in row:
                raise RunDirError(f"{path}:{n}: item row has no '{key}' field")
        try:
            items.append(ItemScore.model_validate(row))
        except ValidationError as exc:
            raise RunDirError(f"{path}:{n}: not an item row: {_validation_message(exc)}") from exc
    if not items:
        raise RunDirError(f"{path}: no item rows; expected one per (encounter, condition)")
    return items


def _read_summary(path: Path) -> tuple[list[SummaryLine] | None, list[str]]:
    if not path.is_file():
        return None, []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        cols = list(reader.fieldnames or [])
        if "condition" not in cols:
            raise RunDirError(f"{path}: expected a 'condition' column in the header, got {cols}")
        lines = [SummaryLine(condition=row["condition"], cells=row) for row in reader]
    return lines, cols


def _conditions(manifest: RunManifest, items: list[ItemScore], path: Path) -> ConditionGrid:
    try:
        if manifest.conditions:
            return ConditionGrid(manifest.conditions)
        # Older or partial manifests: take the conditions in the order items name them.
        seen: dict[str, dict[str, Any]] = {}
        for it in items:
            if it.condition not in seen:
                seen[it.condition] = {
                    "condition": it.condition,
                    "family": it.family or "clean",
                    "snr_db": it.snr_db,
                    "mitigated": bool(it.mitigated),
                }
        return ConditionGrid.from_json(seen.values())
    except ValidationError as exc:
        raise RunDirError(f"{path}: conditions: {_validation_message(exc)}") from exc
    except ValueError as exc:
        raise RunDirError(f"{path}: conditions: {exc}") from exc
