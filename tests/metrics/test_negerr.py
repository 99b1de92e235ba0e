"""NegErr: which negation-status differences count (see stresstest.metrics.negation)."""

from __future__ import annotations

import pytest

from stresstest.metrics.negation import neg_err_flag, negation_mismatches
from stresstest.metrics.summary import aggregate
from stresstest.metrics.triggers import detect_triggers

# (reference, hypothesis, concept, ref_status, hyp_status)
COUNTED = [
    ("I don't see the large round rash.", "I see the large round rash.", "rash", "absent", "present"),
    ("Any chest pain? No.", "Any chest pain?", "chest pain", "absent", "uncertain"),
    ("I have a cough.", "I don't have a cough.", "cough", "present", "absent"),
    ("She denies nausea.", "She has nausea.", "nausea", "absent", "present"),
    ("I'm not on warfarin.", "I'm on warfarin.", "warfarin", "absent", "present"),
    ("no shortness of breath", "know shortness of breath", "shortness of breath", "absent", "present"),
    ("Do you smoke? No.", "Do you smoke? Yes.", "smoking", "absent", "present"),
]

# Pairs that must NOT count, with the reason.
NOT_COUNTED = [
    ("No fever. Cough is bad.", "No fever cough is bad", "punctuation moves the ConText scope only"),
    ("No fever today.", "Today.", "the negated entity is omitted, not flipped"),
    ("I have a cough.", "I might have a cough.", "present -> uncertain is hedging, not negation"),
    ("I have no fever.", "I do not have a fever.", "another cue, same status"),
    ("I have no fever.", "i have no fever", "casing and punctuation only"),
    ("I feel fine.", "I feel fine. No vomiting.", "an entity only in the hypothesis is inserted content"),
    ("Um, I don't have any headaches.", "I do not have any headaches", "fillers and contractions"),
]


@pytest.mark.parametrize(("ref", "hyp", "concept", "rs", "hs"), COUNTED, ids=[c[2] for c in COUNTED])
def test_counted_mismatch(ref: str, hyp: str, concept: str, rs: str, hs: str) -> None:
    (m,) = negation_mismatches(ref, hyp)
    assert (m.concept, m.ref_status, m.hyp_status) == (concept, rs, hs)
    assert ref[m.ref_start : m.ref_end] == m.ref_quote
    assert hyp[m.hyp_start : m.hyp_end] == m.hyp_quote
    assert neg_err_flag(ref, hyp) == 1


@pytest.mark.parametrize(("ref", "hyp", "why"), NOT_COUNTED, ids=[c[2] for c in NOT_COUNTED])
def test_not_counted(ref: str, hyp: str, why: str) -> None:
    assert negation_mismatches(ref, hyp) == [], why
    assert neg_err_flag(ref, hyp) == 0


def test_quotes_reach_from_cue_to_entity() -> None:
    (m,) = negation_mismatches("Any chest pain? No.", "Any chest pain?")
    assert (m.ref_quote, m.hyp_quote, m.ref_cue, m.hyp_cue) == ("chest pain? No", "chest pain", "No", None)


def test_gold_concepts_outside_the_lexicon() -> None:
    ref, hyp = "There is no tinnitus in either ear.", "There is tinnitus in either ear."
    assert neg_err_flag(ref, hyp) == 0
    assert neg_err_flag(ref, hyp, ["Tinnitus"]) == 1
    (m,) = negation_mismatches(ref, hyp, ["Tinnitus"])
    assert m.concept == "tinnitus"


def test_moved_cue_flags_both_entities() -> None:
    ms = negation_mismatches("No fever, but some cough.", "Fever, but no cough.")
    assert [(m.concept, m.ref_status, m.hyp_status) for m in ms] == [
        ("fever", "absent", "present"),
        ("cough", "present", "absent"),
    ]


def test_agrees_with_negation_flip_trigger() -> None:
    # Entity-level flips are NegErr's decision; cue-level flips (no concept) and a negation lost together
    # with its target (clinical_omission) go beyond it.
    for ref, hyp, *_ in [*COUNTED, *NOT_COUNTED]:
        flips = [e for e in detect_triggers(ref, hyp) if e.type == "negation_flip" and e.concept is not None]
        assert bool(flips) == bool(neg_err_flag(ref, hyp)), (ref, hyp)


def test_flags_feed_the_summary_rate() -> None:
    items = [{"encounter_id": r, "condition": "c", "neg_err": neg_err_flag(r, h)} for r, h, *_ in COUNTED[:3]]
    items += [{"encounter_id": r, "condition": "c", "neg_err": neg_err_flag(r, h)} for r, h, _ in NOT_COUNTED[:1]]
    assert aggregate(items)["neg_err"] == pytest.approx(75.0)
