"""Claim identity and deterministic matching (stresstest.clinical.claims)."""

from __future__ import annotations

import pytest

from stresstest.clinical.claims import (
    canonical_claim,
    canonical_flag_key,
    claim_errors,
    claim_key,
    match_claims,
    normalise_time,
    normalise_value,
)
from stresstest.schema import Claim, SafetyFlag


def C(
    id_: str,
    concept: str,
    status: str = "present",
    value: str | None = None,
    unit: str | None = None,
    time: str | None = None,
    category: str = "symptom",
) -> Claim:
    return Claim(id=id_, category=category, concept=concept, status=status, value=value, unit=unit, time=time)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # trade vs generic
        (
            C("a", "Coumadin", value="5", unit="mg", category="medication"),
            C("b", "warfarin", value="5", unit="mg", category="medication"),
        ),
        (
            C("a", "Ventolin", value="2", unit="puffs", category="medication"),
            C("b", "salbutamol", value="2", unit="puffs", category="medication"),
        ),
        # number words vs digits
        (C("a", "cough", time="three days"), C("b", "cough", time="3 days")),
        # unit spellings
        (C("a", "ramipril", value="5", unit="milligrams"), C("b", "ramipril", value="5", unit="mg")),
        (C("a", "ramipril", value="5mg"), C("b", "ramipril", value="five", unit="milligrams")),
        # lay vs clinical synonyms
        (C("a", "breathless"), C("b", "shortness of breath")),
        (C("a", "tummy ache"), C("b", "abdominal pain")),
        (C("a", "coughing up blood"), C("b", "haemoptysis")),
        # NKDA written either way; category does not enter the key
        (C("a", "NKDA", "absent", category="allergy"), C("b", "drug allergies", "absent", category="history")),
        # time phrasing
        (C("a", "fever", time="for a couple of days"), C("b", "fever", time="2 days")),
        (C("a", "salbutamol", time="twice a day"), C("b", "salbutamol", time="BD")),
    ],
)
def test_equivalent_claims_share_a_key(a: Claim, b: Claim) -> None:
    assert claim_key(a) == claim_key(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (C("a", "chest pain", time="2 hours"), C("b", "chest pain", time="2 days")),  # temporal distortion
        (C("a", "fever"), C("b", "fever", "absent")),  # negation
        (C("a", "stairs", value="3 or 4 flights"), C("b", "stairs", value="three or four steps")),  # unit
        (C("a", "warfarin", value="5", unit="mg"), C("b", "warfarin", value="50", unit="mg")),
    ],
)
def test_different_claims_have_different_keys(a: Claim, b: Claim) -> None:
    assert claim_key(a) != claim_key(b)


def test_key_layout_is_concept_status_value_time() -> None:
    assert claim_key(C("x", "Lipitor", value="twenty", unit="milligrams", time="once daily")) == (
        "atorvastatin|present|20 mg|1/day"
    )


def test_normalisers_by_hand() -> None:
    assert normalise_value("3 or 4 flights of stairs") == "3 4 flight stairs"  # one spelling of a range
    assert normalise_value("3 or 4 flights of stairs") == normalise_value("3-4 flights of stairs")
    assert normalise_time("two to three times a week") == normalise_time("2-3 per week") == "2 3/week"
    assert normalise_time("twice a week") == normalise_time("2 times per week") == "2/week"
    assert normalise_time("5 to 6 hours") == normalise_time("5-6 hours")
    assert normalise_value(None, None) == ""
    assert normalise_time("since last night") == "night"
    assert normalise_time("two weeks ago") == "2 week"
    assert normalise_time(None) == ""


def test_a_rate_without_a_count_is_once_per_unit() -> None:
    # "every week" was "/week" while "every day" was "1/day"; one spelling now
    assert normalise_time("every night") == normalise_time("once a night") == normalise_time("1 per night") == "1/night"
    assert normalise_time("per week") == normalise_time("once weekly") == "1/week"
    assert normalise_time("per day for 40 years") == "1/day 40 year"
    assert normalise_time("a few times a week") == "few times /week"  # an unknown count stays unknown
    assert normalise_time("2-3 times per week") == "2 3/week"


@pytest.mark.parametrize(
    "concept", ["shortness of breath on exertion", "dyspnea on exertion", "shortness of breath worse with exertion"]
)
def test_breathlessness_on_exertion_is_breathlessness_with_that_value(concept: str) -> None:
    folded = canonical_claim(C("x", concept))
    assert (folded.concept, folded.value) == ("shortness of breath", "on exertion")
    with_distance = canonical_claim(C("x", "shortness of breath on exertion", value="200", unit="feet"))
    assert (with_distance.concept, with_distance.value) == ("shortness of breath", "200 feet")


def test_a_cough_at_night_is_one_fact_however_named() -> None:
    assert claim_key(C("x", "nocturnal cough")) == claim_key(C("y", "cough worse at night"))
    assert claim_key(C("x", "morning cough")) == claim_key(C("y", "cough worse in the morning"))


def test_values_said_with_and_are_one_value() -> None:
    assert normalise_value("dull and achy") == normalise_value("dull, achy") == "dull achy"


def test_yesterday_is_one_day() -> None:
    assert normalise_time("yesterday") == normalise_time("since yesterday") == normalise_time("1 day") == "1 day"
    assert normalise_time("yesterday evening") == "yesterday evening"  # a part of the day stays


def test_match_decisions_and_error_set_by_hand() -> None:
    gold = [
        C("g1", "chest pain", time="8 hours"),
        C("g2", "fever", "absent"),
        C("g3", "nausea"),
        C("g4", "aspirin", value="75", unit="mg", category="medication"),
    ]
    pred = [
        C("p1", "aspirin", value="seventy five", unit="milligrams", category="medication"),
        C("p2", "chest pain", time="8 days"),
        C("p3", "fever", "present"),
        C("p4", "cough"),
    ]
    m = match_claims(pred, gold)
    got = [(d.decision, d.pred_id, d.gold_id) for d in m.decisions]
    assert got == [
        ("time_mismatch", "p2", "g1"),
        ("status_mismatch", "p3", "g2"),
        ("exact", "p1", "g4"),
        ("missing", None, "g3"),
        ("spurious", "p4", None),
    ]
    assert m.matched == [("p1", "g4")]
    assert m.unmatched_gold == ["g3"]
    assert m.unmatched_pred == ["p4"]
    assert all(d.reason for d in m.decisions)
    # Err = C △ C^gold: 3 predicted-only keys + 3 gold-only keys; the aspirin pair cancels.
    assert m.errors == {
        "+chest pain|present||8 day",
        "+fever|present||",
        "+cough|present||",
        "-chest pain|present||8 hour",
        "-fever|absent||",
        "-nausea|present||",
    }


def test_duplicates_count_once_and_are_recorded() -> None:
    gold = [C("g1", "cough")]
    pred = [C("p1", "cough"), C("p2", "coughing")]
    m = match_claims(pred, gold)
    assert m.errors == frozenset()
    assert [d.decision for d in m.decisions] == ["exact", "duplicate"]


def test_match_is_deterministic_and_order_free_on_errors() -> None:
    gold = [C("g1", "cough"), C("g2", "fever", "absent"), C("g3", "wheeze")]
    pred = [C("p1", "wheezing"), C("p2", "fevers", "absent"), C("p3", "sore throat")]
    a = match_claims(pred, gold)
    b = match_claims(pred, gold)
    assert a == b
    assert match_claims(list(reversed(pred)), list(reversed(gold))).errors == a.errors


def test_claim_errors_is_symmetric_difference() -> None:
    assert claim_errors({"a", "b"}, {"b", "c"}) == {"+a", "-c"}
    assert claim_errors(set(), set()) == frozenset()


def test_flag_keys_fold_trade_names_and_allergy_wording() -> None:
    f1 = SafetyFlag(id="f1", kind="high_risk_medication", name="Coumadin")
    f2 = SafetyFlag(id="f2", kind="high_risk_medication", name="warfarin")
    assert canonical_flag_key(f1) == canonical_flag_key(f2) == "high_risk_medication:warfarin"
    a1 = SafetyFlag(id="a1", kind="allergy", name="Penicillin allergy")
    a2 = SafetyFlag(id="a2", kind="allergy", name="allergic to penicillin")
    assert canonical_flag_key(a1) == canonical_flag_key(a2) == "allergy:penicillin"


def test_family_history_is_not_the_patients_own_history() -> None:
    own = C("a", "diabetes", category="history")
    mum = C("b", "diabetes", category="family_history")
    assert claim_key(mum) == "family history of diabetes|present||"
    assert claim_key(own) != claim_key(mum)
    assert claim_key(own) == claim_key(C("c", "diabetes", category="symptom"))


def test_a_temperature_is_the_same_value_whatever_its_scale_word() -> None:
    from stresstest.clinical.claims import normalise_value

    assert normalise_value("38.5", "degrees C") == normalise_value("38.5", "°C") == normalise_value("38.5", "degrees")
    assert normalise_value("103", "F") == "103 degree"
    assert normalise_value("2", "c") == "2 c"  # not a body temperature: left alone
