"""Claim identity and deterministic claim matching (docs/spec.md §6, ErrProp; docs/gold.md).

Canonical key of a claim = ``concept | status | value | time`` where

* **concept**: the shipped synonym table first (``stresstest/gold/data/synonyms_extra.tsv``,
  for phrasings the shared lexicon lacks), then
  :func:`stresstest.clinical.lexicon.canonical_concept` (lay↔clinical synonyms,
  British/American spelling, trade→generic drug names). Category and laterality
  are *not* part of the key: two structurers may file "wheeze" under symptom or
  finding, and that is not a clinical disagreement. The one exception is
  ``family_history``, whose concept becomes "family history of <concept>": a
  relative's diabetes is not the patient's. An ``allergy`` claim's non-drug
  allergen is folded by the shared allergen table ("peanut" = "peanuts").
* **status**: present / absent / uncertain, as is.
* **value**: value and unit joined, number words as digits ("three" = "3"),
  unit spellings canonical ("milligrams" = "mg", "puffs" = "puff"), a number
  glued to its unit split ("5mg" = "5 mg"), one spelling per range
  ("3 or 4" = "3 to 4" = "3-4").
* **time**: number words as digits, time units singular ("2 days" = "two day"),
  filler words dropped ("for", "since", "about", "ago", …), common frequencies
  folded ("twice a day" = "bd" = "2/day"), one spelling per range and rate
  ("two to three times a week" = "2-3 per week" = "2 3/week").

Err^(c) = C^(c) △ C^gold is computed on these keys as plain sets (duplicates
collapse). :func:`match_claims` additionally pairs the claims that are left over
by concept, so every decision can be written out for audit (exact match, value
or time or status mismatch, spurious, missing, duplicate) with its reason.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from stresstest.clinical.vocab import number_words
from stresstest.errors import GoldError
from stresstest.records import revise
from stresstest.schema import Claim, SafetyFlag, flag_key

SYNONYMS_EXTRA = Path(__file__).resolve().parent.parent / "gold" / "data" / "synonyms_extra.tsv"

_NON_WORD = re.compile(r"[^a-z0-9/.%]+")
_GLUED = re.compile(r"(?<=\d)(?=[a-z%])|(?<=[a-z])(?=\d)")
_DOT_WORD = re.compile(r"(?<![0-9])\.|\.(?![0-9])")

# Number words the key understands even without the shared number normaliser; it
# is applied first, these only catch what is left (e.g. "a couple of").
_NUMBER_WORDS: dict[str, str] = {
    w: (str(int(v)) if v == int(v) else str(v))
    for w, v in {**number_words(), **number_words("approx")}.items()
    if w != "thousand"
}

# Unit spellings -> canonical unit. Why a table here: the key must not depend on
# how a transcript (or an LLM) happened to spell a unit.
_UNITS: dict[str, str] = {
    "milligram": "mg",
    "milligrams": "mg",
    "mgs": "mg",
    "mg": "mg",
    "microgram": "mcg",
    "micrograms": "mcg",
    "mcg": "mcg",
    "ug": "mcg",
    "µg": "mcg",
    "gram": "g",
    "grams": "g",
    "gm": "g",
    "g": "g",
    "milliliter": "ml",
    "milliliters": "ml",
    "millilitre": "ml",
    "millilitres": "ml",
    "mls": "ml",
    "ml": "ml",
    "liter": "l",
    "liters": "l",
    "litre": "l",
    "litres": "l",
    "unit": "unit",
    "units": "unit",
    "iu": "unit",
    "puff": "puff",
    "puffs": "puff",
    "tablet": "tablet",
    "tablets": "tablet",
    "tab": "tablet",
    "tabs": "tablet",
    "pill": "tablet",
    "pills": "tablet",
    "capsule": "capsule",
    "capsules": "capsule",
    "flight": "flight",
    "flights": "flight",
    "step": "step",
    "steps": "step",
    "block": "block",
    "blocks": "block",
    "pack": "pack",
    "packs": "pack",
    "cigarette": "cigarette",
    "cigarettes": "cigarette",
    "drink": "drink",
    "drinks": "drink",
    "beer": "beer",
    "beers": "beer",
    "glass": "glass",
    "glasses": "glass",
    "bottle": "bottle",
    "bottles": "bottle",
    "pint": "pint",
    "pints": "pint",
    "kilogram": "kg",
    "kilograms": "kg",
    "kilo": "kg",
    "kilos": "kg",
    "kgs": "kg",
    "kg": "kg",
    "pound": "lb",
    "pounds": "lb",
    "lbs": "lb",
    "lb": "lb",
    "percent": "%",
    "per": "/",
    "degree": "degree",
    "degrees": "degree",
    "celsius": "c",
    "centigrade": "c",
    "fahrenheit": "f",
    "mmhg": "mmhg",
    "bpm": "/min",
    "meter": "m",
    "meters": "m",
    "metre": "m",
    "metres": "m",
    "mile": "mile",
    "miles": "mile",
    "kilometer": "km",
    "kilometers": "km",
    "km": "km",
    "year": "year",
    "years": "year",
    "yr": "year",
    "yrs": "year",
    "y": "year",
    "month": "month",
    "months": "month",
    "mo": "month",
    "week": "week",
    "weeks": "week",
    "wk": "week",
    "wks": "week",
    "day": "day",
    "days": "day",
    "d": "day",
    "hour": "hour",
    "hours": "hour",
    "hr": "hour",
    "hrs": "hour",
    "h": "hour",
    "minute": "minute",
    "minutes": "minute",
    "min": "minute",
    "mins": "minute",
    "second": "second",
    "seconds": "second",
    "sec": "second",
    "secs": "second",
    "night": "night",
    "nights": "night",
}
_TIME_UNITS = frozenset({"year", "month", "week", "day", "hour", "minute", "second", "night"})
# Words that change how a duration is phrased, not what it is.
_TIME_FILLER = frozenset(
    {
        "for",
        "since",
        "about",
        "around",
        "approximately",
        "approx",
        "roughly",
        "almost",
        "nearly",
        "over",
        "the",
        "of",
        "ago",
        "past",
        "last",
        "just",
        "like",
        "maybe",
        "or",
        "so",
        "now",
        "x",
        "~",
    }
)
_VALUE_FILLER = frozenset(
    {"a", "an", "for", "of", "the", "about", "around", "approximately", "roughly", "like", "x", "~", "and"}
)  # "dull and achy" = "dull, achy"
# "a" before a time unit means one only after these words ("for a week", "about a month ago").
_A_IS_ONE_AFTER = frozenset(
    {
        "for",
        "since",
        "about",
        "around",
        "over",
        "in",
        "within",
        "than",
        "past",
        "last",
        "almost",
        "nearly",
        "roughly",
        "approximately",
        "just",
        "maybe",
        "like",
    }
)
# Frequencies as clinicians abbreviate them -> "<n>/day" style.
_FREQ = (
    (re.compile(r"\b(?:1 (?:time )?(?:a|per|/) ?day|1 daily|daily|od|qd|every day|1/day)\b"), "1/day"),
    (re.compile(r"\b(?:2 (?:times )?(?:a|per|/) ?day|bd|bid|b\.i\.d|2 daily|2/day)\b"), "2/day"),
    (re.compile(r"\b(?:3 (?:times )?(?:a|per|/) ?day|tds|tid|t\.i\.d|3 daily|3/day)\b"), "3/day"),
    (re.compile(r"\b(?:4 (?:times )?(?:a|per|/) ?day|qds|qid|q\.i\.d|4 daily|4/day)\b"), "4/day"),
    (re.compile(r"\b(?:a|per|every|each) (day|week|month|night|year)\b"), r"/\1"),
    (re.compile(r"\b(?:as needed|when needed|when required|prn|as required)\b"), "prn"),
    (re.compile(r"\b(?:1 (?:time )?(?:a|per|/) ?week|1 weekly|weekly|once weekly)\b"), "1/week"),
)
#: "2 to 3", "1 or 2" -> "2 3", "1 2": the same range as "2-3" (whose dash the tokenizer drops).
_RANGE = re.compile(r"\b(\d+(?:\.\d+)?) (?:or|to) (\d+(?:\.\d+)?)\b")
#: "2 times / week", "2 /week", "2-3 times a week" -> "2/week", "2 3/week": one spelling per rate.
_RATE = re.compile(r"\b(\d+(?:\.\d+)?(?: \d+(?:\.\d+)?)?) (?:times? )?/ ?(day|week|month|night|year|hour)\b")
_ALLERGY_WORDS = re.compile(r"^(?:allergy|allergic|allergies)(?: to)? |(?: allergy| allergies)$")


@functools.lru_cache(maxsize=1)
def _extra_synonyms() -> dict[str, str]:
    """``synonyms_extra.tsv``: normalised surface -> canonical concept (project-local additions)."""
    out: dict[str, str] = {}
    if not SYNONYMS_EXTRA.exists():
        return out
    for n, line in enumerate(SYNONYMS_EXTRA.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise GoldError(f"{SYNONYMS_EXTRA}:{n}: expected 'surface<TAB>canonical', got {line!r}")
        out[_lookup_form(parts[0])] = parts[1].strip()
    return out


def _basic(text: str) -> str:
    """Lower case, punctuation to spaces (keeping '/', '.', '%' inside numbers), single spaces."""
    t = _NON_WORD.sub(" ", text.lower().replace("’", "'").replace("'", ""))
    t = _DOT_WORD.sub(" ", t)
    return " ".join(t.split())


def _lookup_form(term: str) -> str:
    """The shared lexicon's phrase normalisation (lower case, American spelling, single spaces)."""
    from stresstest.clinical.text import norm_phrase

    return norm_phrase(term)


@functools.lru_cache(maxsize=8192)
def canonical_concept_name(term: str) -> str:
    """Canonical concept for a claim concept or flag name (extra table, then the shared lexicon)."""
    from stresstest.clinical.lexicon import canonical_concept

    extra = _extra_synonyms().get(_lookup_form(term))
    return canonical_concept(extra if extra is not None else term) or _basic(term)


def _numbers(text: str) -> str:
    try:
        from stresstest.clinical.numbers import normalise_numbers
    except ImportError:  # the shared normaliser is optional here: the word table below still applies
        return text
    return normalise_numbers(text)


def _tokens(text: str) -> list[str]:
    t = _basic(_numbers(text))
    t = _GLUED.sub(" ", t)
    out: list[str] = []
    words = t.split()
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        prev = out[-1] if out else ""
        if w in ("a", "an") and _UNITS.get(nxt) in _TIME_UNITS and (not prev or prev in _A_IS_ONE_AFTER):
            out.append("1")  # "for a week" = "1 week", but "twice a day" / "a pack a day" are rates
        elif w in _NUMBER_WORDS:
            out.append(_NUMBER_WORDS[w])
        else:
            out.append(_UNITS.get(w, w))
    return out


@functools.lru_cache(maxsize=8192)
def normalise_value(value: str | None, unit: str | None = None) -> str:
    """Canonical ``value unit`` string ('' when both are empty)."""
    raw = " ".join(x for x in (value, unit) if x)
    if not raw.strip():
        return ""
    s = _RANGE.sub(r"\1 \2", " ".join(_tokens(raw)))
    for pat, rep in _FREQ:
        s = pat.sub(rep, s)
    s = _RATE.sub(r"\1/\2", s)
    t = _TEMPERATURE.match(s)
    if t and (34 <= float(t.group(1)) <= 45 or 93 <= float(t.group(1)) <= 113):
        s = f"{t.group(1)} degree"  # "38.5 degrees C" = "38.5 C" = "38.5 degrees": the number gives the scale
    return " ".join(w for w in s.split() if w not in _VALUE_FILLER)


_TEMPERATURE = re.compile(r"^(\d+(?:\.\d+)?) (?:degree(?: c| f)?|c|f)$")


@functools.lru_cache(maxsize=8192)
def normalise_time(time: str | None) -> str:
    """Canonical time/duration/frequency string ('' when empty)."""
    if not time or not time.strip():
        return ""
    s = _RANGE.sub(r"\1 \2", " ".join(_tokens(time)))
    for pat, rep in _FREQ:
        s = pat.sub(rep, s)
    s = _RATE.sub(r"\1/\2", s)
    s = _ONCE_PER.sub(lambda m: f"{m.group(1)} 1/{m.group(3)}", s).strip()
    toks = [w for w in s.split() if w not in _TIME_FILLER and w not in ("a", "an")]
    if toks == ["yesterday"]:
        return "1 day"  # "it started yesterday" = "1 day" (a day ago), as writers and clinicians put it
    return " ".join(toks)


#: A rate with no count ("every night", "per week") is once per unit, as "daily" is "1/day".
_ONCE_PER = re.compile(r"(^|\b(?!times?\b)([a-z]+)) ?/ ?(day|week|month|night|year|hour)\b")


@dataclass(frozen=True)
class CanonicalClaim:
    """A claim's canonical identity (see module docstring)."""

    concept: str
    status: str
    value: str
    time: str

    @property
    def key(self) -> str:
        """The identity as one string, used in claim error sets and written per item."""
        return f"{self.concept}|{self.status}|{self.value}|{self.time}"


@functools.lru_cache(maxsize=1)
def _allergen_names() -> dict[str, str]:
    """Non-drug allergen spellings -> one name ("peanut" = "peanuts"), from the shared allergen table."""
    from stresstest.clinical.text import read_table

    return {_basic(r[0]): r[1] for r in read_table("allergens.tsv") if len(r) >= 2}


def _allergen(name: str) -> str:
    return _allergen_names().get(_basic(name), name)


def canonical_claim(claim: Claim) -> CanonicalClaim:
    """Canonical identity of one claim; deterministic, no model calls."""
    concept = canonical_concept_name(_allergen(claim.concept) if claim.category == "allergy" else claim.concept)
    if claim.category == "family_history":
        # "Mother has diabetes" is a different fact from "the patient has diabetes".
        concept = f"family history of {concept}"
    value = normalise_value(claim.value, claim.unit)
    if concept == _EXERTIONAL_DYSPNEA:
        # Breathlessness on exertion is the breathlessness, "on exertion" its value (docs/gold_guide.md), however
        # a writer or a model spelled it ("dyspnea on exertion", "shortness of breath worse with exertion").
        concept, value = "shortness of breath", value or normalise_value("on exertion")
    return CanonicalClaim(concept=concept, status=claim.status, value=value, time=normalise_time(claim.time))


_EXERTIONAL_DYSPNEA = "shortness of breath on exertion"


def claim_key(claim: Claim) -> str:
    """Shorthand for ``canonical_claim(claim).key``."""
    return canonical_claim(claim).key


def canonical_flag_name(flag: SafetyFlag) -> str:
    """Canonical flag name: allergy wording stripped ("penicillin allergy" = "penicillin"), then concept."""
    name = _basic(flag.name)
    if flag.kind == "allergy":
        name = _allergen(_ALLERGY_WORDS.sub("", name).strip() or name)
    return canonical_concept_name(name)


def canonical_flag_key(flag: SafetyFlag) -> str:
    """:func:`stresstest.schema.flag_key` of the flag with its canonical name."""
    return flag_key(revise(flag, name=canonical_flag_name(flag)))


def flag_keys(flags: Iterable[SafetyFlag], kinds: Iterable[str] | None = None) -> frozenset[str]:
    """Canonical flag keys of ``flags`` (only ``kinds`` when given)."""
    wanted = None if kinds is None else frozenset(kinds)
    return frozenset(canonical_flag_key(f) for f in flags if wanted is None or f.kind in wanted)


Decision = Literal["exact", "status_mismatch", "value_mismatch", "time_mismatch", "spurious", "missing", "duplicate"]


@dataclass(frozen=True)
class MatchDecision:
    """One matching decision, written per item for audit.

    ``exact`` and ``duplicate`` decisions add nothing to the error set; every
    other decision puts its claim key(s) in Err = C △ C^gold.
    """

    decision: Decision
    pred_id: str | None
    gold_id: str | None
    pred_key: str | None
    gold_key: str | None
    reason: str

    def to_dict(self) -> dict[str, str | None]:
        """Plain dict (for items.jsonl)."""
        return asdict(self)


@dataclass(frozen=True)
class ClaimMatch:
    """The result of :func:`match_claims`."""

    decisions: tuple[MatchDecision, ...]
    pred_keys: frozenset[str]
    gold_keys: frozenset[str]
    _errors: frozenset[str] = field(repr=False, default=frozenset())

    @property
    def matched(self) -> list[tuple[str, str]]:
        """(pred id, gold id) of exact matches."""
        return [(d.pred_id or "", d.gold_id or "") for d in self.decisions if d.decision == "exact"]

    @property
    def mismatched(self) -> list[MatchDecision]:
        """Pairs on the same concept whose status, value or time differ."""
        return [d for d in self.decisions if d.decision.endswith("_mismatch")]

    @property
    def unmatched_pred(self) -> list[str]:
        """Ids of predicted claims with no gold counterpart (spurious)."""
        return [d.pred_id or "" for d in self.decisions if d.decision == "spurious"]

    @property
    def unmatched_gold(self) -> list[str]:
        """Ids of gold claims with no predicted counterpart (missing)."""
        return [d.gold_id or "" for d in self.decisions if d.decision == "missing"]

    @property
    def errors(self) -> frozenset[str]:
        """Err = C △ C^gold; elements ``'+key'`` (predicted only) / ``'-key'`` (gold only)."""
        return self._errors


def claim_errors(pred_keys: Iterable[str], gold_keys: Iterable[str]) -> frozenset[str]:
    """The symmetric difference C △ C^gold, with a side mark on each element."""
    p, g = frozenset(pred_keys), frozenset(gold_keys)
    return frozenset({f"+{k}" for k in p - g} | {f"-{k}" for k in g - p})


def match_claims(pred: Sequence[Claim], gold: Sequence[Claim]) -> ClaimMatch:
    """Match predicted claims to gold claims deterministically.

    Pass 1 pairs equal canonical keys (``exact``). Pass 2 pairs what is left by
    canonical concept, preferring the same status, in list order, and says what
    differs (``status_mismatch`` before ``value_mismatch`` before ``time_mismatch``).
    What is still left is ``spurious`` (predicted) or ``missing`` (gold). A claim
    whose key repeats an earlier one on the same side is a ``duplicate``.

    Args:
        pred: claims of a structured record.
        gold: claims of the gold record.

    Returns:
        The decisions (gold order first, then leftover predictions) and the error set.
    """
    pc = [canonical_claim(c) for c in pred]
    gc = [canonical_claim(c) for c in gold]
    decisions: list[MatchDecision] = []

    def dedupe(claims: Sequence[Claim], canon: list[CanonicalClaim], side: str) -> list[int]:
        seen: dict[str, str] = {}
        keep = []
        for i, (c, k) in enumerate(zip(claims, canon, strict=True)):
            if k.key in seen:
                decisions.append(
                    MatchDecision(
                        "duplicate",
                        c.id if side == "pred" else None,
                        c.id if side == "gold" else None,
                        k.key if side == "pred" else None,
                        k.key if side == "gold" else None,
                        f"{side} claim {c.id!r} repeats the key of {seen[k.key]!r}; a set counts it once",
                    )
                )
            else:
                seen[k.key] = c.id
                keep.append(i)
        return keep

    p_left = dedupe(pred, pc, "pred")
    g_left = dedupe(gold, gc, "gold")
    pairs: list[tuple[int, int, Decision, str]] = []
    by_key = {pc[i].key: i for i in p_left}
    rest_g = []
    for gi in g_left:
        pi = by_key.pop(gc[gi].key, None)
        if pi is None:
            rest_g.append(gi)
        else:
            pairs.append((pi, gi, "exact", "same canonical key"))
    rest_p = [i for i in p_left if i in by_key.values()]
    still_g = []
    for gi in rest_g:
        cands = [pi for pi in rest_p if pc[pi].concept == gc[gi].concept]
        if not cands:
            still_g.append(gi)
            continue
        same = [pi for pi in cands if pc[pi].status == gc[gi].status]
        pi = (same or cands)[0]
        rest_p.remove(pi)
        p, g = pc[pi], gc[gi]
        if p.status != g.status:
            pairs.append((pi, gi, "status_mismatch", f"status {g.status!r} in gold, {p.status!r} predicted"))
        elif p.value != g.value:
            pairs.append((pi, gi, "value_mismatch", f"value {g.value!r} in gold, {p.value!r} predicted"))
        else:
            pairs.append((pi, gi, "time_mismatch", f"time {g.time!r} in gold, {p.time!r} predicted"))
    out = [
        MatchDecision(d, pred[pi].id, gold[gi].id, pc[pi].key, gc[gi].key, why)
        for pi, gi, d, why in sorted(pairs, key=lambda t: t[1])
    ]
    out += [
        MatchDecision(
            "missing", None, gold[gi].id, None, gc[gi].key, f"no predicted claim on concept {gc[gi].concept!r}"
        )
        for gi in still_g
    ]
    out += [
        MatchDecision("spurious", pred[pi].id, None, pc[pi].key, None, f"no gold claim on concept {pc[pi].concept!r}")
        for pi in rest_p
    ]
    pk = frozenset(k.key for k in pc)
    gk = frozenset(k.key for k in gc)
    return ClaimMatch(tuple(out + decisions), pk, gk, claim_errors(pk, gk))
