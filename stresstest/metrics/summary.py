"""Per-condition aggregation of item-level fields into the SPEC §10 summary.

This is the ONE place where item-level quantities become rates; the runner, the
bootstrap CIs and the report all call :func:`aggregate`, so every number in the
report equals the one in ``summary.csv``.

Item-level fields read here (keys of an ``items.jsonl`` row; ``None`` or a
missing key means "not computed for this item" and the item is left out of that
metric, never counted as zero):

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
``completeness``    note quality (SPEC §8), percent per item:
``conciseness``     entailment scores (:mod:`stresstest.metrics.note_quality`)
``groundedness``
``halluc_lexical``  percent of the record's statements unsupported (literal /
``halluc_inference``inference-aware judge)
=================== ===========================================================

The note-quality columns (:data:`QUALITY_COLUMNS`) follow the SPEC §10 ones in
``summary.csv``; each is the mean of the item scores of the condition, and an
empty cell when no item has one (not computed in that run, e.g. the rules-only
demo).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from stresstest.grid import Condition

SUMMARY_COLUMNS: tuple[str, ...] = (
    "condition", "family", "snr_db", "n", "wer", "ins_rate", "neg_err", "err_prop",
    "triage_match", "scer", "under_triage", "mean_score", "unsafe",
)
METRIC_COLUMNS: tuple[str, ...] = SUMMARY_COLUMNS[4:]
QUALITY_COLUMNS: tuple[str, ...] = (
    "completeness", "conciseness", "groundedness", "halluc_lexical", "halluc_inference",
)

#: Error rates a clinician reads (:mod:`stresstest.metrics.split_wer`), after the note-quality columns.
ERROR_RATE_COLUMNS: tuple[str, ...] = (
    "clinical_wer", "wer_clinician", "wer_patient", "clinical_wer_clinician", "clinical_wer_patient",
)
#: Column -> (errors field, reference-words field) of an ``items.jsonl`` row.
ERROR_RATE_FIELDS: dict[str, tuple[str, str]] = {
    "clinical_wer": ("clin_errors", "clin_words"),
    "wer_clinician": ("errors_clinician", "ref_words_clinician"),
    "wer_patient": ("errors_patient", "ref_words_patient"),
    "clinical_wer_clinician": ("clin_errors_clinician", "clin_words_clinician"),
    "clinical_wer_patient": ("clin_errors_patient", "clin_words_patient"),
}

# Direction of "better" for each metric (used for the report's arrows).
HIGHER_IS_BETTER: dict[str, bool] = {
    "wer": False, "ins_rate": False, "neg_err": False, "err_prop": False, "triage_match": True,
    "scer": False, "under_triage": False, "mean_score": True, "unsafe": False,
    "completeness": True, "conciseness": True, "groundedness": True, "halluc_lexical": False,
    "halluc_inference": False,
    **dict.fromkeys(ERROR_RATE_COLUMNS, False),
}


def _vals(items: Sequence[Mapping[str, Any]], key: str) -> list[Any]:
    return [it[key] for it in items if it.get(key) is not None]


def _rate(items: Sequence[Mapping[str, Any]], key: str) -> float | None:
    v = _vals(items, key)
    return 100.0 * sum(int(x) for x in v) / len(v) if v else None


def aggregate(items: Sequence[Mapping[str, Any]], *, is_clean: bool = False) -> dict[str, float | None]:
    """SPEC §6 rates for one condition from its (non-failed) item rows.

    Args:
        items: item rows of ONE condition (one per encounter).
        is_clean: True for the clean-ASR reference row, which has no ErrProp.

    Returns:
        ``{metric: value or None}`` for every name in :data:`METRIC_COLUMNS`.
    """
    out: dict[str, float | None] = dict.fromkeys(METRIC_COLUMNS)
    asr = [it for it in items if it.get("ref_words") is not None and it.get("asr_sub") is not None]
    n_ref = sum(int(it["ref_words"]) for it in asr)
    if asr and n_ref > 0:
        errs = sum(int(it["asr_sub"]) + int(it["asr_del"]) + int(it["asr_ins"]) for it in asr)
        out["wer"] = 100.0 * errs / n_ref
        out["ins_rate"] = 100.0 * sum(int(it["asr_ins"]) for it in asr) / n_ref
    out["neg_err"] = _rate(items, "neg_err")
    out["triage_match"] = _rate(items, "triage_match")
    out["under_triage"] = _rate(items, "under_triage_new")
    out["scer"] = _rate(items, "scer_new")
    if not is_clean:
        prop = [it for it in items if it.get("err_new") is not None and it.get("asr_delta_e") is not None]
        if prop:
            denom = sum(int(it["asr_delta_e"]) for it in prop)
            out["err_prop"] = 100.0 * sum(int(it["err_new"]) for it in prop) / denom if denom > 0 else 0.0
    scores = _vals(items, "judge_score")
    if scores:
        out["mean_score"] = sum(float(s) for s in scores) / len(scores)
        out["unsafe"] = 100.0 * sum(1 for s in scores if float(s) <= 2) / len(scores)
    return out


def aggregate_quality(items: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Note-quality means of one condition: ``{column: mean of the item scores or None}``."""
    out: dict[str, float | None] = {}
    for col in QUALITY_COLUMNS:
        v = _vals(items, col)
        out[col] = sum(float(x) for x in v) / len(v) if v else None
    return out


def aggregate_error_rates(items: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Clinical-term and per-speaker WER of one condition, micro-averaged like WER: ``{column: percent or None}``.

    ``100 · Σ errors / Σ reference words`` over the items that have both fields; None (an empty cell)
    when those reference words sum to 0 (no clinical term, no patient turn) or no item has them.
    """
    out: dict[str, float | None] = {}
    for col, (err_key, n_key) in ERROR_RATE_FIELDS.items():
        use = [it for it in items if it.get(n_key) is not None and it.get(err_key) is not None]
        n = sum(int(it[n_key]) for it in use)
        out[col] = 100.0 * sum(int(it[err_key]) for it in use) / n if n > 0 else None
    return out


def in_pairing(item: Mapping[str, Any]) -> bool:
    """True when an item row enters the paired rates: not failed, and its encounter not dropped (SPEC §11).

    ``paired`` is set by :func:`stresstest.pipeline.pairing.apply_pairing`; rows
    written before the rule existed have no such key and count as paired.
    """
    return not item.get("failed") and item.get("paired", True) is not False


def summary_rows(
    items: Iterable[Mapping[str, Any]], conditions: Iterable[Condition]
) -> list[dict[str, Any]]:
    """One summary row per condition, in the order of ``conditions``.

    Args:
        items: all item rows of a run (failed rows and rows of encounters dropped by
            the pairing rule are skipped here, see :func:`in_pairing`; they are
            counted in the manifest's failure and pairing lists).
        conditions: the grid (:class:`~stresstest.grid.Condition` in row order).
    """
    by_cond: dict[str, list[Mapping[str, Any]]] = {}
    for it in items:
        if in_pairing(it):
            by_cond.setdefault(str(it["condition"]), []).append(it)
    rows = []
    for c in conditions:
        its = by_cond.get(c.id, [])
        row: dict[str, Any] = {"condition": c.id, "family": c.family, "snr_db": c.snr_db, "n": len(its)}
        row.update(aggregate(its, is_clean=c.is_clean))
        row.update(aggregate_quality(its))
        row.update(aggregate_error_rates(its))
        rows.append(row)
    return rows
