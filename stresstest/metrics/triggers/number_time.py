"""``number_unit_conflict`` and ``temporal_distortion``: a number, dose, unit or frequency, or a
duration, time anchor or time relation, that changes, is lost or is gained in a region (docs/spec.md §6, §10).
"""

from __future__ import annotations

from stresstest.clinical.lexicon import Mention
from stresstest.clinical.numbers import Quantity
from stresstest.clinical.vocab import category_weight
from stresstest.metrics.align import AlignedPair
from stresstest.metrics.triggers.numbers import (
    _in_terms,
    _may_quantify,
    _numbers,
    _quantity_values,
    _spoken_values,
    _time_words,
    _units,
)
from stresstest.metrics.triggers.regions import _event, _overlapping, _Region, _Side, _union
from stresstest.metrics.triggers.words import _POLLUTION_MIN_WORDS, _RELATIONS, _TIME_WORDS
from stresstest.results import TriggerEvent


def _numbers_and_time(pair: AlignedPair, g: _Region, ref: _Side, hyp: _Side) -> list[TriggerEvent]:
    if not (_may_quantify(pair.ref.words, g.r0, g.r1) or _may_quantify(pair.hyp.words, g.h0, g.h1)):
        return []
    rq = _overlapping(ref.quantities, g.r0, g.r1)
    hq = _overlapping(hyp.quantities, g.h0, g.h1)
    # Widen to whole quantities on both sides, so "2 hours" vs "2 days" compares both whole.
    r0, r1 = min([g.r0, *(a.i for a in rq)]), max([g.r1, *(a.j for a in rq)])
    h0, h1 = min([g.h0, *(a.i for a in hq)]), max([g.h1, *(a.j for a in hq)])
    if rq or hq:
        pi, pj = pair.hyp_range_for_ref(r0, r1)
        qi, qj = pair.ref_range_for_hyp(h0, h1)
        rq = _union(rq, _overlapping(ref.quantities, qi, qj))
        hq = _union(hq, _overlapping(hyp.quantities, pi, pj))
        r0, r1 = min([r0, *(a.i for a in rq)]), max([r1, *(a.j for a in rq)])
        h0, h1 = min([h0, *(a.i for a in hq)]), max([h1, *(a.j for a in hq)])
    ref_digits, hyp_digits = _numbers(pair.ref, r0, r1), _numbers(pair.hyp, h0, h1)
    if ref_digits != hyp_digits and _numbers(pair.ref, r0, r1, True) == _numbers(pair.hyp, h0, h1, True):
        ref_digits = hyp_digits  # "grade iv to v" / "grade 4-5"
    if ref_digits != hyp_digits and _numbers(pair.ref, r0, r1, ranks=True) == _numbers(pair.hyp, h0, h1, ranks=True):
        ref_digits = hyp_digits  # an ordinal is a rank: "for the first week" / "for the week"
    if (
        ref_digits != hyp_digits
        and (rv := _spoken_values(pair.ref, r0, r1)) is not None
        and (rv == _spoken_values(pair.hyp, h0, h1))
    ):
        ref_digits = hyp_digits  # "2 1/2" / "two and a half", "1.5" / "one and a half"
    if (
        ref_digits != hyp_digits
        and (rv2 := _quantity_values(pair.ref, r0, r1))
        and rv2 == _quantity_values(pair.hyp, h0, h1)
    ):
        ref_digits = hyp_digits  # the same values read from the texts: "1 to 10, 10" / "one to ten, ten"
    ref_units = _units(rq, pair.hyp.words[max(0, h0 - 1) : h1 + 2])
    hyp_units = _units(hq, pair.ref.words[max(0, r0 - 1) : r1 + 2])
    ref_terms, hyp_terms = _in_terms(ref, g.r0, g.r1), _in_terms(hyp, g.h0, g.h1)
    ref_time = _time_words(pair.ref.words, g.r0, g.r1, ref_terms)
    hyp_time = _time_words(pair.hyp.words, g.h0, g.h1, hyp_terms)
    # A time word of a clinical term on one side ("night sweats") is no anchor gained on the other ("nights").
    for own, other, words, skip in (
        (ref_time, hyp_time, pair.ref.words, ref_terms),
        (hyp_time, ref_time, pair.hyp.words, hyp_terms),
    ):
        for k in skip:
            base = words[k][:-1] if words[k].endswith("s") and words[k][:-1] in _TIME_WORDS else words[k]
            if base in other and base not in own:
                del other[base]
    inserted = len(g.hyp_words) - len(g.ref_words) >= _POLLUTION_MIN_WORDS
    if inserted and not ref_digits and not ref_units and not ref_time:
        return []  # numbers inside a long inserted run are that run's content: see nonspeech_pollution
    deleted = len(g.ref_words) - len(g.hyp_words) >= _POLLUTION_MIN_WORDS
    if deleted and not hyp_digits and not hyp_units and not hyp_time:
        return []  # a dropped stretch of speech is an omission, not a changed number
    ref_text = pair.ref.original[slice(*pair.ref.char_span(r0, r1))] if r1 > r0 else ""
    hyp_text = pair.hyp.original[slice(*pair.hyp.char_span(h0, h1))] if h1 > h0 else ""
    what = f"{ref_text or 'nothing'!r} became {hyp_text or 'nothing'!r}"
    kinds = {a.item.kind for a in (*rq, *hq) if isinstance(a.item, Quantity)}
    if ref_digits != hyp_digits or ref_units != hyp_units:
        concept = next(iter(ref_units or hyp_units), None)
        if ref_units == hyp_units and not (ref_units or hyp_units) and (ref_time or hyp_time):
            kinds.add("time")
        if "time" in kinds and "frequency" not in kinds:
            why = f"time expression changed: {what}"
            return [_event("temporal_distortion", pair, g, why, concept, rq, hq)]
        dose = "dose" in kinds or _near_medication(ref, r0, r1) or _near_medication(hyp, h0, h1)
        weight = category_weight("dose_conflict" if dose else "number_unit_conflict")
        return [_event("number_unit_conflict", pair, g, f"quantity changed: {what}", concept, rq, hq, weight)]
    if ref_time != hyp_time and not (rq or hq):
        concept = next(iter(ref_time or hyp_time))
        return [_event("temporal_distortion", pair, g, f"time expression changed: {what}", concept)]
    ref_rel = {w for w in g.ref_words if w in _RELATIONS}
    hyp_rel = {w for w in g.hyp_words if w in _RELATIONS}
    if ref_rel and hyp_rel and ref_rel != hyp_rel:
        why = f"time relation changed: {what}"
        return [_event("temporal_distortion", pair, g, why, "/".join(sorted(ref_rel)))]
    return []


def _near_medication(side: _Side, i: int, j: int, window: int = 4) -> bool:
    return any(
        isinstance(a.item, Mention) and a.item.category == "medication"
        for a in side.mentions.overlapping(i - window, j + window)
    )
