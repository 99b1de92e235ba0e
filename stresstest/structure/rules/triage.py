"""Pass 8 of the ``rules`` structurer, triage: the documented rule of the package docstring
(emergency, urgent, routine) and the quotes that drove the level.
"""

from __future__ import annotations

from stresstest.schema import Claim, SafetyFlag, Triage
from stresstest.structure.rules.common import (
    _Built,
    _Dialogue,
    _exertional_only,
    _Extractor,
    _fmt_num,
    _Group,
    _has_any,
    _hours,
    _is_modifier,
    _is_number,
    _Patient,
    _supporting,
)
from stresstest.structure.rules.tables import (
    _ACS_RADIATION,
    _ACUTE_CHEST_PAIN_HOURS,
    _ACUTE_INJURY_DAYS,
    _CHRONIC_DAYS,
    _FOCAL_WITH_FEVER,
    _HEART_FAILURE,
    _INJURY_SIGNS,
    _RADIATION,
    _REST_CUES,
    _SEVERE,
    _SEVERE_RATING,
)


def _pass_triage(
    ex: _Extractor,
    built: list[_Built],
    flags: list[tuple[SafetyFlag, list[str], str | None]],
    patient: _Patient,
    dialogue: _Dialogue,
) -> tuple[Triage, list[str]]:
    """The triage rule of the module docstring; returns the decision and the quotes that drove it."""
    present = {b.claim.concept: b for b in built if b.claim.status == "present"}
    chief = next(
        (
            b
            for b in built
            if b.claim.category == "symptom" and b.claim.status == "present" and not _is_modifier(b.claim.concept)
        ),
        None,
    )
    chief_hours = _hours(chief.claim.time) if chief is not None else None
    emergency: list[tuple[str, list[str]]] = []
    urgent: list[tuple[str, list[str]]] = []
    for f, ev, hint in flags:
        if f.kind not in ("red_flag", "self_harm_risk", "critical_vital"):
            continue
        b = present.get(f.name)
        # A red flag without its own onset is dated by the presenting complaint.
        hours = _hours(b.claim.time) if b is not None else None
        hours = hours if hours is not None else chief_hours
        chronic = b is not None and (hours or 0) >= _CHRONIC_DAYS * 24
        if hint == "emergency" and not chronic:
            emergency.append((f.name, ev))
        else:
            urgent.append((f.name + (" (chronic)" if chronic and hint == "emergency" else ""), ev))
    cp = present.get("chest pain")
    if cp is not None:
        hours = _hours(cp.claim.time)
        if hours is not None and hours <= _ACUTE_CHEST_PAIN_HOURS:
            emergency.append((f"acute chest pain ({cp.claim.time})", cp.evidence))
        emergency += _chest_pain_modifiers(ex, cp)
    oxygen = present.get("supplemental oxygen")
    if oxygen is not None:
        emergency.append(("on supplemental oxygen", oxygen.evidence))
    rated = [(v, ev) for v, _key, ev in dialogue.ratings if v >= _SEVERE_RATING]
    rated += [
        (float(b.claim.value.split("-")[-1]), b.evidence)
        for b in present.values()
        if b.claim.unit == "out of 10"
        and b.claim.value
        and _is_number(b.claim.value.split("-")[-1])
        and float(b.claim.value.split("-")[-1]) >= _SEVERE_RATING
    ]
    if rated:
        urgent.append((f"symptom rated {_fmt_num(max(v for v, _ in rated))}/10", rated[0][1]))
    for b in present.values():
        if b.claim.category == "symptom" and _is_severe(ex, b.claim, b.group):
            urgent.append((f"severe {b.claim.concept}", b.evidence))
    fever = present.get("fever")
    if fever is not None:
        age = patient.age_years
        if patient.temperature is not None and patient.temperature >= 38.0:
            urgent.append((f"temperature {_fmt_num(patient.temperature)}", patient.temp_evidence or fever.evidence))
        elif age is not None and (age < 16 or age >= 65):
            urgent.append((f"fever at age {_fmt_num(round(age, 1))}", fever.evidence))
        elif patient.is_child:
            urgent.append(("fever in a child", fever.evidence))
        elif "shortness of breath" in present:
            urgent.append(("fever with shortness of breath", fever.evidence))
        elif any(c in present for c in _FOCAL_WITH_FEVER):
            # docs/gold_guide.md: fever with new focal symptoms is seen the same day (strep throat, cellulitis,
            # COVID-19 testing).
            focal = next(c for c in _FOCAL_WITH_FEVER if c in present)
            urgent.append((f"fever with {focal}", fever.evidence))
    for concept in _HEART_FAILURE:
        if concept in present:
            urgent.append((concept, present[concept].evidence))
    sob = present.get("shortness of breath")
    if sob is not None and not _exertional_only(ex, sob.group, vigorous=True):
        sob_hours = _hours(sob.claim.time)
        if sob_hours is None or sob_hours < _CHRONIC_DAYS * 24 or sob is chief:
            # New (or presenting) breathlessness needs same-day assessment (oxygen saturation, chest exam).
            urgent.append(("shortness of breath", sob.evidence))
    trauma = present.get("trauma")
    if trauma is not None:
        hours = _hours(trauma.claim.time)
        hours = hours if hours is not None else chief_hours
        signs = [c for c in _INJURY_SIGNS if c in present]
        if hours is not None and hours <= _ACUTE_INJURY_DAYS * 24 and signs:
            # An injury of the last days with swelling, bruising, deformity or a limb not used needs a same-day
            # examination and, by the Ottawa-type rules, an X-ray.
            urgent.append((f"acute injury with {signs[0]}", trauma.evidence + present[signs[0]].evidence[:1]))
        elif (
            hours is not None
            and hours <= _ACUTE_INJURY_DAYS * 24
            and patient.is_child
            and chief is not None
            and chief.claim.concept.endswith(" pain")
        ):
            # A child in pain after an injury is examined the same day (fracture, pulled elbow).
            urgent.append((f"injury with {chief.claim.concept} in a child", trauma.evidence + chief.evidence[:1]))
    if patient.age_years is not None and patient.age_years >= 65:
        for concept in ("shortness of breath", "chest pain"):
            if concept in present:
                urgent.append((f"{concept} at age {_fmt_num(patient.age_years)}", present[concept].evidence))
    if emergency:
        level, driving, why = "emergency", emergency, "emergency red flag, acute chest pain or critical vital"
    elif urgent:
        level, driving, why = "urgent", urgent, "red flag, severity, fever or age"
    else:
        ev = chief.evidence[:1] if chief else []
        return Triage(
            level="routine", rationale="routine: no red flag, severe symptom, fever risk or critical vital documented."
        ), ev
    names = ", ".join(dict.fromkeys(nm for nm, _ in driving[:4]))
    tri_ev: list[str] = []
    for _, ev in driving:
        for quote in ev[:1]:
            if quote not in tri_ev:
                tri_ev.append(quote)
    return Triage(level=level, rationale=f"{level}: {why}: {names}."), tri_ev  # type: ignore[arg-type]


def _is_severe(ex: _Extractor, claim: Claim, g: _Group) -> bool:
    """Severity words on a present symptom: 'severe' / 'excruciating' / 'worst' right next to it."""
    for m, _a in _supporting(g.mentions, "present"):
        i, j = ex.span(m)
        lo, hi = ex.sentence_bounds(ex.sentence_of(i))
        # Only the words right before the mention or a few after ("severe pain", "the pain is severe").
        near = ex.words[max(lo, i - 3) : i] + ex.words[j : min(hi, j + 3)]
        if any(w in _SEVERE for w in near):
            return True
    return False


def _chest_pain_modifiers(ex: _Extractor, b: _Built) -> list[tuple[str, list[str]]]:
    """Emergency features of a present chest pain, said about it in a statement (not only asked):
    at rest, or radiating to the arm or jaw (acute coronary syndrome)."""
    out: list[tuple[str, list[str]]] = []
    norms = [
        c
        for m, a in _supporting(b.group.mentions, "present")
        if a.source == "statement"
        for c in ex.context_norms(m, a, side=8)
    ]
    if any(_has_any(nm, _REST_CUES) for nm in norms):
        out.append(("chest pain at rest", b.evidence))
    if any(any(f" {r} " in nm for r in _RADIATION) and any(f" {s} " in nm for s in _ACS_RADIATION) for nm in norms):
        out.append(("chest pain radiating to the arm or jaw", b.evidence))
    return out
