"""Lexicon: synonyms, lay terms, spellings, longest match, offsets, canonical concepts."""

from __future__ import annotations

import pytest

from stresstest.clinical import canonical_concept, concept_info, find_mentions, lexicon_concepts


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        ("I've been short of breath", "shortness of breath"),
        ("feeling breathless", "shortness of breath"),
        ("dyspnoea on exertion", "shortness of breath"),
        ("dyspnea on exertion", "shortness of breath"),
        ("I have tummy pain", "abdominal pain"),
        ("a bad stomach ache", "abdominal pain"),
        ("there was blood in the stool", "rectal bleeding"),
        ("I've had bloody stools", "rectal bleeding"),
        ("haematochezia", "rectal bleeding"),
        ("coughing up blood", "hemoptysis"),
        ("haemoptysis", "hemoptysis"),
        ("hemoptysis", "hemoptysis"),
        ("black tarry stools", "melena"),
        ("my ankles are swollen, oedema", "leg swelling"),
        ("bad diarrhoea", "diarrhea"),
        ("I've been throwing up", "vomiting"),
        ("I felt lightheaded", "dizziness"),
        ("I passed out", "fainting"),
        ("my heart is racing", "palpitations"),
        ("high blood pressure", "hypertension"),
        ("I get heartburn", "heartburn"),
        ("Headaches", "headache"),
        ("SHORTNESS OF BREATH", "shortness of breath"),
    ],
)
def test_surface_forms_map_to_concepts(text: str, concept: str) -> None:
    assert concept in [m.concept for m in find_mentions(text)]


def test_offsets_and_surface_are_exact() -> None:
    text = "Well, I’ve had Chest Pain and blood in the stool."
    for m in find_mentions(text):
        assert text[m.start : m.end] == m.surface
    assert [m.surface for m in find_mentions(text)] == ["Chest Pain", "blood in the stool"]


def test_longest_match_wins() -> None:
    (m,) = find_mentions("short of breath at rest")
    assert m.concept == "shortness of breath at rest" and m.red_flag and m.triage_hint == "emergency"
    (m,) = find_mentions("a productive cough")  # the cough, its type is the value
    assert m.concept == "cough" and m.surface == "productive cough"
    (m,) = find_mentions("coughing up phlegm")
    assert m.concept == "sputum"


def test_whole_words_only_and_no_match_across_punctuation() -> None:
    assert find_mentions("coughing") != [] and find_mentions("scoughing") == []
    assert [m.concept for m in find_mentions("the chest. Pain came later")] == ["chest"]  # body site only


def test_red_flags_are_marked() -> None:
    flags = {m.concept: m.red_flag for m in find_mentions("chest pain, a cough and coughing up blood")}
    assert flags == {"chest pain": True, "cough": False, "hemoptysis": True}


def test_lexicon_covers_the_five_specialties_and_body_sites() -> None:
    cats = {c.category for c in lexicon_concepts()}
    assert {"symptom", "history", "body_site", "social"} <= cats
    for concept in ["wheeze", "palpitations", "dysphagia", "joint swelling", "itch", "rash", "back pain"]:
        assert concept_info(concept) is not None, concept


@pytest.mark.parametrize(
    ("term", "canonical"),
    [
        ("breathless", "shortness of breath"),
        ("Dyspnoea", "shortness of breath"),
        ("SOB", "sob"),  # deliberately not in the lexicon (too ambiguous in speech)
        ("Bloody stools", "rectal bleeding"),
        ("tummy pain", "abdominal pain"),
        ("Eliquis", "apixaban"),
        ("Tylenol", "acetaminophen"),
        ("paracetamol", "acetaminophen"),
        ("  Some  Unknown-Term! ", "some unknown term"),
        ("haemoglobin", "hemoglobin"),
    ],
)
def test_canonical_concept(term: str, canonical: str) -> None:
    assert canonical_concept(term) == canonical


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("short of uh breath", "short of uh breath"),
        ("blood in the the stool", "blood in the the stool"),
        ("um chest pain um", "chest pain"),
    ],
)
def test_disfluencies_inside_a_term(text: str, surface: str) -> None:
    (m,) = find_mentions(text)
    assert m.surface == surface


def test_non_clinical_phrases_shadow_clinical_words() -> None:
    text = "We can clarify the confusion about the medications. Any confusion?"
    assert [(m.surface, m.concept) for m in find_mentions(text)] == [("confusion", "confusion")]
    assert all(c.concept != "-" for c in lexicon_concepts())


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("pain better with rest", "pain relieved by rest"),
        ("knee pain worse on walking", "pain worse with walking"),
        ("pain worse on deep breath", "pain worse with deep breathing"),
        ("pain worse going down stairs", "pain worse with stairs"),
        ("pain better with icing", "pain relieved by ice"),
        ("pain worse with lying down", "pain worse lying down"),
        ("shortness of breath worse with exertion", "exertional dyspnea"),
        ("breathlessness worse with walking", "shortness of breath on exertion"),
        ("cough worse with cold weather", "cough worse with cold air"),
        ("visual disturbance", "vision changes"),
        ("previous surgery", "surgery"),
    ],
)
def test_one_spelling_for_a_factor_of_a_symptom(a: str, b: str) -> None:
    from stresstest.clinical.claims import canonical_concept_name

    assert canonical_concept_name(a) == canonical_concept_name(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("pain worse with running", "pain relieved by running"),  # direction kept
        ("cough worse at night", "pain worse at night"),  # subject kept
        ("pain worse with coughing", "pain worse with movement"),  # activity kept
    ],
)
def test_different_factors_stay_different(a: str, b: str) -> None:
    assert canonical_concept(a) != canonical_concept(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("vision change", "vision changes"),
        ("hearing change", "hearing changes"),
        ("night sweat", "night sweats"),
        ("headaches", "headache"),
    ],
)
def test_the_other_number_of_the_last_word_folds(a: str, b: str) -> None:
    assert canonical_concept(a) == canonical_concept(b)
    assert canonical_concept("stress") == "stress"  # "-ss" is not a plural
