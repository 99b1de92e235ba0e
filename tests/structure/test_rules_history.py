"""History-taking readings of the ``rules`` structurer added in issue 14 (dev split only): pain modifiers,
screening questions, occupation, vague and one-unit durations, medication response, hedged habits,
inverted surfaces, triage for new breathlessness and a hot swollen joint."""

from __future__ import annotations

import pytest
from rules_claims import grounded_claims as _claims

from stresstest.clinical.claims import canonical_claim, canonical_flag_key
from stresstest.schema import Claim, SafetyFlag
from stresstest.structure.rules import extract_record


@pytest.mark.parametrize(
    ("text", "concept", "status"),
    [
        (
            "I have this chest pain. It's usually worse when I'm coughing or laying down.",
            "pain worse with coughing",
            "present",
        ),
        (
            "I have this chest pain. It's usually worse when I'm coughing or laying down.",
            "pain worse lying down",
            "present",
        ),
        ("D: Is the pain worse when you lie down? P: No.", "pain worse lying down", "absent"),
        ("My knee pain is bad. Resting it definitely helps.", "pain relieved by rest", "present"),
        (
            "I have chest pain. When I lean forward, it actually does get better.",
            "pain relieved by leaning forward",
            "present",
        ),
        ("D: Does the pain radiate anywhere? P: No, it stays in one spot.", "pain radiation", "absent"),
        ("D: Has this ever happened before? P: No, no it hasn't.", "previous similar episode", "absent"),
        ("P: I have a headache and this is completely new for me.", "previous similar episode", "absent"),
        ("D: Is this the first time you're having this back pain? P: Yeah yes.", "previous similar episode", "absent"),
        ("P: It's not the first time, I had the same pain last year.", "previous similar episode", "present"),
    ],
)
def test_pain_modifiers_and_previous_episodes(text: str, concept: str, status: str) -> None:
    got = _claims(text)
    assert concept in got, sorted(got)
    assert got[concept].status == status


def test_modifiers_need_a_pain_and_are_never_the_chief_complaint() -> None:
    rec = extract_record("P: My throat pain is worse when I'm coughing.")
    assert rec.chief_complaint == "sore throat"
    assert {c.concept for c in rec.claims} == {"sore throat", "pain worse with coughing"}  # no cough of its own
    # no pain word anywhere: "worse when I cough" describes the cough, not a pain modifier
    assert "pain worse with coughing" not in {
        c.concept for c in extract_record("P: The cough is worse when I lie flat at night.").claims
    }


def test_senses_listed_in_a_screening_question_are_each_answered() -> None:
    got = _claims("D: Any changes in your vision, hearing, smell, or taste? P: Nope, that's all been normal.")
    assert {k: v.status for k, v in got.items()} == {
        "vision changes": "absent",
        "hearing changes": "absent",
        "loss of smell": "absent",
        "loss of taste": "absent",
    }
    # a statement about a sense is not a screening answer
    assert "loss of taste" not in _claims("P: My taste has been fine though.")


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        ("Appetite's been normal.", "absent"),
        ("Not great, I'm eating less.", "present"),
        ("Not bad.", "absent"),
        ("I haven't noticed any change.", None),
        ("Hmm.", None),
    ],
)
def test_how_is_your_appetite(answer: str, status: str | None) -> None:
    got = _claims(f"D: How's your appetite been? P: {answer}")
    assert (got["loss of appetite"].status if "loss of appetite" in got else None) == status


@pytest.mark.parametrize(
    ("answer", "value"),
    [
        ("I'm an accountant.", "accountant"),
        ("So I work um at a butcher shop.", "butcher shop"),
        ("I'm retired now.", "retired"),
        ("I do a bit of everything.", None),
    ],
)
def test_occupation_from_the_answer_to_a_work_question(answer: str, value: str | None) -> None:
    got = _claims(f"D: And what do you do for work? P: {answer}")
    assert got["occupation"].category == "social" and got["occupation"].status == "present"
    assert got["occupation"].value == value


def test_no_work_question_no_occupation() -> None:
    assert "occupation" not in _claims("P: I have a cough. D: How long has it been going on? P: Two days.")


@pytest.mark.parametrize(
    ("text", "time"),
    [
        ("P: I've had this cough over the last few days.", "few days"),
        ("P: I've been having this back pain for the past month.", "1 month"),
        ("P: I've had this back pain that's been going on now for the last uh two weeks.", "2 weeks"),
        ("P: I've had a cough for a few days, about 3 days now.", "3 days"),
    ],
)
def test_durations(text: str, time: str) -> None:
    got = _claims(text)
    concept = "cough" if "cough" in text else "back pain"
    assert got[concept].time == time


def test_a_life_question_never_dates_the_symptom() -> None:
    got = _claims(
        "P: I've been having this back pain for the past month. D: And how long have you worked in "
        "this role? P: For the past 30 years."
    )
    assert got["back pain"].time == "1 month"


def test_how_bad_after_a_scale_is_a_rating() -> None:
    got = _claims(
        "P: My knee hurts, it's a sharp pain. D: And one to 10, 10 being the worst pain you've ever had. "
        "How bad is this pain? P: It's about a 7."
    )
    assert (got["knee pain"].value, got["knee pain"].unit) == ("7", "out of 10")


def test_pain_character_is_the_value_without_a_rating() -> None:
    got = _claims("D: How would you describe the pain? P: I'd say my back pain is pretty sharp.")
    assert got["back pain"].value == "sharp"


def test_a_medication_said_not_to_help_keeps_its_dose_field_empty() -> None:
    # the medication value is its dose: "no relief" there would read as a dosing error to the judge
    meds = [
        c
        for c in extract_record("P: I tried Tylenol but that didn't do anything.").claims
        if c.category == "medication"
    ]
    assert meds and meds[0].value is None


def test_a_hedge_on_a_habit_qualifies_the_amount() -> None:
    got = _claims("D: Do you drink alcohol? P: Maybe a glass of wine on the weekends.")
    assert got["alcohol"].status == "present"
    # but a hedged symptom stays uncertain
    assert _claims("D: Any wheeze? P: Maybe, maybe a slight wheeze.")["wheeze"].status == "uncertain"


def test_clarifying_sentences_between_question_and_answer() -> None:
    got = _claims(
        "D: OK, how about any chills? So it could be like when you kind of shaking in your bed. P: No, not really."
    )
    assert got["chills"].status == "absent"


def test_joint_swelling_and_pain_at_one_site() -> None:
    got = _claims("P: Five days ago I started having this pain and swelling in my right knee.")
    assert got["knee pain"].time == "5 days" and got["joint swelling"].status == "present"
    assert "swelling" not in got  # the vague concept is never a claim of its own


def test_hot_swollen_joint_is_urgent() -> None:
    text = (
        "P: Five days ago I started having this pain and swelling in my right knee. D: Is the joint hot as well? "
        "P: It does feel a bit warmer than the surrounding areas. D: Does it look red? P: It definitely looks "
        "more red than my other knee."
    )
    rec = extract_record(text)
    assert rec.triage.level == "urgent"
    assert any(f.name == "hot swollen joint" and f.kind == "red_flag" for f in rec.safety_flags)


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("P: I've been short of breath since last night and I have a cough.", "urgent"),
        ("P: I get short of breath when I'm running in gym class, it goes away after a couple of minutes.", "routine"),
    ],
)
def test_new_breathlessness_is_urgent_unless_only_on_exertion(text: str, level: str) -> None:
    assert extract_record(text).triage.level == level


def test_allergen_names_compare_singular_and_plural_alike() -> None:
    a = SafetyFlag(id="f1", kind="allergy", name="peanut", detail="")
    b = SafetyFlag(id="f1", kind="allergy", name="peanuts allergy", detail="")
    assert canonical_flag_key(a) == canonical_flag_key(b)
    ca = Claim(id="c1", category="allergy", concept="peanut", status="present")
    cb = Claim(id="c1", category="allergy", concept="peanuts", status="present")
    assert canonical_claim(ca) == canonical_claim(cb)


def test_blood_listed_beside_sputum_is_hemoptysis() -> None:
    got = _claims("D: So you haven't been bringing up any sputum or or any blood? P: No no.")
    assert (got["sputum"].status, got["hemoptysis"].status) == ("absent", "absent")
    assert "hemoptysis" not in _claims("D: Any blood in your stool? P: No.")


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        ("It's mainly in those areas.", "absent"),
        ("No, I would say just on the left side.", "absent"),
        ("Yes, to my left arm.", "present"),
    ],
)
def test_a_pain_that_stays_put_does_not_radiate(answer: str, status: str) -> None:
    assert _claims(f"D: Does the pain move anywhere? P: {answer}")["pain radiation"].status == status


def test_never_before_means_no_previous_episode() -> None:
    got = _claims("P: I've had chest pain since this morning. I've never had any pain in my chest before.")
    assert got["previous similar episode"].status == "absent"
    assert got["chest pain"].status == "present"
    assert "previous similar episode" not in _claims("P: I have never smoked.")


def test_sites_listed_in_a_yes_no_pain_question_are_each_asked() -> None:
    got = _claims(
        "D: And any pain in other joints, like the hips or the knees or your shoulders? P: Uh, no nothing, no."
    )
    assert {k: v.status for k, v in got.items()} == {
        "joint pain": "absent",
        "hip pain": "absent",
        "knee pain": "absent",
        "shoulder pain": "absent",
    }
    # an open question naming sites asks where, not whether
    assert set(_claims("D: Where is the pain, your chest or your back? P: My chest.")) == {"chest pain"}


def test_swollen_legs_are_leg_swelling() -> None:
    assert _claims("P: My legs felt a bit swollen on the airplane.")["leg swelling"].status == "present"


def test_how_often_fills_the_time_of_an_undated_symptom() -> None:
    got = _claims(
        "P: I get these muscle cramps in my back. D: How often are you getting these spasms? "
        "P: Um I'd say like two to three times a week."
    )
    assert canonical_claim(got["muscle cramps"]).time == "2 3/week"


def test_an_amount_in_the_next_sentence_and_and_a_half_durations() -> None:
    got = _claims(
        "D: Have you lost any weight? P: Yeah, I've actually lost a significant amount of weight. "
        "I would say within the last 1 and a 1/2 months probably lost like 8 to 10 pounds."
    )
    c = got["weight loss"]
    assert (c.value, c.unit, c.time) == ("8-10", "lb", "1.5 months")


def test_a_clarified_onset_range_replaces_the_first_answer() -> None:
    got = _claims(
        "D: What brings you in today? P: I've had a sore throat now for a couple of weeks and it's just "
        "not going away. D: Couple of weeks. OK, so about two weeks, three weeks? "
        "P: Yeah, about two to three weeks."
    )
    assert got["sore throat"].time == "2-3 weeks"


def test_a_checked_onset_replaces_the_first_one() -> None:
    got = _claims(
        "P: He's had a sore throat now for the last couple of days. D: OK, how old is he? P: He is 3 "
        "years old. D: And you said for the past couple days, so about 2-3 days? P: Yeah, probably yeah "
        "about 3 days ago he started."
    )
    assert got["sore throat"].time == "3 days"


@pytest.mark.parametrize(
    ("text", "concept", "value"),
    [
        ("D: Any family history of heart problems? P: My dad had a heart attack.", "myocardial infarction", "father"),
        ("D: Anything that runs in the family? P: My mom has diabetes.", "diabetes", "mother"),
        ("D: Anyone in the family? P: My mum and my dad both have high blood pressure.", "hypertension", None),
        ("D: Anything in the family? P: Diabetes runs in the family.", "diabetes", None),
    ],
)
def test_a_family_claim_names_the_one_relative(text: str, concept: str, value: str | None) -> None:
    c = _claims(text)[concept]
    assert (c.category, c.status, c.value) == ("family_history", "present", value)


def test_one_unit_of_time_is_singular() -> None:
    claims = _claims("P: I've had this cough for one week. And a fever for 2 days.")
    assert claims["cough"].time == "1 week"
    assert claims["fever"].time == "2 days"


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("D: Have you had pain like this before? P: No, this is the first time.", "absent"),
        ("D: Has this ever happened to you before? P: No, no it hasn't.", "absent"),
        ("D: Have you ever experienced anything like this in the past? P: Uh no.", "absent"),
        ("D: Is this the first time? P: No.", "present"),
        ("P: This is not the first time.", "present"),
    ],
)
def test_a_no_that_answers_the_question_does_not_negate_first_time(text: str, status: str) -> None:
    assert _claims(text)["previous similar episode"].status == status


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("P: I tested positive for COVID last week.", {"covid-19": "present"}),
        ("P: I had covid in March.", {"covid-19": "present"}),
        ("P: I was laid off because of COVID.", {}),
        ("D: Any contact with anyone who might have COVID? P: No.", {}),
    ],
)
def test_an_illness_talked_about_is_not_a_claim(text: str, expected: dict[str, str]) -> None:
    assert {k: c.status for k, c in _claims(text).items()} == expected


def test_a_wet_cough_is_productive_and_coughing_up_phlegm_is_sputum() -> None:
    assert (_claims("P: It has been a wet cough.")["cough"].value) == "productive"
    assert (_claims("P: I have a dry cough.")["cough"].value) == "dry"
    got = _claims("D: Are you coughing up phlegm? P: Yes, green stuff.")
    assert (got["sputum"].status, got["sputum"].value) == ("present", "green")


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        (
            "D: Does anything make the cough worse? P: Running makes it worse, and the cold air.",
            "cough worse with exertion",
        ),
        (
            "D: Does anything make the cough worse? P: Running makes it worse, and the cold air.",
            "cough worse with cold air",
        ),
        ("P: The dust makes my cough worse.", "cough worse with dust"),
        ("D: Anything make your cough better? P: Resting helps.", "cough relieved by rest"),
        ("P: I have a cough. It gets worse when I lie down.", "cough worse with lying down"),
        ("P: My knee pain is worse when I walk.", "pain worse with movement"),
        ("P: I have chest pain. It is worse when I cough.", "pain worse with coughing"),
    ],
)
def test_factors_of_a_cough_belong_to_the_cough(text: str, concept: str) -> None:
    got = _claims(text)
    assert got[concept].status == "present", sorted(got)
    assert "common cold" not in got  # "the cold air" is weather, not an infection


def test_breathlessness_on_exertion_stays_the_breathlessness() -> None:
    got = _claims("P: I get short of breath, it is worse with walking.")
    assert sorted(got) == ["shortness of breath"] and got["shortness of breath"].status == "present"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("D: Have you taken any cough medicine? P: No.", {"cough syrup": ("medication", "absent")}),
        ("P: I tried over the counter cough syrup, but it's not helping.", {"cough syrup": ("medication", "present")}),
        (
            "P: I've tried some topical analgesics and nothing seems to be working.",
            {"topical analgesic": ("medication", "present")},
        ),
        ("D: Any pain elsewhere on your body? P: Nope, just my knee.", {"pain elsewhere": ("symptom", "absent")}),
        ("D: Does the pain go anywhere else? P: No.", {"pain radiation": ("symptom", "absent")}),
    ],
)
def test_remedies_tried_and_pain_elsewhere(text: str, expected: dict[str, tuple[str, str]]) -> None:
    assert {k: (c.category, c.status) for k, c in _claims(text).items()} == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (
            "P: I've had a cough for three days. D: Is it a dry cough or are you bringing anything up? "
            "P: No, it's it's dry. It's very dry.",
            "dry",
        ),
        ("P: I have a cough. D: Does the cough bring anything up? P: It's pretty wet.", "productive"),
        ("P: I have a cough. D: And your throat? P: It's dry.", None),  # the throat's, not the cough's
        ("P: I have a cough. D: Is the cough worse at night? P: It's dry skin mostly.", None),
    ],
)
def test_the_cough_type_said_as_a_reply(text: str, value: str | None) -> None:
    assert _claims(text)["cough"].value == value


@pytest.mark.parametrize(
    ("text", "concept", "status"),
    [
        ("D: Do you have a runny nose or a stuffy nose? P: Maybe a bit of a runny nose.", "runny nose", "present"),
        ("D: Do you have a sore throat? P: Maybe a little bit this morning, yeah.", "sore throat", "present"),
        ("D: Any fever? P: Maybe, I'm not sure.", "fever", "uncertain"),
        ("D: Any weakness in your arms? P: Uh yeah I haven't had any muscle weakness.", "weakness", "absent"),
        (
            "D: Have you ever experienced this before or is this the first time? P: Yeah, this is the first time "
            "I've been experiencing it.",
            "previous similar episode",
            "absent",
        ),
    ],
)
def test_hedges_on_amounts_and_denials_inside_a_yes(text: str, concept: str, status: str) -> None:
    assert _claims(text)[concept].status == status


def test_a_hedged_yes_is_never_read_as_a_denial() -> None:
    got = _claims("D: Are you producing sputum? P: Yeah, I guess I'd say I have this frothy sputum.")
    assert got["sputum"].status != "absent"


def test_an_achy_pain_is_the_pain_not_muscle_aches() -> None:
    assert "muscle aches" not in _claims("D: How would you describe the pain? P: It's kind of like this achy pain.")
    assert _claims("D: Any muscle aches? P: Yes, my muscles ache all over.")["muscle aches"].status == "present"


def test_sites_in_a_radiation_question_are_destinations_not_pains() -> None:
    got = _claims(
        "D: Does the pain radiate anywhere else like pain in the hand or wrist, or up into the arm? "
        "P: I don't think so."
    )
    assert {k: c.status for k, c in got.items()} == {"pain radiation": "absent"}
    assert _claims("D: Do you have any pain in your hand? P: Yes.")["hand pain"].status == "present"


def test_a_drug_class_named_with_its_member_is_the_member() -> None:
    assert set(_claims("P: I tried anti-inflammatories like ibuprofen or Advil.")) == {"ibuprofen"}
    assert set(_claims("P: I took some anti inflammatories.")) == {"nsaid"}


@pytest.mark.parametrize(
    ("text", "level"),
    [
        (
            "P: I was skiing yesterday and I fell on my arm, and now my wrist is painful and it looks swollen and "
            "bruised.",
            "urgent",
        ),
        ("P: I was in a car accident last week and my neck has been a bit stiff since.", "routine"),
        ("P: I fell on my wrist two years ago. Now it aches a little and it looks bruised.", "routine"),
    ],
)
def test_a_recent_injury_with_swelling_or_bruising_is_urgent(text: str, level: str) -> None:
    assert extract_record(text).triage.level == level


def test_a_time_that_opens_the_sentence_dates_every_symptom_in_it() -> None:
    got = _claims("P: Five days ago I started having this pain and swelling in my right knee.")
    assert got["knee pain"].time == got["joint swelling"].time == "5 days"
    assert (
        _claims("P: So this morning I woke up and I have some like bruising on my hand.")["bruising"].time
        == "this morning"
    )


def test_hair_and_nails_listed_in_a_screening_question() -> None:
    got = _claims("D: Any changes to your hair, nails or skin? P: No.")
    assert (got["hair changes"].status, got["nail changes"].status) == ("absent", "absent")


def test_a_duration_asked_after_the_onset_replaces_the_anchor() -> None:
    text = (
        "D: When did this chest pain start? P: It started last night, but it's becoming sharper. D: Where is it? "
        "P: On the left side of my chest. D: So how long has it been going on for then if it started last "
        "night? P: So I guess it would be a couple of hours now, maybe like 8."
    )
    rec = extract_record(text)
    (cp,) = [c for c in rec.claims if c.concept == "chest pain"]
    assert cp.time == "8 hours"
    assert "So I guess it would be a couple of hours now, maybe like 8" in rec.field_evidence[cp.id]
    assert rec.triage.level == "emergency"  # acute chest pain of 8 hours


def test_how_long_it_lasts_is_an_episode_not_the_onset() -> None:
    got = _claims("P: I get these headaches. D: How long do they last? P: About 2 hours.")
    assert got["headache"].time is None


def test_bladder_accidents_with_back_pain_are_a_cauda_equina_red_flag() -> None:
    rec = extract_record(
        "P: My back has been killing me for two months. I can't feel anything in the groin area "
        "and I'm having so many bladder accidents."
    )
    flags = {(f.kind, f.name) for f in rec.safety_flags}
    assert {("red_flag", "urinary incontinence"), ("red_flag", "saddle anesthesia")} <= flags
    assert rec.triage.level == "emergency"
    plain = extract_record("P: I've had some leaking urine when I laugh, for years.")
    assert not any(f.kind == "red_flag" for f in plain.safety_flags)


@pytest.mark.parametrize(
    ("text", "concept", "status"),
    [
        (
            "D: Does the pain go anywhere? P: Yeah, I think it kind of goes to my neck sometimes.",
            "pain radiation",
            "present",
        ),
        ("D: Are you producing sputum? P: Yeah, I guess I would say I have this frothy sputum.", "sputum", "present"),
        ("D: Any fever? P: I think so, maybe.", "fever", "uncertain"),
        ("D: Does the pain travel anywhere else? P: No, it's just right below my kneecap.", "pain radiation", "absent"),
    ],
)
def test_a_yes_softened_by_i_think_is_still_a_yes(text: str, concept: str, status: str) -> None:
    assert _claims(text)[concept].status == status


def test_drooling_with_a_sore_throat_is_an_airway_emergency() -> None:
    rec = extract_record(
        "P: She has a sore throat and she seems to have issues swallowing food. D: Has she been "
        "drooling at all? P: Yes, she has been drooling a lot."
    )
    assert ("red_flag", "drooling") in {(f.kind, f.name) for f in rec.safety_flags}
    assert rec.triage.level == "emergency"
    teething = extract_record("P: My baby is teething and drooling a lot.")
    assert teething.triage.level == "routine" and not teething.safety_flags


def test_a_hot_swollen_knee_said_in_pieces() -> None:
    rec = extract_record(
        "P: I've had this pain in my knee. It started within the last few hours and my knee's "
        "swollen, it's painful. D: Is it red and warm? P: It is, yeah, it's really red. D: Okay. "
        "P: And warm as well."
    )
    got = {c.concept: c.status for c in rec.claims}
    assert got["joint swelling"] == got["redness"] == got["warmth"] == "present"
    assert ("red_flag", "hot swollen joint") in {(f.kind, f.name) for f in rec.safety_flags}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "D: Are you bringing up any sputum? P: Yes, a little. D: OK, have you noticed any blood? P: No blood.",
            {"sputum": "present", "hemoptysis": "absent"},
        ),
        ("P: I have a cough. D: Any blood pressure problems? P: No.", {"cough": "present", "hypertension": "absent"}),
    ],
)
def test_a_blood_question_right_after_the_sputum_is_about_hemoptysis(text: str, expected: dict[str, str]) -> None:
    assert {k: c.status for k, c in _claims(text).items()} == expected


@pytest.mark.parametrize(
    ("text", "concept", "status"),
    [
        ("D: How is your appetite? P: I haven't been as hungry.", "loss of appetite", "present"),
        ("P: I've been eating as much as usual.", "loss of appetite", "absent"),
        ("P: I feel like I've been able to smell.", "loss of smell", "absent"),
        ("P: I haven't really been able to smell these last few days.", "loss of smell", "present"),
    ],
)
def test_surfaces_that_name_the_normal_state(text: str, concept: str, status: str) -> None:
    assert _claims(text)[concept].status == status


@pytest.mark.parametrize(
    ("text", "value"),
    [("P: I work in construction.", "construction"), ("P: I worked as a mechanic when I was younger.", "mechanic")],
)
def test_more_job_statements(text: str, value: str) -> None:
    assert _claims(text)["occupation"].value == value


def test_a_rating_question_closed_with_a_full_stop() -> None:
    got = _claims(
        "P: I have pain just below my big toe. D: And how would you describe the severity of this pain. "
        "One being the least pain and 10 being the worst pain you've ever felt. P: I say it's like an 8."
    )
    assert (got["foot pain"].value, got["foot pain"].unit) == ("8", "out of 10")


def test_a_cough_bringing_up_sputum_is_productive() -> None:
    got = _claims("P: I've had a cough for 3 weeks. D: Are you bringing anything up? P: Yes, some green phlegm.")
    assert (got["cough"].value, got["sputum"].value) == ("productive", "green")
    assert _claims("P: I've had a cough for 3 weeks.")["cough"].value is None


def test_a_walking_distance_asked_of_cough_and_breathlessness_is_the_breathlessness() -> None:
    got = _claims(
        "P: I have a cough and shortness of breath. D: How much can you walk or run until you feel the "
        "coughing or shortness of breath? P: About like 200 meters."
    )
    assert (got["shortness of breath"].value, got["shortness of breath"].unit) == ("200", "meters")
    assert got["cough"].value is None


def test_a_rough_onset_answer_keeps_its_own_scale() -> None:
    got = _claims(
        "P: I've had this pain in my left knee that's been going on now for the last three or four months. "
        "D: And you said it started a few weeks ago? P: Well, I think it first started a few months ago, "
        "but in the past couple of weeks it has started to last longer."
    )
    assert got["knee pain"].time == "3-4 months"
    assert _claims("P: I have a cough. D: When did it start? P: A few days, maybe 3 days.")["cough"].time == "3 days"


def test_temperature_scale_breathlessness_on_exertion_and_the_cough_type_over_a_rating() -> None:
    got = _claims("D: Did you check your temperature? P: Yes, it was 38.5.")
    assert (got["fever"].value, got["fever"].unit) == ("38.5", "°C")
    assert _claims("P: Her temperature was 103.")["fever"].unit == "°F"
    got = _claims("P: I get short of breath when I'm walking up the stairs or running.")
    assert got["shortness of breath"].value == "on exertion"
    got = _claims("P: I have a dry cough. D: How bad is the cough on a scale of 1 to 10? P: About a 6.")
    assert got["cough"].value == "dry"


@pytest.mark.parametrize(
    ("text", "status", "value"),
    [
        ("P: Ever since I got back from Mexico it's been yeah so about two weeks.", "present", "mexico"),
        ("P: I went to Haiti on a trip for a volunteer program.", "present", "haiti"),
        (
            "D: Any travel? P: I was in Italy for the past three weeks actually, just got back last night.",
            "present",
            "italy",
        ),
        ("D: Have you travelled anywhere recently? P: No.", "absent", None),
    ],
)
def test_a_trip_said_as_a_statement_names_its_destination(text: str, status: str, value: str | None) -> None:
    got = _claims(text)["travel"]
    assert (got.status, got.value) == (status, value)


def test_no_trip_in_an_emergency_department_visit_or_a_pain_that_travels() -> None:
    assert "travel" not in _claims("P: I went to the Emergency Department yesterday.")
    got = _claims("D: Does the pain travel anywhere else? P: No.")
    assert {k: c.status for k, c in got.items()} == {"pain radiation": "absent"}


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("D: Do you consume alcohol? P: Uh, no, very rarely because I always get a headache.", "present"),
        (
            "D: Do you drink alcohol? P: Uh rarely I'll have maybe a glass of wine like once every couple of months.",
            "present",
        ),
        ("D: Do you drink alcohol? P: No, never.", "absent"),
    ],
)
def test_a_rare_habit_is_present(text: str, status: str) -> None:
    assert _claims(text)["alcohol"].status == status


@pytest.mark.parametrize(
    ("text", "pains"),
    [
        ("P: Those gels seem to help temporarily, but the pain comes back.", set()),
        ("P: There is pain at the back of my knee.", {"knee pain"}),
        ("P: I have pain in my lower back.", {"back pain"}),
        ("P: The pain in my back came on suddenly.", {"back pain"}),
    ],
)
def test_back_as_an_adverb_is_not_the_back(text: str, pains: set[str]) -> None:
    assert {k for k in _claims(text) if k.endswith(" pain")} == pains


def test_a_severity_question_rates_the_pain_at_a_site_not_the_aches() -> None:
    got = _claims(
        "P: My right knee is very painful. I've also had some muscle aches. D: What would you say the "
        "severity of the pain is, with 10 being the worst pain you've ever felt? P: I give it about a 6."
    )
    assert (got["knee pain"].value, got["knee pain"].unit) == ("6", "out of 10")
    assert got["muscle aches"].value is None


def test_a_cough_type_beats_its_sound() -> None:
    assert _claims("P: It's a hacking cough. It's a wet cough too.")["cough"].value == "productive"
    assert _claims("P: It's a barking cough.")["cough"].value == "barking"


@pytest.mark.parametrize(
    "text",
    [
        "D: What brought you in? P: I've been feeling hot for the past couple of days and I have this terrible "
        "headache. D: When did these symptoms start exactly? P: So they started about 3 days ago.",
        "D: What brought you in? P: She has fever and a headache. D: When did the fever and headache start? "
        "P: So they started about 3 days ago.",
    ],
)
def test_an_onset_asked_of_several_symptoms_dates_each(text: str) -> None:
    got = _claims(text)
    assert (got["fever"].time, got["headache"].time) == ("3 days", "3 days")


def test_an_onset_of_one_symptom_does_not_date_the_others() -> None:
    got = _claims(
        "D: What brought you in? P: I have a cough and a fever. D: When did the cough start? P: About 3 days ago."
    )
    assert (got["cough"].time, got["fever"].time) == ("3 days", None)


def test_a_number_in_the_next_sentence_refines_a_rough_onset() -> None:
    got = _claims(
        "P: I've been having this pain in my right elbow over the last few days. "
        "I started having it around three days ago."
    )
    assert got["elbow pain"].time == "3 days"
    kept = _claims("P: I've been having this pain in my right elbow for 2 days. It started a few days after the match.")
    assert kept["elbow pain"].time == "2 days"  # a number is not replaced by a rough one


@pytest.mark.parametrize(
    "text",
    [
        "D: And does this pain move anywhere else in your hand, or does it just stay where you described? "
        "P: Um it just stays there.",
        "D: Do you feel the pain radiating anywhere else, or you just feeling it at that one spot? "
        "P: I'm feeling it just in that one spot.",
        "D: Did the pain stay in that same spot or does it move anywhere else? "
        "P: It has pretty much stayed in that one spot, yeah.",
        "D: Does it radiate anywhere? Like to your forearm or up into your upper arm or shoulder? "
        "P: Uh no, I don't think so. No.",
        "D: And is the pain going anywhere else or is it just staying in your chest? P: The pain is just in my chest.",
    ],
)
def test_a_pain_that_stays_put_in_an_either_or_question(text: str) -> None:
    got = _claims(text)
    assert got["pain radiation"].status == "absent"
    assert not {k for k in got if k.endswith(" pain") and k != "chest pain"}  # the sites asked about are not pains


def test_a_radiation_answer_with_a_destination_is_present() -> None:
    assert (
        _claims("D: Does the pain move anywhere else? P: Yes, it goes down my leg.")["pain radiation"].status
        == "present"
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (
            "P: Now I ran to catch the bus yesterday and I was a bit more short of breath than I would usually be.",
            "on exertion",
        ),
        (
            "P: Walking, doing day to day things has made me feel a little bit more short of breath than I used to.",
            "on exertion",
        ),
        (
            "D: Is the shortness of breath just during activity, or when you're resting as well? "
            "P: The shortness of breath is more with activity when I'm walking around.",
            "on exertion",
        ),
        ("P: I'm short of breath even when I'm sitting, and walking makes it worse.", None),
        (
            "D: So there's no relationship with activity and your shortness of breath? P: No. "
            "P: I've been short of breath.",
            None,
        ),
    ],
)
def test_breathlessness_on_exertion_is_its_value(text: str, value: str | None) -> None:
    assert _claims(text)["shortness of breath"].value == value


def test_breathlessness_on_mild_exertion_stays_urgent() -> None:
    # New breathlessness with walking about needs same-day assessment; with sport only it does not.
    mild = extract_record("P: For two days I get short of breath every time I'm walking around the house.")
    sport = extract_record("P: For two days I get short of breath when I play hockey.")
    assert (mild.triage.level, sport.triage.level) == ("urgent", "routine")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("P: It does have some like dark yellow greenish mucus every time I cough.", "dark yellow greenish"),
        ("P: I've been bringing up this yellow, greenish sputum.", "yellow greenish"),
        ("D: What colour is the sputum? P: It's mainly like clear to white.", "clear to white"),
        ("P: I cough up thick sputum.", "thick"),
    ],
)
def test_sputum_takes_the_colours_said_together(text: str, value: str) -> None:
    assert _claims(text)["sputum"].value == value


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        ("P: Anytime I tried to move it, it hurts.", "pain worse with movement"),
        ("P: My knee hurts the most when I'm moving the knee.", "pain worse with movement"),
        ("P: My shoulder is sore and any type of movement is really bad.", "pain worse with movement"),
        ("D: Does anything make the pain worse? P: Um, moving it.", "pain worse with movement"),
        ("P: If I'm just resting the elbow, um, it makes it better.", "pain relieved by rest"),
        ("P: My wrist is painful, but if I rest, the pain eventually goes away.", "pain relieved by rest"),
    ],
)
def test_a_factor_said_as_when_the_pain_comes_or_goes(text: str, concept: str) -> None:
    assert _claims(text)[concept].status == "present"


def test_an_activity_without_a_hurt_is_no_factor() -> None:
    got = _claims("P: My knee is sore. When I'm walking to work I listen to music.")
    assert "pain worse with movement" not in got


@pytest.mark.parametrize(
    ("text", "absent"),
    [
        (
            "D: How about any discharge like mucus or tears from your eyes or ears? P: No, nothing like that.",
            {"eye discharge", "ear discharge"},
        ),
        ("D: Have you had any eye symptoms such as discharge, tearing or itchiness? P: No.", {"eye discharge"}),
        ("D: Any vaginal discharge? P: No.", set()),
    ],
)
def test_discharge_asked_with_the_eyes_or_ears(text: str, absent: set[str]) -> None:
    got = _claims(text)
    assert {k for k, c in got.items() if k.endswith("discharge") and c.status == "absent"} == absent


@pytest.mark.parametrize(
    ("text", "trauma"),
    [
        ("P: Sometimes I get a little bit congested during the fall, but that's it.", False),
        ("P: My allergies are bad every fall.", False),
        ("P: It flares in the spring and fall.", False),
        ("P: I hurt my wrist in the fall.", True),
        ("P: I had a fall down the stairs.", True),
        ("P: Sometimes I find it'll just fall out of my hand.", False),
        ("P: Things fell out of my hand twice.", False),
        ("P: I can't fall asleep because of the pain.", False),
        ("P: I fell off my bike.", True),
    ],
)
def test_fall_the_season_is_no_trauma(text: str, trauma: bool) -> None:
    assert ("trauma" in _claims(text)) is trauma


def test_a_pain_question_rates_the_presenting_pain() -> None:
    got = _claims(
        "P: I've been having this pain in my right elbow. If I extend my wrist, I feel a sharp pain. "
        "My wrist pain is worse when I grip things. D: In terms of severity, 1 to 10, how bad is the pain? "
        "P: Um, probably like a 6 or 7."
    )
    assert (got["elbow pain"].value, got["elbow pain"].unit) == ("6-7", "out of 10")
    assert got["wrist pain"].unit is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("P: I have this pain in my right ankle. D: How would you describe the pain? P: Dull and achy.", "dull achy"),
        ("P: My lower back pain is dull, achy.", "dull achy"),
        ("P: It's an achy pain in my elbow.", "achy"),
    ],
)
def test_pain_qualities_said_together(text: str, value: str) -> None:
    pains = [c for k, c in _claims(text).items() if k.endswith("pain")]
    assert [c.value for c in pains] == [value]
    assert "muscle aches" not in _claims(text)  # "achy" describes the pain here


def test_a_describe_question_read_past_its_offered_options() -> None:
    got = _claims(
        "P: I have this pain in my right ankle. D: How would you describe the pain? Is it like a dull, "
        "aching pain or sharp stabbing pain? P: Dull and achy."
    )
    assert got["ankle pain"].value == "dull achy"


@pytest.mark.parametrize(
    ("text", "pain"),
    [
        (
            "P: I went for a run and I twisted my ankle. I think I stepped on something and it really hurts.",
            "ankle pain",
        ),
        ("P: I bumped my knee on the table. Now it's really sore.", "knee pain"),
    ],
)
def test_it_hurts_after_a_named_site_is_that_sites_pain(text: str, pain: str) -> None:
    assert _claims(text)[pain].status == "present"


def test_it_hurts_needs_one_site_before() -> None:
    got = _claims("P: I hit my knee and my elbow on the door. It really hurts.")
    assert not {k for k in got if k.endswith(" pain")}
    got = _claims("P: I twisted my ankle. It doesn't hurt though.")
    assert got.get("ankle pain") is None or got["ankle pain"].status == "absent"


def test_an_injury_is_dated_by_the_pain_it_caused() -> None:
    got = _claims("P: I fell off my bicycle and landed on my chest. I've had this chest pain for the past two hours.")
    assert (got["trauma"].time, got["chest pain"].time) == ("2 hours", "2 hours")


def test_an_onset_asked_of_the_injury_dates_it_and_its_pain() -> None:
    got = _claims(
        "P: I went for a run and I twisted my ankle. I think I stepped on something and it really hurts. "
        "D: OK, and so when did you have the injury? P: It was just yesterday."
    )
    assert (got["trauma"].time, got["ankle pain"].time) == ("yesterday", "yesterday")


def test_an_old_injury_does_not_date_todays_pain() -> None:
    got = _claims(
        "P: I have this pain in my knee. D: Any injuries? P: Yes, I injured it playing soccer. "
        "D: When did you have the injury? P: That was 3 years ago."
    )
    assert got["trauma"].time == "3 years" and got["knee pain"].time is None


def test_an_onset_is_not_read_from_the_clinicians_next_question() -> None:
    got = _claims(
        "P: I've had this intense pain in my right foot for the past six hours. D: OK, so you say it "
        "started six hours ago, has the pain been getting better or worse? D: And was there any trauma "
        "to the foot within the last day, or in the last six hours?"
    )
    assert got["foot pain"].time == "6 hours"


@pytest.mark.parametrize(
    ("answer", "value"), [("I would say probably a 6 or a 7.", "6-7"), ("Maybe a 4 or 5.", "4-5"), ("It's a 7.", "7")]
)
def test_a_rating_said_as_two_numbers_is_a_range(answer: str, value: str) -> None:
    got = _claims(
        f"P: My neck is really painful. D: 1 to 10, 10 being the worst pain you've ever felt, how bad is "
        f"this pain? P: {answer}"
    )
    assert (got["neck pain"].value, got["neck pain"].unit) == (value, "out of 10")


def test_a_time_said_right_after_another_term_is_that_terms() -> None:
    got = _claims("P: So I've had a fever that I measured this morning and I had a cough.")
    assert got["fever"].time == "this morning" and got["cough"].time is None
    shared = _claims("P: I had a fever a couple of nights and just yesterday I noticed a loss of taste.")
    assert shared["loss of taste"].time == "yesterday"  # "and just yesterday" opens a new clause


@pytest.mark.parametrize(
    ("text", "status"),
    [
        (
            "D: Any fevers? P: I don't, like I don't have a thermometer, I maybe felt a little hot, but I don't know.",
            "uncertain",
        ),
        ("D: You mentioned you had a fever, but have you checked your temperature? P: No, I haven't.", "uncertain"),
        ("D: Any fever? P: No.", "absent"),
        ("P: No fever, my temperature was normal.", "absent"),
        # not measured, but feeling well: a denial (the normal words include "well", "fine", "good")
        ("D: Any fever, did you take your temperature? P: No, I haven't, but I feel well.", "absent"),
        ("D: Any fever, did you take your temperature? P: No, I haven't, but I feel fine.", "absent"),
    ],
)
def test_a_fever_not_measured_is_not_denied(text: str, status: str) -> None:
    assert _claims(text)["fever"].status == status


@pytest.mark.parametrize(
    ("text", "concept", "status"),
    [
        (
            "D: Any other symptoms like runny nose? P: Uh nothing I can think of, just just this cough that's been "
            "bugging me.",
            "cough",
            "present",
        ),
        (
            "D: Any other symptoms like runny nose? P: Uh nothing I can think of, just just this cough that's been "
            "bugging me.",
            "runny nose",
            "absent",
        ),
        ("P: No, only the knee pain.", "knee pain", "present"),
        ("P: I thought it was maybe just like a chest infection.", "pneumonia", "uncertain"),
        ("P: I have no cough and no fever.", "cough", "absent"),
    ],
)
def test_the_one_thing_a_denial_leaves_out_is_present(text: str, concept: str, status: str) -> None:
    assert _claims(text)[concept].status == status


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("P: I've had a sore throat since last night and I feel feverish.", "urgent"),
        ("P: I lost my sense of smell yesterday and I've had a fever.", "urgent"),
        ("P: I've had a sore throat since last night. D: Any fever? P: No.", "routine"),
    ],
)
def test_fever_with_a_focal_symptom_is_same_day(text: str, level: str) -> None:
    assert extract_record(text).triage.level == level


def test_a_child_in_pain_after_an_injury_is_same_day() -> None:
    child = extract_record(
        "P: Hi, I'm here with my daughter. Since yesterday she's been having this pain in her "
        "elbow. She was about to fall and I pulled her back up by the arm."
    )
    adult = extract_record(
        "P: Since yesterday I've been having this pain in my elbow. I was about to fall and "
        "someone pulled me back up by the arm."
    )
    assert (child.triage.level, adult.triage.level) == ("urgent", "routine")


def test_an_anchor_in_the_next_sentence_dates_the_symptom() -> None:
    got = _claims("P: I just feel really wheezy. I notice that mostly last night, yeah.")
    assert got["wheeze"].time == "last night"


@pytest.mark.parametrize(
    ("text", "constant"),
    [
        ("P: I've had a cough that's just been constantly bothering me for the past few days.", False),
        ("P: I've been feeling very nauseated, it feels like all the time right now.", False),
        ("P: At work there is always just constant lifting.", False),
        (
            "P: This pain in my elbow started three days ago. D: Has it been persistent since, or on and off? "
            "P: It's been pretty persistent.",
            True,
        ),
    ],
)
def test_constant_is_a_pains_only_when_said_of_a_pain(text: str, constant: bool) -> None:
    assert ("constant pain" in _claims(text)) is constant


@pytest.mark.parametrize(
    ("text", "concept", "found"),
    [
        (
            "D: Any triggers for your coughing, like the cold, uh, time of day? P: Um, smoking makes it worse.",
            "common cold",
            False,
        ),
        ("D: Any triggers for the cough, like going outside into the cold? P: No.", "common cold", False),
        ("P: Just the cold that I was talking about a few weeks ago.", "common cold", True),
        ("P: I had a cold last week.", "common cold", True),
        ("P: She had the flu vaccine though.", "influenza", False),
        ("P: I had the flu last month.", "influenza", True),
    ],
)
def test_an_illness_word_that_names_something_else(text: str, concept: str, found: bool) -> None:
    assert (concept in _claims(text)) is found


def test_how_much_weight_gives_the_weight_change_its_amount_and_time() -> None:
    got = _claims(
        "D: Any weight loss recently? P: Uh no, weight gain. D: Weight gain, OK. How much weight have you "
        "gained over the last several months? P: Over the past six months, I'd say I've gained about 20 "
        "pounds."
    )
    assert (got["weight gain"].value, got["weight gain"].unit, got["weight gain"].time) == ("20", "lb", "6 months")


def test_a_recapped_onset_is_the_presenting_complaints() -> None:
    got = _claims(
        "P: I've been having this cough and trouble breathing. D: Are you bringing up any mucus? "
        "P: Yes, more mucus. D: And then you said it started a couple days ago, is that correct? "
        "P: Yeah, I guess like 3 days ago then."
    )
    assert got["cough"].time == "3 days" or got["shortness of breath"].time == "3 days"
    assert got["sputum"].time is None


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        ("P: My knee pain, the main things that hurt are if I'm walking down stairs.", "pain worse with stairs"),
        ("P: My knee is sore, it's mostly during running that it really hurts the most.", "pain worse with running"),
        ("P: The pain in my knee gets worse when I go up stairs.", "pain worse with stairs"),
    ],
)
def test_a_pain_worse_with_stairs_or_running_keeps_the_activity(text: str, concept: str) -> None:
    got = _claims(text)
    assert got[concept].status == "present" and "pain worse with movement" not in got


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        (
            "D: Is your cough at all worse during the day or at night? P: I think the cough's worse at night.",
            "cough worse at night",
        ),
        ("D: How is the cough? P: I find it's worse in the morning.", "cough worse in the morning"),
        ("P: I've had this cough and I've been coughing at night too.", "cough worse at night"),
    ],
)
def test_a_cough_worse_at_a_time_of_day(text: str, concept: str) -> None:
    assert _claims(text)[concept].status == "present"


def test_a_pain_worse_at_night_is_no_cough_factor() -> None:
    got = _claims("P: I have a cough. My back pain is worse at night.")
    assert not {k for k in got if k.startswith("cough worse")}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("P: I guess I've been short of breath after I cough, so yeah.", True),
        ("P: I have a cough. After some of my coughing fits, I can be a little bit shorter in breath.", True),
        (
            "D: Is there anything that makes breathing more difficult for you? P: Yeah, not really. Actually, it's "
            "been well, but just bad after I cough.",
            True,
        ),
        ("P: I'm short of breath. It's come on after that, the cough started first.", False),
        ("P: My chest hurts after I cough.", False),
    ],
)
def test_breathless_after_coughing(text: str, found: bool) -> None:
    assert ("shortness of breath worse with coughing" in _claims(text)) is found


def test_a_family_list_goes_on_into_the_next_sentence() -> None:
    got = _claims(
        "D: Any family history of cancer? P: Yeah, there's a lot of cancer in the family. There's colon "
        "cancer, breast cancer, ovarian cancer."
    )
    assert {c.category for k, c in got.items() if k.endswith("cancer") and k != "cancer"} == {"family_history"}
    own = _claims("P: My mother had diabetes in the family. I have had colon cancer myself.")
    assert own["colon cancer"].category == "history"


@pytest.mark.parametrize(
    ("answer", "sputum"),
    [("It is dry.", "absent"), ("Yeah, it's really dry.", "absent"), ("Some sputum, yes.", "present")],
)
def test_its_dry_to_a_dry_or_sputum_question_denies_the_sputum(answer: str, sputum: str) -> None:
    got = _claims(f"D: Is it a dry cough or are you bringing up any sputum? P: {answer}")
    assert got["sputum"].status == sputum


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("P: I have type 2 diabetes.", "type 2"),
        ("P: I have diabetes, type one.", "type 1"),
        ("P: I have diabetes.", None),
    ],
)
def test_the_diabetes_type_is_its_value(text: str, value: str | None) -> None:
    assert _claims(text)["diabetes"].value == value


def test_pain_in_other_joints_keeps_which_joints() -> None:
    got = _claims("P: My knee hurts. D: Are you getting any pain in any other joints? P: No.")
    assert (got["joint pain"].status, got["joint pain"].value) == ("absent", "other joints")


def test_a_temperature_is_the_fevers_value_only() -> None:
    got = _claims(
        "P: He's also been vomiting for the last two days. I managed to measure it and it was 38.3 degrees Celsius."
    )
    assert got["vomiting"].unit is None
    fever = _claims("P: Yesterday he also developed a fever. It was 38.3 degrees Celsius.")
    assert fever["fever"].value == "38.3"


@pytest.mark.parametrize(
    ("text", "concept", "status"),
    [
        (
            "D: Have you noticed any changes in your sense of smell? Do you feel like you can smell less? "
            "P: I think that's pretty normal.",
            "loss of smell",
            "absent",
        ),
        ("D: Any changes in your bowel movements? P: They have been normal.", "change in bowel habit", "absent"),
        ("D: Any changes in your sense of smell? P: A little bit less than usual.", "loss of smell", "present"),
    ],
)
def test_a_change_question_answered_with_the_normal_state(text: str, concept: str, status: str) -> None:
    assert _claims(text)[concept].status == status


def test_a_relatives_habit_and_illness_are_not_the_patients() -> None:
    got = _claims(
        "D: Do you smoke? P: No, I never have. My dad smoked two packs a day for 30 years and had lung cancer."
    )
    assert got["smoking"].status == "absent" and got["smoking"].value is None
    assert got["lung cancer"].category == "family_history"
    own = _claims("D: Do you smoke? P: Yes, I smoke a pack a day, my dad smoked too.")
    assert own["smoking"].status == "present"


def test_sometimes_ends_a_denials_reach() -> None:
    got = _claims("D: Are you on any medications? P: Not prescribed, sometimes I take like some antacids.")
    assert got["antacids"].status == "present"


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        ("D: What makes the pain worse? P: Touching it.", "pain worse with touch"),
        ("P: My big toe is so painful, even my shoes touching it hurts.", "pain worse with touch"),
        (
            "P: My knee is sore. I've tried icing it too, after practice, which does seem to help a little bit.",
            "pain relieved by ice",
        ),
        (
            "P: My ankle hurts. I've tried some ibuprofen, some ice. It seems to help temporarily.",
            "pain relieved by ice",
        ),
    ],
)
def test_touch_and_ice_as_pain_factors(text: str, concept: str) -> None:
    assert _claims(text)[concept].status == "present"


def test_a_factor_question_takes_the_pain_as_given() -> None:
    got = _claims("D: Is the pain on your legs worse when you touch it? P: Yeah, maybe not so much when I touch it.")
    assert (got["leg pain"].status, got["pain worse with touch"].status) == ("present", "absent")
