"""Social-history and medication readings of the ``rules`` structurer: how much and how often the patient
drinks or smokes, the job, and when a medication was taken (dev split only)."""

from __future__ import annotations

import pytest
from rules_claims import grounded_claims as _claims

from stresstest.clinical.claims import canonical_claim
from stresstest.schema import Claim


def _key(c: Claim) -> tuple[str, str]:
    k = canonical_claim(c)
    return k.value, k.time


@pytest.mark.parametrize(
    ("text", "concept", "value", "time"),
    [
        (
            "D: Do you drink alcohol? P: Um occasionally uh maybe I'll have a glass of red wine on the weekend or "
            "something like that, but uh not too often.",
            "alcohol",
            "glass red wine",
            "on weekend",
        ),
        (
            "D: Do you drink alcohol? P: I drink like a couple beers on the weekends, but that's it.",
            "alcohol",
            "2 beer",
            "on weekends",
        ),
        (
            "D: And how about alcohol? P: Uh rarely I'll have maybe a glass of wine like once every couple of months.",
            "alcohol",
            "glass wine",
            "every 2 month",
        ),
        (
            "D: Do you drink alcohol? P: Uh, yeah sometimes, maybe one or two glasses of wine every night.",
            "alcohol",
            "1 2 glass wine",
            "1/night",
        ),
        ("D: Do you drink alcohol? P: Hot days, sometimes I'll have a beer or two.", "alcohol", "beer or 2", ""),
        ("D: Do you drink alcohol? P: Yes. D: How much? P: One to two drinks a day.", "alcohol", "1 2 drink", "1/day"),
        (
            "D: Do you smoke? P: Uh, I've smoked um yeah, I smoke a pack of cigarettes uh per day. D: OK, and for how "
            "long have you smoked uh cigarettes for? P: Uh about 40 years.",
            "smoking",
            "1 pack",
            "1/day 40 year",
        ),
        (
            "D: And do you smoke? P: Yeah once in a while. D: How much do you smoke on average? P: Last couple of "
            "weeks, I've been smoking more, maybe like 2 packs a week.",
            "smoking",
            "2 pack",
            "1/week",
        ),
        (
            "D: OK and do you smoke cigarettes? P: I do, I'm trying to stop. I smoke maybe like. I don't know like 5 "
            "per day or something at this point.",
            "smoking",
            "5 cigarette",
            "1/day",
        ),
    ],
)
def test_habit_amount_and_rate(text: str, concept: str, value: str, time: str) -> None:
    c = _claims(text)[concept]
    assert c.status == "present"
    assert _key(c) == (value, time)


@pytest.mark.parametrize(
    "text",
    [
        # a cigarette lit once is not an amount smoked; the years are the cough's
        "P: Smoking definitely makes it worse. I haven't smoked since each time I lit a cigarette it brought it on.",
        "P: I think that's related to maybe smoking. It's something that was going on for a few years.",
        # a relative's habit is not the patient's
        "D: Do you smoke? P: Yes I do. My dad smokes on the weekends too.",
    ],
)
def test_habit_amount_not_read(text: str) -> None:
    c = _claims(text)["smoking"]
    assert (c.value, c.unit, c.time) == (None, None, None)


@pytest.mark.parametrize(
    ("text", "value", "time"),
    [
        (
            "D: And currently right now, uh do you work? P: Uh I'm a retired school teacher.",
            "retired school teacher",
            None,
        ),
        ("D: OK, and what do you do for work? P: Um, Im an accountant.", "accountant", None),
        ("D: OK, and what do you do for work? P: So I work in at the bank as a consultant.", "bank consultant", None),
        (
            "D: Nice, and what do you do for work? Or are you retired? P: I'm still working, I am a production "
            "overseer, over at Fairbanks.",
            "production overseer",
            None,
        ),
        (
            "P: I just attributed it to being out of shape and I worked as a mechanic when I was younger. I was pretty "
            "active, but ever since retiring I don't do much.",
            "retired mechanic",
            None,
        ),
        (
            "P: So I work in this factory where I move a lot of boxes. D: OK, I see and how long have you worked in "
            "this role? P: For the past 30 years.",
            "factory",
            "30 years",
        ),
        ("D: What do you do for work? P: I work at a butcher shop.", "butcher shop", None),
    ],
)
def test_occupation_value_and_time(text: str, value: str, time: str | None) -> None:
    c = _claims(text)["occupation"]
    assert c.status == "present"
    assert (c.value, c.time) == (value, time)


@pytest.mark.parametrize(
    ("text", "concept", "time"),
    [
        (
            "D: Have you tried any medications that helped the pain? P: Yeah, I took some um, I took some Tylenol and "
            "that did help. D: OK. P: I took it once yesterday.",
            "acetaminophen",
            "1 day",
        ),
        (
            "P: I've been taking Tylenol, the Tylenol cold so I don't know if that helped. D: OK, how often are you "
            "taking the Tylenol cold? P: I just took it like for four days just before going to sleep in the last "
            "week.",
            "acetaminophen",
            "at bedtime 4 day",
        ),
        (
            "D: Any medications? P: I take ibuprofen for the pain. D: How often do you take the ibuprofen? P: Twice a "
            "day, usually.",
            "ibuprofen",
            "2/day",
        ),
    ],
)
def test_medication_time_said_apart(text: str, concept: str, time: str) -> None:
    c = _claims(text)[concept]
    assert c.status == "present"
    assert canonical_claim(c).time == time


def test_medication_time_not_from_another_topic() -> None:
    # the next statement is about the pain, not about taking the drug
    c = _claims("P: I took some Tylenol and that did help. D: OK. P: The pain started two days ago.")["acetaminophen"]
    assert c.time is None


def test_denied_drug_use_with_past_use_is_absent_with_the_history() -> None:
    c = _claims(
        "D: Um and have you used any other recreational drugs? P: Um, no, no. I mean, when I was like "
        "younger I sometimes like would use marijuana, but I haven't really recently."
    )["recreational drug use"]
    assert (c.status, canonical_claim(c).value) == ("absent", "marijuana in past")


def test_current_drug_use_stays_present() -> None:
    c = _claims("D: Any recreational drugs? P: No. Well, I smoke marijuana on the weekends.")["recreational drug use"]
    assert c.status == "present"


def test_sexual_partner_as_said() -> None:
    c = _claims("D: Alright, are you currently sexually active? P: Yeah just like with my boyfriend.")[
        "sexually active"
    ]
    assert (c.status, c.value) == ("present", "with boyfriend")


@pytest.mark.parametrize(
    ("text", "time"),
    [
        (
            "P: Yeah, I went to Haiti on a trip for a volunteer program with my school. D: Were you in close quarters? "
            "P: Yeah, we were living with the locals. It was part of the experience. I was there for almost two months "
            "as part of my summer break.",
            "2 month",
        ),
        (
            "D: Have you traveled anywhere recently? P: I just got back from a trip in the US, was there for work. D: "
            "How long were you there for and when did you get back? P: I was there for one night and got back five "
            "days ago.",
            "5 day",
        ),
    ],
)
def test_travel_time_said_after_the_trip(text: str, time: str) -> None:
    c = _claims(text)["travel"]
    assert c.status == "present"
    assert canonical_claim(c).time == time
