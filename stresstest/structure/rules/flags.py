"""Pass 7 of the ``rules`` structurer, flags: red-flag symptoms (with the constitutional, throat and
composite rules of the package docstring), critical vital signs, allergies, high-risk and current medications,
self-harm risk and social risk, ``f1..`` in text order with their evidence and triage hint.
"""

from __future__ import annotations

from stresstest.clinical.drugs import high_risk_class
from stresstest.schema import Claim, SafetyFlag
from stresstest.structure.rules.common import (
    _Built,
    _Extractor,
    _Group,
    _has_any,
    _hours,
    _is_modifier,
    _Patient,
    _supporting,
)
from stresstest.structure.rules.tables import (
    _ACUTE_ILLNESS_DAYS,
    _CONSTITUTIONAL,
    _GI_BLEED,
    _JOINT_PAIN_SITES,
    _THROAT_PAIN,
)


def _pass_flags(
    ex: _Extractor,
    built: list[_Built],
    reactions: dict[str, list[str]],
    patient: _Patient,
    field_evidence: dict[str, list[str]],
) -> list[tuple[SafetyFlag, list[str], str | None]]:
    """Safety flags (f1.. in text order) with their evidence and triage hint; fills ``field_evidence``.

    Red-flag symptoms present are ``red_flag`` (constitutional ones such as night sweats and weight
    loss only when the presenting complaint is not acute, i.e. not within :data:`_ACUTE_ILLNESS_DAYS`
    days, because an acute febrile illness explains them); a fever in an infant under 3 months is the
    red flag "fever in infant"; critical vital signs are ``critical_vital``.
    """
    present: dict[str, _Built] = {}
    for b in built:
        if b.claim.status == "present":
            present.setdefault(b.claim.concept, b)
    chief = next(
        (
            b
            for b in built
            if b.claim.category == "symptom" and b.claim.status == "present" and not _is_modifier(b.claim.concept)
        ),
        None,
    )
    acute_illness = chief is not None and (_hours(chief.claim.time) or 1e9) <= _ACUTE_ILLNESS_DAYS * 24
    rows: list[tuple[int, str, str, str | None, list[str], str | None]] = []

    def flag(kind: str, name: str, detail: str | None, ev: list[str], g: _Group, hint: str | None = None) -> None:
        sup = _supporting(g.mentions, "present")
        rows.append((sup[0][0].start if sup else 0, kind, name, detail, ev, hint))

    for b in present.values():
        claim, g = b.claim, b.group
        amount = f"{claim.value} {claim.unit or ''}".strip() if claim.value else None
        det_parts = [p for p in (amount, claim.time) if p]
        detail = "; ".join(det_parts) or None
        if claim.category == "symptom" and claim.concept in ("suicidal ideation", "self-harm"):
            flag("self_harm_risk", claim.concept, detail, b.evidence, g, g.triage_hint)
        elif claim.category == "symptom" and g.red_flag:
            if claim.concept in _CONSTITUTIONAL and acute_illness:
                continue
            if claim.concept == "dysphagia" and present.keys() & _THROAT_PAIN:
                continue  # painful swallowing with a sore throat (odynophagia), not obstructive dysphagia
            flag("red_flag", claim.concept, detail, b.evidence, g, g.triage_hint)
        elif claim.category == "allergy":
            reaction = ", ".join(reactions.get(claim.concept, [])[:3]) or None
            flag("allergy", claim.concept, reaction, b.evidence, g)
        elif claim.category == "medication":
            cls = high_risk_class(claim.concept)
            if cls is not None:
                flag("high_risk_medication", claim.concept, "; ".join([cls, *det_parts]), b.evidence, g)
            else:
                flag("current_medication", claim.concept, detail, b.evidence, g)
        elif claim.category == "social":
            if claim.concept == "smoking" and "former" not in g.extra:
                flag("social_risk", "smoking", detail, b.evidence, g)
            elif claim.concept == "alcohol" and "heavy" in g.extra:
                flag("social_risk", "heavy alcohol use", detail, b.evidence, g)
            elif claim.concept == "recreational drug use":
                flag("social_risk", "recreational drug use", detail, b.evidence, g)
    if "urinary incontinence" in present and present.keys() & {"back pain", "saddle anesthesia"}:
        # Bladder control lost with back pain or saddle numbness: cauda equina until proven otherwise.
        ub = present["urinary incontinence"]
        flag("red_flag", "urinary incontinence", ub.claim.time, ub.evidence, ub.group, "emergency")
    if "fever" in present and patient.age_years is not None and patient.age_years < 0.25:
        fb = present["fever"]
        flag(
            "red_flag",
            "fever in infant",
            fb.claim.value and f"{fb.claim.value} {fb.claim.unit or ''}".strip(),
            patient.age_evidence + fb.evidence[:1],
            fb.group,
            "emergency",
        )
    present_groups = {c: (b.claim, b.evidence, b.group) for c, b in present.items()}
    for name, hint, ev, g in _composite_red_flags(ex, present_groups):
        flag("red_flag", name, None, ev, g, hint)
    if "tachypnea" in present and (
        "supplemental oxygen" in present or (patient.age_years is not None and patient.age_years < 1)
    ):
        # Fast breathing that needs oxygen, or in an infant, is respiratory distress: one finding, so its
        # flag replaces the plain tachypnea red flag rather than standing beside it.
        rows[:] = [r for r in rows if (r[1], r[2]) != ("red_flag", "tachypnea")]
        tb = present["tachypnea"]
        ev = tb.evidence[:1] + (
            present["supplemental oxygen"].evidence[:1] if "supplemental oxygen" in present else patient.age_evidence
        )
        flag(
            "red_flag",
            "respiratory distress",
            "fast breathing" + (" on oxygen" if "supplemental oxygen" in present else " in an infant"),
            ev,
            tb.group,
            "emergency",
        )
    for name, value, ev in patient.critical:
        pos = ex.text.find(value)
        rows.append((pos, "critical_vital", name, value, ev, "emergency"))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    out: list[tuple[SafetyFlag, list[str], str | None]] = []
    seen: set[tuple[str, str]] = set()
    for _pos, kind, name, detail, ev, flag_hint in rows:
        if (kind, name) in seen:
            continue
        seen.add((kind, name))
        f = SafetyFlag(id=f"f{len(out) + 1}", kind=kind, name=name, detail=detail)  # type: ignore[arg-type]
        out.append((f, ev, flag_hint))
        field_evidence[f.id] = ev
    return out


def _composite_red_flags(
    ex: _Extractor, present: dict[str, tuple[Claim, list[str], _Group]]
) -> list[tuple[str, str, list[str], _Group]]:
    """Red flags that need a modifier or a combination of present concepts (chest-pain modifiers are
    triage inputs, see :func:`_chest_pain_modifiers`, not flags of their own)."""
    out: list[tuple[str, str, list[str], _Group]] = []

    def sent_norms(g: _Group) -> list[str]:
        # A tight window: a modifier must be said about this mention, not somewhere in the turn.
        return [c for m, a in _supporting(g.mentions, "present") for c in ex.context_norms(m, a, side=8)]

    if "shortness of breath" in present and "shortness of breath at rest" not in present:
        claim, ev, g = present["shortness of breath"]
        if any(
            _has_any(nm, ("at rest", "while resting", "when resting", "even resting", "sitting still", "doing nothing"))
            for nm in sent_norms(g)
        ):
            out.append(("shortness of breath at rest", "emergency", ev, g))
    bleed = sorted(_GI_BLEED & present.keys())
    faint = sorted({"dizziness", "fainting"} & present.keys())
    if bleed and faint:
        _, ev1, g = present[bleed[0]]
        ev2 = present[faint[0]][1]
        out.append((f"{bleed[0]} with {faint[0]}", "emergency", ev1[:1] + ev2[:1], g))
    if "fever" in present and "neck stiffness" in present:
        _, ev1, g = present["neck stiffness"]
        out.append(("fever with neck stiffness", "emergency", present["fever"][1][:1] + ev1[:1], g))
    if "drooling" in present and {"dysphagia", "sore throat", "painful swallowing"} & present.keys():
        # Drooling with a painful throat or trouble swallowing: a threatened airway (epiglottitis, abscess).
        _, ev1, g = present["drooling"]
        out.append(("drooling", "emergency", ev1[:1], g))
    swollen = sorted({"joint swelling", "swelling"} & present.keys())
    if (
        swollen
        and "warmth" in present
        and ({"redness", "joint pain"} & present.keys() or any(c.endswith(_JOINT_PAIN_SITES) for c in present))
    ):
        # A hot, swollen (red or painful) joint: septic arthritis until proven otherwise.
        _, ev1, g = present[swollen[0]]
        out.append(("hot swollen joint", "urgent", ev1[:1] + present["warmth"][1][:1], g))
    return out
