"""What a run writes for other tools to read: item rows, failures and the manifest.

* :class:`ItemScore` — one row of ``items.jsonl`` per (encounter, condition),
  failed items included. A field that was not computed for an item is absent
  from its row (or None); :mod:`stresstest.metrics.summary` leaves such items
  out of that metric, never counts them as zero. Rows are written with
  :meth:`ItemScore.to_row` (only the fields that were set), so adding a field
  here never changes the bytes of rows that do not set it.
* :class:`FailureRecord` — one failed (stage, encounter, condition) with its reason.
* :class:`RunManifest` — ``manifest.json``: versions, seeds, grid, noise choices,
  failures, stage times. It carries ``schema_version`` (of the manifest) and
  ``items_schema_version`` (of the ``items.jsonl`` rows; rows do not repeat it so
  that they stay byte-stable across releases that do not change them).

The report validates both files with these models when it reads a run back
(:func:`stresstest.report.rundir.load_run`); unknown keys are errors there,
so a writer and its reader cannot drift apart silently.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from stresstest.grid import Condition

#: Version of the item-row schema (bump when a field changes meaning or type).
ITEM_SCHEMA_VERSION = 1
#: Version of the manifest schema. 2: conditions carry ``base``; ``items_schema_version``; ``executor``.
MANIFEST_SCHEMA_VERSION = 2

Num = int | float  # kept apart so a value is written back exactly as it was computed (3 stays 3, 3.0 stays 3.0)


class ItemScore(BaseModel):
    """One ``items.jsonl`` row: an (encounter, condition) with its provenance and item-level metrics.

    Only ``encounter_id`` and ``condition`` are required; every other field is
    absent when the stage that computes it did not run for this item.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # identity and grid (SPEC §10)
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
    mix: dict[str, Any] | None = Field(default=None, description="MixInfo without the noise recipe (in the manifest).")
    transcript_path: str | None = None
    record_path: str | None = None
    scores_path: str | None = None
    # outcome
    failed: bool | None = Field(default=None, description="True when some stage failed for this item.")
    error: str | None = Field(default=None, description="'stage: reason' of the first failure.")
    paired: bool | None = Field(default=None, description="In the paired comparison (SPEC §11 pairing rule).")
    unpaired_reason: str | None = Field(default=None, description="Why a non-failed item left the pairing.")
    # ASR (SPEC §6: WER, InsRate, ErrProp denominator)
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
    trigger_counts: dict[str, int] | None = Field(default=None, description="Trigger events vs r_i, by type.")
    triggers_vs_clean: list[dict[str, Any]] | None = Field(default=None, description="Events vs the clean ASR.")
    # structuring / mitigation
    extra: dict[str, Any] | None = Field(default=None, description="Backend facts of the record (guard counts...).")
    abstention_rate: Num | None = None
    quotes_discarded: int | None = None
    fields_nulled: int | None = None
    fields_total: int | None = None
    # effect side (SPEC §6 safety)
    triage: str | None = None
    triage_clean: str | None = None
    triage_gold: str | None = None
    triage_match: int | None = None
    under_triage_new: int | None = None
    scer_new: int | None = None
    new_critical_flags: list[str] | None = None
    err_new: int | None = None
    judge_score: Num | None = None
    judge: str | dict[str, Any] | None = Field(default=None, description="Judge id (or {model, ...}).")
    # note quality (SPEC §8; stresstest.metrics.quality_stage): percent per item, absent when not computed
    completeness: Num | None = Field(default=None, description="Entailment of the gold statements by the record.")
    conciseness: Num | None = Field(default=None, description="Entailment of the record's statements by gold.")
    groundedness: Num | None = Field(default=None, description="Entailment of the record's statements by x(c).")
    halluc_lexical: Num | None = Field(default=None, description="% statements a literal judge calls unsupported.")
    halluc_inference: Num | None = Field(default=None, description="% unsupported under the inference-aware judge.")
    pairwise: dict[str, Any] | None = Field(
        default=None, description="{vs: baseline condition, outcomes: {dimension: win|tie|loss}, consistent, ...}."
    )
    quality_path: str | None = Field(default=None, description="quality/<condition>/<encounter>.json (verdicts).")
    quality_errors: list[str] | None = Field(default=None, description="Failed judge calls ('measure: reason').")

    def to_row(self) -> dict[str, Any]:
        """The ``items.jsonl`` form: the fields that were set, JSON-ready."""
        return self.model_dump(mode="json", exclude_unset=True)


class FailureRecord(BaseModel):
    """One failed item at one stage (counted against ``run.max_failures``, never dropped)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    encounter_id: str
    condition: str
    stage: str = Field(description="speech, mix, asr, structure, score...")
    error: str = Field(description="One-line reason.")


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
    corpus: dict[str, Any] = Field(default_factory=dict)
    asr: dict[str, Any] = Field(default_factory=dict)
    structure: dict[str, Any] = Field(default_factory=dict)
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
    conditions: list[Condition] = Field(default_factory=list, description="The grid, in order.")
    noise: dict[str, Any] = Field(default_factory=dict)
    mixtures: list[dict[str, Any]] = Field(default_factory=list, description="Per-item MixInfo (with recipes).")
    speech: dict[str, Any] = Field(default_factory=dict)
    failures: list[FailureRecord] = Field(default_factory=list)
    n_failures: int | None = None
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    invocations: list[dict[str, Any]] = Field(default_factory=list, description="Wall time of each invocation.")
    completed: bool | None = Field(default=None, description="True once the run finished (report included).")
    pairing: dict[str, Any] | None = Field(default=None, description="SPEC §11 coverage: paired/dropped encounters.")
    note_quality: dict[str, Any] | None = Field(
        default=None, description="SPEC §8 judges: model, prompt/ontology hashes, calibration, adequacy, failures."
    )

    def to_json(self) -> dict[str, Any]:
        """The ``manifest.json`` form (conditions with their ``condition`` key)."""
        return self.model_dump(mode="json", by_alias=True)
