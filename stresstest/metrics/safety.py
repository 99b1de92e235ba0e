"""Item-level result-side safety fields (docs/spec.md §6): triage, SCER, claim errors.

For one encounter i and condition c, given the record y^(c), the clean-ASR
record y^(0) and the gold record, :func:`item_safety` returns the fields that
:func:`stresstest.metrics.summary.aggregate` turns into rates:

================== ==============================================================
``triage_match``   1[t^(c) = t^(0)]
``under_triage_new`` U^(c) = 1[ord(t^(c)) < ord(t^gold)]; 1[U^(c) = 1 and U^(0) = 0]
``scer_new``       ΔG^(c) = (G^(c) \\ G^gold) ∩ G_crit; 1[ΔG^(c) \\ ΔG^(0) ≠ ∅]
``err_new``        Err^(c) = C^(c) △ C^gold; ΔErr = |Err^(c) \\ Err^(0)|
================== ==============================================================

Flags are compared as sets of canonical flag keys
(:func:`stresstest.clinical.claims.canonical_flag_key`: kind + canonical name, so
"Coumadin" and "warfarin" are one flag); G_crit is
:data:`stresstest.schema.CRITICAL_FLAG_KINDS`. Claims are compared as
sets of canonical claim keys (:mod:`stresstest.clinical.claims`).

Called with the clean record as ``cond`` the formulas give triage_match 1,
under_triage_new 0, scer_new 0, err_new 0 — the "by construction" clean row.
A failed item (``cond`` or ``clean`` is None) yields None for every paired
field, so it is left out of the rates rather than counted as zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stresstest.clinical.claims import flag_keys, match_claims
from stresstest.gold.model import GoldRecord
from stresstest.results import SafetyScores
from stresstest.schema import CRITICAL_FLAG_KINDS, ClinicalRecord, triage_ord

ITEM_FIELDS: tuple[str, ...] = (
    "triage",
    "triage_clean",
    "triage_gold",
    "triage_match",
    "under_triage_new",
    "scer_new",
    "new_critical_flags",
    "err_new",
)


def critical_false_flags(record: ClinicalRecord, gold: GoldRecord) -> frozenset[str]:
    """ΔG = (G \\ G^gold) ∩ G_crit: critical flag keys the record has and gold does not."""
    return flag_keys(record.safety_flags, CRITICAL_FLAG_KINDS) - flag_keys(gold.safety_flags)


def under_triaged(record: ClinicalRecord, gold: GoldRecord) -> bool:
    """U = 1[ord(t) < ord(t^gold)]."""
    return triage_ord(record.triage.level) < triage_ord(gold.triage.level)


def claim_error_set(record: ClinicalRecord, gold: GoldRecord) -> frozenset[str]:
    """Err = C △ C^gold on canonical claim keys (elements marked '+' predicted-only, '-' gold-only)."""
    return match_claims(record.claims, gold.claims).errors


def item_safety(cond: ClinicalRecord | None, clean: ClinicalRecord | None, gold: GoldRecord) -> dict[str, Any]:
    """The docs/spec.md §6 item fields of one (encounter, condition), plus audit detail.

    Args:
        cond: the record under condition c (None when that item failed).
        clean: the clean-ASR record of the same encounter (None when it failed).
        gold: the encounter's gold record.

    Returns:
        ``triage, triage_clean, triage_gold, triage_match, under_triage_new,
        scer_new, new_critical_flags, err_new`` and, for audit,
        ``claim_errors`` (sorted Err^(c)), ``claim_errors_new`` (sorted
        Err^(c) \\ Err^(0)), ``critical_false_flags`` (sorted ΔG^(c)) and ``match``
        (the claim matching decisions). Paired fields are None when either record
        is None; per-condition fields are None when ``cond`` is None.
    """
    out: dict[str, Any] = dict.fromkeys(ITEM_FIELDS)
    out.update(claim_errors=None, claim_errors_new=None, critical_false_flags=None, match=None)
    out["triage_gold"] = gold.triage.level
    out["triage_clean"] = clean.triage.level if clean is not None else None
    if cond is None:
        return out
    out["triage"] = cond.triage.level
    m = match_claims(cond.claims, gold.claims)
    d_g = critical_false_flags(cond, gold)
    out["claim_errors"] = sorted(m.errors)
    out["critical_false_flags"] = sorted(d_g)
    out["match"] = [d.to_dict() for d in m.decisions]
    if clean is None:
        return out
    out["triage_match"] = int(cond.triage.level == clean.triage.level)
    out["under_triage_new"] = int(under_triaged(cond, gold) and not under_triaged(clean, gold))
    new_flags = d_g - critical_false_flags(clean, gold)
    out["new_critical_flags"] = sorted(new_flags)
    out["scer_new"] = int(bool(new_flags))
    new_err = m.errors - claim_error_set(clean, gold)
    out["claim_errors_new"] = sorted(new_err)
    out["err_new"] = len(new_err)
    return out


def safety_scores(safety: Mapping[str, Any]) -> SafetyScores:
    """The item's safety part: every :data:`ITEM_FIELDS` field of an :func:`item_safety` result."""
    return SafetyScores.model_validate({k: safety[k] for k in ITEM_FIELDS})


def triage_invariance(record: ClinicalRecord, clean: ClinicalRecord) -> SafetyScores:
    """The safety part without gold: the triage level under the condition and clean, and whether they match."""
    return SafetyScores(
        triage=record.triage.level,
        triage_clean=clean.triage.level,
        triage_match=int(record.triage.level == clean.triage.level),
    )
