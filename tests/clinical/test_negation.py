"""Negation / uncertainty / dialogue Q&A table for the ConText-style detector."""

from __future__ import annotations

import pytest

from stresstest.clinical import find_drugs, find_mentions, mention_assertion, mention_status

# (text, concept, expected status)
CASES: list[tuple[str, str, str]] = [
    ("I have chest pain.", "chest pain", "present"),
    ("I have no blood in the stool.", "rectal bleeding", "absent"),
    ("There's no blood in the stool", "rectal bleeding", "absent"),
    ("She denies any shortness of breath.", "shortness of breath", "absent"),
    ("I don't have a fever, cough or headache.", "headache", "absent"),
    ("I haven't had any wheezing.", "wheeze", "absent"),
    ("I've never coughed up blood.", "hemoptysis", "absent"),
    ("He is not short of breath.", "shortness of breath", "absent"),
    ("Doing fine without any nausea.", "nausea", "absent"),
    ("I'm free of chest pain now.", "chest pain", "absent"),
    ("The fever has resolved.", "fever", "absent"),
    ("No fever but a cough.", "cough", "present"),
    ("No fever, however I get headaches.", "headache", "present"),
    ("Not only chest pain, also palpitations.", "chest pain", "present"),
    ("No change in the cough.", "cough", "present"),
    ("No increase in the swelling.", "swelling", "present"),
    ("Maybe a fever last night.", "fever", "uncertain"),
    ("It might be heartburn.", "heartburn", "uncertain"),
    ("I'm not sure if I had a fever.", "fever", "uncertain"),
    ("Possibly some wheeze.", "wheeze", "uncertain"),
    ("Any chest pain? No.", "chest pain", "absent"),
    ("Any chest pain? Nope.", "chest pain", "absent"),
    ("Have you had a fever? No, never.", "fever", "absent"),
    ("D: Have you had a fever?\nP: Yeah, a bit.", "fever", "present"),
    ("D: Any vomiting?\n\nP: Um, yes, twice.", "vomiting", "present"),
    ("D: Any night sweats?\nP: Uh no, not that I've noticed.", "night sweats", "absent"),
    ("D: Any blood in your stool?\nP: I'm not sure.", "rectal bleeding", "uncertain"),
    ("D: No chest pain?\nP: Right.", "chest pain", "absent"),
    ("So no chest pain? Correct.", "chest pain", "absent"),
    ("And the chest pain is still there? Correct.", "chest pain", "present"),
    ("Any chest pain?", "chest pain", "uncertain"),
    ("do you have any chest pain no i don't", "chest pain", "absent"),
    ("do you have any chest pain yeah sometimes", "chest pain", "present"),
    ("i dont have any fever", "fever", "absent"),
    (
        "any recreational drugs like marijuana cocaine heroin anything like that before no i've never",
        "recreational drug use",
        "absent",
    ),
    ("ok and how about anybody in the family have a stroke no strokes", "stroke", "absent"),
    ("I feel hot, no idea about a fever", "fever", "uncertain"),
    ("the pain is not as bad as the headache", "headache", "present"),
    ("[doctor] do you have any nausea\n[patient] no", "nausea", "absent"),
    ("[doctor] do you have any nausea\n[patient] yeah a little", "nausea", "present"),
    ("any chest pain when you walk i get tired", "chest pain", "present"),
    ("The ibuprofen doesn't help the back pain.", "back pain", "present"),
    ("no fever and i have a cough", "cough", "present"),
    ("If I walk up two flights of stairs I get short of breath.", "shortness of breath", "present"),
    ("If you start getting weakness or seizures or anything like that, come back.", "seizure", "uncertain"),
    ("I just don't feel quite right, like I've had this pain in my chest for days", "chest pain", "present"),
    ("Sometimes things can be associated with a cough, so we'll look into it.", "cough", "uncertain"),
    # "I think" / "I guess" soften a report without withdrawing it (docs/gold_guide.md: "uncertain" only when the
    # patient does not commit); a bare "I think so" reply and "I'm not sure" stay uncertain.
    ("I think I've been eating less than usual.", "loss of appetite", "present"),
    ("I guess she's been a bit irritable.", "irritability", "present"),
    ("D: Any fever? P: I think so.", "fever", "uncertain"),
    ("D: Any fever? P: I don't think so.", "fever", "absent"),
    ("I'm not sure, I think maybe a fever.", "fever", "uncertain"),
]


@pytest.mark.parametrize(("text", "concept", "expected"), CASES)
def test_status_table(text: str, concept: str, expected: str) -> None:
    mentions = [m for m in find_mentions(text) if m.concept == concept]
    assert mentions, f"{concept!r} not found in {text!r}"
    assert mention_status(text, mentions[0]) == expected


def test_assertion_names_the_cue_with_offsets() -> None:
    text = "Patient denies chest pain."
    (m,) = find_mentions(text)
    a = mention_assertion(text, m)
    assert a.status == "absent" and a.cue == "denies"
    assert a.cue_start is not None and a.cue_end is not None
    assert text[a.cue_start : a.cue_end] == "denies"


def test_window_limits_reach_in_unpunctuated_text() -> None:
    # A "no" far back in a run-on ASR turn must not negate a later symptom.
    text = "no i was at work all day long and then later that evening i got this chest pain"
    m = [x for x in find_mentions(text) if x.concept == "chest pain"][0]
    assert mention_status(text, m) == "present"


def test_negation_applies_to_drugs_too() -> None:
    text = "I'm not on any warfarin."
    (m,) = find_drugs(text)
    assert mention_status(text, m) == "absent"


def test_unpunctuated_drug_question_answered_no() -> None:
    text = "ok are you on insulin right now no are you on any other medications"
    (m,) = find_drugs(text)
    assert m.concept == "insulin" and mention_status(text, m) == "absent"


@pytest.mark.parametrize("answer", ["Nothing that I've noticed.", "Nothing like that.", "I haven't noticed."])
def test_nothing_answers_are_no(answer: str) -> None:
    text = f"Any yellowing of your skin? {answer}"
    (m,) = find_mentions(text)
    assert m.concept == "jaundice" and mention_status(text, m) == "absent"


@pytest.mark.parametrize(
    ("text", "concept", "expected"),
    [
        ("When did the cough start? About three days ago.", "cough", "present"),
        ("And the blood in your sputum, when did that start? Two weeks ago.", "hemoptysis", "present"),
        ("What about chest pain? Nothing like that.", "chest pain", "absent"),
        ("How about fevers?", "fever", "uncertain"),
        (
            "would you say this was the worst headache of your life no nothing like that",
            "sudden severe headache",
            "absent",
        ),
    ],
)
def test_open_questions_presuppose_their_target(text: str, concept: str, expected: str) -> None:
    (m,) = [x for x in find_mentions(text) if x.concept == concept]
    assert mention_status(text, m) == expected


@pytest.mark.parametrize(
    ("text", "concept", "expected"),
    [
        ("D: Fevers or chills. P: No.", "chills", "absent"),
        ("D: How she had a cough or sore throat. P: No.", "cough", "absent"),
        ("D: Any wheeze at all. P: Yeah.", "wheeze", "present"),
        ("P: I have a cough. D: OK.", "cough", "present"),  # an acknowledgement is no answer
        ("P: I've had a fever. D: No.", "fever", "present"),  # the speaker's own statement
        ("P: The cough mostly, at night. D: No, OK.", "cough", "present"),  # an answer echoed back
    ],
)
def test_a_question_closed_with_a_full_stop_is_read_from_its_bare_reply(text: str, concept: str, expected: str) -> None:
    (m,) = [m for m in find_mentions(text) if m.concept == concept][:1]
    assert mention_status(text, m) == expected
