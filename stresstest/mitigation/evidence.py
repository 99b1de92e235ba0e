"""Deterministic evidence filter (the last step of the guard agent, docs/spec.md §7).

:func:`evidence_filter` is a pure function of (record, raw transcript,
high-stakes definition). Its rules, version ``filter-v1``:

1. **Quote test.** A quote survives only if, after the *whitespace rule*, it is
   a substring of the raw transcript. Whitespace rule: in both the quote and the
   transcript every run of whitespace (spaces, tabs, newlines) becomes one
   space, and the quote's leading/trailing whitespace is removed. Nothing else
   is normalised: case, punctuation, spelling and digits must match exactly, so
   a paraphrase or a "corrected" quote is discarded. A quote with no letter or
   digit (empty, "...") proves nothing and is discarded. Surviving quotes are
   stored in their whitespace-normalised form (the form that was verified).
2. **Evidence keys** that name neither ``triage`` nor an id present in the
   record are dropped (counted as dangling).
3. **High-stakes items without surviving evidence are removed** (a list item's
   "null"): flags whose kind is high-stakes, claims whose category is
   high-stakes, and claims whose concept names a high-stakes flag of the record
   (same normalised text as the flag's name, so "chest pain" the claim goes
   with "chest pain" the red flag). A claim or flag with surviving quotes stays.
4. **Numbers must be quoted.** On a surviving high-stakes item, a ``value`` (claim) or
   ``detail`` (flag) containing a number whose digits — or, up to 99, English
   words — appear in none of its surviving quotes is nulled (with the claim's
   ``unit``): a dose heard as "50" must not survive as "15".

Not high-stakes: ``triage`` (required by the schema, never nulled; its quotes
are still filtered) and ``chief_complaint``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from stresstest.records import revise
from stresstest.schema import (  # the reports travel with the record (RecordExtra), so they live in the base layer
    CRITICAL_FLAG_KINDS,
    EVIDENCE_CLAIM_CATEGORIES,
    ClinicalRecord,
    DiscardedQuote,
)
from stresstest.schema import FILTER_VERSION as FILTER_VERSION  # re-exported
from stresstest.schema import FilterReport as FilterReport  # re-exported

_WS = re.compile(r"\s+")
_ALNUM = re.compile(r"[A-Za-z0-9]")
_NAME = re.compile(r"[^a-z0-9]+")
_DIGITS = re.compile(r"\d+")
_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split()
)
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


class HighStakes(BaseModel):
    """Which fields are high-stakes (removed when left without evidence)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flag_kinds: frozenset[str] = Field(
        default=CRITICAL_FLAG_KINDS | {"current_medication"},
        description="Flag kinds: the safety-critical subset (red flag, allergy, high-risk medication, "
        "self-harm risk, critical vital) plus current medication (its dose).",
    )
    claim_categories: frozenset[str] = Field(
        default=EVIDENCE_CLAIM_CATEGORIES,
        description="Claim categories: allergies, medications (with doses) and vital signs (the categories whose "
        "claims output schema v2 makes cite evidence).",
    )
    claims_of_flags: bool = Field(
        default=True, description="Also claims whose concept names a high-stakes flag of the record."
    )


DEFAULT_HIGH_STAKES = HighStakes()


def normalise_ws(text: str) -> str:
    """The whitespace rule: runs of whitespace → one space, ends stripped."""
    return _WS.sub(" ", text).strip()


def quote_supported(quote: str, raw_transcript: str) -> bool:
    """True when ``quote`` passes the quote test against ``raw_transcript`` (rule 1)."""
    q = normalise_ws(quote)
    return bool(_ALNUM.search(q)) and q in normalise_ws(raw_transcript)


def _name(text: str) -> str:
    return _NAME.sub(" ", text.lower()).strip()


def number_words(n: int) -> list[str]:
    """English spellings of 0–99 accepted as evidence for a digit string ("twenty five", "twenty-five")."""
    if n < 20:
        return [_UNITS[n]]
    if n < 100:
        tens, unit = divmod(n, 10)
        if unit == 0:
            return [_TENS[tens - 2]]
        return [f"{_TENS[tens - 2]} {_UNITS[unit]}", f"{_TENS[tens - 2]}-{_UNITS[unit]}"]
    return []


def numbers_quoted(value: str, quotes: Iterable[str]) -> bool:
    """True when every number in ``value`` appears (as digits, or words up to 99) in some quote."""
    text = " ".join(quotes).lower()
    for digits in _DIGITS.findall(value):
        if re.search(rf"(?<!\d){re.escape(digits)}(?!\d)", text):
            continue
        n = int(digits)
        if not any(re.search(rf"\b{re.escape(w)}\b", text) for w in number_words(n)):
            return False
    return True


def evidence_filter(
    record: ClinicalRecord, raw_transcript: str, high_stakes: HighStakes = DEFAULT_HIGH_STAKES
) -> tuple[ClinicalRecord, FilterReport]:
    """Apply the deterministic evidence filter (rules in the module docstring).

    Args:
        record: the (guarded) record.
        raw_transcript: the raw ASR text, exactly.
        high_stakes: which fields are high-stakes.

    Returns:
        The filtered record (a new object; the input is not changed) and the report of what was removed.
    """
    discarded: list[DiscardedQuote] = []
    total = 0
    surviving: dict[str, list[str]] = {}
    for key, quotes in record.field_evidence.items():
        keep: list[str] = []
        for q in quotes:
            total += 1
            nq = normalise_ws(q)
            if not _ALNUM.search(nq):
                discarded.append(DiscardedQuote(field=key, quote=q, reason="no letter or digit"))
            elif nq not in normalise_ws(raw_transcript):
                discarded.append(DiscardedQuote(field=key, quote=q, reason="not a substring of the raw transcript"))
            elif nq not in keep:
                keep.append(nq)
        surviving[key] = keep

    hs_flag_names = {_name(f.name) for f in record.safety_flags if f.kind in high_stakes.flag_kinds}
    removed_claims: list[str] = []
    removed_flags: list[str] = []
    values_nulled: list[str] = []
    hs_total = 0

    claims = []
    for c in record.claims:
        hs = c.category in high_stakes.claim_categories or (
            high_stakes.claims_of_flags and _name(c.concept) in hs_flag_names
        )
        quotes = surviving.get(c.id, [])
        if hs:
            hs_total += 1
            if not quotes:
                removed_claims.append(c.id)
                continue
            if c.value is not None and not numbers_quoted(c.value, quotes):
                c = revise(c, value=None, unit=None)
                values_nulled.append(f"{c.id}.value")
        claims.append(c)

    flags = []
    for f in record.safety_flags:
        quotes = surviving.get(f.id, [])
        if f.kind in high_stakes.flag_kinds:
            hs_total += 1
            if not quotes:
                removed_flags.append(f.id)
                continue
            if f.detail is not None and not numbers_quoted(f.detail, quotes):
                f = revise(f, detail=None)
                values_nulled.append(f"{f.id}.detail")
        flags.append(f)

    live_ids = {"triage"} | {c.id for c in claims} | {f.id for f in flags}
    removed = set(removed_claims) | set(removed_flags)
    dangling = [k for k in record.field_evidence if k not in live_ids and k not in removed]
    evidence = {k: v for k, v in surviving.items() if k in live_ids and v}
    out = revise(record, claims=claims, safety_flags=flags, field_evidence=evidence)
    report = FilterReport(
        quotes_total=total,
        quotes_discarded=len(discarded),
        discarded=discarded,
        dangling_keys=dangling,
        high_stakes_total=hs_total,
        removed_claims=removed_claims,
        removed_flags=removed_flags,
        values_nulled=values_nulled,
    )
    return ClinicalRecord.model_validate(out.model_dump()), report
