"""What several passes of the ``rules`` structurer share: :class:`_Extractor` (the one token stream,
its sentences, quotes and evidence, the quantities near a mention, laterality), :class:`_Group`, the result each
pass hands to the later ones (:class:`_Found`, :class:`_Dialogue`, :class:`_Built`, :class:`_Patient`), value
formatting, the dialogue readers (answer sentences, fillers) and the small tests more than one pass asks
(:func:`_is_modifier`, :func:`_is_pain_concept`, :func:`_hours`, ...).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from stresstest.clinical.lexicon import Mention, surfaces_by_category
from stresstest.clinical.negation import FIRST_PERSON, Assertion, ContextAnalyzer
from stresstest.clinical.numbers import Quantity, find_quantities
from stresstest.clinical.text import Token, tokenize
from stresstest.clinical.vocab import answer_fillers, discourse_fillers, hesitations
from stresstest.schema import Claim
from stresstest.structure.rules.tables import (
    _ANCHOR_HOURS,
    _AT_REST,
    _EXERTION,
    _EXERTION_REACH,
    _FAMILY,
    _MAX_QUOTE_TOKENS,
    _MILD_EXERTION,
    _OPENER_WORDS,
    _PAIN_QUALITIES,
    _QTY_WINDOW,
    _QUOTE_SIDE,
    _TIME_WINDOW,
    _UNIT_HOURS,
    _VIGOROUS,
    _number_words,
)


@dataclass
class _Group:
    """All mentions of one (category, concept), accumulated in text order."""

    category: str
    concept: str
    mentions: list[tuple[Mention, Assertion]] = field(default_factory=list)
    red_flag: bool = False
    triage_hint: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


@functools.lru_cache(maxsize=1)
def _site_words() -> dict[str, str]:
    return {k: v for k, v in surfaces_by_category("body_site").items() if " " not in k}


def _fmt_num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _fmt_value(q: Quantity) -> str:
    assert q.value is not None  # callers check; internal invariant, not user input
    return _fmt_num(q.value) + (f"-{_fmt_num(q.value_max)}" if q.value_max is not None else "")


def _fmt_qty(q: Quantity) -> str:
    if q.value is None:
        anchor = q.unit_canonical or ""
        return anchor if anchor.startswith(("last", "this", "yesterday", "few", "several")) else f"since {anchor}"
    val = _fmt_value(q)
    unit = q.unit_canonical
    if unit in _PLURAL_UNITS and q.value == 1 and q.value_max is None:
        unit = unit[:-1]  # "1 week", not "1 weeks"
    return f"{val} {unit}" if unit else val


_PLURAL_UNITS = frozenset({"seconds", "minutes", "hours", "days", "nights", "weeks", "months", "years", "times"})


_CLAUSE_JOINERS = frozenset({"and", "but", "so", "then"})


class _Extractor:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[Token] = tokenize(text)
        self.words = [t.norm for t in self.tokens]
        self.ctx = ContextAnalyzer(text, self.tokens)
        self.quantities = find_quantities(text)
        self.qty_tok = [self._tok_index(q.start) for q in self.quantities]
        #: temperature readings (Celsius or Fahrenheit as said) by the start of their fever mention
        self.temp_at: dict[int, float] = {}
        #: sentences that hold a clinical mention (filled by the mentions pass)
        self.mention_sents: set[int] = set()
        self.mention_toks: set[int] = set()

    # ---- token / sentence helpers
    def _tok_index(self, char: int) -> int:
        import bisect

        return max(0, bisect.bisect_right(self.ctx.starts, char) - 1)

    def span(self, m: Mention) -> tuple[int, int]:
        i = self._tok_index(m.start)
        j = self._tok_index(m.end - 1) + 1
        return i, j

    def sentence_of(self, tok: int) -> int:
        return self.ctx.sent_id[tok]

    def sentence_bounds(self, s: int) -> tuple[int, int]:
        lo = self.ctx.sent_start[s]
        hi = self.ctx.sent_start[s + 1] if s + 1 < len(self.ctx.sent_start) else len(self.tokens)
        while lo < hi and lo in self.ctx.skip:
            lo += 1  # never quote a speaker label as part of the sentence
        return lo, hi

    def quote(self, i: int, j: int, lo: int, hi: int) -> str:
        """Exact substring: the sentence [lo, hi) around tokens [i, j), capped for run-on text."""
        if hi - lo > _MAX_QUOTE_TOKENS:
            lo = max(lo, i - _QUOTE_SIDE)
            hi = min(hi, j + _QUOTE_SIDE)
        return self.text[self.tokens[lo].start : self.tokens[hi - 1].end]

    def evidence(self, m: Mention, a: Assertion) -> list[str]:
        i, j = self.span(m)
        s = self.sentence_of(i)
        lo, hi = self.sentence_bounds(s)
        quotes = [self.quote(i, j, lo, hi)]
        if a.cue_start is not None:  # an answer, or a cue such as a temperature reading
            k = self._tok_index(a.cue_start)
            s2 = self.sentence_of(k)
            lo2, hi2 = self.sentence_bounds(s2)
            if s2 != s and lo2 < hi2:
                quotes.append(self.quote(k, k + 1, lo2, min(hi2, lo2 + _MAX_QUOTE_TOKENS)))
        return quotes

    def context_norms(self, m: Mention, a: Assertion | None = None, side: int = _QUOTE_SIDE) -> list[str]:
        """Normalised words around the mention (its sentence, capped to ``side`` tokens each way) and,
        for an answered question, the start of the answer. Capping keeps run-on ASR text local."""
        i, j = self.span(m)
        s = self.sentence_of(i)
        lo, hi = self.sentence_bounds(s)
        out = [" " + " ".join(self.words[max(lo, i - side) : min(hi, j + side)]) + " "]
        if a is not None and a.source == "answer" and a.cue_start is not None:
            # The answer sentence only: the doctor's next question must not count as the answer.
            k = self._tok_index(a.cue_start)
            _alo, ahi = self.sentence_bounds(self.sentence_of(k))
            out.append(" " + " ".join(self.words[k : min(ahi, k + 2 * side)]) + " ")
        return out

    def scope_sentences(self, m: Mention, a: Assertion) -> list[int]:
        s = self.sentence_of(self.span(m)[0])
        out = [s]
        if a.source == "answer" and a.cue_start is not None:
            s2 = self.sentence_of(self._tok_index(a.cue_start))
            if s2 != s:
                out.append(s2)
        return out

    # ---- attributes
    def quantities_near(self, m: Mention, a: Assertion, after_only: bool = False) -> list[Quantity]:
        i, j = self.span(m)
        sents = self.scope_sentences(m, a)
        out: list[tuple[int, Quantity]] = []
        for q, k in zip(self.quantities, self.qty_tok, strict=True):
            s = self.sentence_of(min(k, len(self.tokens) - 1))
            if s not in sents:
                continue
            if s == sents[0]:
                if after_only and k < j:
                    continue
                dist = (i - k) if k < i else (k - j)
                if k >= i and k < j:
                    continue  # inside the mention itself ("type 2 diabetes")
                if (
                    q.kind == "time"
                    and k < i
                    and not self._opens_sentence(k)
                    and any(
                        self.sentence_bounds(s)[0] <= t < k
                        and k - t < i - k
                        and not _CLAUSE_JOINERS.intersection(self.words[t + 1 : k])
                        for t in self.mention_toks
                    )
                ):
                    # "a fever that I measured this morning and I had a cough": the fever's time (not in "a fever
                    # a couple of nights and just yesterday I noticed a loss of taste": a new clause starts)
                    continue
                if (
                    dist > _QTY_WINDOW
                    and not (
                        q.kind == "time"
                        and k >= j
                        and dist <= _TIME_WINDOW
                        and not any(j <= t < k for t in self.mention_toks)
                    )
                    and not (q.kind == "time" and k < i and self._opens_sentence(k))
                ):
                    continue  # a duration may trail its symptom further ("pain that's been going on
                    # now for the last two weeks"), unless another clinical term comes between; a time that
                    # opens the sentence dates all of it ("Five days ago I started having pain and swelling")
                out.append((dist, q))
            else:
                out.append((_QTY_WINDOW + 1 + k, q))  # in the answer: after same-sentence ones
        return [q for _, q in sorted(out, key=lambda t: (t[0], t[1].start))]

    def _opens_sentence(self, k: int) -> bool:
        """Token ``k`` starts its sentence, after fillers and openers ("So, this morning I woke up ...")."""
        lo, _hi = self.sentence_bounds(self.sentence_of(k))
        return all(w in _OPENER_WORDS or w in _fillers() for w in self.words[lo:k])

    def laterality(self, m: Mention) -> str | None:
        i, j = self.span(m)
        s = self.sentence_of(i)
        lo, hi = self.sentence_bounds(s)
        sites = _site_words()
        found: set[str] = set()
        for k in range(max(lo, i - 4), min(hi, j + 4)):
            w = self.words[k]
            if w not in ("left", "right", "both", "bilateral"):
                continue
            nxt = self.words[k + 1 : min(hi, k + 3)]
            if w == "bilateral" or any(x in sites or x in ("side", "sided", "sides") for x in nxt):
                found.add("bilateral" if w in ("both", "bilateral") else w)
        if "bilateral" in found or {"left", "right"} <= found:
            return "bilateral"
        return next(iter(sorted(found)), None)


def _vague(time: str) -> bool:
    """ "a few days", "several weeks": a duration without a number."""
    return time.startswith(("few ", "several "))


def _is_family(ex: _Extractor, m: Mention) -> bool:
    i, _ = ex.span(m)
    s = ex.sentence_of(i)
    lo, _hi = ex.sentence_bounds(s)
    _, j = ex.span(m)
    _lo, hi = ex.sentence_bounds(s)
    near = ex.words[max(lo, i - 8) : i] + ex.words[j : min(hi, j + 4)]
    if any(w in _FAMILY for w in near):
        return True
    # "My dad smoked two packs a day for 30 years and had lung cancer": a sentence about a relative, up to where
    # the patient speaks of themself again.
    lead = [w for w in ex.words[lo : min(i, lo + 4)] if w not in _fillers()]
    if (
        len(lead) >= 2
        and lead[0] in ("my", "his", "her", "our")
        and lead[1] in _FAMILY
        and not any(w in FIRST_PERSON - {"my"} for w in ex.words[lo + 2 : i])
    ):
        return True
    # Answer to "any family history of ...?": the family word comes in the answer sentence.
    if any("family history" in c or " in the family " in c for c in ex.context_norms(m)):
        return True
    return _family_list_continues(ex, s)


_LIST_OPENERS = frozenset(
    {"there's", "there", "like", "including", "mostly", "mainly", "especially", "so", "and", "um", "uh", "yeah", "well"}
)


def _family_list_continues(ex: _Extractor, s: int) -> bool:
    """ "There's a lot of cancer in the family. There's colon cancer, breast cancer, ovarian cancer.": a statement
    that goes on listing after a family-history sentence (no first person, opening with "there's", "like", ...)."""
    if s == 0 or ex.ctx.ends_q[s]:
        return False
    plo, phi = ex.sentence_bounds(s - 1)
    prev = " " + " ".join(ex.words[plo:phi]) + " "
    if not _has_any(prev, ("in the family", "family history", "runs in", "in my family", "side of the family")):
        return False
    lo, hi = ex.sentence_bounds(s)
    words = ex.words[lo:hi]
    return bool(words) and words[0] in _LIST_OPENERS and not any(w in FIRST_PERSON for w in words)


def _supporting(items: list[tuple[Mention, Assertion]], status: str) -> list[tuple[Mention, Assertion]]:
    return [(m, a) for m, a in items if a.status == status and a.source != "unanswered"]


def _has_any(norm: str, phrases: tuple[str, ...]) -> bool:
    return any(f" {p} " in norm for p in phrases)


@dataclass
class _Found:
    """Pass 1 output: what the text mentions (character offsets into the transcript)."""

    lex: list[Mention]  # symptoms, findings, history, social (composed terms included)
    drugs: list[Mention]
    allergens: list[Mention]
    consumed: set[int]  # indexes into ``drugs`` that are allergens, not medications
    regions: list[tuple[int, int, str]]  # token ranges describing an allergen's reaction


#: Activities that change a pain ("worse when I'm coughing or laying down", "leaning forward helps"):
#: word sequence -> (concept when it makes the pain worse, concept when it relieves it).
_MODIFIER_ACTIVITIES: dict[tuple[str, ...], tuple[str | None, str | None]] = {
    **dict.fromkeys(
        [
            ("lie", "down"),
            ("lying", "down"),
            ("laying", "down"),
            ("lay", "down"),
            ("lie", "flat"),
            ("lying", "flat"),
            ("laying", "flat"),
        ],
        ("pain worse lying down", "pain relieved by lying down"),
    ),
    **dict.fromkeys([("cough",), ("coughing",), ("coughs",)], ("pain worse with coughing", None)),
    **dict.fromkeys(
        [("deep", "breath"), ("deep", "breaths"), ("breathe", "in"), ("breathing", "in"), ("deep", "breathing")],
        ("pain worse with deep breath", None),
    ),
    **dict.fromkeys(
        [
            ("move",),
            ("moving",),
            ("movement",),
            ("movements",),
            ("walk",),
            ("walking",),
            ("activity",),
            ("activities",),
            ("bend",),
            ("bending",),
            ("lifting",),
            ("exercise",),
            ("exercising",),
        ],
        ("pain worse with movement", None),
    ),
    **dict.fromkeys([("eat",), ("eating",), ("meal",), ("meals",), ("food",)], ("pain worse with eating", None)),
    **dict.fromkeys(
        [("lean", "forward"), ("leaning", "forward"), ("sit", "forward"), ("sitting", "forward")],
        ("pain worse leaning forward", "pain relieved by leaning forward"),
    ),
    **dict.fromkeys([("rest",), ("resting",), ("rested",)], (None, "pain relieved by rest")),
    **dict.fromkeys([("ice",), ("icing",), ("ice", "packs"), ("ice", "pack")], (None, "pain relieved by ice")),
    **dict.fromkeys(
        [("touch",), ("touching",), ("palpate",), ("pressing",), ("press",)], ("pain worse with touch", None)
    ),
}


#: Concepts that describe another symptom (its modifiers, pattern, radiation, history), never a topic
#: or the presenting complaint themselves.
_MODIFIER_CONCEPTS = frozenset(
    {c for pair in _MODIFIER_ACTIVITIES.values() for c in pair if c}
    | {
        "pain radiation",
        "constant pain",
        "previous similar episode",
        "pain worse with deep breath",
        "pain worse with coughing",
        "pain worse with movement",
        "pain worse with eating",
        "pain worse lying down",
        "pain relieved by rest",
        "pain relieved by leaning forward",
    }
)
_FACTOR_WORDS = (" worse with ", " relieved by ", " worse at ", " worse in the ", " on exertion")


def _is_modifier(concept: str) -> bool:
    """A factor, pattern or history of another symptom (never a topic or the presenting complaint)."""
    return concept in _MODIFIER_CONCEPTS or any(w in f" {concept}" for w in _FACTOR_WORDS)


_SPUTUM_WORDS = frozenset({"sputum", "phlegm", "mucus"})


def _answer_sentences(ex: _Extractor, s: int, limit: int = 2) -> list[int]:
    """The sentences after question ``s`` that answer it: up to ``limit``, stopping at the next question."""
    out: list[int] = []
    n = len(ex.ctx.sent_start)
    for s2 in range(s + 1, min(n, s + 1 + limit)):
        out.append(s2)
        if ex.ctx.ends_q[s2]:
            break
    return out


def _fillers() -> frozenset[str]:
    """Hesitations and discourse fillers ("um", "well"): a sentence of only these carries no answer."""
    return answer_fillers()


@functools.lru_cache(maxsize=1)
def _lead_fillers() -> frozenset[str]:
    """Words skipped when looking for a question's first word: hesitations and discourse fillers."""
    return hesitations() | discourse_fillers()


@dataclass
class _Answered:
    """An attribute read from the answer to a clinician's question about the current topic."""

    kind: str  # "onset" | "confirm" (a checked onset) | "rating" | "distance" | "describe" |
    #                           "frequency"
    value: str | None
    unit: str | None
    time: str | None
    rating: float | None  # the highest number of a 0-10 rating
    evidence: list[str]


@dataclass
class _Dialogue:
    """Pass 4 output: answers attached to a group key, and every 0-10 rating heard."""

    answers: dict[tuple[str, str], list[_Answered]] = field(default_factory=dict)
    ratings: list[tuple[float, tuple[str, str] | None, list[str]]] = field(default_factory=list)


def _is_pain_concept(concept: str) -> bool:
    if _is_modifier(concept):
        return False
    return any(w in concept for w in ("pain", "ache", "sore", "headache", "dysuria"))


@dataclass
class _Built:
    """One claim with its evidence and the group it came from."""

    claim: Claim
    evidence: list[str]
    group: _Group
    pos: int = 0  # character offset of the first supporting mention (claims are numbered in text order)


_COLOURS = frozenset(
    {
        "yellow",
        "yellowish",
        "green",
        "greenish",
        "white",
        "whitish",
        "clear",
        "brown",
        "brownish",
        "rusty",
        "pink",
        "pinkish",
        "red",
        "grey",
        "gray",
        "greyish",
    }
)
_SHADES = frozenset({"dark", "light", "bright", "pale"})


def _colour_span(toks: list[str], i: int) -> tuple[int, int]:
    """The colours said together with the colour at ``i``: its shade before it and the colours after it, joined
    or by "or", "to", "and" ("dark yellow greenish", "clear to white")."""
    lo = i
    while lo > 0 and toks[lo - 1] in _SHADES:
        lo -= 1
    hi = i + 1
    while hi < len(toks):
        if toks[hi] in _COLOURS:
            hi += 1
        elif toks[hi] in ("or", "to", "and") and hi + 1 < len(toks) and toks[hi + 1] in _COLOURS:
            hi += 2
        else:
            break
    return lo, hi


_TYPE_LEADS = frozenset({"no", "yeah", "yes", "so", "well", "oh", "um", "uh", "and", "but"})
_TYPE_HEDGES = frozenset(
    {
        "it's",
        "pretty",
        "very",
        "mostly",
        "really",
        "quite",
        "more",
        "kind",
        "of",
        "like",
        "a",
        "bit",
        "just",
        "been",
        "always",
        "usually",
        "all",
    }
)


def _qualities_end(toks: list[str], i: int) -> int:
    """End of the pain qualities said together from ``i`` ("dull achy", "dull and achy", "sharp, stabbing")."""
    hi = i + 1
    while hi < len(toks):
        if toks[hi] in _PAIN_QUALITIES:
            hi += 1
        elif toks[hi] == "and" and hi + 1 < len(toks) and toks[hi + 1] in _PAIN_QUALITIES:
            hi += 2
        else:
            break
    return hi


#: Words that call a state normal: :func:`_how_is_claims` ("appetite is fine") and :func:`_unmeasured` (a
#: temperature said to be normal) both read this set.
_NORMAL_WORDS = frozenset(
    {"normal", "fine", "good", "okay", "ok", "great", "same", "usual", "regular", "alright", "unchanged", "well"}
)


@dataclass
class _Patient:
    """Age and vital signs read from the dialogue (for triage and critical-vital flags)."""

    age_years: float | None = None
    age_evidence: list[str] = field(default_factory=list)
    temperature: float | None = None  # highest reading, Celsius
    temp_evidence: list[str] = field(default_factory=list)
    # (name, value text, evidence): vital signs in a critical range
    critical: list[tuple[str, str, list[str]]] = field(default_factory=list)
    child: bool = False  # under 16, or a parent speaking for a son or daughter ("I'm here with my daughter")

    @property
    def is_child(self) -> bool:
        return self.child or (self.age_years is not None and self.age_years < 16)


def _num_word(text: str) -> float | None:
    text = text.lower()
    if text.replace(".", "", 1).isdigit():
        return float(text)
    return _number_words().get(text)


def _exertional_only(ex: _Extractor, g: _Group, vigorous: bool = False) -> bool:
    """Breathlessness said with exertion words ("when I play hockey", "walking around") and never at rest; with
    ``vigorous``, only with exertion a healthy person may be breathless with (running, stairs, sports)."""
    norms: list[str] = []
    said: list[str] = []  # a question offers both ("during activity, or resting as well?"): only what is said rules out
    for m, a in _supporting(g.mentions, "present"):
        around = ex.context_norms(m, a, side=_EXERTION_REACH)
        norms += around
        said += (
            around if not ex.ctx.ends_q[ex.sentence_of(ex.span(m)[0])] else around[1:] if a.source == "answer" else []
        )
    if any(_has_any(nm, _AT_REST) for nm in said):
        return False
    if vigorous:
        return any(_has_any(nm, _VIGOROUS) for nm in norms) and not any(_has_any(nm, _MILD_EXERTION) for nm in norms)
    return any(_has_any(nm, _EXERTION) for nm in norms)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _hours(time: str | None) -> float | None:
    """Rough age of an onset/duration in hours ("30 minutes" 0.5, "last night" 12, "3 days" 72);
    None when it is no duration (a frequency, "since Monday")."""
    if not time:
        return None
    t = time.replace("since ", "")
    if t in _ANCHOR_HOURS:
        return _ANCHOR_HOURS[t]
    parts = t.split()
    if len(parts) != 2:
        return None
    try:
        value = float(parts[0].split("-")[-1])
    except ValueError:
        return None
    unit = parts[1].rstrip("s")
    return value * _UNIT_HOURS[unit] if unit in _UNIT_HOURS else None
