"""Trigger rules of issue 34: numbers by value, answer particles, lost answers, ordinary-word meaning changes,
and the medwer-backed term vocabulary shared with the clinical-term WER."""

from __future__ import annotations

import pytest

from stresstest.clinical.numbers import find_quantities
from stresstest.clinical.vocab import category_weight, match_terms, medwer_terms, term_vocabulary
from stresstest.metrics.triggers import clinical_mentions, detect_triggers


def _kinds(ref: str, hyp: str) -> list[tuple[str, str]]:
    return [(e.type, e.ref_span) for e in detect_triggers(ref, hyp)]


# --- numbers compare by value; answer particles before hedges -----------------------------------------


@pytest.mark.parametrize(
    ("ref", "hyp"),
    [
        (
            "Rate the severity of your pain 1 to 10, 10 being the worst pain.",
            "Rate the severity of your pain one to ten, ten being the worst pain.",
        ),
        ("And one to 10, 10 being the worst, how bad is it?", "and one to ten, ten being the worst. How bad is it?"),
        (
            "till probably I guess it's kind of, I'm really, you know, haven't been getting up very much",
            "no probably. I guess it's kind of. I'm really. You know, I haven't been getting up very much",
        ),
    ],
)
def test_same_values_and_bare_particles_raise_nothing(ref: str, hyp: str) -> None:
    assert detect_triggers(ref, hyp) == []


def test_ten_ten_is_two_numbers() -> None:
    assert [(q.value, q.value_max) for q in find_quantities("one to ten, ten being the worst")] == [
        (1.0, 10.0),
        (10.0, None),
    ]
    assert [q.value for q in find_quantities("one hundred ten")] == [110.0]


def test_a_changed_scale_value_still_conflicts() -> None:
    assert ("number_unit_conflict", "10") in _kinds("Rate it 1 to 10, 10 worst.", "Rate it 1 to 10, 9 worst.")


# --- lost answers -----------------------------------------------------------------------------------------


def _answers(ref: str, hyp: str) -> list[tuple[str, float, str]]:
    return [
        (e.ref_span, e.weight, e.explanation)
        for e in detect_triggers(ref, hyp)
        if e.type == "clinical_omission" and (e.concept or "").startswith("answer:")
    ]


def test_a_yes_answer_replaced_by_filler_is_an_omission_linked_to_its_question() -> None:
    [(span, weight, why)] = _answers(
        "Does it hurt when you take a deep breath in? Yeah. Yeah", "does it hurt me when you take a deep breath and"
    )
    assert span == "Yeah. Yeah" and weight == category_weight("answer_symptom")
    assert "Does it hurt when you take a deep breath in" in why


@pytest.mark.parametrize(
    ("question", "key"),
    [
        ("Do you have any allergies?", "answer_allergy"),
        ("Are you taking any medications for it?", "answer_medication"),
        ("Is it getting worse?", "answer_severity"),
        ("Have you had a cough?", "answer_symptom"),
        ("Did it start a while ago?", "answer_duration"),
        ("Is it yellow?", "answer"),
    ],
)
def test_a_lost_answer_is_weighted_by_what_the_question_asked(question: str, key: str) -> None:
    [(_, weight, _)] = _answers(f"{question} Yeah, yeah.", f"{question} okay, okay, okay.")
    assert weight == category_weight(key)


def test_a_bare_negative_answer_and_an_answer_with_content_count_without_a_question() -> None:
    assert [s for s, _, _ in _answers("I I don't think so", "okay, okay, okay, okay")] == ["I I don't think so"]
    assert _answers("Yeah well yeah, it's creamy yellow", "okay, okay, okay, okay")


def test_a_kept_answer_or_a_lone_backchannel_is_no_omission() -> None:
    assert _answers("Yeah, I do have a bit of pain in my leg", "I do have a bit of pain in my leg") == []
    assert _answers("so that is fine . yeah . and then we go", "so that is fine and then we go") == []
    assert _answers("Is it yellow? Yeah.", "Is it yellow? Yes.") == []


def test_a_speaker_label_does_not_hide_the_question() -> None:
    [(span, weight, _)] = _answers(
        "Doctor: Is the cough getting better? Patient: Yeah. Doctor: Good.",
        "Doctor: Is the cough getting better? Patient: Doctor: Good.",
    )
    assert span == "Yeah" and weight == category_weight("answer_severity")


# --- meaning changed by ordinary words ------------------------------------------------------------------


def test_a_gained_not_flips_without_a_reference_cue() -> None:
    ref, hyp = "It's been ongoing for about three months.", "It's not going for about three months."
    assert [t for t, _ in _kinds(ref, hyp)] == ["negation_flip"]
    assert _kinds("agh , i see . that's", "ac not") == []  # a trailing "not" negates nothing


@pytest.mark.parametrize(
    ("ref", "hyp", "kind"),
    [
        ("The pain is getting worse.", "The pain is getting better.", "entity_substitution"),
        ("It is a mild pain.", "It is a severe pain.", "entity_substitution"),
        ("It happens sometimes.", "It happens always.", "entity_substitution"),
        ("The cough is improving.", "The cough is worsening.", "entity_substitution"),
        ("It is getting worse.", "It is getting first.", "clinical_omission"),
    ],
)
def test_qualifier_swaps_and_losses(ref: str, hyp: str, kind: str) -> None:
    assert [t for t, _ in _kinds(ref, hyp)] == [kind]


def test_a_course_question_keeping_one_alternative_is_no_loss() -> None:
    ref = "Has the pain been getting any better or any worse?"
    assert _kinds(ref, ref.replace("worse", "world")) == []


# --- vocabulary: medwer list + the project's overlay ----------------------------------------------------


def test_medwer_terms_are_matched_as_units_and_common_words_left_out() -> None:
    table = medwer_terms()
    assert ("insulin", "glargine") in table and ("buttock",) in table
    for ordinary in ("water", "wife", "caught", "stairs", "gram"):
        assert (ordinary,) not in table  # common English (wordfreq) or a unit
    found = [(m.surface, m.category) for m in match_terms("she was started on insulin glargine for it")]
    assert found == [("insulin glargine", "medical_term")]
    assert term_vocabulary()[("cough",)] == "symptom"  # the overlay types what it lists


def test_clinical_term_wer_and_the_detector_share_the_vocabulary() -> None:
    surfaces = [m.surface for m in clinical_mentions("a bit of pain in my buttock area near dust")]
    assert "buttock" in surfaces and "dust" in surfaces
    assert [e.type for e in detect_triggers("pain in my buttock area", "pain in my button area")] == [
        "clinical_omission"
    ]


# --- the demo report's mined examples: the event type shown --------------------------------------------


def test_an_ordinary_word_heard_as_a_clinical_one_is_a_substitution_not_pollution() -> None:
    ref = "how much would you rate the pain felt and 10 being the worst"
    assert [t for t, _ in _kinds(ref, ref.replace("felt", "fell"))] == ["entity_substitution"]


def test_a_time_word_of_a_clinical_term_is_no_anchor_on_the_other_side() -> None:
    kinds = _kinds(
        "has he been having chills or night sweats. Um, nothing like that",
        "has been having. choice for nights what nothing like that",
    )
    assert [t for t, _ in kinds] == ["clinical_omission", "clinical_omission"]


def test_a_number_glued_to_a_word_is_no_quantity() -> None:
    kinds = _kinds(
        "up at nine in the middle of the night to catch your breath. No.",
        "up at 9 in the middle of the 90-catcher breath? No.",
    )
    assert "number_unit_conflict" not in [t for t, _ in kinds]
    assert [t for t, _ in _kinds("a 20-year-old man", "a 30-year-old man")] == ["number_unit_conflict"]
