"""Reading numbers, quantities and time words off aligned tokens (``number_unit_conflict`` and
``temporal_distortion`` compare these readings).

Every number reading goes through :mod:`stresstest.clinical.numbers` (issue 27: one number reader); this module
only decides which tokens to read and joins the pieces the normaliser split ("1:46" -> "1 46").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from stresstest.clinical.numbers import (
    Quantity,
    comparable_number,
    find_quantities,
    is_number_token,
    is_ordinal_token,
    spoken_values,
)
from stresstest.clinical.vocab import set_phrases, unit_words
from stresstest.metrics.align import TokenizedText
from stresstest.metrics.triggers.regions import _Ann, _Side
from stresstest.metrics.triggers.words import _CLOCK, _GREETING, _QUANTITY_CUES, _RELATIONS, _TIME_WORDS


def _numbers(tt: TokenizedText, i: int, j: int, roman: bool = False, ranks: bool = False) -> list[str]:
    """Numbers of tokens [i, j); digits written as one ("1:46", "9/17", "4/28/07") are joined.

    The normaliser splits "1:46" into "1 46"; joining tokens separated in the
    original only by ``: / , .`` (or by dashes, two or more in one word, as in
    "8-23-97") makes it equal "146". A spoken "o"/"oh", which
    the normaliser reads as 0, is a filler here. ``roman`` reads ii-ix as numbers; ``ranks`` leaves out
    ordinals outside dates (see :func:`_ordinal`).
    """
    out: list[str] = []
    prev: tuple[int, int] | None = None  # span of the previous number token
    for k in range(i, j):
        tok = tt.tokens[k]
        surface = tt.original[tok.start : tok.end]
        rank = ranks and _ordinal(tt.words, k)
        glued = _glued_to_word(surface)
        n = None if surface.lower() in ("o", "oh") or rank or glued else comparable_number(tt.words[k], roman=roman)
        if n is None:
            prev = None
            continue
        if prev is None:
            gap = None
        elif prev == (tok.start, tok.end):
            # Two tokens of one original word ("1:46" -> "1 46", "4-5" -> "4 5"): its non-digits. One
            # dash is a range ("4-5"); more are a date or an id ("8-23-97"), written as one number.
            gap = "".join(c for c in surface if not c.isalnum()) or " "
            if gap.count("-") >= 2:
                gap = gap.replace("-", "/")
        else:
            gap = tt.original[prev[1] : tok.start]
        if out and gap and all(c in ":/,." for c in gap):
            out[-1] += n
        else:
            out.append(n)
        prev = (tok.start, tok.end)
    return out


# Words a number may be hyphenated to and stay a quantity ("5-day", "20-year-old", "two-fold").
_HYPHEN_QUANTITY = frozenset({"old", "fold", "times", "odd", "ish"})


def _glued_to_word(surface: str) -> bool:
    """A number hyphenated to an ordinary word is part of a garbled word, not a quantity ("90-catcher");
    "5-day", "20-year-old", "10-mg", "4-5" stay quantities."""
    parts = surface.lower().split("-")
    if len(parts) < 2:
        return False
    words = [w for w in parts if w.isalpha()]
    return bool(words) and not all(
        w in _TIME_WORDS or w.rstrip("s") in _TIME_WORDS or w in unit_words() or w in _HYPHEN_QUANTITY for w in words
    )


_MONTHS = frozenset("january february march april may june july august september october november december".split())


def _ordinal(words: Sequence[str], k: int) -> bool:
    """An ordinal ("first", "2nd") is a rank, not a quantity ("the first time"), except in a date ("may 17th")."""
    if not is_ordinal_token(words[k]):
        return False
    return not any(w in _MONTHS for w in words[max(0, k - 2) : k + 3])


def _spoken_values(tt: TokenizedText, i: int, j: int) -> list[float] | None:
    """Values of the numbers in the ORIGINAL text of tokens [i, j) (:func:`~stresstest.clinical.numbers.spoken_values`).

    The normaliser's own reading of fractions is not usable here ("one and a half" -> "one.5", "2 1/2" ->
    "2 one 2").
    """
    if j <= i:
        return None
    s, e = tt.char_span(i, j)
    return spoken_values(tt.original[s:e])


def _quantity_values(tt: TokenizedText, i: int, j: int) -> list[tuple[float | None, float | None, str | None]]:
    """(value, upper value, unit) of each quantity read from the ORIGINAL text of tokens [i, j).

    Compares numbers by value where the normaliser's digits do not: it folds "ten, ten" into "1010" and
    leaves "10, 10" as two numbers.
    """
    if j <= i:
        return []
    s, e = tt.char_span(i, j)
    return [(q.value, q.value_max, q.unit_canonical) for q in find_quantities(tt.original[s:e])]


def _units(anns: Iterable[_Ann], other_words: Sequence[str]) -> Counter[str]:
    """Canonical units of some quantities.

    A rate "per day" is left out when the other side says "day" right there:
    the quantity finder reads "milligrams per day" but not "mg/day".
    """
    other = {w[:-1] if w.endswith("s") else w for w in other_words}
    return Counter(
        a.item.unit_canonical
        for a in anns
        if isinstance(a.item, Quantity)
        and a.item.unit_canonical
        and not (a.item.unit_canonical.startswith("per ") and a.item.unit_canonical[4:] in other)
    )


def _may_quantify(words: Sequence[str], i: int, j: int) -> bool:
    """Could tokens [i, j), or the few around them, belong to a quantity or time expression?"""
    for w in words[max(0, i - 3) : j + 3]:
        if (
            is_number_token(w)
            or w in _QUANTITY_CUES
            or w in _TIME_WORDS
            or w.rstrip("s") in _TIME_WORDS
            or w in _RELATIONS
        ):
            return True
    return False


def _in_terms(side: _Side, i: int, j: int) -> frozenset[int]:
    """Tokens of [i, j) inside a lexicon/drug mention ("night" of "night sweats" is no time word)."""
    return frozenset(k for a in side.mentions.overlapping(i, j) for k in range(a.i, a.j))


def _time_words(words: list[str], i: int, j: int, skip: frozenset[int] = frozenset()) -> Counter[str]:
    """Time words of tokens [i, j) in singular form, except greetings ("good morning"), "i am", set phrases
    and tokens of a clinical term (``skip``)."""
    out: Counter[str] = Counter()
    for k in range(i, j):
        if k in skip:
            continue
        w, prev = words[k], words[k - 1] if k > 0 else ""
        if w in _CLOCK:
            if is_number_token(prev):
                out[w] += 1
            continue
        # "hours"/"hour" and "fridays"/"friday" are the same time word.
        base = w[:-1] if w.endswith("s") and w[:-1] in _TIME_WORDS else w
        if base in _TIME_WORDS and prev not in _GREETING and not _in_set_phrase(words, k):
            out[base] += 1
    return out


def _in_set_phrase(words: Sequence[str], k: int) -> bool:
    """Is token ``k`` inside one of the set phrases ("what brought you in today", "good morning")?"""
    for p in set_phrases():
        for t, pw in enumerate(p):
            if pw == words[k] and k - t >= 0 and tuple(words[k - t : k - t + len(p)]) == p:
                return True
    return False
