"""Cause-side trigger events: the transcript distortions that can change a clinical conclusion.

:func:`detect_triggers` aligns a reference and a hypothesis word by word (on the
documented normalisation, :mod:`stresstest.metrics.align`), groups adjacent
edits into *regions*, and types each region by what it does to clinical
content (SPEC §6, §10):

``negation_flip``
    A clinical entity's negation status changes because words changed: a cue
    lost, gained or moved off its target ("I don't see the rash" -> "I see the
    rash"), or a "no" answer to a symptom question dropped. Same decision as
    NegErr (:mod:`stresstest.metrics.negation`), so given the same gold
    concepts the two always agree. A "not"/"never" gained or lost with no
    cue word on the other side counts too ("it's been ongoing" -> "it's not
    going").
``number_unit_conflict``
    A number, dose, count, measure or frequency changes value or unit ("3 or 4
    flights of stairs" -> "three or four steps", "twice a day" -> "twice a
    week", "15 mg" -> "50 mg"), or a number is lost or gained. Equal values in
    other spellings ("3"/"three", "mg"/"milligrams", "1:46"/"146",
    "4/28/07"/"4/28/2007", "17th"/"17") are not conflicts. Numbers inside a
    long inserted run belong to that run (``nonspeech_pollution``); numbers
    and times inside a long deleted run are an omission, not a conflict.
``temporal_distortion``
    A duration or time anchor changes ("two hours" -> "two days", "since
    Monday" -> "since Sunday", "yesterday" -> "today"), is lost or is gained,
    or a time relation is heard as another ("after meals" -> "before meals").
    Frequencies ("twice a day" -> "twice a week") are number/unit conflicts.
``entity_substitution``
    One clinical entity replaced by a different one of the same kind (drug ->
    other drug, symptom -> other symptom, body site -> other site), a
    laterality swap (left <-> right) or a hypo-/hyper- swap; failing those, a
    clinical term heard as one of another kind ("Eucrisa" -> "elbow"); a
    course / severity / frequency qualifier heard as another value of its
    scale ("worse" -> "better", "mild" -> "severe"). Trade
    and generic names of one drug are the same entity; losing a word of a term
    ("chest pain" -> "chest") is not a substitution.
``nonspeech_pollution``
    Content absent from the reference appears in the hypothesis (a background
    talker, a hallucinated phrase): where the hypothesis has more words than
    the reference, either a clinical entity
    or drug that the reference does not mention within 40 words, or a run of
    at least three inserted words of which at least three are content words
    the reference does not have within 40 words. (A like-for-like
    misrecognition such as "mess" -> "mass" is not pollution.)

``clinical_omission``
    A clinical term of the reference (lexicon, drug dictionary, the medwer
    term list behind the project's overlay) lost or turned into other words;
    a short yes/no answer lost with its content, weighted by what the question
    before it asked; a course or severity word lost.

Benign differences produce no event: they vanish in normalisation (casing,
punctuation, contractions, British/American spelling, number words vs digits,
hesitation fillers) or are filtered per region (compound splits such as
"workup"/"work up" and "all right"/"alright", discourse fillers such as "okay",
"you know", immediate word repetitions, function-word edits, unit spellings).

Each event quotes the ORIGINAL texts (``ref_span == ref[ref_start:ref_end]``,
likewise for the hypothesis). A side with no words in the region (a pure
deletion or insertion) is quoted with two words of context either side so a
reader can find the spot. The detector is deterministic: events are sorted by
position and type.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from stresstest.clinical.drugs import match_drug_tokens
from stresstest.clinical.lexicon import Mention, match_tokens
from stresstest.clinical.numbers import (
    Quantity,
    comparable_number,
    find_quantities,
    is_number_token,
    is_ordinal_token,
    small_number_digits,
    spoken_values,
)
from stresstest.clinical.text import Token as ClinicalToken
from stresstest.clinical.text import tokenize as clinical_tokenize
from stresstest.clinical.vocab import (
    all_fillers,
    category_weight,
    match_terms,
    qualifiers,
    set_phrases,
    unit_words,
    zipf,
)
from stresstest.metrics.align import AlignedPair, TokenizedText, align
from stresstest.metrics.negation import entity_mentions, mismatches_from_mentions
from stresstest.results import TRIGGER_TYPES, TriggerEvent, TriggerType

__all__ = [
    "TRIGGER_TYPES",
    "TriggerEvent",
    "TriggerType",
    "clinical_mentions",
    "content_word_errors",
    "detect_in_pair",
    "detect_triggers",
    "trigger_counts",
    "trigger_risk",
]

def trigger_risk(events: Iterable[TriggerEvent]) -> float:
    """A pair's trigger risk: the sum of its events' weights (SPEC §6, §10); 0 without events."""
    return round(sum(e.weight for e in events), 6)


def content_word_errors(pair: AlignedPair) -> int:
    """Reference content words the hypothesis deletes or substitutes (the crude validation baseline).

    Content words are those outside the function-word and filler lists, not numbers, longer than one letter.
    """
    n = 0
    for o in pair.ops:
        if o.op in ("sub", "del"):
            n += sum(1 for w in pair.ref.words[o.ref_start : o.ref_end] if _is_content(w))
    return n


def trigger_counts(events: Iterable[TriggerEvent]) -> dict[str, int]:
    """Number of events per type, with all six types present (zeros included)."""
    counts: dict[str, int] = dict.fromkeys(TRIGGER_TYPES, 0)
    for e in events:
        counts[e.type] += 1
    return counts


# --- word classes (normalised tokens) -------------------------------------------------------------

# Discourse fillers and backchannels that ASR drops or adds freely; the normaliser already removes
# um/uh/hmm. Polarity words (no, yes, not) are NOT here: negation is judged separately.
_FILLERS = all_fillers()  # data/fillers.tsv: hesitations, discourse fillers, backchannels
_FILLER_BIGRAMS = frozenset(
    {("you", "know"), ("i", "mean"), ("kind", "of"), ("sort", "of"), ("all", "right")}
)

# Function words: edits confined to these carry no clinical content of their own.
_FUNCTION = frozenset(
    """a an the this that these those there here it its it's i me my mine we us our you your yours he him his
    she her they them their what which who whom whose where when why how whatever whenever
    am is are was were be been being do does did done have has had having will would shall should can could
    may might must ca wo let lets gonna wanna gotta na
    and or but if then than because as so of to in on at by for with from up down out over into onto about
    off through just also too very much more most some any all each both either such only own same other
    another again still even ever yet already not no yes yeah nope
    go going goes went get got gets getting make made take took say said says tell told see saw seen know
    knew think thought want wanted need needed feel felt look looking looks come came coming back
    thing things stuff something anything nothing everything lot bit little kind sort way time
    good great fine nice sure oh okay ok alright well like right now then today um uh hmm""".split()
)

_TIME_WORDS = frozenset(
    """minute minutes hour hours day days week weeks month months year years decade decades fortnight
    yesterday today tomorrow tonight overnight morning mornings afternoon afternoons evening evenings night
    nights weekend weekends midnight noon monday tuesday wednesday thursday friday saturday sunday
    january february april june july august september october november december""".split()
)
# Words that start or make a quantity without being a digit or a time word.
_QUANTITY_CUES = frozenset(
    """once twice thrice daily nightly weekly monthly hourly yearly annually od bd bid tds tid qds qid qd prn
    nocte since last ago half couple few several dozen hundred thousand""".split()
)
# Time relations: they count when one is heard as another ("after meals" -> "before meals"); ASR
# drops and adds them too often for a lone deletion to mean anything.
_RELATIONS = frozenset({"before", "after", "until", "during"})
# "am"/"pm" are clock times only after a number ("i am" is not a time).
_CLOCK = frozenset({"am", "pm"})
# Time words that also start greetings ("good morning") are not time expressions there.
_GREETING = frozenset({"good"})
_LATERALITY = {"left": "left", "right": "right", "bilateral": "bilateral", "both": "bilateral"}
_SIDE_NOUNS = frozenset(
    """side sided arm arms leg legs knee knees ankle ankles foot feet hand hands hip hips shoulder shoulders
    eye eyes ear ears lung lungs kidney breast chest wrist wrists elbow elbows lower upper flank""".split()
)
_ENTITY_GROUPS = {
    "medication": "medication",
    "body_site": "body_site",
    "symptom": "clinical",
    "finding": "clinical",
    "history": "clinical",
    "risk": "clinical",
    "social": "clinical",
}
# Inserted material is "absent from the reference" when not found within this many reference tokens.
_NOVELTY_WINDOW = 40
_POLLUTION_MIN_WORDS = 3
_CONTEXT = 2


def _strip_fillers(words: Sequence[str]) -> list[str]:
    out: list[str] = []
    k = 0
    while k < len(words):
        if k + 1 < len(words) and (words[k], words[k + 1]) in _FILLER_BIGRAMS:
            k += 2
            continue
        if words[k] not in _FILLERS:
            out.append(small_number_digits(words[k]))
        k += 1
    return out


def _is_content(tok: str) -> bool:
    return tok not in _FUNCTION and tok not in _FILLERS and not is_number_token(tok) and len(tok) > 1


# --- regions ----------------------------------------------------------------------------------------


@dataclass
class _Region:
    """Adjacent non-equal alignment blocks merged: reference tokens [r0, r1), hypothesis [h0, h1)."""

    r0: int
    r1: int
    h0: int
    h1: int
    ref_words: list[str] = field(default_factory=list)
    hyp_words: list[str] = field(default_factory=list)


def _regions(pair: AlignedPair) -> list[_Region]:
    out: list[_Region] = []
    for o in pair.ops:
        if o.op == "equal":
            continue
        if out and out[-1].r1 == o.ref_start and out[-1].h1 == o.hyp_start:
            out[-1].r1, out[-1].h1 = o.ref_end, o.hyp_end
        else:
            out.append(_Region(o.ref_start, o.ref_end, o.hyp_start, o.hyp_end))
    for g in out:
        g.ref_words = pair.ref.words[g.r0 : g.r1]
        g.hyp_words = pair.hyp.words[g.h0 : g.h1]
    return out


def _drop_repeats(words: list[str], all_words: list[str], start: int) -> list[str]:
    """Region words minus immediate repetitions of a neighbour ("i i think", "the the")."""
    out = []
    for k, w in enumerate(words):
        pos = start + k
        prev = all_words[pos - 1] if pos > 0 else None
        nxt = all_words[pos + 1] if pos + 1 < len(all_words) else None
        if w != prev and w != nxt:
            out.append(w)
    return out


def _is_benign(g: _Region, pair: AlignedPair) -> bool:
    """True when the region cannot carry any trigger except a negation flip."""
    ref = _strip_fillers(_drop_repeats(g.ref_words, pair.ref.words, g.r0))
    hyp = _strip_fillers(_drop_repeats(g.hyp_words, pair.hyp.words, g.h0))
    # Compound splits and joins: "work up"/"workup", "all right"/"alright", "9 17"/"917".
    if "".join(ref) == "".join(hyp):
        return True
    # Only function words changed ("a couple days" / "a couple of days", "the" / "a").
    return all(w in _FUNCTION and w not in _TIME_WORDS for w in (*ref, *hyp))


# --- annotations of one text ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Ann:
    """A mention or quantity placed on the alignment tokens [i, j)."""

    i: int
    j: int
    start: int
    end: int
    item: Mention | Quantity


def _place(tt: TokenizedText, items: Iterable[Mention | Quantity]) -> _Anns:
    out = []
    for it in items:
        i, j = tt.tokens_in(it.start, it.end)
        if i < j:
            out.append(_Ann(i, j, it.start, it.end, it))
    return _Anns(out)


def _union(a: Sequence[_Ann], b: Sequence[_Ann]) -> list[_Ann]:
    # Sorted on positions, never on set order (which follows string hashing and varies by process).
    return sorted(set(a) | set(b), key=lambda x: (x.i, x.j, x.start, x.end))


class _Anns(list[_Ann]):
    """Annotations sorted by first token, with a bisect index: overlap queries cost O(log n + hits)."""

    def __init__(self, items: Iterable[_Ann] = ()) -> None:
        super().__init__(sorted(items, key=lambda a: (a.i, a.j, a.start, a.end)))
        self.starts = [a.i for a in self]
        self.longest = max((a.j - a.i for a in self), default=0)

    def overlapping(self, i: int, j: int) -> list[_Ann]:
        lo = bisect_left(self.starts, i - self.longest)
        hi = bisect_left(self.starts, j)
        return [a for a in self[lo:hi] if a.j > i]


def _overlapping(anns: Sequence[_Ann], i: int, j: int) -> list[_Ann]:
    if i == j:
        return []
    if isinstance(anns, _Anns):
        return anns.overlapping(i, j)
    return [a for a in anns if a.i < j and a.j > i]


@dataclass
class _Side:
    tt: TokenizedText
    mentions: _Anns
    terms: _Anns = field(default_factory=_Anns)
    _quantities: _Anns | None = None

    @property
    def quantities(self) -> _Anns:
        # Found on first use: most regions hold no number or time word and never need them.
        if self._quantities is None:
            self._quantities = _place(self.tt, find_quantities(self.tt.original))
        return self._quantities


def _found(text: str) -> tuple[list[Mention], list[ClinicalToken]]:
    """Lexicon and drug mentions of a text (minus dictionary hits on ordinary words), and its tokens."""
    toks = clinical_tokenize(text)
    found = [m for m in (*match_tokens(text, toks), *match_drug_tokens(text, toks)) if _plausible(m)]
    return found, toks


def clinical_mentions(text: str) -> list[Mention]:
    """The clinical terms of ``text`` as the detector sees them (what ``clinical_omission`` and the
    clinical-term WER count as clinical): lexicon and drug mentions, minus dictionary hits on ordinary words,
    then the terms of the vocabulary (``medwer`` list + the project's overlay,
    :func:`~stresstest.clinical.vocab.term_vocabulary`) that overlap none of them; in text order."""
    found, toks = _found(text)
    spans = [(m.start, m.end) for m in found]
    extra = [t for t in match_terms(text, toks) if not any(a < t.end and b > t.start for a, b in spans)]
    return sorted([*found, *extra], key=lambda m: (m.start, m.end))


def _plausible(m: Mention) -> bool:
    """Drop dictionary hits on ordinary words ("he" is helium in the drug dictionary)."""
    return not all(w in _FUNCTION for w in m.surface.lower().split())


# --- event construction -----------------------------------------------------------------------------


def _side_span(tt: TokenizedText, i: int, j: int, extra: Iterable[_Ann] = ()) -> tuple[int, int]:
    """Character span of tokens [i, j) widened to cover ``extra``; context words when empty."""
    extra = list(extra)
    if extra:
        i = min([i, *(a.i for a in extra)]) if j > i else min(a.i for a in extra)
        j = max([j, *(a.j for a in extra)])
    if i == j:
        lo, hi = max(0, i - _CONTEXT), min(len(tt), i + _CONTEXT)
        return tt.char_span(lo, hi)
    return tt.char_span(i, j)


def _event(
    kind: TriggerType,
    pair: AlignedPair,
    g: _Region,
    explanation: str,
    concept: str | None,
    ref_extra: Iterable[_Ann] = (),
    hyp_extra: Iterable[_Ann] = (),
    weight: float | None = None,
) -> TriggerEvent:
    rs, re_ = _side_span(pair.ref, g.r0, g.r1, ref_extra)
    hs, he = _side_span(pair.hyp, g.h0, g.h1, hyp_extra)
    return TriggerEvent(
        type=kind,
        weight=category_weight(kind) if weight is None else weight,
        ref_span=pair.ref.original[rs:re_],
        hyp_span=pair.hyp.original[hs:he],
        explanation=explanation,
        ref_start=rs,
        ref_end=re_,
        hyp_start=hs,
        hyp_end=he,
        concept=concept,
    )


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


_MONTHS = frozenset(
    "january february march april may june july august september october november december".split()
)


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
        a.item.unit_canonical for a in anns
        if isinstance(a.item, Quantity) and a.item.unit_canonical
        and not (a.item.unit_canonical.startswith("per ") and a.item.unit_canonical[4:] in other)
    )


def _may_quantify(words: Sequence[str], i: int, j: int) -> bool:
    """Could tokens [i, j), or the few around them, belong to a quantity or time expression?"""
    for w in words[max(0, i - 3) : j + 3]:
        if (is_number_token(w) or w in _QUANTITY_CUES or w in _TIME_WORDS or w.rstrip("s") in _TIME_WORDS
                or w in _RELATIONS):
            return True
    return False


def _numbers_and_time(pair: AlignedPair, g: _Region, ref: _Side, hyp: _Side) -> list[TriggerEvent]:
    if not (_may_quantify(pair.ref.words, g.r0, g.r1) or _may_quantify(pair.hyp.words, g.h0, g.h1)):
        return []
    rq = _overlapping(ref.quantities, g.r0, g.r1)
    hq = _overlapping(hyp.quantities, g.h0, g.h1)
    # Widen to whole quantities on both sides, so "2 hours" vs "2 days" compares both whole.
    r0, r1 = min([g.r0, *(a.i for a in rq)]), max([g.r1, *(a.j for a in rq)])
    h0, h1 = min([g.h0, *(a.i for a in hq)]), max([g.h1, *(a.j for a in hq)])
    if rq or hq:
        pi, pj = pair.hyp_range_for_ref(r0, r1)
        qi, qj = pair.ref_range_for_hyp(h0, h1)
        rq = _union(rq, _overlapping(ref.quantities, qi, qj))
        hq = _union(hq, _overlapping(hyp.quantities, pi, pj))
        r0, r1 = min([r0, *(a.i for a in rq)]), max([r1, *(a.j for a in rq)])
        h0, h1 = min([h0, *(a.i for a in hq)]), max([h1, *(a.j for a in hq)])
    ref_digits, hyp_digits = _numbers(pair.ref, r0, r1), _numbers(pair.hyp, h0, h1)
    if ref_digits != hyp_digits and _numbers(pair.ref, r0, r1, True) == _numbers(pair.hyp, h0, h1, True):
        ref_digits = hyp_digits  # "grade iv to v" / "grade 4-5"
    if ref_digits != hyp_digits and _numbers(pair.ref, r0, r1, ranks=True) == _numbers(pair.hyp, h0, h1, ranks=True):
        ref_digits = hyp_digits  # an ordinal is a rank: "for the first week" / "for the week"
    if ref_digits != hyp_digits and (rv := _spoken_values(pair.ref, r0, r1)) is not None and (
        rv == _spoken_values(pair.hyp, h0, h1)
    ):
        ref_digits = hyp_digits  # "2 1/2" / "two and a half", "1.5" / "one and a half"
    if ref_digits != hyp_digits and (rv2 := _quantity_values(pair.ref, r0, r1)) and rv2 == _quantity_values(
        pair.hyp, h0, h1
    ):
        ref_digits = hyp_digits  # the same values read from the texts: "1 to 10, 10" / "one to ten, ten"
    ref_units = _units(rq, pair.hyp.words[max(0, h0 - 1) : h1 + 2])
    hyp_units = _units(hq, pair.ref.words[max(0, r0 - 1) : r1 + 2])
    ref_terms, hyp_terms = _in_terms(ref, g.r0, g.r1), _in_terms(hyp, g.h0, g.h1)
    ref_time = _time_words(pair.ref.words, g.r0, g.r1, ref_terms)
    hyp_time = _time_words(pair.hyp.words, g.h0, g.h1, hyp_terms)
    # A time word of a clinical term on one side ("night sweats") is no anchor gained on the other ("nights").
    for own, other, words, skip in ((ref_time, hyp_time, pair.ref.words, ref_terms),
                                    (hyp_time, ref_time, pair.hyp.words, hyp_terms)):
        for k in skip:
            base = words[k][:-1] if words[k].endswith("s") and words[k][:-1] in _TIME_WORDS else words[k]
            if base in other and base not in own:
                del other[base]
    inserted = len(g.hyp_words) - len(g.ref_words) >= _POLLUTION_MIN_WORDS
    if inserted and not ref_digits and not ref_units and not ref_time:
        return []  # numbers inside a long inserted run are that run's content: see nonspeech_pollution
    deleted = len(g.ref_words) - len(g.hyp_words) >= _POLLUTION_MIN_WORDS
    if deleted and not hyp_digits and not hyp_units and not hyp_time:
        return []  # a dropped stretch of speech is an omission, not a changed number
    ref_text = pair.ref.original[slice(*pair.ref.char_span(r0, r1))] if r1 > r0 else ""
    hyp_text = pair.hyp.original[slice(*pair.hyp.char_span(h0, h1))] if h1 > h0 else ""
    what = f"{ref_text or 'nothing'!r} became {hyp_text or 'nothing'!r}"
    kinds = {a.item.kind for a in (*rq, *hq) if isinstance(a.item, Quantity)}
    if ref_digits != hyp_digits or ref_units != hyp_units:
        concept = next(iter(ref_units or hyp_units), None)
        if ref_units == hyp_units and not (ref_units or hyp_units) and (ref_time or hyp_time):
            kinds.add("time")
        if "time" in kinds and "frequency" not in kinds:
            why = f"time expression changed: {what}"
            return [_event("temporal_distortion", pair, g, why, concept, rq, hq)]
        dose = "dose" in kinds or _near_medication(ref, r0, r1) or _near_medication(hyp, h0, h1)
        weight = category_weight("dose_conflict" if dose else "number_unit_conflict")
        return [_event("number_unit_conflict", pair, g, f"quantity changed: {what}", concept, rq, hq, weight)]
    if ref_time != hyp_time and not (rq or hq):
        concept = next(iter(ref_time or hyp_time))
        return [_event("temporal_distortion", pair, g, f"time expression changed: {what}", concept)]
    ref_rel = {w for w in g.ref_words if w in _RELATIONS}
    hyp_rel = {w for w in g.hyp_words if w in _RELATIONS}
    if ref_rel and hyp_rel and ref_rel != hyp_rel:
        why = f"time relation changed: {what}"
        return [_event("temporal_distortion", pair, g, why, "/".join(sorted(ref_rel)))]
    return []


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


def _group_concepts(anns: Sequence[_Ann]) -> dict[str, dict[str, _Ann]]:
    out: dict[str, dict[str, _Ann]] = {}
    for a in anns:
        m = a.item
        if isinstance(m, Mention) and m.category in _ENTITY_GROUPS:
            out.setdefault(_ENTITY_GROUPS[m.category], {}).setdefault(m.concept, a)
    return out


def _near_concepts(side: _Side, i: int, j: int, window: int) -> set[str]:
    return {
        a.item.concept for a in side.mentions.overlapping(i - window, j + window) if isinstance(a.item, Mention)
    }


def _laterality(words: Sequence[str]) -> set[str]:
    return {_LATERALITY[w] for w in words if w in _LATERALITY}


def _entities(pair: AlignedPair, g: _Region, ref: _Side, hyp: _Side) -> tuple[list[TriggerEvent], set[str]]:
    """Entity substitutions in a region; also returns the hypothesis concepts they explain."""
    events: list[TriggerEvent] = []
    explained: set[str] = set()
    rg = _group_concepts(_overlapping(ref.mentions, g.r0, g.r1))
    hg = _group_concepts(_overlapping(hyp.mentions, g.h0, g.h1))
    ref_near = _near_concepts(ref, g.r0, g.r1, 3)
    hyp_near = _near_concepts(hyp, g.h0, g.h1, 3)
    for group in sorted(set(rg) & set(hg)):
        lost = [c for c in rg[group] if c not in hyp_near]
        new = [c for c in hg[group] if c not in ref_near]
        if lost and new:
            a, b = rg[group][lost[0]], hg[group][new[0]]
            why = f"{group} {_named(lost[0], pair.ref.original[a.start:a.end])} replaced by "
            why += _named(new[0], pair.hyp.original[b.start : b.end])
            events.append(_event("entity_substitution", pair, g, why, lost[0], [a], [b]))
            explained.update(new)
    if not events:
        events += _cross_kind(pair, g, rg, hg, ref_near, hyp_near, explained)
    rl, hl = _laterality(g.ref_words), _laterality(g.hyp_words)
    if rl and hl and rl != hl and _sided(pair, g):
        events.append(_event(
            "entity_substitution", pair, g,
            f"laterality {'/'.join(sorted(rl))} replaced by {'/'.join(sorted(hl))}", "laterality",
            weight=category_weight("laterality"),
        ))
    for rw in g.ref_words:
        for hw in g.hyp_words:
            if _hypo_hyper(rw, hw):
                events.append(_event(
                    "entity_substitution", pair, g, f"{rw!r} replaced by its opposite {hw!r}", rw,
                ))
                explained.add(hw)
    return events, explained


def _cross_kind(
    pair: AlignedPair,
    g: _Region,
    rg: dict[str, dict[str, _Ann]],
    hg: dict[str, dict[str, _Ann]],
    ref_near: set[str],
    hyp_near: set[str],
    explained: set[str],
) -> list[TriggerEvent]:
    """A clinical term heard as one of another kind ("Eucrisa" -> "urethra"): drug -> body site etc.

    A part of the other term does not count ("chest pain" -> "chest" is a lost word, not a new entity).
    """
    lost = [a for grp in sorted(rg) for c, a in rg[grp].items() if c not in hyp_near]
    new = [b for grp in sorted(hg) for c, b in hg[grp].items() if c not in ref_near]
    for a in lost:
        for b in new:
            sa = set(pair.ref.original[a.start : a.end].lower().split())
            sb = set(pair.hyp.original[b.start : b.end].lower().split())
            if sa <= sb or sb <= sa:
                continue
            ma, mb = a.item, b.item
            if not (isinstance(ma, Mention) and isinstance(mb, Mention)):
                continue
            why = f"{ma.category} {_named(ma.concept, ma.surface)} replaced by {mb.category} "
            why += _named(mb.concept, mb.surface)
            explained.add(mb.concept)
            return [_event("entity_substitution", pair, g, why, ma.concept, [a], [b])]
    return []


def _named(concept: str, surface: str) -> str:
    return repr(concept) if surface.lower() == concept else f"{concept!r} ({surface!r})"


def _sided(pair: AlignedPair, g: _Region) -> bool:
    """'right' is a laterality only next to a body part ("right knee", "on the left side")."""
    words = [*pair.ref.words[max(0, g.r0 - 3) : g.r1 + 3], *pair.hyp.words[max(0, g.h0 - 3) : g.h1 + 3]]
    return any(w in _SIDE_NOUNS or w.rstrip("s") in _SIDE_NOUNS for w in words)


def _hypo_hyper(a: str, b: str) -> bool:
    for x, y in (("hypo", "hyper"), ("hyper", "hypo")):
        if a.startswith(x) and b.startswith(y) and a[len(x):] == b[len(y):] and len(a) > len(x) + 3:
            return True
    return False


def _pollution(
    pair: AlignedPair, g: _Region, ref: _Side, hyp: _Side, explained: set[str]
) -> list[TriggerEvent]:
    n_ins = len(g.hyp_words) - len(g.ref_words)
    ref_content = [w for w in g.ref_words if _is_content(w)]
    if n_ins <= 0 and ref_content:
        return []  # a like-for-like substitution, not inserted material
    lo, hi = max(0, g.r0 - _NOVELTY_WINDOW), g.r1 + _NOVELTY_WINDOW
    ref_vocab = set(pair.ref.words[lo:hi])
    ref_concepts = _near_concepts(ref, g.r0, g.r1, _NOVELTY_WINDOW)
    new_entities = [
        a for a in _overlapping(hyp.mentions, g.h0, g.h1)
        if isinstance(a.item, Mention) and a.item.category != "body_site"
        and a.item.concept not in ref_concepts and a.item.concept not in explained
    ]
    if new_entities:
        names = ", ".join(repr(pair.hyp.original[a.start : a.end]) for a in new_entities)
        # Same number of words, only function words replaced: a misrecognition, not inserted material
        # ("pain felt" -> "pain fell"): an ordinary word heard as a clinical term.
        kind: TriggerType = "entity_substitution" if n_ins <= 0 else "nonspeech_pollution"
        what = "ordinary words heard as clinical content" if n_ins <= 0 else "hypothesis inserts clinical content"
        return [_event(
            kind, pair, g, f"{what} absent from the reference: {names}",
            new_entities[0].item.concept if isinstance(new_entities[0].item, Mention) else None,
            weight=category_weight("nonspeech_clinical"),
        )]
    novel = [w for w in g.hyp_words if _is_content(w) and w not in ref_vocab]
    if n_ins >= _POLLUTION_MIN_WORDS and len(novel) >= _POLLUTION_MIN_WORDS:
        return [_event(
            "nonspeech_pollution", pair, g,
            f"hypothesis inserts {n_ins} words absent from the reference ({' '.join(novel[:8])})", None,
        )]
    return []


# --- clinical omission ------------------------------------------------------------------------------

# Negation cues (normalised tokens: the normaliser spells "don't" as "do not").
_NEG_CUES = frozenset({
    "no", "not", "never", "without", "denies", "denied", "deny", "none", "nothing", "nor", "nah", "nope",
})
# Negation cues that are also bare answer particles: they negate a verb only with content near them.
# "not" / "never" always negate what follows ("it's been ongoing" -> "it's not going").
_ANSWER_PARTICLES = frozenset({"no", "nope", "nah"})
# Hedges: words that qualify a whole answer, no content for a negation cue to bear on ("no, probably").
_HEDGES = frozenset({"probably", "guess", "maybe", "perhaps", "suppose", "possibly", "mean"})
# A lost reference word this rare (wordfreq Zipf) and of no known category still counts as clinical content
# ("macromastia", "hawkins"), with the small rare_word weight.
_RARE_ZIPF = 3.0
# A hypothesis word this common is an ordinary word, so a close spelling of the term is no recovery
# ("persa gel" -> "person gel"); rarer near-spellings keep the term readable ("tacrolimus" -> "tacromilius").
_COMMON_ZIPF = 3.5
_CLOSE = 0.8
_RESPELLED = 0.6
_SURVIVAL_SLACK = 2


def _stem(w: str) -> str:
    for suf in ("ing", "ed", "es", "s"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)]
    return w


def _near_medication(side: _Side, i: int, j: int, window: int = 4) -> bool:
    return any(
        isinstance(a.item, Mention) and a.item.category == "medication"
        for a in side.mentions.overlapping(i - window, j + window)
    )


@dataclass(frozen=True)
class _Unit:
    """A clinical unit of the reference: tokens [i, j), its concept, category and weight key."""

    i: int
    j: int
    concept: str
    category: str
    key: str
    ann: _Ann | None


def _ref_units(pair: AlignedPair, g: _Region, ref: _Side) -> list[_Unit]:
    """Clinical units of the reference overlapping region ``g``: lexicon, drugs, terms, then rare words."""
    units: list[_Unit] = []
    taken: set[int] = set()
    for a in (*_overlapping(ref.mentions, g.r0, g.r1), *_overlapping(ref.terms, g.r0, g.r1)):
        m = a.item
        if not isinstance(m, Mention) or any(k in taken for k in range(a.i, a.j)):
            continue
        if m.category == "family_member" and not _condition_near(ref, a.i, a.j):
            continue  # "dad and I both think..." is no family history
        if m.category == "medication":
            key = "high_risk_medication" if m.triage_hint == "high_risk" else "medication"
        elif m.red_flag:
            key = "red_flag"
        else:
            key = m.category
        units.append(_Unit(a.i, a.j, m.concept, m.category, key, a))
        taken.update(range(a.i, a.j))
    long_deletion = len(g.ref_words) - len(g.hyp_words) >= _POLLUTION_MIN_WORDS
    for k in range(g.r0, g.r1):
        w = pair.ref.words[k]
        if k in taken or _fragment(pair.ref, k):
            continue
        if long_deletion and is_number_token(w) and not w.endswith(("st", "nd", "rd", "th")):
            # A number lost with a dropped stretch of speech (number_unit_conflict leaves these alone).
            units.append(_Unit(k, k + 1, w, "quantity", "quantity", None))
            continue
        if not w.isalpha() or len(w) < 4 or w in _FUNCTION or w in _FILLERS or w in unit_words():
            continue  # units are number_unit_conflict's ("milliliters" / "ml" is no loss)
        if zipf(w) < _RARE_ZIPF:
            units.append(_Unit(k, k + 1, w, "rare_word", "rare_word", None))
    return units


_CONDITION_CATEGORIES = frozenset({"symptom", "finding", "history", "risk", "habit"})


def _condition_near(side: _Side, i: int, j: int, window: int = 6) -> bool:
    """Is a condition (symptom, finding, history, habit) mentioned within ``window`` tokens of [i, j)?"""
    return any(
        isinstance(a.item, Mention) and a.item.category in _CONDITION_CATEGORIES
        for a in (*side.mentions.overlapping(i - window, j + window), *side.terms.overlapping(i - window, j + window))
    )


def _fragment(tt: TokenizedText, k: int) -> bool:
    """A cut-off word ("breash-", "bloo-"): a disfluency, not content."""
    end = tt.tokens[k].end
    if end > 0 and tt.original[end - 1] == "-":
        return True
    return end < len(tt.original) and tt.original[end] == "-" and (
        end + 1 == len(tt.original) or not tt.original[end + 1].isalnum()
    )


def _survival(pair: AlignedPair, u: _Unit, hyp: _Side) -> str:
    """"kept", "garbled" (a close, uncommon spelling remains) or "lost" for one reference unit."""
    pi, pj = pair.hyp_range_for_ref(u.i, u.j)
    lo, hi = max(0, pi - _SURVIVAL_SLACK), min(len(pair.hyp), pj + _SURVIVAL_SLACK)
    if u.ann is not None and any(
        isinstance(b.item, Mention) and b.item.concept == u.concept
        for b in (*hyp.mentions.overlapping(lo, hi), *hyp.terms.overlapping(lo, hi))
    ):
        return "kept"
    words = [w for w in pair.ref.words[u.i : u.j] if w not in _FUNCTION]
    window = pair.hyp.words[lo:hi]
    stems = {_stem(h) for h in window}
    if all(w in window or _stem(w) in stems or any(_same_family(w, h) for h in window) for w in words):
        return "kept"
    joined = "".join(pair.ref.words[u.i : u.j])
    hyp_joined = "".join(window)
    if joined and joined in hyp_joined:
        return "kept"  # "breastfeeding" / "breast feeding", "atenolol" / "a tenolol"
    for a in range(len(window)):
        for b in range(a + 1, min(len(window), a + 3) + 1):
            cand = "".join(window[a:b])
            r = _ratio(joined, cand)
            if u.category == "rare_word" and r >= _RESPELLED:
                return "kept"  # a rare word of no known category respelled ("culdesac" / "culvasec")
            if r >= _CLOSE and all(zipf(h) < _COMMON_ZIPF for h in window[a:b]):
                return "garbled"
    return "lost"


def _same_family(a: str, b: str) -> bool:
    """Two forms of one word ("trichomoniasis" / "trichomonas"; "swollen" / "swelling" are not): a shared
    prefix of at least 7 letters covering most of the shorter word, or a word of 5+ letters extended by at
    most 3."""
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 5 and long_.startswith(short) and len(long_) - len(short) <= 3:
        return True  # "weigh" / "weight", "smoke" / "smoker" ("pain" / "paint" is too short to tell)
    n = 0
    for x, y in zip(a, b):  # noqa: B905 - compare up to the shorter word
        if x != y:
            break
        n += 1
    return n >= 7 and n >= 0.7 * min(len(a), len(b))


def _ratio(a: str, b: str) -> float:
    """Indel similarity in [0, 1] ("tacrolimus" / "tacromilius" 0.86, "eucrisa" / "urethra" 0.57)."""
    from rapidfuzz.distance import Indel

    return float(Indel.normalized_similarity(a, b))


def _negated_before(words: Sequence[str], i: int) -> bool:
    return any(w in _NEG_CUES for w in words[max(0, i - 4) : i])


def _negation_cue(pair: AlignedPair, g: _Region, ref: _Side, hyp: _Side) -> list[TriggerEvent]:
    """A negation cue lost or gained in a region with no known entity of its own ("the injection didn't
    help" -> "the injection, did it help"): negation_flip, heavier next to a clinical term."""
    rc = [k for k in range(g.r0, g.r1) if pair.ref.words[k] in _NEG_CUES]
    hc = [k for k in range(g.h0, g.h1) if pair.hyp.words[k] in _NEG_CUES]
    if bool(rc) == bool(hc) or (hc and len(g.hyp_words) - len(g.ref_words) >= _POLLUTION_MIN_WORDS):
        return []  # no change, or a cue inside a long inserted run (nonspeech_pollution's content)
    other = pair.hyp.words[max(0, g.h0 - 1) : g.h1 + 1] if rc else pair.ref.words[max(0, g.r0 - 1) : g.r1 + 1]
    if any(w in _NEG_CUES for w in other):
        return []  # the cue only moved
    side, ks = (ref, rc) if rc else (hyp, hc)
    words = side.tt.words
    near = words[max(0, ks[0] - 3) : ks[-1] + 4]
    particles = all(words[k] in _ANSWER_PARTICLES for k in ks)
    if particles and not any(
        _is_content(w) and w.isalpha() and len(w) > 2 and w not in _NEG_CUES | _HEDGES for w in near
    ):
        return []  # "no, that i can do", "no probably, i guess": a bare answer particle
    if not particles and ks[-1] + 1 >= len(words):
        return []  # a trailing "not" negates nothing said
    lo, hi = ks[0] - 4, ks[-1] + 5
    clinical = bool(side.mentions.overlapping(lo, hi) or side.terms.overlapping(lo, hi))
    what = "lost" if rc else "gained"
    quoted = pair.ref.quote(g.r0, g.r1) if rc else pair.hyp.quote(g.h0, g.h1)
    return [_event(
        "negation_flip", pair, g, f"negation cue {what}: {quoted!r}", None,
        weight=category_weight("negation_flip" if clinical else "negation_cue"),
    )]


def _omissions(
    pair: AlignedPair, g: _Region, ref: _Side, hyp: _Side, explained: set[str]
) -> list[TriggerEvent]:
    """Clinical terms of the reference in region ``g`` that the hypothesis loses or turns into other words."""
    out: list[TriggerEvent] = []
    for u in _ref_units(pair, g, ref):
        if u.concept in explained:
            continue
        state = _survival(pair, u, hyp)
        if state == "kept":
            continue
        weight = category_weight(u.key)
        surface = pair.ref.original[slice(*pair.ref.char_span(u.i, u.j))]
        why = f"{u.category.replace('_', ' ')} {_named(u.concept, surface)}"
        negated = _negated_before(pair.ref.words, u.i) and not any(
            w in _NEG_CUES for w in pair.hyp.words[max(0, g.h0 - 4) : g.h1]
        )
        if negated:
            weight += category_weight("negated")
            why += " (negated)"
        if state == "garbled":
            weight *= category_weight("garbled")
            why += " garbled in the hypothesis (a close spelling remains)"
        else:
            why += " does not survive in the hypothesis"
        ev = _event("clinical_omission", pair, g, why, u.concept, weight=round(weight, 3))
        # Quote the lost term itself (several terms lost in one region are several events).
        rs, re_ = pair.ref.char_span(u.i, u.j)
        out.append(ev.model_copy(update={"ref_start": rs, "ref_end": re_, "ref_span": pair.ref.original[rs:re_]}))
    return out


def _negation_events(
    pair: AlignedPair,
    ref_found: list[Mention],
    hyp_found: list[Mention],
    concepts: Sequence[str],
    tokens: tuple[list[ClinicalToken], list[ClinicalToken]],
) -> list[TriggerEvent]:
    ref_ents = entity_mentions(pair.ref.original, concepts, found=ref_found)
    hyp_ents = entity_mentions(pair.hyp.original, concepts, found=hyp_found)
    out = []
    for m in mismatches_from_mentions(pair, ref_ents, hyp_ents, tokens=tokens):
        why = f"{m.concept!r} is {m.ref_status} in the reference"
        why += f" (cue {m.ref_cue!r})" if m.ref_cue else ""
        why += f" but {m.hyp_status} in the hypothesis"
        why += f" (cue {m.hyp_cue!r})" if m.hyp_cue else ""
        out.append(TriggerEvent(
            type="negation_flip", weight=category_weight("negation_flip"),
            ref_span=m.ref_quote, hyp_span=m.hyp_quote, explanation=why,
            ref_start=m.ref_start, ref_end=m.ref_end, hyp_start=m.hyp_start, hyp_end=m.hyp_end,
            concept=m.concept,
        ))
    return out


# --- qualifiers: course, severity, frequency words (entity_substitution / clinical_omission) ------------

# Course and severity words whose loss to other words changes the statement ("getting worse" -> "getting first").
_LOSABLE_SCALES = frozenset({"course", "severity"})


def _qualifier_changes(pair: AlignedPair, g: _Region, taken: Sequence[TriggerEvent]) -> list[TriggerEvent]:
    """A qualifier heard as another value of its scale ("worse" -> "better", "mild" -> "severe"):
    entity_substitution; a course or severity word lost to other words: clinical_omission."""
    table = qualifiers()
    rq = [(k, *table[w]) for k in range(g.r0, g.r1) if (w := pair.ref.words[k]) in table]
    if not rq:
        return []
    hq = [(k, *table[w]) for k in range(g.h0, g.h1) if (w := pair.hyp.words[k]) in table]
    out: list[TriggerEvent] = []
    for k, scale, value in rq:
        rs, re_ = pair.ref.char_span(k, k + 1)
        if any(e.ref_start < re_ and e.ref_end > rs for e in taken):
            continue  # already an event of its own ("constant" of "constant pain")
        same_scale = [v for _, sc, v in hq if sc == scale]
        word = pair.ref.words[k]
        if same_scale and value not in same_scale:
            why = f"{scale} word {word!r} heard as {'/'.join(sorted(set(same_scale)))!r}"
            ev = _event("entity_substitution", pair, g, why, scale, weight=category_weight("qualifier"))
        elif not same_scale and scale in _LOSABLE_SCALES and g.h1 > g.h0:
            pi, pj = pair.hyp_range_for_ref(k, k + 1)
            window = pair.hyp.words[max(0, pi - 1) : pj + 1]
            if word in window or any(_ratio(word, h) >= _CLOSE for h in window):
                continue
            near = pair.hyp.words[max(0, pi - 4) : pj + 4]
            if any(table.get(h, ("",))[0] == scale for h in near):
                continue  # "any better or any worse" -> "any better or any world": still asks the course
            why = f"{scale} word {word!r} does not survive in the hypothesis"
            ev = _event("clinical_omission", pair, g, why, scale, weight=category_weight("qualifier_lost"))
        else:
            continue
        out.append(ev.model_copy(update={"ref_start": rs, "ref_end": re_, "ref_span": pair.ref.original[rs:re_]}))
    return out


# --- lost answers (clinical_omission of the answered fact) ------------------------------------------

_YES = frozenset({"yes", "yeah", "yep", "yup", "mhm", "correct", "sure", "absolutely", "definitely"})
_NO = frozenset({"no", "nope", "nah", "never"})
# Characters between two tokens that end a sentence or a turn ("[patient]", "Patient:").
_BOUNDARY = frozenset(".?!]:\n")
_BARE_ANSWER_MAX = 6  # tokens of a sentence that is only an answer ("I I don't think so", "No, not really")
_QUESTION_MAX = 30  # tokens of a question looked back over
# What a question asks, in order of precedence: (weight key, cue words). Clinical terms in the question
# make it a symptom (or medication) question when no cue word decides.
_QUESTION_TOPICS = (
    ("answer_allergy", frozenset({"allergy", "allergies", "allergic", "reaction", "reactions"})),
    ("answer_medication", frozenset({
        "medication", "medications", "medicine", "medicines", "pill", "pills", "tablet", "tablets", "drug",
        "drugs", "prescription", "inhaler", "dose",
    })),
    ("answer_severity", frozenset({
        "scale", "severe", "severity", "bad", "worse", "worst", "better", "rate", "intense", "intensity",
        "mild", "much",
    })),
)
_DURATION_CUES = frozenset({"long", "since", "start", "started", "ago", "often", "frequently", "lasted"})


def _boundary_before(tt: TokenizedText, k: int) -> bool:
    """Does a sentence or turn end right before token ``k`` (or is ``k`` the first token)?"""
    if k == 0:
        return True
    gap = tt.original[tt.tokens[k - 1].end : tt.tokens[k].start]
    return any(c in _BOUNDARY for c in gap)


def _speaker_label(tt: TokenizedText, k: int) -> bool:
    """Is token ``k`` a speaker label ("Patient:", "[doctor]")?"""
    end = tt.tokens[k].end
    return tt.words[k] in _SPEAKERS and tt.original[end : end + 1] in (":", "]")


_SPEAKERS = frozenset({"doctor", "patient", "clinician", "nurse", "dr", "pt"})


def _sentence_end(tt: TokenizedText, k: int) -> int:
    """First token index after the sentence that holds token ``k``."""
    j = k + 1
    while j < len(tt) and not _boundary_before(tt, j):
        j += 1
    return j


def _question_before(tt: TokenizedText, k: int) -> tuple[int, int] | None:
    """Tokens [i, j) of the question that ends right before token ``k`` (a "?" in the gap), if any."""
    while k > 0 and _speaker_label(tt, k - 1):
        k -= 1  # "Do you smoke? Patient: No."
    if k == 0 or "?" not in tt.original[tt.tokens[k - 1].end : tt.tokens[k].start]:
        return None
    i = k - 1
    while i > 0 and k - i < _QUESTION_MAX and not _boundary_before(tt, i):
        i -= 1
    return i, k


def _question_topic(pair: AlignedPair, ref: _Side, q: tuple[int, int] | None) -> str:
    """Weight key of what the question [i, j) asks (symptom, duration, severity, allergy, medication)."""
    if q is None:
        return "answer"
    words = set(pair.ref.words[q[0] : q[1]])
    for key, cues in _QUESTION_TOPICS:
        if words & cues:
            return key
    found = [a.item for a in (*ref.mentions.overlapping(*q), *ref.terms.overlapping(*q)) if isinstance(a.item, Mention)]
    if any(m.category == "medication" for m in found):
        return "answer_medication"
    if found:
        return "answer_symptom"
    return "answer_duration" if words & _DURATION_CUES else "answer"


def _answer_polarity(words: Sequence[str]) -> str | None:
    """"yes" / "no" when the words open with an answer particle or are a bare negative answer ("I don't
    think so", "not really"); else None."""
    lead = [w for w in words if w not in _FILLERS or w in _YES]
    if not lead:
        return None
    if lead[0] in _YES:
        return "yes"
    if lead[0] in _NO:
        return "no"
    content = [w for w in lead if _is_content(w) and w not in _HEDGES]
    if len(words) <= _BARE_ANSWER_MAX and not content and any(w in _NEG_CUES for w in lead):
        return "no"
    return None


def _lost_answers(pair: AlignedPair, g: _Region, ref: _Side, taken: list[tuple[int, int]]) -> list[TriggerEvent]:
    """Short answers of the reference in region ``g`` lost in the hypothesis: clinical_omission of the answered
    fact, weighted by what the question before it asked.

    An answer is a sentence that opens with a yes/no particle ("Yeah, yeah", "No.") or is a bare negative
    ("I don't think so"). It is lost when the hypothesis, over the sentence's aligned stretch, has no word of
    the same polarity and none of the sentence's content words ("Yeah, it's creamy yellow" -> "okay, okay").
    Its question is the sentence ending in "?" right before it; an answer with no question in view counts
    only when the sentence is nothing but the answer.
    """
    out: list[TriggerEvent] = []
    tt, words = pair.ref, pair.ref.words
    k = g.r0
    while k < g.r1:
        if not _boundary_before(tt, k):
            k += 1
            continue
        if _speaker_label(tt, k):
            k += 1
            continue
        end = _sentence_end(tt, k)
        polarity = _answer_polarity(words[k:end])
        if polarity is None:
            k = end
            continue
        while end < len(tt) and _answer_polarity(words[end : (nxt := _sentence_end(tt, end))]) == polarity and not any(
            _is_content(w) for w in words[end:nxt]
        ):
            end = nxt  # "Yeah. Yeah": one answer said twice
        q = _question_before(tt, k)
        content = [w for w in words[k:end] if _is_content(w) and w not in _HEDGES and w not in _NEG_CUES]
        pi, pj = pair.hyp_range_for_ref(k, end)
        window = pair.hyp.words[max(0, pi - 1) : pj + 1]
        kept_polarity = any(w in (_YES if polarity == "yes" else _NEG_CUES) for w in window)
        stems = {_stem(h) for h in window}
        kept_content = any(w in window or _stem(w) in stems for w in content)
        rs, re_ = tt.char_span(k, end)
        overlaps = any(a < re_ and b > rs for a, b in taken)
        # With no question in view a bare "yeah" is a backchannel; a bare "no" / "I don't think so" still answers.
        backchannel = q is None and not content and polarity == "yes"
        lead = [w for w in words[k:end] if w not in _FILLERS]
        # ... and a "No," that opens a statement ("No, that I can do") answers nothing in view.
        opener = q is None and len(lead) > 2 and lead[0] in _NO and not any(w in _NEG_CUES for w in lead[1:])
        if kept_polarity or kept_content or overlaps or backchannel or opener:
            k = end
            continue
        key = _question_topic(pair, ref, q)
        asked = f" to {tt.original[slice(*tt.char_span(*q))]!r}" if q else ""
        what = key.replace("answer_", "") if key != "answer" else ("no clinical topic" if q else "question out of view")
        why = f"{polarity!r} answer{asked} ({what}) does not survive in the hypothesis"
        region = _Region(k, end, pi, pj)
        ev = _event("clinical_omission", pair, region, why, f"answer:{polarity}", weight=category_weight(key))
        out.append(ev.model_copy(update={"ref_start": rs, "ref_end": re_, "ref_span": tt.original[rs:re_]}))
        k = end
    return out


def _ref_start(pair: AlignedPair, g: _Region) -> int:
    return pair.ref.char_span(*_widen(pair, g))[0]


def _ref_end(pair: AlignedPair, g: _Region) -> int:
    return pair.ref.char_span(*_widen(pair, g))[1]


def _widen(pair: AlignedPair, g: _Region) -> tuple[int, int]:
    return (max(0, g.r0 - 1), min(len(pair.ref), max(g.r1, g.r0 + 1) + 1))


def detect_triggers(reference: str, hypothesis: str, concepts: Iterable[str] = ()) -> list[TriggerEvent]:
    """Typed trigger events between a reference transcript and a hypothesis.

    Args:
        reference: reference (human / clean) transcript, original text.
        hypothesis: hypothesis (ASR / noisy) transcript, original text.
        concepts: the encounter's gold concepts, if known (widens the entities
            whose negation is checked, as NegErr does).

    Returns:
        Events sorted by reference position, hypothesis position and type.
        Empty when the texts differ only in benign ways.
    """
    pair = align(reference, hypothesis)
    return detect_in_pair(pair, concepts)


def detect_in_pair(pair: AlignedPair, concepts: Iterable[str] = ()) -> list[TriggerEvent]:
    """:func:`detect_triggers` on an existing alignment (lets callers reuse one)."""
    if all(o.op == "equal" for o in pair.ops):
        return []
    all_regions = _regions(pair)
    regions = [g for g in all_regions if not _is_benign(g, pair)]
    ref_found, ref_toks = _found(pair.ref.original)
    hyp_found, hyp_toks = _found(pair.hyp.original)
    ref = _Side(pair.ref, _place(pair.ref, ref_found), _place(pair.ref, match_terms(pair.ref.original, ref_toks)))
    hyp = _Side(pair.hyp, _place(pair.hyp, hyp_found), _place(pair.hyp, match_terms(pair.hyp.original, hyp_toks)))
    events = _negation_events(pair, ref_found, hyp_found, list(concepts), (ref_toks, hyp_toks))
    flips = sorted((e.ref_start, e.ref_end) for e in events)
    flip_starts = [a for a, _ in flips]
    longest_flip = max((b - a for a, b in flips), default=0)

    def flipped(g: _Region) -> bool:
        """Does a negation_flip of the reference overlap region ``g`` (one character of context each side)?"""
        lo, hi = _ref_start(pair, g), _ref_end(pair, g)
        k0 = bisect_left(flip_starts, lo - longest_flip)
        return any(a < hi and b > lo for a, b in flips[k0 : bisect_left(flip_starts, hi)])

    flipped_concepts = {e.concept for e in events if e.concept}  # entity-level negation flips
    for g in regions:
        events += _numbers_and_time(pair, g, ref, hyp)
        subs, explained = _entities(pair, g, ref, hyp)
        events += subs
        events += _pollution(pair, g, ref, hyp, explained)
        lost = {e.concept for e in subs if e.concept}
        omitted = _omissions(pair, g, ref, hyp, lost | flipped_concepts)
        events += omitted
        events += _qualifier_changes(pair, g, [*subs, *omitted])
        # A lost negation is a negation_flip unless its target went with it (then it is that omission's).
        if not any("(negated)" in e.explanation for e in omitted) and not flipped(g):
            events += _negation_cue(pair, g, ref, hyp)
    kept = {id(g) for g in regions}
    for g in all_regions:
        if id(g) in kept or "".join(g.ref_words) == "".join(g.hyp_words):
            continue
        # Function-word-only regions carry no trigger but a lost or gained negation ("didn't help" -> "did it help").
        if not flipped(g):
            events += _negation_cue(pair, g, ref, hyp)
    # A lost answer is the omission of what it answered; a bare cue lost with it ("I don't think so" ->
    # "okay") is that answer, not a separate negation_flip.
    cue_only = [e for e in events if e.type == "negation_flip" and e.explanation.startswith("negation cue")]
    taken = [(e.ref_start, e.ref_end) for e in events if e.type in ("clinical_omission", "negation_flip")
             and not any(e is c for c in cue_only)]
    answers = [a for g in all_regions for a in _lost_answers(pair, g, ref, taken)]
    if answers:
        events = [e for e in events if not any(
            e is c and any(a.ref_start <= c.ref_start and c.ref_end <= a.ref_end for a in answers) for c in cue_only
        )]
    events += answers
    unique = {(e.type, e.ref_start, e.ref_end, e.hyp_start, e.hyp_end): e for e in events}
    return sorted(unique.values(), key=lambda e: (e.ref_start, e.hyp_start, TRIGGER_TYPES.index(e.type)))
