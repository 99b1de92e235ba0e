"""Pass 5 of the ``rules`` structurer, claims: status, value/unit, time and laterality per group (a
dialogue answer first, then quantities next to a mention, then a descriptive qualifier or a pain's character),
ids ``c1..`` in text order; and the fixes on the built claims (a productive cough, an injury's time,
renumbering).
"""

from __future__ import annotations

import re

from stresstest.clinical.lexicon import Mention
from stresstest.clinical.negation import Assertion
from stresstest.records import revise
from stresstest.schema import Claim
from stresstest.structure.rules.common import (
    _COLOURS,
    _TYPE_HEDGES,
    _TYPE_LEADS,
    _Built,
    _colour_span,
    _Dialogue,
    _exertional_only,
    _Extractor,
    _fmt_num,
    _fmt_qty,
    _fmt_value,
    _Group,
    _has_any,
    _hours,
    _is_modifier,
    _is_pain_concept,
    _num_word,
    _qualities_end,
    _supporting,
    _vague,
)
from stresstest.structure.rules.history import _HABIT_GAP, _HABITS, _habit_attributes, _medication_time, _partner
from stresstest.structure.rules.tables import (
    _ACUTE_INJURY_DAYS,
    _AMOUNT_HEDGES,
    _COUGH_WORDS,
    _DIAGNOSED_CUES,
    _DRINK_UNITS,
    _FAMILY,
    _FORMER_CUES,
    _HEAVY_DRINK,
    _OXYGEN_RE,
    _PAIN_QUALITIES,
    _PAST_MARKERS,
    _QUALIFIERS,
    _QUALITY_REACH,
    _TALKED_ABOUT,
    _TEMPERATURE_UNITS,
    _VAGUE_CONCEPTS,
)


def _narrows(first: str | None, later: str) -> bool:
    """Whether a later onset answer restates ``first`` as a range that contains it ("2 weeks" ->
    "2-3 weeks"): the clinician's clarifying question got the more exact answer."""
    if not first:
        return False
    a, b = first.split(" ", 1) if " " in first else (first, "")
    c, d = later.split(" ", 1) if " " in later else (later, "")
    if b != d or "-" not in c or "-" in a:
        return False
    try:
        lo, hi = (float(x) for x in c.split("-", 1))
        return lo <= float(a) <= hi
    except ValueError:
        return False


def _anchored(time: str | None) -> bool:
    """ "last night", "since Monday", "this morning", "yesterday": a point in time, not a duration."""
    return bool(time) and time.startswith(("last ", "this ", "since ", "yesterday"))  # type: ignore[union-attr]


_RELATIVE = {
    "mom": "mother",
    "mum": "mother",
    "mom's": "mother",
    "mum's": "mother",
    "mother's": "mother",
    "dad": "father",
    "dad's": "father",
    "father's": "father",
    "grandma": "grandmother",
    "grandpa": "grandfather",
    "aunts": "aunt",
    "uncles": "uncle",
    "sisters": "sister",
    "brothers": "brother",
    "cousins": "cousin",
    "sons": "son",
    "daughters": "daughter",
    "parent": "parents",
    "sibling": "siblings",
}


def _relative(ex: _Extractor, support: list[tuple[Mention, Assertion]]) -> str | None:
    """Who in the family has it ("my dad has high blood pressure" -> father), when the sentence names
    exactly one kind of relative next to the condition; None for "the family" or two relatives."""
    for m, _a in support:
        i, j = ex.span(m)
        lo, hi = ex.sentence_bounds(ex.sentence_of(i))
        near = ex.words[max(lo, i - 8) : i] + ex.words[j : min(hi, j + 4)]
        kinds = {_RELATIVE.get(w, w) for w in near if w in _FAMILY and w != "family"}
        if len(kinds) == 1:
            return kinds.pop()
        if kinds:
            return None
    return None


_RARELY = (
    "rarely",
    "occasionally",
    "socially",
    "once in a while",
    "every now and then",
    "now and again",
    "special occasions",
)


def _rarely(ex: _Extractor, g: _Group) -> bool:
    """The "no" that denied a habit is followed, in the same answer, by how rarely ("No, very rarely")."""
    for _m, a in g.mentions:
        if a.source != "answer" or a.cue_start is None:
            continue
        k = ex._tok_index(a.cue_start)
        _lo, hi = ex.sentence_bounds(ex.sentence_of(k))
        if _has_any(" " + " ".join(ex.words[k:hi]) + " ", _RARELY):
            return True
    return False


def _diagnosed(ex: _Extractor, g: _Group) -> bool:
    """A sentence that names the illness says the patient tested positive or was diagnosed, or a verb of
    having it comes right before it ("I had COVID", "caught the flu")."""
    for m, _a in g.mentions:
        i, _j = ex.span(m)
        lo, hi = ex.sentence_bounds(ex.sentence_of(i))
        if any(w in ("positive", "diagnosed") for w in ex.words[lo:hi]) or any(
            w in _DIAGNOSED_CUES for w in ex.words[max(lo, i - 2) : i]
        ):
            return True
    return False


def _aggregate_status(items: list[tuple[Mention, Assertion]]) -> str | None:
    statuses = [a.status for _, a in items if a.source != "unanswered"]
    if not statuses:
        return None
    for st in ("present", "absent", "uncertain"):
        if st in statuses:
            return st
    return None  # pragma: no cover


def _only_past(ex: _Extractor, g: _Group) -> bool:
    """Every present mention of a symptom describes a past episode (a marker such as "last week",
    "not anymore", "used to" in its sentence or the two before it) and a direct question about it
    was answered no: the symptom is absent now."""
    answered_no = any(a.status == "absent" and a.source == "answer" for _m, a in g.mentions)
    present = _supporting(g.mentions, "present")
    if not answered_no or not present:
        return False
    for m, _a in present:
        s = ex.sentence_of(ex.span(m)[0])
        lo = ex.sentence_bounds(max(0, s - 2))[0]
        hi = ex.sentence_bounds(min(len(ex.ctx.sent_start) - 1, s + 1))[1]
        if not _has_any(" " + " ".join(ex.words[lo:hi]) + " ", _PAST_MARKERS):
            return False
    return True


_PAST_USE_CONCEPTS = frozenset({"recreational drug use"})
_PAST_USE = (
    "used to",
    "in the past",
    "when i was younger",
    "when i was young",
    "when i was a teenager",
    "as a teenager",
    "in college",
    "in high school",
    "in university",
    "back in the day",
    "years ago",
    "not anymore",
    "no longer",
    "haven't really recently",
    "haven't recently",
    "not recently",
    "haven't since",
    "quit",
    "stopped",
)


def _past_drug_use(ex: _Extractor, g: _Group) -> list[tuple[Mention, Assertion]]:
    """The present mentions of a habit when the patient denied it when asked and every one of them is about the
    past ("Any recreational drugs? - Um, no, no. I mean, when I was like younger I sometimes like would use
    marijuana, but I haven't really recently"): docs/gold_guide.md writes the use as absent with the history in
    the value, as for an ex-smoker. [] when the use is current or was not denied."""
    if not any(a.status == "absent" and a.source == "answer" for _m, a in g.mentions):
        return []
    present = _supporting(g.mentions, "present")
    for m, _a in present:
        lo, hi = ex.sentence_bounds(ex.sentence_of(ex.span(m)[0]))
        said = " " + " ".join(w for w in ex.words[lo:hi] if w not in _HABIT_GAP) + " "
        if not _has_any(said, _PAST_USE):
            return []
    return present


def _pass_claims(ex: _Extractor, groups: dict[tuple[str, str], _Group], dialogue: _Dialogue) -> list[_Built]:
    """Status, value/unit, time and laterality per group; ids c1.. in text order.

    Attribute precedence: an answer to a question about this topic (rating, onset, distance)
    beats a quantity found next to a mention; a mention's own sentence beats its answer's.
    """
    rows: list[tuple[int, Claim, list[str], _Group]] = []
    for key, g in groups.items():
        if g.concept in _VAGUE_CONCEPTS or (g.concept in _TALKED_ABOUT and not _diagnosed(ex, g)):
            continue
        status = _aggregate_status(g.mentions)
        if status is None:
            continue
        read_as = status  # the mentions that decided the status support the claim
        if status == "present" and g.category == "symptom" and _only_past(ex, g):
            status = "absent"  # "Any cough? No, not right now, but I did have a flu last week..."
        if (
            status == "uncertain"
            and g.category in ("social", "medication")
            and all(
                a.status != "uncertain" or a.source == "unanswered" or (a.cue or "").lower() in _AMOUNT_HEDGES
                for _m, a in g.mentions
            )
            and any(a.source != "unanswered" for _m, a in g.mentions)
        ):
            status = "present"  # "maybe a glass of wine on the weekend": the hedge is on the amount
        rare = status == "absent" and g.category == "social" and _rarely(ex, g)
        if rare:
            status = "present"  # "Do you drink? - No, very rarely": some, not none
        past_use = _past_drug_use(ex, g) if status == "present" and g.concept in _PAST_USE_CONCEPTS else []
        if past_use:
            status = "absent"  # "any recreational drugs? - no, no. When I was younger I would use marijuana"
        support = _supporting(g.mentions, read_as if read_as == "uncertain" or rare else status)
        first_m, _first_a = support[0]
        evidence: list[str] = []
        for m, a in support[:2]:
            for quote in ex.evidence(m, a):
                if quote not in evidence:
                    evidence.append(quote)
        value, unit, time, more = _near_attributes(ex, g, support)
        evidence += [q for q in more if q not in evidence]
        if past_use:
            m, a = past_use[0]
            drug = m.surface.lower()
            value, unit, time = (None if "drug" in drug else f"{drug} in the past"), None, None
            evidence += [q for q in ex.evidence(m, a) if q not in evidence]
        if status == "present":
            used: set[str] = set()  # the first answer of each kind wins (later ones are about episodes)
            for ans in dialogue.answers.get(key, []):
                if ans.kind == "confirm" and ans.time and not _vague(ans.time):
                    time = ans.time  # "a couple of days ... so about 2-3 days? - about 3 days ago"
                    used.add("onset")
                    for quote in ans.evidence:
                        if quote not in evidence:
                            evidence.append(quote)
                    continue
                if ans.kind == "onset" and "onset" in used and ans.time and _narrows(time, ans.time):
                    time = ans.time  # "a couple of weeks ... two weeks, three weeks? - about two to three weeks"
                    continue
                if (
                    ans.kind == "onset"
                    and "onset" in used
                    and ans.time
                    and _anchored(time)
                    and not _anchored(ans.time)
                    and not _vague(ans.time)
                ):
                    time = ans.time  # "started last night ... how long has it been going on? - maybe 8 hours"
                    for quote in ans.evidence:
                        if quote not in evidence:
                            evidence.append(quote)
                    continue
                if ans.kind in used:
                    continue
                if ans.kind == "onset" and ans.time:
                    if _vague(ans.time) and time is not None and not _vague(time):
                        continue  # "a few days" does not replace "3 days"
                    time = ans.time
                    if _vague(time):
                        continue  # keep reading: a later answer may give the number
                elif ans.kind == "describe" and ans.value and value is None:
                    value, unit = ans.value, None
                elif ans.kind == "amount" and ans.value and value is None and unit is None:
                    value, unit, time = ans.value, ans.unit, time or ans.time
                elif ans.kind == "frequency" and ans.time and time is None:
                    time = ans.time  # "how often? - two to three times a week" (no onset was given)
                elif (
                    ans.kind in ("rating", "distance")
                    and ans.value
                    and (ans.kind == "rating" or value is None or unit is None)
                    and not (ans.kind == "rating" and g.concept == "cough")
                ):  # a cough's value is its type
                    value, unit = ans.value, ans.unit
                else:
                    continue
                used.add(ans.kind)
                for quote in ans.evidence:
                    if quote not in evidence:
                        evidence.append(quote)
        if g.category == "social" and status == "present":
            _social_extras(ex, g, support, value, unit, time)
            if g.concept in _HABITS:
                value, unit, time, more = _habit_attributes(ex, g, value, unit, time)
                evidence += [q for q in more if q not in evidence]
            if g.concept == "sexually active" and value is None:
                value, more = _partner(ex, g)
                evidence += [q for q in more if q not in evidence]
            if g.concept == "smoking" and "former" in g.extra:
                value = value or "former"
        if g.category == "medication" and status == "present" and time is None:
            time, more = _medication_time(ex, g)
            evidence += [q for q in more if q not in evidence]
        if g.category == "family_history" and status == "present" and value is None and unit is None:
            value = _relative(ex, support)
        if (
            g.concept == "shortness of breath"
            and status == "present"
            and value is None
            and unit is None
            and _exertional_only(ex, g)
        ):
            value = "on exertion"  # docs/gold.md: breathlessness "on exertion" or a distance as its value
        laterality = None
        if g.category in ("symptom", "finding"):
            for m, _a in support:
                laterality = ex.laterality(m)
                if laterality:
                    break
        claim = Claim(
            id="",
            category=g.category,  # type: ignore[arg-type]
            concept=g.concept,
            status=status,  # type: ignore[arg-type]
            value=value,
            unit=unit,
            time=time,
            laterality=laterality,  # type: ignore[arg-type]
        )
        rows.append((first_m.start, claim, evidence, g))
    rows.sort(key=lambda t: (t[0], t[1].category, t[1].concept))
    return [
        _Built(revise(claim, id=f"c{n}"), evidence, g, pos) for n, (pos, claim, evidence, g) in enumerate(rows, start=1)
    ]


def _near_attributes(
    ex: _Extractor, g: _Group, support: list[tuple[Mention, Assertion]]
) -> tuple[str | None, str | None, str | None, list[str]]:
    """(value, unit, time, extra quotes) from quantities next to the supporting mentions (or in their
    answer); the extra quotes cover what came from the next sentence, so every field keeps its evidence."""
    more: list[str] = []
    value = unit = time = None
    for m, _a in support:
        if m.start in ex.temp_at:
            t = ex.temp_at[m.start]
            value, unit = _fmt_num(t), "°C" if t < 50 else "°F"  # 36-43 is Celsius, 95-110 Fahrenheit
            break
        if g.concept == "supplemental oxygen":
            n = _OXYGEN_RE.match(m.surface)
            if n and n.group("n"):
                value, unit = _fmt_num(_num_word(n.group("n")) or 0), "litres"
            break
    for m, a in support:
        if g.concept == "supplemental oxygen":
            break
        qs = ex.quantities_near(m, a, after_only=g.category in ("medication", "plan"))
        for q in qs:
            if (
                q.kind in ("time", "frequency")
                and (time is None or _vague(time))
                and not (time is not None and _vague(_fmt_qty(q)))
            ):
                time = _fmt_qty(q)  # a number beats "a few days" said alongside it
            elif q.kind in ("dose", "count", "measure") and value is None and q.value is not None and unit is None:
                if q.unit_canonical is None and g.category not in ("medication", "plan", "social"):
                    continue  # a bare number next to a symptom is rarely its value
                if q.unit_canonical == "years of age":
                    continue  # the patient's age, not the symptom's value
                if q.unit_canonical in _TEMPERATURE_UNITS and g.concept != "fever":
                    continue  # "vomiting ... and a temperature of 38.3 degrees": the fever's value
                value = _fmt_value(q)
                unit = q.unit_canonical
        if value is not None or (time is not None and not _vague(time)):
            break
    rough = time is not None and _vague(time)
    if g.category == "symptom" and (time is None or rough or (value is None and unit is None)):
        next_time, next_value, next_unit, quote = _next_sentence_attrs(ex, support, g.concept)
        # "over the last few days. I started having it around three days ago": the number refines it
        better = next_time is not None and (time is None or (rough and not _vague(next_time)))
        used_next = better or (value is None and unit is None and next_value is not None)
        time = next_time if better else time
        if value is None and unit is None:
            value, unit = next_value, next_unit
        if used_next and quote:
            more.append(quote)
    if value is None and unit is None and g.concept == "diabetes":
        value = _diabetes_type(ex, support)
    if (
        value is None
        and unit is None
        and g.concept == "joint pain"
        and any(" other joints " in c or " any other joint " in c for m, a in support for c in ex.context_norms(m, a))
    ):
        value = "other joints"  # "Any pain in other joints? - No": the pain asked of the joints not presenting
    if value is None and g.concept in _QUALIFIERS:
        value = _qualifier(ex, g.concept, support)
    if value is None and unit is None and g.concept == "cough":
        found = _cough_type_answer(ex)
        if found:
            value, quote = found
            more.append(quote)
    if value is None and g.category == "symptom" and _is_pain_concept(g.concept):
        value = _pain_quality(ex, support)
    return value, unit, time, more


_DIABETES_TYPE = re.compile(r"\btype\s*(1|2|one|two|i{1,2})\b", re.IGNORECASE)


def _diabetes_type(ex: _Extractor, support: list[tuple[Mention, Assertion]]) -> str | None:
    """ "type 2 diabetes", "diabetes, type one": "type 1" / "type 2" said with a supporting mention."""
    for m, a in support:
        for norm in ex.context_norms(m, a, side=3):
            t = _DIABETES_TYPE.search(norm)
            if t:
                n = t.group(1).lower()
                return f"type {'1' if n in ('1', 'one', 'i') else '2'}"
    return None


def _qualifier(ex: _Extractor, concept: str, support: list[tuple[Mention, Assertion]]) -> str | None:
    """A descriptive value said next to the symptom or in its answer: sputum colour/consistency
    ("yellow sputum", "it's creamy yellow"), cough type ("a dry cough")."""
    words, reach = _QUALIFIERS[concept]
    if concept == "cough":  # its type (dry / productive) before a sound ("hacking", "barking")
        word = _first_word_near(ex, support, _COUGH_TYPES, reach) or _first_word_near(ex, support, words, reach)
    elif concept == "sputum":
        return _colour_phrase(ex, support, words, reach)
    else:
        word = _first_word_near(ex, support, words, reach)
    return _QUALIFIER_SPELLING.get(word, word) if word else None


def _colour_phrase(
    ex: _Extractor, support: list[tuple[Mention, Assertion]], words: frozenset[str], reach: int
) -> str | None:
    """Sputum's look as said: the first qualifier near a supporting mention, a colour taken with the colours and
    shade said with it ("dark yellow greenish mucus", "clear to white", "yellowish green"), else the word."""
    for m, a in support:
        for norm in ex.context_norms(m, a, side=reach):
            toks = norm.split()
            for i, w in enumerate(toks):
                if w not in words:
                    continue
                if w not in _COLOURS:
                    return w
                lo, hi = _colour_span(toks, i)
                return " ".join(toks[lo:hi])
    return None


_COUGH_TYPES = frozenset({"dry", "wet", "productive", "chesty"})


_QUALIFIER_SPELLING = {"wet": "productive", "chesty": "productive"}


def _cough_type_answer(ex: _Extractor) -> tuple[str, str] | None:
    """A cough's type said as a reply about the cough ("Is it a dry cough? - No, it's it's dry. It's very
    dry."): (dry / productive, the reply's quote), or None."""
    for s in range(1, len(ex.ctx.sent_start)):
        if ex.ctx.ends_q[s]:
            continue
        plo, phi = ex.sentence_bounds(s - 1)
        if not any(w in _COUGH_WORDS for w in ex.words[plo:phi]):
            continue
        lo, hi = ex.sentence_bounds(s)
        k = lo
        while k < hi and ex.words[k] in _TYPE_LEADS:
            k += 1
        if k >= hi or ex.words[k] not in ("it's", "its", "it"):
            continue
        k += 2 if ex.words[k] == "it" and k + 1 < hi and ex.words[k + 1] in ("is", "was", "has") else 1
        while k < hi and ex.words[k] in _TYPE_HEDGES:
            k += 1
        if (
            k < hi
            and ex.words[k] in ("dry", "wet", "productive", "chesty")
            and (k + 1 >= hi or ex.words[k + 1] not in ("skin", "throat", "mouth", "eyes", "air"))
        ):
            w = ex.words[k]
            return _QUALIFIER_SPELLING.get(w, w), ex.quote(lo, hi, lo, hi)
    return None


def _first_word_near(
    ex: _Extractor, support: list[tuple[Mention, Assertion]], words: frozenset[str], reach: int
) -> str | None:
    """The first of ``words`` within ``reach`` tokens of a supporting mention (or in its answer)."""
    for m, a in support:
        for norm in ex.context_norms(m, a, side=reach):
            for w in norm.split():
                if w in words:
                    return w
    return None


def _pain_quality(ex: _Extractor, support: list[tuple[Mention, Assertion]]) -> str | None:
    """A pain's character said next to it ("a sharp pain", "it's dull and achy"): the first word of
    :data:`_PAIN_QUALITIES` within :data:`_QUALITY_REACH` tokens of a supporting mention, with the qualities
    said right after it ("dull and achy" -> "dull achy")."""
    for m, a in support:
        for norm in ex.context_norms(m, a, side=_QUALITY_REACH):
            toks = norm.split()
            for i, w in enumerate(toks):
                if w in _PAIN_QUALITIES:
                    return " ".join(t for t in toks[i : _qualities_end(toks, i)] if t != "and")
    return None


def _next_sentence_attrs(
    ex: _Extractor, support: list[tuple[Mention, Assertion]], concept: str
) -> tuple[str | None, str | None, str | None, str | None]:
    """(time, value, unit) said right after a statement of the symptom ("he's had this cough... It's been
    happening for the past two days"; "I've lost a lot of weight. Probably like 8 to 10 pounds"): the next
    sentence, when it is a statement that names no other clinical concept. The value must carry a unit
    (a bare number there is rarely the symptom's). The last element is that sentence's quote."""
    for m, a in support:
        if a.source != "statement":
            continue
        s = ex.sentence_of(ex.span(m)[0])
        if ex.ctx.ends_q[s] or s + 1 >= len(ex.ctx.sent_start) or ex.ctx.ends_q[s + 1] or s + 1 in ex.mention_sents:
            continue
        lo, hi = ex.sentence_bounds(s + 1)
        time = value = unit = None
        for q, k in zip(ex.quantities, ex.qty_tok, strict=True):
            if not lo <= k < hi:
                continue
            if q.kind == "time" and (q.value is not None or q.unit_canonical) and time is None:
                time = _fmt_qty(q)  # "... really wheezy. I notice that mostly last night." (an anchor too)
            elif (
                q.kind in ("measure", "dose")
                and q.value is not None
                and q.unit_canonical
                and value is None
                and q.unit_canonical != "years of age"
                and (concept == "fever" or q.unit_canonical not in _TEMPERATURE_UNITS)
            ):
                value, unit = _fmt_value(q), q.unit_canonical
        return time, value, unit, ex.quote(lo, hi, lo, hi) if (time or value) else None
    return None, None, None, None


def _social_extras(
    ex: _Extractor,
    g: _Group,
    support: list[tuple[Mention, Assertion]],
    value: str | None,
    unit: str | None,
    time: str | None,
) -> None:
    """Former smoker / heavy drinking markers on a present social claim (``g.extra``)."""
    norm = " ".join(c for m, a in support for c in ex.context_norms(m, a))
    if any(f" {w} " in norm for w in _FORMER_CUES) and g.concept == "smoking":
        g.extra["former"] = "1"
    if g.concept == "alcohol" and _has_any(norm, _HEAVY_DRINK):
        g.extra["heavy"] = "1"
    if g.concept == "alcohol" and unit in _DRINK_UNITS and value:
        try:
            n = float(value.split("-")[-1])
        except ValueError:
            n = 0.0
        per_week = time is not None and "week" in time
        if (per_week and n >= 14) or (not per_week and time is not None and n >= 4):
            g.extra["heavy"] = "1"


def _productive_cough(built: list[_Built]) -> list[_Built]:
    """A cough with sputum brought up is a productive cough: the cough's value when nothing else filled it
    (docs/gold.md: cough ``dry`` / ``productive``), with the sputum's evidence."""
    sputum = next((b for b in built if b.claim.concept == "sputum" and b.claim.status == "present"), None)
    if sputum is None:
        return built
    out = []
    for b in built:
        if b.claim.concept == "cough" and b.claim.status == "present" and not b.claim.value and not b.claim.unit:
            b = _Built(
                revise(b.claim, value="productive"),
                b.evidence + [q for q in sputum.evidence[:1] if q not in b.evidence],
                b.group,
                b.pos,
            )
        out.append(b)
    return out


def _injury_time(built: list[_Built]) -> list[_Built]:
    """An injury and the pain it caused began together: a present trauma without a time takes the presenting
    pain's (the first present pain at a site), and that pain without a time takes a recent trauma's (at most
    :data:`_ACUTE_INJURY_DAYS` days; an old injury talked about did not start today's pain), with the other
    claim's evidence."""
    trauma = next((b for b in built if b.claim.concept == "trauma" and b.claim.status == "present"), None)
    pain = next(
        (
            b
            for b in built
            if b.claim.category == "symptom"
            and b.claim.status == "present"
            and b.claim.concept.endswith(" pain")
            and not _is_modifier(b.claim.concept)
        ),
        None,
    )
    if trauma is None or pain is None or bool(trauma.claim.time) == bool(pain.claim.time):
        return built
    if trauma.claim.time and (_hours(trauma.claim.time) or 1e9) > _ACUTE_INJURY_DAYS * 24:
        return built
    src, dst = (pain, trauma) if pain.claim.time else (trauma, pain)
    filled = _Built(
        revise(dst.claim, time=src.claim.time),
        dst.evidence + [q for q in src.evidence[:2] if q not in dst.evidence],
        dst.group,
        dst.pos,
    )
    return [filled if b is dst else b for b in built]


def _renumber(built: list[_Built]) -> list[_Built]:
    """Claims in text order (of their first supporting mention or question) with ids c1.."""
    ordered = sorted(built, key=lambda b: (b.pos, b.claim.category, b.claim.concept))
    return [_Built(revise(b.claim, id=f"c{n}"), b.evidence, b.group, b.pos) for n, b in enumerate(ordered, start=1)]
