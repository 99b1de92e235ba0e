"""Numbers, units, durations, doses, frequencies."""

from __future__ import annotations

import pytest

from stresstest.clinical import Quantity, find_quantities, normalise_numbers


def _one(text: str) -> Quantity:
    qs = find_quantities(text)
    assert len(qs) == 1, qs
    q = qs[0]
    assert text[q.start : q.end]  # offsets point into the text
    return q


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("three or four flights of stairs", "3 or 4 flights of stairs"),
        ("twenty five years", "25 years"),
        ("a couple of days", "a couple of days"),
        ("no one came", "no one came"),
    ],
)
def test_normalise_numbers(text: str, expected: str) -> None:
    assert normalise_numbers(text) == expected


@pytest.mark.parametrize(
    ("text", "value", "vmax", "unit", "kind"),
    [
        ("3 or 4 flights of stairs", 3, 4, "flights of stairs", "count"),
        ("three or four flights of stairs", 3, 4, "flights of stairs", "count"),
        ("three or four steps", 3, 4, "steps", "count"),
        ("about 100 yards", 100, None, "yards", "count"),
        ("two hours", 2, None, "hours", "time"),
        ("2 hrs", 2, None, "hours", "time"),
        ("two days", 2, None, "days", "time"),
        ("for twenty five years", 25, None, "years", "time"),
        ("half an hour", 0.5, None, "hours", "time"),
        ("an hour and a half", 1.5, None, "hours", "time"),
        ("a couple of days", 2, None, "days", "time"),
        ("5 mg", 5, None, "mg", "dose"),
        ("five milligrams", 5, None, "mg", "dose"),
        ("500mg", 500, None, "mg", "dose"),
        ("100 micrograms", 100, None, "mcg", "dose"),
        ("two puffs", 2, None, "puffs", "dose"),
        ("38.5 degrees", 38.5, None, "degrees", "measure"),
        ("I'm 45 years old", 45, None, "years of age", "measure"),
        ("7 out of 10", 7, None, "out of 10", "measure"),
        ("twice a day", 2, None, "per day", "frequency"),
        ("three times a week", 3, None, "per week", "frequency"),
        ("BD", 2, None, "per day", "frequency"),
        ("every 4 hours", 0.25, None, "per hour", "frequency"),
        ("one hundred and twenty", 120, None, None, "count"),
    ],
)
def test_quantities(text: str, value: float, vmax: float | None, unit: str | None, kind: str) -> None:
    q = _one(text)
    assert (q.value, q.value_max, q.unit_canonical, q.kind) == (value, vmax, unit, kind)


def test_digit_and_word_forms_agree_and_units_differ() -> None:
    a, b = _one("3 days"), _one("three days")
    assert (a.value, a.unit_canonical) == (b.value, b.unit_canonical)
    assert _one("two hours").unit_canonical != _one("two days").unit_canonical


@pytest.mark.parametrize(
    ("text", "anchor"),
    [
        ("since Monday", "monday"),
        ("since last week", "last week"),
        ("yesterday", "yesterday"),
        ("last night", "last night"),
    ],
)
def test_time_anchors(text: str, anchor: str) -> None:
    q = _one(text)
    assert q.kind == "time" and q.value is None and q.unit_canonical == anchor


def test_rates_after_counts_and_doses() -> None:
    qs = find_quantities("one or two drinks a day and 10 cigarettes per day")
    assert [(q.unit_canonical, q.kind) for q in qs] == [
        ("drinks", "count"),
        ("per day", "frequency"),
        ("cigarettes", "count"),
        ("per day", "frequency"),
    ]


def test_bare_articles_are_not_numbers() -> None:
    assert find_quantities("I had a cough and one of them") == []
    assert find_quantities("") == []


def test_deterministic() -> None:
    text = "5 mg twice a day for 3 days, since Monday"
    assert find_quantities(text) == find_quantities(text)


@pytest.mark.parametrize(
    ("text", "value", "canon"),
    [
        ("within the last 1 and a 1/2 months", 1.5, "months"),
        ("two and a half weeks ago", 2.5, "weeks"),
        ("for the past month", 1.0, "months"),
        ("a couple days", 2.0, "days"),
        ("a couple of days", 2.0, "days"),
        ("over the last few days", None, "few days"),
    ],
)
def test_duration_phrases(text: str, value: float | None, canon: str) -> None:
    (q,) = find_quantities(text)  # one quantity: the phrase replaced or filled in, never both
    assert (q.kind, q.value, q.unit_canonical) == ("time", value, canon)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2 1/2 tablets", [2.5]),
        ("2.5 tablets", [2.5]),
        ("two and a half tablets", [2.5]),
        ("two and one half tablets", [2.0, 1.5]),  # the detector's reading before the move (counts unchanged)
        ("1 and a half weeks", [1.5]),
        ("a half", [0.5]),
        ("1/2", [0.5]),
        ("one half", [0.5]),
        ("twenty five and a half", [20.0, 5.5]),  # each word is read alone (the trigger detector compares lists)
        ("twice and a half", [0.5]),  # "twice" is a frequency, not a number
        ("three tablets", None),  # nothing fractional
    ],
)
def test_spoken_values(text: str, expected: list[float] | None) -> None:
    from stresstest.clinical.numbers import spoken_values

    assert spoken_values(text) == expected


def test_word_value_is_the_number_word_list() -> None:
    from stresstest.clinical.numbers import word_value
    from stresstest.clinical.vocab import number_words

    assert word_value("12") == 12.0 and word_value("2.5") == 2.5 and word_value("twelve") == 12.0
    assert word_value("hundred") == 100.0 and word_value("once") is None and word_value("half") is None
    assert {w: word_value(w) for w in number_words() if w not in number_words("multiplier")} == {
        w: v for w, v in number_words().items() if w not in number_words("multiplier")
    }


@pytest.mark.parametrize(
    ("token", "roman", "expected"),
    [
        ("17th", False, "17"),  # ordinal suffix dropped
        ("2007", False, "7"),  # a year compares equal to its two-digit form ...
        ("07", False, "7"),  # ... and leading zeros go
        ("$40", False, "40"),
        ("50%", False, "50"),
        ("2.50", False, "2.50"),
        ("seven", False, "7"),
        ("twice", False, "2"),  # a frequency word up to ten counts as its number
        ("thrice", False, None),
        ("iv", False, None),
        ("iv", True, "4"),
        ("hello", False, None),
    ],
)
def test_comparable_number(token: str, roman: bool, expected: str | None) -> None:
    from stresstest.clinical.numbers import comparable_number

    assert comparable_number(token, roman=roman) == expected


def test_number_token_shapes() -> None:
    from stresstest.clinical.numbers import is_number_token, is_ordinal_token, small_number_digits

    assert all(is_number_token(t) for t in ("12", "2.5", "$40", "17th", "50%"))
    assert not any(is_number_token(t) for t in ("twelve", "1/2", "a1", "4-5"))
    assert is_ordinal_token("21st") and not is_ordinal_token("21") and not is_ordinal_token("first")
    assert [small_number_digits(w) for w in ("ten", "eleven", "once")] == ["10", "eleven", "1"]
