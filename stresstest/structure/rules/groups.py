"""Pass 3 of the ``rules`` structurer, groups: one :class:`_Group` per (category, concept) with every
mention and its assertion - lexicon mentions (a relative's history or habit told apart), fever from a measured
temperature, supplemental oxygen, medications (or plans), allergens or a denied allergy - and the reactions said
of an allergen.
"""

from __future__ import annotations

from stresstest.clinical.lexicon import Mention
from stresstest.clinical.negation import Assertion
from stresstest.structure.rules.common import _Extractor, _Found, _Group, _has_any, _is_family
from stresstest.structure.rules.tables import _CATEGORY, _OXYGEN_RE, _PLAN_CUES, _TEMP_REACH


def _temperature_claims(ex: _Extractor) -> list[tuple[Mention, Assertion]]:
    """Fever from a measured temperature ("have you taken his temperature? ... it was 39.4").

    A reading of 37.8-43 (Celsius) or 100-110 (Fahrenheit), or "high", within
    :data:`_TEMP_REACH` tokens after the word makes fever present; a reading of
    35-37.5 / 95-99.5 or "normal" makes it absent. The mention spans the word
    "temperature" through the reading, so its quote holds both.
    """
    out: list[tuple[Mention, Assertion]] = []
    for k, w in enumerate(ex.words):
        if w not in ("temperature", "temp"):
            continue
        status: str | None = None
        end_tok = k
        for kk in range(k + 1, min(len(ex.words), k + _TEMP_REACH)):
            x = ex.words[kk]
            if x in ("high", "raised", "elevated", "spiking") and status is None:
                status, end_tok = "present", kk
                continue  # a reading may follow ("pretty high actually, it was like 39.4")
            if x in ("normal", "fine") and status is None:
                status, end_tok = "absent", kk
                continue
            if x[0].isdigit():
                if status is not None and kk - end_tok > 8:
                    break
                v = _reading(ex, kk)
                if v is None:
                    continue
                if 37.8 <= v <= 43 or 100 <= v <= 110:
                    status, end_tok = "present", kk
                    break
                if 35 <= v <= 37.5 or 95 <= v <= 99.5:
                    status, end_tok = "absent", kk
                    break
        if status is None:
            continue
        start, end = ex.tokens[k].start, ex.tokens[end_tok].end
        m = Mention(start, end, ex.text[start:end], "fever", "symptom")
        cue = ex.tokens[end_tok]
        reading = _reading(ex, end_tok) if ex.words[end_tok][0].isdigit() else None
        if reading is not None:
            ex.temp_at[start] = reading
        out.append((m, Assertion(status, "statement", cue.text, cue.start, cue.end)))  # type: ignore[arg-type]
    return out


def _oxygen_claims(ex: _Extractor) -> list[tuple[Mention, Assertion]]:
    """Supplemental oxygen ("he is on 2 litres of oxygen"): a present finding; its litres are the value."""
    out: list[tuple[Mention, Assertion]] = []
    for mt in _OXYGEN_RE.finditer(ex.text):
        m = Mention(mt.start(), mt.end(), mt.group(0), "supplemental oxygen", "finding")
        out.append((m, Assertion("present", "statement")))
    return out


def _reading(ex: _Extractor, k: int) -> float | None:
    """The number starting at token k, joining "39" "." "4" back into 39.4."""
    try:
        v = float(ex.words[k])
    except ValueError:
        return None
    if (
        k + 1 < len(ex.tokens)
        and ex.text[ex.tokens[k].end : ex.tokens[k + 1].start] == "."
        and ex.words[k + 1].isdigit()
    ):
        v = float(f"{ex.words[k]}.{ex.words[k + 1]}")
    return v


def _no_allergy_statements(ex: _Extractor) -> list[Mention]:
    """'allergies' / 'allergic' cue tokens, used for 'no allergies' (absent) claims."""
    out = []
    for k, w in enumerate(ex.words):
        if w in ("allergies", "allergic", "nkda"):
            t = ex.tokens[k]
            out.append(Mention(t.start, t.end, t.text, "allergies", "allergy"))
    return out


def _pass_groups(
    ex: _Extractor, found: _Found, assertions: dict[int, Assertion]
) -> tuple[dict[tuple[str, str], _Group], dict[str, list[str]]]:
    """One group per (category, concept) with every mention and its assertion; allergen reactions."""
    groups: dict[tuple[str, str], _Group] = {}
    reactions: dict[str, list[str]] = {}

    def add(category: str, concept: str, m: Mention, a: Assertion, red: bool = False, hint: str | None = None) -> None:
        g = groups.get((category, concept))
        if g is None:
            g = groups[(category, concept)] = _Group(category, concept, red_flag=red, triage_hint=hint)
        g.red_flag = g.red_flag or red
        g.mentions.append((m, a))

    for m in found.lex:
        if m.category in ("symptom", "finding"):
            tok = ex.span(m)[0]
            hit = next((r for r in found.regions if r[0] <= tok < r[1]), None)
            if hit is not None:
                # The reaction to an allergen ("gives me hives"), not a current symptom.
                reactions.setdefault(hit[2], [])
                if m.concept not in reactions[hit[2]]:
                    reactions[hit[2]].append(m.concept)
                continue
        category = _CATEGORY.get(m.category, "symptom")
        if category == "history" and _is_family(ex, m):
            category = "family_history"
        if category == "social" and _is_family(ex, m):
            continue  # "my dad smoked two packs a day": the relative's habit, not the patient's
        add(category, m.concept, m, assertions[m.start], m.red_flag and category == "symptom", m.triage_hint)
    for m, a in _temperature_claims(ex):
        add("symptom", "fever", m, a)
    for m, a in _oxygen_claims(ex):
        add("finding", "supplemental oxygen", m, a)
    for idx, d in enumerate(found.drugs):
        if idx in found.consumed:
            continue
        category = "plan" if _has_any(ex.context_norms(d, side=8)[0], _PLAN_CUES) else "medication"
        add(category, d.concept, d, ex.ctx.assertion(d))
    for al in found.allergens:
        add("allergy", al.concept, al, ex.ctx.assertion(al))
    if not found.allergens:
        for cue in _no_allergy_statements(ex):
            a = ex.ctx.assertion(cue)
            if a.status == "absent":
                add("allergy", "allergies", cue, a)
    return groups, reactions
