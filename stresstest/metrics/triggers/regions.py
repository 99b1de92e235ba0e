"""Regions of an alignment and what each side of it mentions: the shared ground of every detector.

A *region* is a run of adjacent non-equal alignment blocks (:class:`_Region`); :func:`_is_benign` sets aside
the regions that cannot carry any trigger but a negation flip. A :class:`_Side` holds one text's clinical
mentions, vocabulary terms and (found on first use) quantities, placed on the alignment tokens (:class:`_Ann`,
:class:`_Anns`). :func:`_event` builds a :class:`~stresstest.results.TriggerEvent` for a region, quoting the
original texts.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from stresstest.clinical.drugs import match_drug_tokens
from stresstest.clinical.lexicon import Mention, match_tokens
from stresstest.clinical.numbers import Quantity, find_quantities
from stresstest.clinical.text import Token as ClinicalToken
from stresstest.clinical.text import tokenize as clinical_tokenize
from stresstest.clinical.vocab import category_weight, match_terms
from stresstest.metrics.align import AlignedPair, TokenizedText
from stresstest.metrics.triggers.words import _CONTEXT, _FUNCTION, _TIME_WORDS, _strip_fillers
from stresstest.results import TriggerEvent, TriggerType


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


def _near_concepts(side: _Side, i: int, j: int, window: int) -> set[str]:
    return {a.item.concept for a in side.mentions.overlapping(i - window, j + window) if isinstance(a.item, Mention)}


def _named(concept: str, surface: str) -> str:
    return repr(concept) if surface.lower() == concept else f"{concept!r} ({surface!r})"
