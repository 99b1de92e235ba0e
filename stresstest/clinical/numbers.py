"""Numbers, units, durations, doses and frequencies in clinical speech.

Two jobs:

* :func:`normalise_numbers` rewrites number words as digits ("three or four"
  -> "3 or 4", "twenty five" -> "25") with ``text2num``, for comparing texts.
* :func:`find_quantities` finds quantities with character offsets into the
  *original* text, so "3 flights of stairs" and "three flights of stairs" give
  the same value and canonical unit, while "two hours" and "two days" differ.

Unit spellings are folded by ``data/units.tsv`` (mg / milligrams, hrs / hours,
flights of stairs / flight of stairs...). Frequencies ("twice a day", "three
times daily", "every 4 hours", "BD") are normalised to a count per period.
Anchored times ("since Monday", "yesterday", "last night") are kind ``time``
with ``value`` None and the anchor as the canonical unit.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

from text_to_num import alpha2digit

from stresstest.clinical.text import norm_word, read_table
from stresstest.clinical.vocab import number_words

QuantityKind = Literal["time", "dose", "count", "measure", "frequency"]

# Number words come from data/number_words.tsv (the one list; see stresstest.clinical.vocab).
_SMALL = {w: int(v) for w, v in number_words("small").items()}
_TENS = {w: int(v) for w, v in number_words("tens").items()}
_SCALES = {w: int(v) for w, v in number_words("scale").items()}
_MULT_WORDS = number_words("multiplier")
# What one word says as a number (multipliers are frequencies, "approx" words are not numbers here).
_WORD_VALUES = {**_SMALL, **_TENS, **_SCALES}
_DECIMAL = re.compile(r"\d+(?:\.\d+)?")
_FRACTION = re.compile(r"^(\d+)/(\d+)$")
_SPOKEN_FRACTIONS = {"half": 0.5, "halves": 0.5, "quarter": 0.25, "quarters": 0.25, "third": 1 / 3, "thirds": 1 / 3}
_VALUE_TOKEN = re.compile(r"\d+(?:[./]\d+)?|[a-z]+")
# One normalised token that is a number: digits, maybe "$", a decimal, an ordinal suffix or "%".
_NUMBER_TOKEN = re.compile(r"^\$?\d+(?:\.\d+)?(?:st|nd|rd|th|%)?$")
_ORDINAL_TOKEN = re.compile(r"\d+(st|nd|rd|th)")
_ORDINAL_SUFFIX = re.compile(r"(?<=\d)(?:st|nd|rd|th)$")
_YEAR = re.compile(r"^(?:19|20)(\d\d)$")
# Number words up to ten as digits ("once"/"twice" too; "thrice" is left as a word).
_SMALL_DIGITS = {w: str(int(v)) for w, v in number_words().items() if v <= 10 and w != "thrice"}
_ROMAN = {"ii": "2", "iii": "3", "iv": "4", "v": "5", "vi": "6", "vii": "7", "viii": "8", "ix": "9"}
# Prescription shorthand -> doses per day.
_ABBREV_FREQ = {
    "od": 1.0,
    "qd": 1.0,
    "bd": 2.0,
    "bid": 2.0,
    "tds": 3.0,
    "tid": 3.0,
    "qds": 4.0,
    "qid": 4.0,
    "nocte": 1.0,
    "daily": 1.0,
    "nightly": 1.0,
    "weekly": 1.0,
    "monthly": 1.0,
    "hourly": 1.0,
}
_ABBREV_PERIOD = {"weekly": "per week", "monthly": "per month", "hourly": "per hour"}
_PERIODS = {
    "day": "per day",
    "days": "per day",
    "daily": "per day",
    "night": "per day",
    "week": "per week",
    "weeks": "per week",
    "month": "per month",
    "months": "per month",
    "year": "per year",
    "hour": "per hour",
    "hours": "per hour",
    "minute": "per minute",
    "morning": "per day",
    "evening": "per day",
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ANCHOR_WORDS = {
    "yesterday",
    "today",
    "tonight",
    "morning",
    "evening",
    "afternoon",
    "night",
    "week",
    "weekend",
    "month",
    "year",
    "christmas",
    "january",
    "february",
    "march",
    "april",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    *_WEEKDAYS,
}

_WORD = re.compile(r"\d+(?:\.\d+)?|[A-Za-z]+(?:['\u2019][A-Za-z]+)*|%")


@dataclass(frozen=True, slots=True)
class Quantity:
    """A number with its unit, found in a text.

    Attributes:
        start: Character offset of the quantity in the searched text.
        end: One past its last character.
        value: The number (the lower bound of a range such as "3 or 4"); None
            for anchored times ("since Monday").
        unit: The unit as written (None for a bare number).
        unit_canonical: Canonical unit ("mg", "hours", "flights of stairs",
            "per day" for frequencies, "monday" for anchors), None when bare.
        kind: time | dose | count | measure | frequency.
        value_max: Upper bound of a range ("3 or 4" -> 4), else None.
    """

    start: int
    end: int
    value: float | None
    unit: str | None
    unit_canonical: str | None
    kind: QuantityKind
    value_max: float | None = None


@dataclass(frozen=True, slots=True)
class _W:
    start: int
    end: int
    text: str
    norm: str


@functools.lru_cache(maxsize=1)
def _units() -> tuple[dict[tuple[str, ...], tuple[str, str]], int]:
    table: dict[tuple[str, ...], tuple[str, str]] = {}
    for row in read_table("units.tsv"):
        if len(row) >= 3:
            key = tuple(norm_word(w) for w in row[0].split())
            table.setdefault(key, (row[1], row[2]))
    return table, max(len(k) for k in table)


def normalise_numbers(text: str) -> str:
    """Rewrite English number words as digits ("three or four" -> "3 or 4").

    Uses ``text2num.alpha2digit`` with its default threshold, which leaves an
    isolated "one" alone ("no one" stays) and does not touch vague amounts
    ("a couple of", "a few").

    Args:
        text: Any English text.

    Returns:
        The text with number words replaced by digits.
    """
    return str(alpha2digit(text, "en"))


def word_value(word: str) -> float | None:
    """The number one word says: digits ("12", "2.5") or a number word ("twelve", "hundred"); else None.

    The one reader of a single number word: the quantity scanner here and the trigger detector
    (:mod:`stresstest.metrics.triggers`) both read through it. "once"/"twice" are frequencies, not numbers.

    Args:
        word: One lower-case word.
    """
    if _DECIMAL.fullmatch(word):
        return float(word)
    v = _WORD_VALUES.get(word)
    return None if v is None else float(v)


def small_number_digits(word: str) -> str:
    """``word`` as digits when it is a number word up to ten ("seven" -> "7", "twice" -> "2"), else ``word``."""
    return _SMALL_DIGITS.get(word, word)


def is_number_token(token: str) -> bool:
    """Whether one normalised token is a number ("12", "2.5", "$40", "17th", "50%")."""
    return _NUMBER_TOKEN.match(token) is not None


def is_ordinal_token(token: str) -> bool:
    """Whether one normalised token is a digit ordinal ("1st", "17th")."""
    return _ORDINAL_TOKEN.fullmatch(token) is not None


def comparable_number(token: str, roman: bool = False) -> str | None:
    """One normalised token as a number in comparable form, or None when it is not a number.

    Number words up to ten are digits (:func:`small_number_digits`: "once"/"twice" count as 1/2); ordinal
    suffixes and currency/percent marks go ("17th"/"17"); a four-digit year compares equal to its two-digit
    form ("2007"/"07"); leading zeros go. ``roman`` reads ii-ix as numbers ("grade iv"). The trigger detector
    compares what two texts say through it.
    """
    c = small_number_digits(_ROMAN.get(token, token) if roman else token)
    if not is_number_token(c):
        return None
    c = _ORDINAL_SUFFIX.sub("", c.lstrip("$").rstrip("%"))
    m = _YEAR.match(c)
    if m:
        c = m.group(1)
    return str(int(c)) if c.isdigit() else c


def spoken_values(text: str) -> list[float] | None:
    """The values of the numbers in ``text``, fractions folded into the number before; None when ``text`` holds
    nothing fractional (no "/", ".", "half", "quarter", "third").

    "2 1/2", "2.5" and "two and a half" all read [2.5]; "a half", "one half" and "1/2" read [0.5]; "two and one
    half" reads [2, 1.5] (the trigger detector's reading before this function moved here, kept so its counts hold);
    ordinals are left out ("the first time" holds no quantity). Each number word is read by :func:`word_value`
    ("twenty five" reads [20, 5]). Used by the trigger detector to compare what two texts say.
    """
    words = _VALUE_TOKEN.findall(text.lower())
    if not any("/" in w or "." in w or w in _SPOKEN_FRACTIONS for w in words):
        return None
    vals: list[float] = []
    k = 0
    while k < len(words):
        w = words[k]
        frac = _FRACTION.match(w)
        v: float | None
        if frac and float(frac.group(2)) > 0 and int(frac.group(2)) <= 8:
            v = float(frac.group(1)) / float(frac.group(2))
            if vals and k > 0 and word_value(words[k - 1]) is not None:
                vals[-1] += v
                k += 1
                continue
        elif w in _SPOKEN_FRACTIONS:
            v = _SPOKEN_FRACTIONS[w]
            # "two and a half", "1 and a half": added to the number before "and".
            back = [x for x in words[max(0, k - 3) : k] if x not in ("a", "an", "one")]
            if vals and back and back[-1] == "and":
                vals[-1] += v
                k += 1
                continue
            if k > 0 and words[k - 1] in ("one",) and vals and vals[-1] == 1.0:
                vals[-1] = v  # "one half"
                k += 1
                continue
        else:
            v = word_value(w)
        if v is not None:
            vals.append(v)
        k += 1
    return [round(x, 4) for x in vals]


def _words(text: str) -> list[_W]:
    return [_W(m.start(), m.end(), m.group(0), norm_word(m.group(0))) for m in _WORD.finditer(text)]


def _is_num_word(w: str) -> bool:
    return w in _SMALL or w in _TENS


def _parse_number(ws: list[_W], i: int) -> tuple[float, int] | None:
    """Parse a number (digits or words) at ws[i]; returns (value, next index)."""
    w = ws[i].norm
    if w[0].isdigit():
        return float(w), i + 1
    total = 0
    current = 0
    k = i
    seen = False
    while k < len(ws):
        w = ws[k].norm
        if w in _SMALL:
            if seen and current % 10 != 0 and current != 0:
                break  # "three four" is two numbers, not 34
            if seen and _SMALL[w] >= 10 and current % 100 != 0:
                break  # "ten, ten" / "twenty eleven" are two numbers ("one hundred ten" is one)
            current += _SMALL[w]
        elif w in _TENS:
            if seen and current % 100 != 0:
                break
            current += _TENS[w]
        elif w in _SCALES and seen:
            current = max(current, 1) * _SCALES[w]
            if _SCALES[w] == 1000:
                total += current
                current = 0
        elif w == "and" and seen and k + 1 < len(ws) and _is_num_word(ws[k + 1].norm):
            pass  # "one hundred and twenty"
        else:
            break
        seen = True
        k += 1
    if not seen:
        return None
    return float(total + current), k


def _match_unit(ws: list[_W], i: int, after_digits: bool) -> tuple[str, str, int] | None:
    table, longest = _units()
    for n in range(min(longest, len(ws) - i), 0, -1):
        key = tuple(w.norm for w in ws[i : i + n])
        hit = table.get(key)
        if hit is not None:
            if n == 1 and len(key[0]) == 1 and not after_digits:
                continue  # single-letter units ("h", "m", "g") only right after digits
            return hit[0], hit[1], i + n
    return None


def _period(ws: list[_W], k: int) -> tuple[str, int] | None:
    """'a day' / 'per week' / 'daily' / 'at night' / 'in the morning' after a count."""
    if k < len(ws) and ws[k].norm in ("a", "an", "per", "each", "every", "at", "in", "a"):
        j = k + 1
        if j < len(ws) and ws[j].norm == "the":
            j += 1
        if j < len(ws) and ws[j].norm in _PERIODS:
            return _PERIODS[ws[j].norm], j + 1
    if k < len(ws) and ws[k].norm in ("daily", "nightly"):
        return "per day", k + 1
    return None


_COUPLE_RE = re.compile(r"\bcouple\s+(?:of\s+)?(?P<unit>minutes|hours|days|weeks|months|years)\b", re.IGNORECASE)
_FEW_RE = re.compile(r"\b(?P<q>few|several)\s+(?P<unit>minutes|hours|days|nights|weeks|months|years)\b", re.IGNORECASE)
_PAST_PERIOD_RE = re.compile(
    r"\b(?:for|over|in|during|within)\s+the\s+(?:past|last)\s+(?P<unit>minute|hour|day|night|week|month|year)\b",
    re.IGNORECASE,
)
_AND_A_HALF_RE = re.compile(
    r"\b(?P<n>\d+|one|two|three|four|five|six|seven|eight|nine|ten) and a (?:half|1/2) "
    r"(?P<unit>minutes|hours|days|weeks|months|years)\b",
    re.IGNORECASE,
)


def _fixed_phrases(text: str) -> list[Quantity]:
    """Durations the word scanner misreads, read as phrases (they replace what it found inside them):

    * "for the past month", "over the last week" = 1 month / 1 week (alone, "last week" is an anchor);
    * "1 and a 1/2 months", "two and a half weeks" = 1.5 months / 2.5 weeks (the scanner reads "1/2 months"
      as two months).
    """
    out: list[Quantity] = []
    for mt in _PAST_PERIOD_RE.finditer(text):
        unit = mt.group("unit")
        out.append(Quantity(mt.start(), mt.end(), 1.0, unit, unit.lower() + "s", "time"))
    for mt in _AND_A_HALF_RE.finditer(text):
        n = mt.group("n").lower()
        value = float(n) if n.isdigit() else float(_SMALL[n])
        unit = mt.group("unit").lower()
        out.append(Quantity(mt.start(), mt.end(), value + 0.5, unit, unit, "time"))
    return out


def _missed_phrases(text: str) -> list[Quantity]:
    """Durations the word scanner leaves out (kept only where it found nothing):

    * "a couple days" = 2 days (the scanner reads "a couple of days" itself);
    * "a few days", "several weeks": vague, value None and canonical unit "few days" / "several weeks".
    """
    out: list[Quantity] = []
    for mt in _COUPLE_RE.finditer(text):
        unit = mt.group("unit").lower()
        out.append(Quantity(mt.start(), mt.end(), 2.0, unit, unit if unit.endswith("s") else unit + "s", "time"))
    for mt in _FEW_RE.finditer(text):
        out.append(
            Quantity(
                mt.start(), mt.end(), None, mt.group(0), f"{mt.group('q').lower()} {mt.group('unit').lower()}", "time"
            )
        )
    return out


def find_quantities(text: str) -> list[Quantity]:
    """Find numbers with units, durations, doses, frequencies and time anchors.

    The word scanner (:func:`_scan_quantities`) runs first; the phrases of
    :func:`_fixed_phrases` ("for the past month", "1 and a 1/2 months") replace
    what it found inside them, and those of :func:`_missed_phrases` ("a couple
    days", "a few days") fill in where it found nothing.

    Args:
        text: Any text; offsets refer to it.

    Returns:
        Non-overlapping quantities in text order.
    """
    fixed = _fixed_phrases(text)
    out = [q for q in _scan_quantities(text) if not any(_overlap(p, q) for p in fixed)] + fixed
    out += [p for p in _missed_phrases(text) if not any(_overlap(p, q) for q in out)]
    return sorted(out, key=lambda q: q.start)


def _overlap(a: Quantity, b: Quantity) -> bool:
    return a.start < b.end and b.start < a.end


def _scan_quantities(text: str) -> list[Quantity]:
    """Find numbers with units, durations, doses, frequencies and time anchors, word by word.

    Examples of what is found: "two hours" (time, 2, hours), "3 days ago",
    "since Monday" (time, None, monday), "5 mg" / "five milligrams" (dose, 5,
    mg), "twice a day" / "BD" (frequency, 2, per day), "every 4 hours"
    (frequency, 0.25, per hour), "3 or 4 flights of stairs" (count, 3,
    flights of stairs, value_max 4), "100 yards", "half an hour" (0.5 hours).
    A bare number is kind "count" with no unit; a bare "one"/"a" is ignored.

    Args:
        text: Any text; offsets refer to it.

    Returns:
        Non-overlapping quantities in text order.
    """
    ws = _words(text)
    out: list[Quantity] = []
    i = 0
    n = len(ws)

    def emit(
        a: int, b: int, value: float | None, unit: str | None, canon: str | None, kind: str, vmax: float | None = None
    ) -> None:
        start, end = ws[a].start, ws[b - 1].end
        out.append(Quantity(start, end, value, unit, canon, kind, vmax))  # type: ignore[arg-type]

    while i < n:
        w = ws[i].norm
        # Prescription shorthand and "once/twice a day".
        if w in _ABBREV_FREQ:
            if w == "od" and not (i > 0 and ws[i - 1].norm in ("mg", "mcg", "g", "ml", "units")):
                i += 1
                continue
            emit(i, i + 1, _ABBREV_FREQ[w], ws[i].text, _ABBREV_PERIOD.get(w, "per day"), "frequency")
            i += 1
            continue
        if w in _MULT_WORDS:
            per = _period(ws, i + 1)
            if per is not None:
                emit(i, per[1], _MULT_WORDS[w], " ".join(x.text for x in ws[i + 1 : per[1]]), per[0], "frequency")
                i = per[1]
                continue
        # "every 4 hours", "every other day", "every day"
        if w == "every" and i + 1 < n:
            num = (
                _parse_number(ws, i + 1)
                if (ws[i + 1].norm[0].isdigit() or ws[i + 1].norm in _SMALL or ws[i + 1].norm in _TENS)
                else None
            )
            j = num[1] if num else i + 1
            if j < n and ws[j].norm in ("other",):
                num, j = (2.0, j + 1), j + 1
            unit = _match_unit(ws, j, after_digits=bool(num and ws[i + 1].norm[0].isdigit()))
            if unit is not None and unit[1] == "time":
                every = num[0] if num else 1.0
                canon = unit[0].rstrip("s")
                emit(
                    i,
                    unit[2],
                    1.0 / every if every else None,
                    " ".join(x.text for x in ws[j : unit[2]]),
                    f"per {canon}",
                    "frequency",
                )
                i = unit[2]
                continue
        # Anchored times: "since Monday", "last night", "yesterday", "this morning".
        if w in ("since", "last", "this", "yesterday") and i + 1 <= n:
            j = i + 1
            if w == "yesterday":
                emit(i, i + 1, None, ws[i].text, "yesterday", "time")
                i += 1
                continue
            if j < n and ws[j].norm == "last" and w == "since":
                j += 1
            if j < n and ws[j].norm in _ANCHOR_WORDS:
                anchor = " ".join(x.norm for x in ws[i : j + 1]) if w != "since" else ws[j].norm
                if w == "since" and j > i + 1:
                    anchor = "last " + ws[j].norm
                emit(i, j + 1, None, " ".join(x.text for x in ws[i + 1 : j + 1]), anchor, "time")
                i = j + 1
                continue
        # "2 drinks a day", "10 cigarettes per day": the rate of the quantity just before.
        if (
            w in ("a", "an", "per", "each", "every")
            and out
            and i > 0
            and out[-1].end == ws[i - 1].end
            and out[-1].kind in ("count", "dose")
        ):
            per = _period(ws, i)
            if per is not None:
                emit(i, per[1], 1.0, " ".join(x.text for x in ws[i : per[1]]), per[0], "frequency")
                i = per[1]
                continue
        # A number (digits, words, "a"/"an" before a time unit, "half", "a couple of").
        start = i
        value: float | None = None
        j = i
        after_digits = False
        if w in ("a", "an") and i + 1 < n:
            if ws[i + 1].norm == "couple" and i + 2 < n and ws[i + 2].norm == "of":
                value, j = 2.0, i + 3
            elif ws[i + 1].norm == "half" and i + 2 < n:
                value, j = 0.5, i + 2
            else:
                unit = _match_unit(ws, i + 1, after_digits=False)
                # "a"/"an" counts only before a time unit ("an hour") or a smoking rate ("a pack a day").
                if unit is not None and (unit[1] == "time" or unit[0].startswith("packs")):
                    value, j = 1.0, i + 1
        elif w == "half" and i + 2 < n and ws[i + 1].norm in ("a", "an"):
            value, j = 0.5, i + 2
        else:
            num = _parse_number(ws, i)
            if num is not None:
                value, j = num
                after_digits = ws[i].norm[0].isdigit()
        if value is None:
            i += 1
            continue
        vmax: float | None = None
        # Ranges: "3 or 4", "3 to 4", "3-4".
        if j + 1 < n and ws[j].norm in ("or", "to") or (j < n and text[ws[j - 1].end : ws[j].start] == "-"):
            k = j + 1 if ws[j].norm in ("or", "to") else j
            if k < n:
                nxt = _parse_number(ws, k)
                if nxt is not None and nxt[0] > value:
                    vmax, j = nxt
                    after_digits = ws[k].norm[0].isdigit()
        # Frequencies "3 times a day".
        if j < n and ws[j].norm in ("times", "time", "x"):
            per = _period(ws, j + 1)
            if per is not None:
                unit_text = " ".join(x.text for x in ws[j : per[1]])
                emit(start, per[1], value, unit_text, per[0], "frequency", vmax)
                i = per[1]
                continue
        unit = _match_unit(ws, j, after_digits)
        if unit is None and j < n and ws[j].norm == "percent":
            unit = ("percent", "measure", j + 1)
        if unit is not None:
            canon, kind, e = unit
            # "an hour and a half", "2 and a half days" handled on both sides.
            if e + 2 < n and [x.norm for x in ws[e : e + 3]] == ["and", "a", "half"]:
                value += 0.5
                e += 3
            elif j + 2 < n and [x.norm for x in ws[j : j + 3]] == ["and", "a", "half"]:
                pass
            unit_text = " ".join(x.text for x in ws[j : unit[2]])
            # "pack a day" etc. carry their own period; "packs" + "a day" is a rate too.
            emit(start, e, value, unit_text, canon, kind, vmax)
            i = e
            continue
        if j + 3 < n and [x.norm for x in ws[j : j + 3]] == ["and", "a", "half"]:
            unit = _match_unit(ws, j + 3, False)
            if unit is not None:
                emit(start, unit[2], value + 0.5, " ".join(x.text for x in ws[j + 3 : unit[2]]), unit[0], unit[1], vmax)
                i = unit[2]
                continue
        if j == start + 1 and ws[start].norm in ("a", "an", "one", "half"):
            i = j
            continue  # "a"/"one" alone is an article or pronoun far more often than a count
        emit(start, j, value, None, None, "count", vmax)
        i = j
    return out
