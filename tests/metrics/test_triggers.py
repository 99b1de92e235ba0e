"""Trigger detector: hand-written positive cases per type (real-style), benign pairs, API contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stresstest.metrics.triggers import TRIGGER_TYPES, TriggerEvent, detect_triggers, trigger_counts

# (reference, hypothesis) pairs that must raise at least one event of the given type.
POSITIVE: dict[str, list[tuple[str, str]]] = {
    "negation_flip": [
        (
            "It looks a little red and tender, but I don't see that larger circular rash.",
            "It looks a little red and tender, but I see that larger circular rash.",
        ),
        ("Do you have any chest pain? No.", "Do you have any chest pain?"),
        ("I have no fever.", "I have a fever."),
        ("She denies shortness of breath.", "She has shortness of breath."),
        ("No nausea today.", "Nausea today."),
        ("I'm not taking metformin anymore.", "I'm taking metformin anymore."),
        ("I have a cough.", "I don't have a cough."),
        ("Any blood in your stool? Nope.", "Any blood in your stool?"),
        ("There is no swelling in the ankles.", "There is swelling in the ankles."),
        ("I never had asthma.", "I had asthma."),
        ("He does not smoke.", "He does smoke."),
        ("No fever, but some cough.", "Fever, but no cough."),
        ("I haven't had any headaches.", "I have had any headaches."),
        ("no shortness of breath", "know shortness of breath"),
        ("Have you had any palpitations? No, never.", "Have you had any palpitations? Yes, sometimes."),
        ("I feel fine without any dizziness.", "I feel fine with any dizziness."),
    ],
    "clinical_omission": [
        ("I get chest pain when I walk uphill.", "I get chess pain when I walk uphill."),
        ("I've been wheezing at night.", "I've been weaving at night."),
        ("I smoke about ten a day.", "I spoke about ten a day."),
        ("I'm on the pill at the moment.", "I'm on the hill at the moment."),
        ("I've got the coil fitted.", "I've got the cold fitted."),
        ("My mum had breast cancer.", "My mum had breast answer."),
        ("I take ramipril every morning.", "I take rampart every morning."),
        ("I've been taking paracetamol for it.", "I've been taking pastor cattle for it."),
        ("No fever today.", "Today."),
        ("I finish with the persa-gel.", "I finish with the person gel."),
        ("I looked at the eucrisa you recommended.", "I looked at the urethra you recommended."),
        ("Positive Hawkins-Kennedy test.", "Positive kiss the elbow test."),
        ("My dad had a heart attack at fifty.", "My dad had a heart at fifty."),
        ("I use my inhaler when I'm breathless.", "I use my in here when I'm breathless."),
        ("The rash is really itchy.", "The rash is really."),
        ("Statin could be indicated.", "Could be indicated."),
    ],
    "number_unit_conflict": [
        (
            "I can walk about 3 or 4 flights of stairs before feeling breathless.",
            "I can walk about three or four steps before feeling breathless.",
        ),
        ("I take 25 mg of lisinopril.", "I take 50 mg of lisinopril."),
        ("The dose is fifteen milligrams.", "The dose is fifty milligrams."),
        ("Take it twice a day.", "Take it twice a week."),
        ("Use it once a day.", "Use it three times a day."),
        ("She gets 10 units of insulin.", "She gets 10 ml of insulin."),
        ("I thought my A1c was close to sixteen.", "I thought my A1c was close to sixty."),
        ("I smoke 20 cigarettes a day.", "I smoke 2 cigarettes a day."),
        ("Give 500 micrograms.", "Give 500 milligrams."),
        ("Take two tablets before bed.", "Take two puffs before bed."),
        ("Blood pressure was 140 over 90.", "Blood pressure was 114 over 90."),
        ("Her temperature was 38.5 this evening.", "Her temperature was 35.8 this evening."),
        ("Two puffs every four hours.", "Two puffs every two hours."),
        ("I lost 10 pounds.", "I lost 10 kilos."),
        ("I can walk about 100 yards.", "I can walk about 100 miles."),
        ("I am 45 years old.", "I am 55 years old."),
        ("I can manage 3 or 4 flights.", "I can manage 34 flights."),
    ],
    "temporal_distortion": [
        (
            "The pain has been really intense for the last two hours.",
            "The pain has been really intense for the last two days.",
        ),
        ("It has been hurting since Monday.", "It has been hurting since Sunday."),
        ("It started yesterday.", "It started today."),
        ("I've had it for three weeks.", "I've had it for three months."),
        ("That was about 2 years ago.", "That was about 2 days ago."),
        ("It came on this morning.", "It came on this evening."),
        ("The cough got worse last night.", "The cough got worse last week."),
        ("It lasted for ten minutes.", "It lasted for ten hours."),
        ("I first noticed it in January.", "I first noticed it in June."),
        ("I saw the nurse on Friday.", "I saw the nurse on Thursday."),
        ("The pain lasts about an hour.", "The pain lasts about a day."),
        ("I've been like this for 6 months.", "I've been like this for 16 months."),
        ("It began two weeks ago.", "It began two years ago."),
        ("It began tonight.", "It began tomorrow."),
        ("The tightness lasts half an hour.", "The tightness lasts half a day."),
        ("It got worse over the weekend.", "It got worse over the week."),
        ("The pain comes after meals.", "The pain comes before meals."),
    ],
    "entity_substitution": [
        ("I take lisinopril 10 mg daily.", "I take losartan 10 mg daily."),
        ("I have pain in my left knee.", "I have pain in my right knee."),
        ("I have a cough.", "I have a fever."),
        ("Your hypothyroidism is stable.", "Your hyperthyroidism is stable."),
        ("Watch for transient hypoglycemia.", "Watch for transient hyperglycemia."),
        ("I take Eliquis every day.", "I take Xarelto every day."),
        ("I have pain in my knee.", "I have pain in my neck."),
        ("The chest pain is worse.", "The back pain is worse."),
        ("I was prescribed amoxicillin.", "I was prescribed azithromycin."),
        ("She has asthma.", "She has diabetes."),
        ("There is right arm weakness.", "There is left arm weakness."),
        ("I feel nauseous after meals.", "I feel dizzy after meals."),
        ("He takes metoprolol.", "He takes metformin."),
        ("I get headaches at night.", "I get heartburn at night."),
        ("My ankle is swollen.", "My elbow is swollen."),
        ("I took aspirin for it.", "I took ibuprofen for it."),
    ],
    "nonspeech_pollution": [
        (
            "I've had this dull ache in my right ankle.",
            "I've had this dull ache in my right ankle. Have you noticed blood in your stool at all? I take Metformin.",
        ),
        ("I feel fine today.", "I feel fine today. Take warfarin."),
        ("Okay, let's continue.", "Okay, chest pain, let's continue."),
        ("So how are you doing?", "So how are you doing? The patient was given morphine."),
        (
            "I went for a walk with my brother.",
            "I went for a walk with my brother and the stock market closed higher again.",
        ),
        ("I usually walk the dog.", "I usually walk the dog insulin."),
        ("That sounds good.", "That sounds good. Any vomiting?"),
        ("Let me examine you.", "Let me examine you. Seizures. Ibuprofen."),
        ("Yes, that is right.", "Aspirin. Yes, that is right."),
        ("Thank you, doctor.", "Thank you, doctor. Please subscribe to our channel for more videos."),
        ("We will see you soon.", "We will see you soon. Shortness of breath on exertion."),
        ("It was a nice walk.", "It was a nice walk with a rash."),
        ("My daughter drove me here.", "My daughter drove me here. Atorvastatin twenty milligrams."),
        ("I am doing well.", "I am doing well, coughing up blood."),
        ("Sure, go ahead.", "Sure, go ahead. Palpitations and fainting."),
        ("I brought my list.", "I brought my list. Penicillin allergy, anaphylaxis, hospital admission."),
    ],
}

# Pairs that differ only in benign ways: no event of any type.
BENIGN: list[tuple[str, str]] = [
    ("Um, I don't have a fever.", "I do not have a fever"),
    ("I can walk 3 flights of stairs.", "I can walk three flights of stairs"),
    ("The colour of the rash changed.", "the color of the rash changed"),
    ("Her haemoglobin is fine.", "her hemoglobin is fine"),
    ("Okay, so, uh, the pain is better.", "the pain is better"),
    ("I can't breathe well at night.", "I can not breathe well at night"),
    ("He's been taking aspirin.", "he has been taking aspirin"),
    ("Twenty five milligrams.", "25 mg."),
    ("I'll see you, alright?", "I will see you, all right?"),
    ("We did a full workup.", "we did a full work up"),
    ("Mm-hmm. Yes, that's right.", "yes that is right"),
    ("DO YOU SMOKE?", "do you smoke"),
    ("No fever, no chills.", "no fever; no chills"),
    ("Take it twice a day.", "take it 2 times a day"),
    ("I'll follow up, you know, in a couple of weeks.", "I will follow up in a couple of weeks"),
    ("She takes 1,000 milligrams of metformin.", "she takes 1000 mg of metformin"),
    ("It started on the 17th.", "it started on the 17"),
    ("The the pain is worse.", "the pain is worse"),
    ("I I think so.", "I think so"),
    ("Her oesophagus is sore.", "her esophagus is sore"),
    ("The paediatric clinic called.", "the pediatric clinic called"),
    ("Let's check your blood pressure.", "let us check your blood pressure"),
    ("Chest pain?", "chest pain"),
    ("Well, it's kind of sore.", "it's sore"),
    ("He was born 4/28/07.", "He was born 4/28/2007."),
    ("We'll take some blood, okay?", "we will take some blood"),
    ("Take 1500 milligrams per day.", "take 1500 mg/day"),
    ("I'm fine, thank you.", "I am fine thank you"),
    ("Ninety-five percent.", "95%"),
    ("I've got diarrhoea.", "I have got diarrhea"),
    ("Good morning, doctor.", "Morning, doctor."),
    ("Uh-huh, that's right.", "that is right"),
    ("I take it every day.", "I take it everyday."),
    ("It lasted a couple days.", "It lasted a couple of days."),
    ("No fever. Cough is bad.", "No fever cough is bad"),
    ("It hurts for two hours.", "It hurts for 2 hours."),
    ("I've been like this since Monday.", "I have been like this since monday"),
    ("It hurts after, um, after meals.", "It hurts after meals."),
    ("Come back after that.", "Come back that."),
    ("It's been running at about 146 to 155.", "It's been running at about 1:46 to 1:55."),
    ("It costs around 30 to $40.", "It costs around $30- $40."),
    ("She scores 7 to 10 points.", "She scores 7-10 points."),
    ("Date of birth 8-23-97.", "Date of birth 8/23/1997."),
]


def _cases() -> list[tuple[str, str, str]]:
    return [(t, r, h) for t, pairs in POSITIVE.items() for r, h in pairs]


def test_tables_are_big_enough() -> None:
    assert set(POSITIVE) == set(TRIGGER_TYPES)
    assert all(len(v) >= 15 for v in POSITIVE.values())
    assert len(BENIGN) >= 30


@pytest.mark.parametrize(("kind", "ref", "hyp"), _cases(), ids=lambda x: x if len(x) < 30 else x[:30])
def test_positive_case_raises_its_type(kind: str, ref: str, hyp: str) -> None:
    events = detect_triggers(ref, hyp)
    got = [(e.type, e.explanation) for e in events]
    assert kind in {e.type for e in events}, f"expected {kind}, got {got}"
    for e in events:
        assert ref[e.ref_start : e.ref_end] == e.ref_span
        assert hyp[e.hyp_start : e.hyp_end] == e.hyp_span
        assert e.explanation


@pytest.mark.parametrize(("ref", "hyp"), BENIGN, ids=lambda x: x[:30])
def test_benign_pair_raises_nothing(ref: str, hyp: str) -> None:
    events = detect_triggers(ref, hyp)
    assert events == [], [(e.type, e.explanation) for e in events]


def test_identical_texts_raise_nothing() -> None:
    text = "No chest pain. I take 5 mg of warfarin twice a day since Monday."
    assert detect_triggers(text, text) == []
    assert detect_triggers("", "") == []


def test_types_do_not_bleed() -> None:
    # A clean negation loss is only a negation flip; a pure unit change is only a number conflict.
    assert {e.type for e in detect_triggers("I have no fever.", "I have fever.")} == {"negation_flip"}
    assert {e.type for e in detect_triggers("Give 5 mg now.", "Give 5 ml now.")} == {"number_unit_conflict"}
    assert {e.type for e in detect_triggers("For two hours.", "For two days.")} == {"temporal_distortion"}


def test_spans_quote_the_original_texts() -> None:
    ref = "P: The pain has been really intense for the last TWO hours!"
    hyp = "the pain has been really intense for the last two days"
    (e,) = detect_triggers(ref, hyp)
    assert (e.ref_span, e.hyp_span) == ("TWO hours", "two days")
    assert e.concept == "hours"


def test_deletion_side_is_quoted_with_context() -> None:
    (e,) = detect_triggers("Do you have any chest pain? No.", "Do you have any chest pain?")
    assert e.type == "negation_flip"
    assert e.ref_span == "chest pain? No"
    assert e.hyp_span == "chest pain"


def test_trade_and_generic_name_are_the_same_drug() -> None:
    assert detect_triggers("I take Tylenol for it.", "I take acetaminophen for it.") == []


def test_counts_have_all_types() -> None:
    events = detect_triggers("No fever for two hours on lisinopril.", "Fever for two days on losartan.")
    counts = trigger_counts(events)
    assert list(counts) == list(TRIGGER_TYPES)
    assert counts["negation_flip"] == 1
    assert counts["temporal_distortion"] == 1
    assert counts["entity_substitution"] == 1
    assert counts["nonspeech_pollution"] == 0
    assert trigger_counts([]) == dict.fromkeys(TRIGGER_TYPES, 0)


def test_events_are_json_and_deterministic() -> None:
    ref, hyp = "No fever since Monday, 25 mg of lisinopril.", "Fever since Sunday, 50 mg of losartan aspirin."
    first = detect_triggers(ref, hyp)
    again = detect_triggers(ref, hyp)
    assert first == again
    rows = [json.loads(e.model_dump_json()) for e in first]
    assert {r["type"] for r in rows} <= set(TRIGGER_TYPES)
    assert all(set(r) >= {"type", "ref_span", "hyp_span", "explanation", "concept"} for r in rows)
    assert [TriggerEvent.model_validate(r) for r in rows] == first


def test_gold_concepts_widen_negation_check() -> None:
    ref, hyp = "I have no hyperacusis.", "I have hyperacusis."
    # Not in the shipped lexicon: only the lost cue is seen (a cue-level flip, no concept).
    (e,) = detect_triggers(ref, hyp)
    assert (e.type, e.concept) == ("negation_flip", None)
    (e,) = detect_triggers(ref, hyp, concepts=["hyperacusis"])
    assert (e.type, e.concept) == ("negation_flip", "hyperacusis")


def test_entity_heard_as_another_kind_of_entity() -> None:
    (e,) = detect_triggers("Apply the Eucrisa twice.", "Apply the elbow twice.")
    assert (e.type, e.concept) == ("entity_substitution", "crisaborole")
    # Losing a word of a term is not a new entity: the term is lost (clinical_omission).
    assert [e.type for e in detect_triggers("Some chest pain now.", "Some chest now.")] == ["clinical_omission"]


def test_letter_o_and_roman_numerals_are_not_number_changes() -> None:
    assert detect_triggers("No changes. And please add it.", "No changes o and please add it.") == []
    assert detect_triggers("A grade iv to v murmur.", "A grade 4-5 murmur.") == []
    events = detect_triggers("A grade iv murmur.", "A grade 5 murmur.")
    assert [e.type for e in events] == ["number_unit_conflict"]


_VOCAB = [
    "no",
    "not",
    "don't",
    "fever",
    "chest",
    "pain",
    "twenty",
    "five",
    "25mg",
    "mg",
    "twice",
    "a",
    "day",
    "since",
    "Monday",
    "two",
    "hours",
    "left",
    "right",
    "knee",
    "metformin",
    "warfarin",
    "um",
    "uh-huh",
    "[doctor]",
    "(laughs)",
    "colour",
    "3/4",
    "1,000",
    "?",
    ".",
    ",",
    "P:",
    "it's",
    "o",
    "iv",
    "\n",
    "—",
    "é",
]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_VOCAB), max_size=25), st.lists(st.sampled_from(_VOCAB), max_size=25))
def test_never_crashes_and_quotes_match(ref_words: list[str], hyp_words: list[str]) -> None:
    ref, hyp = " ".join(ref_words), " ".join(hyp_words)
    events = detect_triggers(ref, hyp)
    for e in events:
        assert e.type in TRIGGER_TYPES
        assert ref[e.ref_start : e.ref_end] == e.ref_span
        assert hyp[e.hyp_start : e.hyp_end] == e.hyp_span
    assert detect_triggers(ref, ref) == []


def test_same_events_under_another_hash_seed() -> None:
    """Set and dict orders follow string hashing; the events must not."""
    ref = "No fever since Monday, 25 mg of lisinopril twice a day for 2 weeks, left knee pain, some wheezing at night."
    hyp = (
        "Fever since Sunday, 50 mg of losartan twice a week for 2 days, right knee pain, "
        "some weaving at night. Take warfarin."
    )
    code = (
        "import json, sys; from stresstest.metrics.triggers import detect_triggers; "
        "print(json.dumps([e.model_dump() for e in detect_triggers(sys.argv[1], sys.argv[2])]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [sys.executable, "-c", code, ref, hyp], env=env, capture_output=True, text=True, check=True
    )
    here = [e.model_dump() for e in detect_triggers(ref, hyp)]
    assert json.loads(out.stdout) == here
    assert {e["type"] for e in here} == set(TRIGGER_TYPES)


def test_dropped_stretch_is_an_omission_not_a_conflict() -> None:
    # A number lost with a dropped stretch of speech is a clinical_omission, not a changed number.
    events = detect_triggers("I walk for 20 minutes every morning, then rest.", "I walk, then rest.")
    assert [(e.type, e.concept) for e in events] == [("clinical_omission", "20")]
    # A number lost on its own is a change of that number.
    assert [e.type for e in detect_triggers("I am 45.", "I am.")] == ["number_unit_conflict"]


def test_the_detector_reads_numbers_only_through_clinical_numbers() -> None:
    """Issue 27: one number reader. The detector's number readings are clinical.numbers' functions, and its
    source holds no digit pattern or number-word table of its own."""
    import importlib
    import inspect
    import pkgutil

    from stresstest.clinical import numbers
    from stresstest.metrics import triggers

    # The detector is a package (one module per event kind): every module of it counts.
    modules = [triggers] + [
        importlib.import_module(f"{triggers.__name__}.{m.name}") for m in pkgutil.iter_modules(triggers.__path__)
    ]
    assert len(modules) > 5
    for name in ("comparable_number", "is_number_token", "is_ordinal_token", "small_number_digits", "spoken_values"):
        users = [m for m in modules if hasattr(m, name)]
        assert users and all(getattr(m, name) is getattr(numbers, name) for m in users), name
    for m in modules:
        src = inspect.getsource(m)
        assert "\\d" not in src and "number_words" not in src and "re.compile" not in src, m.__name__
    # The readings it gets from there: fractions, ordinals as ranks, roman grades, years and word numbers.
    for ref, hyp in [
        ("Take 2 1/2 tablets.", "Take two and a half tablets."),
        ("Grade iv.", "Grade 4."),
        ("Since 2007.", "Since 07."),
        ("Seven days.", "7 days."),
    ]:
        assert trigger_counts(detect_triggers(ref, hyp))["number_unit_conflict"] == 0, (ref, hyp)
    assert trigger_counts(detect_triggers("Take 2 1/2 tablets.", "Take 3 1/2 tablets."))["number_unit_conflict"] == 1
