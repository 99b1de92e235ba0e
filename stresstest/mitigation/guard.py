"""Code-enforced contract of the Guard role: it may only delete or null, never add or change.

The Guard LLM returns a full record. :func:`enforce_guard` projects it onto the
Draft, so whatever the model wrote, the result is the Draft minus deletions:

* a claim / flag survives only if the Guard kept its id; its content is the
  Draft's, except that optional fields the Guard set to null become null
  (claim ``value``/``unit``/``time``/``laterality``, flag ``detail``);
* any id the Guard invented is dropped and counted (``added_dropped``);
* any other change to a kept item (concept, status, category, kind, name, a
  different non-null value) is reverted to the Draft and counted
  (``changes_reverted``);
* ``triage`` is the Draft's (the schema requires it, so it cannot be nulled; a
  changed level is reverted and counted); ``chief_complaint`` may be nulled;
* evidence: for each surviving field, the Draft's quotes that the Guard kept
  (exact string equality); quotes the Guard added are dropped and counted.
"""

from __future__ import annotations

from typing import Any

from stresstest.records import revise
from stresstest.schema import Claim, ClinicalRecord, SafetyFlag
from stresstest.schema import GuardReport as GuardReport  # re-exported

_CLAIM_NULLABLE = ("value", "unit", "time", "laterality")
_FLAG_NULLABLE = ("detail",)


def _project(
    draft: Claim | SafetyFlag,
    guarded: Claim | SafetyFlag,
    nullable: tuple[str, ...],
    nulled: list[str],
    reverted: list[str],
) -> Claim | SafetyFlag:
    update: dict[str, Any] = {}
    for name in type(draft).model_fields:
        if name == "id":
            continue
        d, g = getattr(draft, name), getattr(guarded, name)
        if g == d:
            continue
        if name in nullable and g is None:
            update[name] = None
            nulled.append(f"{draft.id}.{name}")
        else:
            reverted.append(f"{draft.id}.{name}")
    return revise(draft, **update) if update else draft


def enforce_guard(draft: ClinicalRecord, guarded: ClinicalRecord) -> tuple[ClinicalRecord, GuardReport]:
    """Project the Guard's output onto the Draft (rules in the module docstring).

    Returns:
        The guarded record (Draft minus deletions) and the report.
    """
    nulled: list[str] = []
    reverted: list[str] = []
    g_claims = {c.id: c for c in guarded.claims}
    g_flags = {f.id: f for f in guarded.safety_flags}
    d_claim_ids = {c.id for c in draft.claims}
    d_flag_ids = {f.id for f in draft.safety_flags}

    claims = [_project(c, g_claims[c.id], _CLAIM_NULLABLE, nulled, reverted) for c in draft.claims if c.id in g_claims]
    flags = [
        _project(f, g_flags[f.id], _FLAG_NULLABLE, nulled, reverted) for f in draft.safety_flags if f.id in g_flags
    ]
    removed_claims = [c.id for c in draft.claims if c.id not in g_claims]
    removed_flags = [f.id for f in draft.safety_flags if f.id not in g_flags]
    added = [i for i in g_claims if i not in d_claim_ids] + [i for i in g_flags if i not in d_flag_ids]

    if guarded.triage.level != draft.triage.level:
        reverted.append("triage.level")
    chief = draft.chief_complaint
    if guarded.chief_complaint is None and chief is not None:
        chief = None
        nulled.append("chief_complaint")
    elif guarded.chief_complaint != chief:
        reverted.append("chief_complaint")

    live = {"triage"} | {c.id for c in claims} | {f.id for f in flags}
    evidence: dict[str, list[str]] = {}
    q_removed = q_added = 0
    for key, quotes in draft.field_evidence.items():
        kept_by_guard = guarded.field_evidence.get(key, [])
        if key not in live:
            continue
        keep = [q for q in quotes if q in kept_by_guard]
        q_removed += len(quotes) - len(keep)
        if keep:
            evidence[key] = keep
    for key, quotes in guarded.field_evidence.items():
        q_added += sum(1 for q in quotes if q not in draft.field_evidence.get(key, []))

    record = revise(draft, claims=claims, safety_flags=flags, field_evidence=evidence, chief_complaint=chief)
    report = GuardReport(
        removed_claims=removed_claims,
        removed_flags=removed_flags,
        nulled_values=nulled,
        added_dropped=added,
        changes_reverted=reverted,
        quotes_removed=q_removed,
        quotes_added_dropped=q_added,
    )
    return ClinicalRecord.model_validate(record.model_dump()), report
