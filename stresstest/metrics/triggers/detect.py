""":func:`detect_triggers`: every detector over every region of one alignment, and the per-pair
numbers read off the events (:func:`trigger_risk`, :func:`trigger_counts`, :func:`content_word_errors`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from stresstest.clinical.vocab import match_terms
from stresstest.metrics.align import AlignedPair, align
from stresstest.metrics.triggers.clinical_omission import _omissions
from stresstest.metrics.triggers.entity_substitution import _entities
from stresstest.metrics.triggers.lost_answers import _lost_answers
from stresstest.metrics.triggers.negation_flip import _negation_cue, _negation_events
from stresstest.metrics.triggers.nonspeech_pollution import _pollution
from stresstest.metrics.triggers.number_time import _numbers_and_time
from stresstest.metrics.triggers.qualifiers import _qualifier_changes
from stresstest.metrics.triggers.regions import _found, _is_benign, _place, _Region, _regions, _Side
from stresstest.metrics.triggers.words import _is_content
from stresstest.results import TRIGGER_TYPES, TriggerEvent


def trigger_risk(events: Iterable[TriggerEvent]) -> float:
    """A pair's trigger risk: the sum of its events' weights (docs/spec.md §6, §10); 0 without events."""
    return round(sum(e.weight for e in events), 6)


def content_word_errors(pair: AlignedPair) -> int:
    """Reference content words the hypothesis deletes or substitutes (the crude validation baseline).

    Content words are those outside the function-word and filler lists, not numbers, longer than one letter.
    """
    n = 0
    for o in pair.ops:
        if o.op in ("sub", "del"):
            n += sum(1 for w in pair.ref.words[o.ref_start : o.ref_end] if _is_content(w))
    return n


def trigger_counts(events: Iterable[TriggerEvent]) -> dict[str, int]:
    """Number of events per type, with all six types present (zeros included)."""
    counts: dict[str, int] = dict.fromkeys(TRIGGER_TYPES, 0)
    for e in events:
        counts[e.type] += 1
    return counts


def _ref_start(pair: AlignedPair, g: _Region) -> int:
    return pair.ref.char_span(*_widen(pair, g))[0]


def _ref_end(pair: AlignedPair, g: _Region) -> int:
    return pair.ref.char_span(*_widen(pair, g))[1]


def _widen(pair: AlignedPair, g: _Region) -> tuple[int, int]:
    return (max(0, g.r0 - 1), min(len(pair.ref), max(g.r1, g.r0 + 1) + 1))


def detect_triggers(reference: str, hypothesis: str, concepts: Iterable[str] = ()) -> list[TriggerEvent]:
    """Typed trigger events between a reference transcript and a hypothesis.

    Args:
        reference: reference (human / clean) transcript, original text.
        hypothesis: hypothesis (ASR / noisy) transcript, original text.
        concepts: the encounter's gold concepts, if known (widens the entities
            whose negation is checked, as NegErr does).

    Returns:
        Events sorted by reference position, hypothesis position and type.
        Empty when the texts differ only in benign ways.
    """
    pair = align(reference, hypothesis)
    return detect_in_pair(pair, concepts)


def detect_in_pair(pair: AlignedPair, concepts: Iterable[str] = ()) -> list[TriggerEvent]:
    """:func:`detect_triggers` on an existing alignment (lets callers reuse one)."""
    if all(o.op == "equal" for o in pair.ops):
        return []
    all_regions = _regions(pair)
    regions = [g for g in all_regions if not _is_benign(g, pair)]
    ref_found, ref_toks = _found(pair.ref.original)
    hyp_found, hyp_toks = _found(pair.hyp.original)
    ref = _Side(pair.ref, _place(pair.ref, ref_found), _place(pair.ref, match_terms(pair.ref.original, ref_toks)))
    hyp = _Side(pair.hyp, _place(pair.hyp, hyp_found), _place(pair.hyp, match_terms(pair.hyp.original, hyp_toks)))
    events = _negation_events(pair, ref_found, hyp_found, list(concepts), (ref_toks, hyp_toks))
    flips = sorted((e.ref_start, e.ref_end) for e in events)
    flip_starts = [a for a, _ in flips]
    longest_flip = max((b - a for a, b in flips), default=0)

    def flipped(g: _Region) -> bool:
        """Does a negation_flip of the reference overlap region ``g`` (one character of context each side)?"""
        lo, hi = _ref_start(pair, g), _ref_end(pair, g)
        k0 = bisect_left(flip_starts, lo - longest_flip)
        return any(a < hi and b > lo for a, b in flips[k0 : bisect_left(flip_starts, hi)])

    flipped_concepts = {e.concept for e in events if e.concept}  # entity-level negation flips
    for g in regions:
        events += _numbers_and_time(pair, g, ref, hyp)
        subs, explained = _entities(pair, g, ref, hyp)
        events += subs
        events += _pollution(pair, g, ref, hyp, explained)
        lost = {e.concept for e in subs if e.concept}
        omitted = _omissions(pair, g, ref, hyp, lost | flipped_concepts)
        events += omitted
        events += _qualifier_changes(pair, g, [*subs, *omitted])
        # A lost negation is a negation_flip unless its target went with it (then it is that omission's).
        if not any("(negated)" in e.explanation for e in omitted) and not flipped(g):
            events += _negation_cue(pair, g, ref, hyp)
    kept = {id(g) for g in regions}
    for g in all_regions:
        if id(g) in kept or "".join(g.ref_words) == "".join(g.hyp_words):
            continue
        # Function-word-only regions carry no trigger but a lost or gained negation ("didn't help" -> "did it help").
        if not flipped(g):
            events += _negation_cue(pair, g, ref, hyp)
    # A lost answer is the omission of what it answered; a bare cue lost with it ("I don't think so" ->
    # "okay") is that answer, not a separate negation_flip.
    cue_only = [e for e in events if e.type == "negation_flip" and e.explanation.startswith("negation cue")]
    taken = [
        (e.ref_start, e.ref_end)
        for e in events
        if e.type in ("clinical_omission", "negation_flip") and not any(e is c for c in cue_only)
    ]
    answers = [a for g in all_regions for a in _lost_answers(pair, g, ref, taken)]
    if answers:
        events = [
            e
            for e in events
            if not any(
                e is c and any(a.ref_start <= c.ref_start and c.ref_end <= a.ref_end for a in answers) for c in cue_only
            )
        ]
    events += answers
    unique = {(e.type, e.ref_start, e.ref_end, e.hyp_start, e.hyp_end): e for e in events}
    return sorted(unique.values(), key=lambda e: (e.ref_start, e.hyp_start, TRIGGER_TYPES.index(e.type)))
