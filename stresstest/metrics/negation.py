"""NegErr (docs/spec.md §6): does any clinical entity change negation status in the hypothesis?

Per item, :func:`neg_err_flag` is 1 when :func:`negation_mismatches` finds at
least one mismatch; the per-condition rate (100/M · Σ flags) is computed by
:mod:`stresstest.metrics.summary` from the item field ``neg_err``.

Which entities: every clinical-lexicon mention whose category carries a
meaningful assertion (symptom, finding, history, social, risk), every drug
mention, and every mention of the encounter's gold concepts when given (gold
concepts outside the lexicon are matched as phrases). Body-site mentions are
left out: in "no pain in my arm" the negated entity is the pain; counting the
arm as well would only duplicate it.

Status comes from the shared ConText implementation
(:mod:`stresstest.clinical.negation`): present, absent, uncertain.

Exactly what counts as a mismatch — a reference mention of concept C is paired
with the hypothesis mention of C at the aligned position (word alignment of
:mod:`stresstest.metrics.align`, ±2 tokens), and the pair counts when

1. exactly one side is ``absent`` (present↔absent, absent↔uncertain; the
   latter covers a "no" answer to a symptom question lost or gained), and
2. the change is caused by words: the cue or answer that decided one side's
   status lies on words that differ between the texts (deleted, inserted or
   substituted: "don't" lost, "no" gained, "no" heard as "know"). So
   differences of punctuation, casing, fillers or contractions, which the
   alignment does not see, never count, even when they move a sentence
   boundary that the ConText scope depends on.

Not counted (by design): present↔uncertain (hedging is not negation); an
entity negated in the reference whose mention is missing from the hypothesis
(an omission, which the claim-level metrics measure); an
entity that appears only in the hypothesis (inserted content; see the
``nonspeech_pollution`` trigger).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from stresstest.clinical.drugs import find_drugs
from stresstest.clinical.lexicon import Mention, canonical_concept, find_mentions
from stresstest.clinical.negation import Assertion, ContextAnalyzer, Status
from stresstest.clinical.text import Token, norm_phrase
from stresstest.clinical.text import tokenize as clinical_tokenize
from stresstest.metrics.align import AlignedPair, TokenizedText, align

__all__ = [
    "NEGATION_CATEGORIES",
    "NegationMismatch",
    "entity_mentions",
    "mismatches_from_mentions",
    "neg_err_flag",
    "negation_mismatches",
]

#: Lexicon categories whose mentions carry a negation status that matters.
NEGATION_CATEGORIES: frozenset[str] = frozenset(
    {"symptom", "finding", "history", "social", "risk", "medication", "gold"}
)
# How far (in tokens) the aligned counterpart of a mention may sit from its projection.
_PAIR_SLACK = 2
# Token windows around a mention in which its deciding cue can sit: ConText looks 8 tokens back and
# 4 ahead; a yes/no answer follows the question, usually within a dozen words.
_CUE_BEFORE = 10
_CUE_AFTER = 16


class NegationMismatch(BaseModel):
    """One clinical entity whose negation status differs between the texts.

    Attributes:
        concept: canonical concept (lexicon concept, generic drug, or gold concept).
        ref_status: status in the reference.
        hyp_status: status in the hypothesis.
        ref_quote: original reference text from the mention to its deciding cue.
        hyp_quote: original hypothesis text, likewise.
        ref_start, ref_end: character offsets of ``ref_quote`` in the reference.
        hyp_start, hyp_end: character offsets of ``hyp_quote`` in the hypothesis.
        ref_cue: the reference cue/answer that decided its status (None if none).
        hyp_cue: the hypothesis cue/answer, likewise.
    """

    model_config = ConfigDict(frozen=True)

    concept: str
    ref_status: Status
    hyp_status: Status
    ref_quote: str
    hyp_quote: str
    ref_start: int
    ref_end: int
    hyp_start: int
    hyp_end: int
    ref_cue: str | None = None
    hyp_cue: str | None = None


@dataclass(frozen=True)
class _Entity:
    mention: Mention
    tok_start: int  # token range in the normalised (alignment) tokens
    tok_end: int


def _gold_keys(concepts: Iterable[str]) -> dict[tuple[str, ...], str]:
    """Phrase key (clinical token norms) -> canonical concept, for gold concepts."""
    keys: dict[tuple[str, ...], str] = {}
    for c in concepts:
        key = tuple(norm_phrase(c).split())
        if key:
            keys.setdefault(key, canonical_concept(c))
    return keys


def _gold_mentions(text: str, keys: dict[tuple[str, ...], str]) -> list[Mention]:
    if not keys:
        return []
    toks = clinical_tokenize(text)
    norms = [t.norm for t in toks]
    out: list[Mention] = []
    for key, concept in sorted(keys.items()):
        n = len(key)
        for i in range(len(norms) - n + 1):
            if tuple(norms[i : i + n]) == key:
                s, e = toks[i].start, toks[i + n - 1].end
                out.append(Mention(s, e, text[s:e], concept, "gold"))
    return out


def entity_mentions(text: str, gold: Sequence[str] = (), *, found: Sequence[Mention] | None = None) -> list[Mention]:
    """Clinically relevant entity mentions of ``text``, in text order, non-overlapping.

    Args:
        text: original text.
        gold: the encounter's gold concepts (any surface form); their mentions
            count even when their lexicon category would not.
        found: lexicon + drug mentions of ``text`` when the caller already has them.

    Returns:
        Lexicon mentions of :data:`NEGATION_CATEGORIES`, drug mentions and gold
        concept mentions (lexicon and drugs first; a gold phrase overlapping
        one of those is dropped).
    """
    gold_keys = _gold_keys(gold)
    gold_concepts = set(gold_keys.values())
    if found is None:
        found = [*find_mentions(text), *find_drugs(text)]
    kept = sorted(
        (m for m in found if m.category in NEGATION_CATEGORIES or m.concept in gold_concepts),
        key=lambda m: (m.start, -m.end),
    )
    out: list[Mention] = []  # non-overlapping, sorted by start (so also by end): bisect finds the neighbours
    starts: list[int] = []
    for m in [*kept, *_gold_mentions(text, gold_keys)]:
        k = bisect_right(starts, m.start)
        if (k > 0 and out[k - 1].end > m.start) or (k < len(out) and out[k].start < m.end):
            continue
        out.insert(k, m)
        starts.insert(k, m.start)
    out.sort(key=lambda m: (m.start, m.end))
    return out


def _entities(tt: TokenizedText, mentions: list[Mention]) -> list[_Entity]:
    out = []
    for m in mentions:
        i, j = tt.tokens_in(m.start, m.end)
        if i < j:  # a mention the normaliser dropped (e.g. inside brackets) cannot be aligned
            out.append(_Entity(m, i, j))
    return out


def _changed(n: int, spans: Iterable[tuple[int, int]]) -> list[bool]:
    flags = [False] * n
    for a, b in spans:
        for k in range(a, b):
            flags[k] = True
    return flags


def _cue_changed(tt: TokenizedText, changed: list[bool], a: Assertion) -> bool:
    if a.cue_start is None or a.cue_end is None:
        return False
    i, j = tt.tokens_in(a.cue_start, a.cue_end)
    return any(changed[i:j])


def _prefix(flags: list[bool]) -> list[int]:
    out = [0]
    for f in flags:
        out.append(out[-1] + f)
    return out


def _any_in(prefix: list[int], i: int, j: int) -> bool:
    n = len(prefix) - 1
    i, j = max(0, i), min(n, j)
    return j > i and prefix[j] > prefix[i]


def _token_range(tt: TokenizedText, start: int, end: int) -> tuple[int, int]:
    i, j = tt.tokens_in(start, end)
    return (i, j) if i < j else (i, i)


def _widen(tt: TokenizedText, i: int, j: int, start: int, end: int) -> tuple[int, int]:
    """Character span covering tokens [i, j) and the characters [start, end)."""
    if i < j:
        s, e = tt.char_span(i, j)
        return min(s, start), max(e, end)
    return start, end


def _quote(m: Mention, a: Assertion) -> tuple[int, int]:
    start, end = m.start, m.end
    if a.cue_start is not None and a.cue_end is not None:
        start, end = min(start, a.cue_start), max(end, a.cue_end)
    return start, end


def negation_mismatches(
    reference: str,
    hypothesis: str,
    concepts: Iterable[str] = (),
    *,
    pair: AlignedPair | None = None,
) -> list[NegationMismatch]:
    """Clinical entities whose negation status differs between reference and hypothesis.

    See the module docstring for exactly which cases count.

    Args:
        reference: reference transcript r_i (original text).
        hypothesis: hypothesis transcript a_i^(c) (original text).
        concepts: the encounter's gold concepts, if any (added to the lexicon).
        pair: ``align(reference, hypothesis)`` when the caller already has it.

    Returns:
        Mismatches in reference order (at most one per reference mention).
    """
    gold = list(concepts)
    if pair is None:
        pair = align(reference, hypothesis)
    if all(o.op == "equal" for o in pair.ops):
        return []
    return mismatches_from_mentions(pair, entity_mentions(reference, gold), entity_mentions(hypothesis, gold))


def mismatches_from_mentions(
    pair: AlignedPair,
    ref_mentions: Sequence[Mention],
    hyp_mentions: Sequence[Mention],
    *,
    tokens: tuple[list[Token], list[Token]] | None = None,
) -> list[NegationMismatch]:
    """:func:`negation_mismatches` on already found entity mentions (the trigger detector shares them).

    Args:
        pair: the aligned reference/hypothesis.
        ref_mentions: entity mentions of ``pair.ref.original`` (see :func:`entity_mentions`).
        hyp_mentions: entity mentions of ``pair.hyp.original``.
        tokens: the clinical tokenisation of both texts, when the caller has it.
    """
    reference, hypothesis = pair.ref.original, pair.hyp.original
    ref_changed = _changed(len(pair.ref), ((o.ref_start, o.ref_end) for o in pair.ops if o.op != "equal"))
    hyp_changed = _changed(len(pair.hyp), ((o.hyp_start, o.hyp_end) for o in pair.ops if o.op != "equal"))
    ref_ents = _entities(pair.ref, list(ref_mentions))
    hyp_ents = _entities(pair.hyp, list(hyp_mentions))
    by_concept: dict[str, list[_Entity]] = {}
    for e in hyp_ents:
        by_concept.setdefault(e.mention.concept, []).append(e)
    used: set[int] = set()
    ref_near = _prefix(ref_changed)
    hyp_near = _prefix(hyp_changed)
    ctx: dict[str, ContextAnalyzer] = {}
    out: list[NegationMismatch] = []
    for r in ref_ents:
        lo = pair.hyp_index_for_ref(r.tok_start) - _PAIR_SLACK
        hi = pair.hyp_index_for_ref(r.tok_end - 1) + 1 + _PAIR_SLACK
        # Cheap pre-filter: no changed word anywhere a cue or answer could sit -> no word-caused flip.
        if not (
            _any_in(ref_near, r.tok_start - _CUE_BEFORE, r.tok_end + _CUE_AFTER)
            or _any_in(hyp_near, lo - _CUE_BEFORE, hi + _CUE_AFTER)
        ):
            continue
        cands = [
            h
            for h in by_concept.get(r.mention.concept, ())
            if id(h) not in used and h.tok_start < hi and h.tok_end > lo
        ]
        if not cands:
            continue  # omitted or replaced in the hypothesis: not a negation mismatch
        centre = (lo + hi) / 2
        h = min(cands, key=lambda e: (abs((e.tok_start + e.tok_end) / 2 - centre), e.tok_start))
        used.add(id(h))
        if not ctx:
            rt, ht = tokens if tokens is not None else (None, None)
            ctx["ref"], ctx["hyp"] = ContextAnalyzer(reference, rt), ContextAnalyzer(hypothesis, ht)
        ra = ctx["ref"].assertion(r.mention)
        ha = ctx["hyp"].assertion(h.mention)
        if (ra.status == "absent") == (ha.status == "absent"):
            continue
        # Caused by words: the cue or answer that decided a side lies on changed words (lost,
        # gained or replaced). A flip with both cues on unchanged words comes from punctuation moving
        # a sentence boundary, which the normalised texts do not see.
        if not (_cue_changed(pair.ref, ref_changed, ra) or _cue_changed(pair.hyp, hyp_changed, ha)):
            continue
        # Quote one region on both sides: each side's cue..mention span plus the projection of the other's.
        r_i, r_j = _token_range(pair.ref, *_quote(r.mention, ra))
        h_i, h_j = _token_range(pair.hyp, *_quote(h.mention, ha))
        p_i, p_j = pair.ref_range_for_hyp(h_i, h_j)
        q_i, q_j = pair.hyp_range_for_ref(r_i, r_j)
        r_i, r_j = min(r_i, p_i), max(r_j, p_j)
        h_i, h_j = min(h_i, q_i), max(h_j, q_j)
        rs, re_ = _widen(pair.ref, r_i, r_j, *_quote(r.mention, ra))
        hs, he = _widen(pair.hyp, h_i, h_j, *_quote(h.mention, ha))
        out.append(
            NegationMismatch(
                concept=r.mention.concept,
                ref_status=ra.status,
                hyp_status=ha.status,
                ref_quote=reference[rs:re_],
                hyp_quote=hypothesis[hs:he],
                ref_start=rs,
                ref_end=re_,
                hyp_start=hs,
                hyp_end=he,
                ref_cue=ra.cue,
                hyp_cue=ha.cue,
            )
        )
    return out


def neg_err_flag(reference: str, hypothesis: str, concepts: Iterable[str] = ()) -> int:
    """docs/spec.md §6 indicator N(r_i, a_i^(c)): 1 if some clinical entity's negation status differs, else 0.

    Args:
        reference: reference transcript.
        hypothesis: hypothesis transcript.
        concepts: the encounter's gold concepts, if any.

    Returns:
        0 or 1 (the item field ``neg_err``).
    """
    return int(bool(negation_mismatches(reference, hypothesis, concepts)))
