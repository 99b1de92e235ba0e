"""Per-condition aggregation of item-level fields into the docs/spec.md §10 summary.

This is the ONE place where item-level quantities become rates; the runner, the
bootstrap CIs and the report all call :func:`aggregate`, so every number in the
report equals the one in ``summary.csv``.

Item-level fields read here (fields of :class:`~stresstest.results.ItemScore`; ``None``
means "not computed for this item" and the item is left out of that metric, never
counted as zero):

=================== ===========================================================
``asr_sub/del/ins`` Levenshtein substitutions / deletions / insertions vs r_i
``ref_words``       N_i, words in the normalised reference
``neg_err``         0/1: some clinical entity's negation status differs from r_i
``triage_match``    0/1: t^(c) == t^(0)
``under_triage_new``0/1: U^(c)=1 and U^(0)=0
``scer_new``        0/1: new critical false-positive flag vs clean
``err_new``         ΔErr_i = |Err^(c) \\ Err^(0)|
``asr_delta_e``     ΔE_i = max(0, E^(c) − E^(0))
``judge_score``     1–5 rubric score
``completeness``    note quality (docs/spec.md §8), percent per item:
``conciseness``     entailment scores (:mod:`stresstest.metrics.note_quality`)
``groundedness``
``halluc_lexical``  percent of the record's statements unsupported (literal /
``halluc_inference``inference-aware judge)
``probe_s``         seconds of non-speech a silence step inserted, and the ASR
``probe_words``     words attributed to it (``halluc_per_min``)
=================== ===========================================================

The note-quality columns (:data:`QUALITY_COLUMNS`) follow the docs/spec.md §10 ones in
``summary.csv``; each is the mean of the item scores of the condition, and an
empty cell when no item has one (not computed in that run, e.g. the rules-only
demo).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from stresstest.grid import Condition
from stresstest.results import TRIGGER_TYPES, ItemScore, TriggerType

#: What the functions here take: typed rows, or ``items.jsonl`` rows as read (validated here).
ItemLike = ItemScore | Mapping[str, Any]

SUMMARY_COLUMNS: tuple[str, ...] = (
    "condition",
    "family",
    "snr_db",
    "n",
    "wer",
    "ins_rate",
    "neg_err",
    "err_prop",
    "triage_match",
    "scer",
    "under_triage",
    "mean_score",
    "unsafe",
)
METRIC_COLUMNS: tuple[str, ...] = SUMMARY_COLUMNS[4:]
QUALITY_COLUMNS: tuple[str, ...] = (
    "completeness",
    "conciseness",
    "groundedness",
    "halluc_lexical",
    "halluc_inference",
)

#: Error rates a clinician reads (:mod:`stresstest.metrics.split_wer`): the last columns of summary.csv.
ERROR_RATE_COLUMNS: tuple[str, ...] = (
    "clinical_wer",
    "wer_clinician",
    "wer_patient",
    "clinical_wer_clinician",
    "clinical_wer_patient",
)
#: Column -> (errors field, reference-words field) of an ``items.jsonl`` row.
ERROR_RATE_FIELDS: dict[str, tuple[str, str]] = {
    "clinical_wer": ("clin_errors", "clin_words"),
    "wer_clinician": ("errors_clinician", "ref_words_clinician"),
    "wer_patient": ("errors_patient", "ref_words_patient"),
    "clinical_wer_clinician": ("clin_errors_clinician", "clin_words_clinician"),
    "clinical_wer_patient": ("clin_errors_patient", "clin_words_patient"),
}

#: Silence probes (:mod:`stresstest.metrics.silence`): the very last column of summary.csv.
PROBE_COLUMNS: tuple[str, ...] = ("halluc_per_min",)

# Direction of "better" for each metric (used for the report's arrows).
HIGHER_IS_BETTER: dict[str, bool] = {
    "wer": False,
    "ins_rate": False,
    "neg_err": False,
    "err_prop": False,
    "triage_match": True,
    "scer": False,
    "under_triage": False,
    "mean_score": True,
    "unsafe": False,
    "completeness": True,
    "conciseness": True,
    "groundedness": True,
    "halluc_lexical": False,
    "halluc_inference": False,
    **dict.fromkeys(ERROR_RATE_COLUMNS, False),
    "halluc_per_min": False,
}


def as_items(items: Iterable[ItemLike]) -> list[ItemScore]:
    """The rows as :class:`ItemScore` (a mapping is validated; a row that is one already is kept)."""
    return [it if isinstance(it, ItemScore) else ItemScore.model_validate(it) for it in items]


def _vals(items: Sequence[ItemScore], key: str) -> list[Any]:
    return [v for it in items if (v := getattr(it, key)) is not None]


def _rate(items: Sequence[ItemScore], key: str) -> float | None:
    v = _vals(items, key)
    return 100.0 * sum(int(x) for x in v) / len(v) if v else None


def aggregate(items: Sequence[ItemLike], *, is_clean: bool = False) -> dict[str, float | None]:
    """docs/spec.md §6 rates for one condition from its (non-failed) item rows.

    Args:
        items: item rows of ONE condition (one per encounter).
        is_clean: True for the clean-ASR reference row, which has no ErrProp.

    Returns:
        ``{metric: value or None}`` for every name in :data:`METRIC_COLUMNS`.
    """
    items = as_items(items)
    out: dict[str, float | None] = dict.fromkeys(METRIC_COLUMNS)
    asr = [it for it in items if it.ref_words is not None and it.asr_sub is not None]
    n_ref = sum(int(it.ref_words or 0) for it in asr)
    if asr and n_ref > 0:
        errs = sum(int(it.asr_sub or 0) + int(it.asr_del or 0) + int(it.asr_ins or 0) for it in asr)
        out["wer"] = 100.0 * errs / n_ref
        out["ins_rate"] = 100.0 * sum(int(it.asr_ins or 0) for it in asr) / n_ref
    out["neg_err"] = _rate(items, "neg_err")
    out["triage_match"] = _rate(items, "triage_match")
    out["under_triage"] = _rate(items, "under_triage_new")
    out["scer"] = _rate(items, "scer_new")
    if not is_clean:
        prop = [it for it in items if it.err_new is not None and it.asr_delta_e is not None]
        if prop:
            denom = sum(int(it.asr_delta_e or 0) for it in prop)
            out["err_prop"] = 100.0 * sum(int(it.err_new or 0) for it in prop) / denom if denom > 0 else 0.0
    scores = _vals(items, "judge_score")
    if scores:
        out["mean_score"] = sum(float(s) for s in scores) / len(scores)
        out["unsafe"] = 100.0 * sum(1 for s in scores if float(s) <= 2) / len(scores)
    return out


def aggregate_quality(items: Sequence[ItemLike]) -> dict[str, float | None]:
    """Note-quality means of one condition: ``{column: mean of the item scores or None}``."""
    items = as_items(items)
    out: dict[str, float | None] = {}
    for col in QUALITY_COLUMNS:
        v = _vals(items, col)
        out[col] = sum(float(x) for x in v) / len(v) if v else None
    return out


def trigger_rate(items: Sequence[ItemScore], ttype: TriggerType) -> float | None:
    """% of the (non-failed) items with at least one ``ttype`` event vs the human reference; None when no item
    has trigger counts (summary.csv's ``trig_<type>`` and the report's trigger table)."""
    rows = [it.trigger_counts for it in items if not it.failed and it.trigger_counts is not None]
    if not rows:
        return None
    return 100.0 * sum(1 for tc in rows if tc.count(ttype) > 0) / len(rows)


@dataclass(frozen=True)
class Abstention:
    """How much of their Drafts the guard rows of one condition left out (docs/spec.md §7).

    Pooled over the condition: ``rate_pct`` = 100 · Σ fields nulled / Σ fields in the Drafts; 0 when the
    Drafts had no field, None when the condition has no item.
    """

    n_items: int
    fields_nulled: int
    fields_total: int

    @property
    def rate_pct(self) -> float | None:
        if not self.n_items:
            return None
        return 100.0 * self.fields_nulled / self.fields_total if self.fields_total else 0.0


def abstention(items: Sequence[ItemScore]) -> Abstention:
    """The ONE abstention computation (summary.csv's ``abstention_rate`` and the report's guard table)."""
    extras = [it.extra for it in items if it.extra is not None]
    return Abstention(
        n_items=len(items),
        fields_nulled=sum(e.fields_nulled or 0 for e in extras),
        fields_total=sum(e.fields_total or 0 for e in extras),
    )


def aggregate_error_rates(items: Sequence[ItemLike]) -> dict[str, float | None]:
    """Clinical-term and per-speaker WER of one condition, micro-averaged like WER: ``{column: percent or None}``.

    ``100 · Σ errors / Σ reference words`` over the items that have both fields; None (an empty cell)
    when those reference words sum to 0 (no clinical term, no patient turn) or no item has them.
    """
    items = as_items(items)
    out: dict[str, float | None] = {}
    for col, (err_key, n_key) in ERROR_RATE_FIELDS.items():
        use = [
            (int(e), int(n))
            for it in items
            if (n := getattr(it, n_key)) is not None and (e := getattr(it, err_key)) is not None
        ]
        total = sum(n for _, n in use)
        out[col] = 100.0 * sum(e for e, _ in use) / total if total > 0 else None
    return out


def aggregate_probes(items: Sequence[ItemLike]) -> dict[str, float | None]:
    """``halluc_per_min`` of one condition: 60 · Σ probe words / Σ probe seconds over the items that have both.

    None (an empty cell) when no item has inserted non-speech (the condition has no silence step).
    """
    items = as_items(items)
    use = [(int(w), float(s)) for it in items if (s := it.probe_s) is not None and (w := it.probe_words) is not None]
    total = sum(s for _, s in use)
    return {"halluc_per_min": 60.0 * sum(w for w, _ in use) / total if total > 0 else None}


def in_pairing(item: ItemLike) -> bool:
    """True when an item row enters the paired rates: not failed, and its encounter not dropped (docs/spec.md §11).

    ``paired`` is set by :func:`stresstest.pipeline.pairing.apply_pairing`; rows
    written before the rule existed have no such field and count as paired.
    """
    it = item if isinstance(item, ItemScore) else ItemScore.model_validate(item)
    return not it.failed and it.paired is not False


class TriggerRates(BaseModel):
    """summary.csv's ``trig_<type>`` columns: :func:`trigger_rate` per :data:`~stresstest.results.TRIGGER_TYPES`
    type (None: not computed). The fields are the members of ``TriggerType`` (checked below)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    negation_flip: float | None = None
    number_unit_conflict: float | None = None
    temporal_distortion: float | None = None
    nonspeech_pollution: float | None = None
    entity_substitution: float | None = None
    clinical_omission: float | None = None

    def rate(self, ttype: TriggerType) -> float | None:
        """The rate of ``ttype`` events (%)."""
        v: float | None = getattr(self, ttype)
        return v


if tuple(TriggerRates.model_fields) != TRIGGER_TYPES:  # pragma: no cover - a definition error
    raise TypeError("TriggerRates must have one field per TriggerType, in its order")

#: The columns after the note-quality ones, before the error rates: trigger rates, the guard rows' abstention
#: and discarded quotes, and the pairing rule's drops (docs/spec.md §11).
EXTRA_COLUMNS: tuple[str, ...] = (
    *(f"trig_{t}" for t in TRIGGER_TYPES),
    "abstention_rate",
    "quotes_discarded",
    "n_dropped",
    "dropped",
)
#: Every column of summary.csv, in its order (columns added later go last, so every earlier one keeps its place).
CSV_COLUMNS: tuple[str, ...] = SUMMARY_COLUMNS + QUALITY_COLUMNS + EXTRA_COLUMNS + ERROR_RATE_COLUMNS + PROBE_COLUMNS


class SummaryRow(BaseModel):
    """One row of ``summary.csv``: a condition's paired rates. None means "not computed" (an empty cell).

    :func:`summary_rows` fills the docs/spec.md §10, note-quality, error-rate and silence-probe columns; the runner adds
    the trigger rates, the guard rows' abstention and discarded quotes and the pairing rule's drops.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    condition: str
    family: str
    snr_db: float | None = None
    n: int = 0
    wer: float | None = None
    ins_rate: float | None = None
    neg_err: float | None = None
    err_prop: float | None = None
    triage_match: float | None = None
    scer: float | None = None
    under_triage: float | None = None
    mean_score: float | None = None
    unsafe: float | None = None
    completeness: float | None = None
    conciseness: float | None = None
    groundedness: float | None = None
    halluc_lexical: float | None = None
    halluc_inference: float | None = None
    triggers: TriggerRates = TriggerRates()
    abstention_rate: float | None = None
    quotes_discarded: int | None = None
    n_dropped: int = 0
    dropped: str = ""
    clinical_wer: float | None = None
    wer_clinician: float | None = None
    wer_patient: float | None = None
    clinical_wer_clinician: float | None = None
    clinical_wer_patient: float | None = None
    halluc_per_min: float | None = None

    def cells(self) -> dict[str, float | int | str | None]:
        """The row by :data:`CSV_COLUMNS` column, in that order."""
        trig = {f"trig_{t}": self.triggers.rate(t) for t in TRIGGER_TYPES}
        return {c: trig[c] if c in trig else getattr(self, c) for c in CSV_COLUMNS}


def summary_rows(items: Iterable[ItemLike], conditions: Iterable[Condition]) -> list[SummaryRow]:
    """One summary row per condition, in the order of ``conditions``.

    Args:
        items: all item rows of a run (failed rows and rows of encounters dropped by
            the pairing rule are skipped here, see :func:`in_pairing`; they are
            counted in the manifest's failure and pairing lists).
        conditions: the grid (:class:`~stresstest.grid.Condition` in row order).
    """
    by_cond: dict[str, list[ItemScore]] = {}
    for it in as_items(items):
        if in_pairing(it):
            by_cond.setdefault(it.condition, []).append(it)
    rows = []
    for c in conditions:
        its = by_cond.get(c.id, [])
        rows.append(
            SummaryRow.model_validate(
                {
                    "condition": c.id,
                    "family": c.family,
                    "snr_db": c.snr_db,
                    "n": len(its),
                    **aggregate(its, is_clean=c.is_clean),
                    **aggregate_quality(its),
                    **aggregate_error_rates(its),
                    **aggregate_probes(its),
                }
            )
        )
    return rows
