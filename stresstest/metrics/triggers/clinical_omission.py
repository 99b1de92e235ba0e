"""``clinical_omission`` of clinical terms: a lexicon, drug, vocabulary term, a number lost with a
dropped stretch or a rare word of the reference that does not survive in the hypothesis (docs/spec.md §6, §10).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stresstest.clinical.lexicon import Mention
from stresstest.clinical.numbers import is_number_token
from stresstest.clinical.vocab import category_weight, unit_words, zipf
from stresstest.metrics.align import AlignedPair, TokenizedText
from stresstest.metrics.triggers.regions import _Ann, _event, _named, _overlapping, _Region, _Side
from stresstest.metrics.triggers.words import (
    _CLOSE,
    _FILLERS,
    _FUNCTION,
    _NEG_CUES,
    _POLLUTION_MIN_WORDS,
    _ratio,
    _stem,
)
from stresstest.records import revise
from stresstest.results import TriggerEvent

# A lost reference word this rare (wordfreq Zipf) and of no known category still counts as clinical content
# ("macromastia", "hawkins"), with the small rare_word weight.
_RARE_ZIPF = 3.0

# A hypothesis word this common is an ordinary word, so a close spelling of the term is no recovery
# ("persa gel" -> "person gel"); rarer near-spellings keep the term readable ("tacrolimus" -> "tacromilius").
_COMMON_ZIPF = 3.5
_RESPELLED = 0.6
_SURVIVAL_SLACK = 2


@dataclass(frozen=True)
class _Unit:
    """A clinical unit of the reference: tokens [i, j), its concept, category and weight key."""

    i: int
    j: int
    concept: str
    category: str
    key: str
    ann: _Ann | None


def _ref_units(pair: AlignedPair, g: _Region, ref: _Side) -> list[_Unit]:
    """Clinical units of the reference overlapping region ``g``: lexicon, drugs, terms, then rare words."""
    units: list[_Unit] = []
    taken: set[int] = set()
    for a in (*_overlapping(ref.mentions, g.r0, g.r1), *_overlapping(ref.terms, g.r0, g.r1)):
        m = a.item
        if not isinstance(m, Mention) or any(k in taken for k in range(a.i, a.j)):
            continue
        if m.category == "family_member" and not _condition_near(ref, a.i, a.j):
            continue  # "dad and I both think..." is no family history
        if m.category == "medication":
            key = "high_risk_medication" if m.triage_hint == "high_risk" else "medication"
        elif m.red_flag:
            key = "red_flag"
        else:
            key = m.category
        units.append(_Unit(a.i, a.j, m.concept, m.category, key, a))
        taken.update(range(a.i, a.j))
    long_deletion = len(g.ref_words) - len(g.hyp_words) >= _POLLUTION_MIN_WORDS
    for k in range(g.r0, g.r1):
        w = pair.ref.words[k]
        if k in taken or _fragment(pair.ref, k):
            continue
        if long_deletion and is_number_token(w) and not w.endswith(("st", "nd", "rd", "th")):
            # A number lost with a dropped stretch of speech (number_unit_conflict leaves these alone).
            units.append(_Unit(k, k + 1, w, "quantity", "quantity", None))
            continue
        if not w.isalpha() or len(w) < 4 or w in _FUNCTION or w in _FILLERS or w in unit_words():
            continue  # units are number_unit_conflict's ("milliliters" / "ml" is no loss)
        if zipf(w) < _RARE_ZIPF:
            units.append(_Unit(k, k + 1, w, "rare_word", "rare_word", None))
    return units


_CONDITION_CATEGORIES = frozenset({"symptom", "finding", "history", "risk", "habit"})


def _condition_near(side: _Side, i: int, j: int, window: int = 6) -> bool:
    """Is a condition (symptom, finding, history, habit) mentioned within ``window`` tokens of [i, j)?"""
    return any(
        isinstance(a.item, Mention) and a.item.category in _CONDITION_CATEGORIES
        for a in (*side.mentions.overlapping(i - window, j + window), *side.terms.overlapping(i - window, j + window))
    )


def _fragment(tt: TokenizedText, k: int) -> bool:
    """A cut-off word ("breash-", "bloo-"): a disfluency, not content."""
    end = tt.tokens[k].end
    if end > 0 and tt.original[end - 1] == "-":
        return True
    return (
        end < len(tt.original)
        and tt.original[end] == "-"
        and (end + 1 == len(tt.original) or not tt.original[end + 1].isalnum())
    )


def _survival(pair: AlignedPair, u: _Unit, hyp: _Side) -> str:
    """ "kept", "garbled" (a close, uncommon spelling remains) or "lost" for one reference unit."""
    pi, pj = pair.hyp_range_for_ref(u.i, u.j)
    lo, hi = max(0, pi - _SURVIVAL_SLACK), min(len(pair.hyp), pj + _SURVIVAL_SLACK)
    if u.ann is not None and any(
        isinstance(b.item, Mention) and b.item.concept == u.concept
        for b in (*hyp.mentions.overlapping(lo, hi), *hyp.terms.overlapping(lo, hi))
    ):
        return "kept"
    words = [w for w in pair.ref.words[u.i : u.j] if w not in _FUNCTION]
    window = pair.hyp.words[lo:hi]
    stems = {_stem(h) for h in window}
    if all(w in window or _stem(w) in stems or any(_same_family(w, h) for h in window) for w in words):
        return "kept"
    joined = "".join(pair.ref.words[u.i : u.j])
    hyp_joined = "".join(window)
    if joined and joined in hyp_joined:
        return "kept"  # "breastfeeding" / "breast feeding", "atenolol" / "a tenolol"
    for a in range(len(window)):
        for b in range(a + 1, min(len(window), a + 3) + 1):
            cand = "".join(window[a:b])
            r = _ratio(joined, cand)
            if u.category == "rare_word" and r >= _RESPELLED:
                return "kept"  # a rare word of no known category respelled ("culdesac" / "culvasec")
            if r >= _CLOSE and all(zipf(h) < _COMMON_ZIPF for h in window[a:b]):
                return "garbled"
    return "lost"


def _same_family(a: str, b: str) -> bool:
    """Two forms of one word ("trichomoniasis" / "trichomonas"; "swollen" / "swelling" are not): a shared
    prefix of at least 7 letters covering most of the shorter word, or a word of 5+ letters extended by at
    most 3."""
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 5 and long_.startswith(short) and len(long_) - len(short) <= 3:
        return True  # "weigh" / "weight", "smoke" / "smoker" ("pain" / "paint" is too short to tell)
    n = 0
    for x, y in zip(a, b):  # noqa: B905 - compare up to the shorter word
        if x != y:
            break
        n += 1
    return n >= 7 and n >= 0.7 * min(len(a), len(b))


def _negated_before(words: Sequence[str], i: int) -> bool:
    return any(w in _NEG_CUES for w in words[max(0, i - 4) : i])


def _omissions(pair: AlignedPair, g: _Region, ref: _Side, hyp: _Side, explained: set[str]) -> list[TriggerEvent]:
    """Clinical terms of the reference in region ``g`` that the hypothesis loses or turns into other words."""
    out: list[TriggerEvent] = []
    for u in _ref_units(pair, g, ref):
        if u.concept in explained:
            continue
        state = _survival(pair, u, hyp)
        if state == "kept":
            continue
        weight = category_weight(u.key)
        surface = pair.ref.original[slice(*pair.ref.char_span(u.i, u.j))]
        why = f"{u.category.replace('_', ' ')} {_named(u.concept, surface)}"
        negated = _negated_before(pair.ref.words, u.i) and not any(
            w in _NEG_CUES for w in pair.hyp.words[max(0, g.h0 - 4) : g.h1]
        )
        if negated:
            weight += category_weight("negated")
            why += " (negated)"
        if state == "garbled":
            weight *= category_weight("garbled")
            why += " garbled in the hypothesis (a close spelling remains)"
        else:
            why += " does not survive in the hypothesis"
        ev = _event("clinical_omission", pair, g, why, u.concept, weight=round(weight, 3))
        # Quote the lost term itself (several terms lost in one region are several events).
        rs, re_ = pair.ref.char_span(u.i, u.j)
        out.append(revise(ev, ref_start=rs, ref_end=re_, ref_span=pair.ref.original[rs:re_]))
    return out
