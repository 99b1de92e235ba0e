"""Word-level aligned diff of a reference and a hypothesis, quotable in the original text.

Alignment runs on the project's one normalisation (:func:`stresstest.metrics.wer.normalise`),
so it sees exactly the tokens WER counts. Reports, however, must quote what was
really said, so every normalised token keeps the character span of the original
words it came from.

How the offset map is built: the whole text is normalised once (these are the
tokens, identical to the ones WER uses); each whitespace-separated original word
is also normalised on its own (cached, so cheap). The two token sequences agree
almost everywhere; where they do not (the normaliser merges words, e.g.
``twenty five`` -> ``25``, or drops a bracketed run spanning several words), the
two sequences are aligned with rapidfuzz's Levenshtein opcodes and each token of
a disagreeing block is mapped to the union of the original words in that block.
So a span is never wrong, at worst a little wider than the single word.

The reference/hypothesis alignment itself is rapidfuzz's Levenshtein opcodes over
the token lists, the same call jiwer makes, so the counts equal jiwer's.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Literal

from rapidfuzz.distance import Levenshtein

from stresstest.errors import MetricError
from stresstest.textnorm import normalise, normaliser, spelling_map

__all__ = ["AlignOp", "AlignedPair", "OpKind", "Token", "TokenizedText", "align", "tokenize"]

OpKind = Literal["equal", "sub", "del", "ins"]

_WORD = re.compile(r"\S+")
# Punctuation trimmed off the edges of a word's span so quotes read "fever", not "fever,".
_LEAD = "\"'([{<“‘«"
_TRAIL = "\"'.,;:!?)]}>”’»…"
_RAPIDFUZZ_TAG: dict[str, OpKind] = {"equal": "equal", "replace": "sub", "delete": "del", "insert": "ins"}


@dataclass(frozen=True, slots=True)
class Token:
    """One normalised token and where it came from.

    Attributes:
        text: the normalised token (as counted by WER).
        start: start character offset in the ORIGINAL text.
        end: end character offset (exclusive) in the ORIGINAL text.
    """

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class TokenizedText:
    """A text as its normalised tokens, each mapped back to original offsets.

    Attributes:
        original: the text as given.
        tokens: normalised tokens in order; ``[t.text for t in tokens]`` equals
            ``normalise(original).split()``.
    """

    original: str
    tokens: tuple[Token, ...]

    @cached_property
    def words(self) -> list[str]:
        """The normalised token strings (computed once; do not mutate)."""
        return [t.text for t in self.tokens]

    def __len__(self) -> int:
        return len(self.tokens)

    def char_span(self, i: int, j: int) -> tuple[int, int]:
        """Original character span covering tokens ``[i, j)``.

        An empty token range gives a zero-width span at the insertion point
        (just after token ``i-1``, or at the start of token ``i`` when i = 0).

        Raises:
            MetricError: when the range is outside ``[0, len(tokens)]``.
        """
        n = len(self.tokens)
        if not (0 <= i <= j <= n):
            raise MetricError(f"token range [{i}, {j}) is outside 0..{n} of this text")
        if i < j:
            if self._monotonic:  # the usual case: O(1), so a span per event stays linear in the text length
                return self._starts[i], self._ends[j - 1]
            return min(t.start for t in self.tokens[i:j]), max(t.end for t in self.tokens[i:j])
        if i > 0:
            pos = self.tokens[i - 1].end
        elif n:
            pos = self.tokens[0].start
        else:
            pos = 0
        return pos, pos

    def quote(self, i: int, j: int, context: int = 0) -> str:
        """Slice of the ORIGINAL text covering tokens ``[i, j)`` plus ``context`` tokens each side.

        The result is always an exact substring of :attr:`original`.
        """
        n = len(self.tokens)
        if not (0 <= i <= j <= n):
            raise MetricError(f"token range [{i}, {j}) is outside 0..{n} of this text")
        lo, hi = max(0, i - context), min(n, j + context)
        start, end = self.char_span(lo, hi)
        return self.original[start:end]

    def tokens_in(self, start: int, end: int) -> tuple[int, int]:
        """Token range ``[i, j)`` of the tokens overlapping original characters ``[start, end)``.

        Useful to place a mention found in the original text (e.g. by the
        clinical lexicon) on the token sequence. Empty (i == j) when none overlap.
        """
        ends = self._ends
        starts = self._starts
        i = bisect_right(ends, start)
        j = bisect_left(starts, end)
        return i, max(i, j)

    @cached_property
    def _starts(self) -> list[int]:
        # Token starts are non-decreasing by construction (mapped in text order).
        return [t.start for t in self.tokens]

    @cached_property
    def _ends(self) -> list[int]:
        return [t.end for t in self.tokens]

    @cached_property
    def _monotonic(self) -> bool:
        # Tokens are mapped in text order, so starts and ends never decrease; checked once, not assumed.
        st, en = self._starts, self._ends
        return all(a <= b for a, b in zip(st, st[1:], strict=False)) and all(
            a <= b for a, b in zip(en, en[1:], strict=False)
        )


# Hesitations the normaliser deletes (it removes them as whole words).
_HESITATIONS = frozenset({"hmm", "mm", "mhm", "mmm", "uh", "um"})


@lru_cache(maxsize=1 << 16)
def _norm_word(word: str) -> tuple[str, ...]:
    """Per-word normalisation, used only as an anchor for offsets.

    Plain words (letters only, edge punctuation aside) take a fast path: lower
    case and the normaliser's own British->American map. It need not equal the
    full normaliser: any disagreement is resolved by aligning with the
    whole-text normalisation (see :func:`tokenize`), so spans stay correct.
    """
    core = word.lower().strip(_LEAD + _TRAIL)
    if core.isascii() and core.isalpha() and not any(c in word for c in "[]<>()"):
        return () if core in _HESITATIONS else (spelling_map().get(core, core),)
    return tuple(normaliser()(word).split())


def _trim(word: str, start: int) -> tuple[int, int]:
    lo, hi = 0, len(word)
    while lo < hi - 1 and word[lo] in _LEAD:
        lo += 1
    while hi > lo + 1 and word[hi - 1] in _TRAIL:
        hi -= 1
    return start + lo, start + hi


@lru_cache(maxsize=32)
def tokenize(text: str) -> TokenizedText:
    """Normalise ``text`` and map each normalised token back to original offsets.

    Cached (the last 32 texts; the result is immutable): a reference is aligned
    with the hypothesis of every condition in turn.

    Args:
        text: the original text.

    Returns:
        The tokens (equal to ``normalise(text).split()``) with their spans.
    """
    global_tokens = normalise(text).split()
    if not global_tokens:
        return TokenizedText(text, ())
    spans: list[tuple[int, int]] = []
    piece_tokens: list[str] = []
    piece_word: list[int] = []
    for m in _WORD.finditer(text):
        toks = _norm_word(m.group())
        if toks:
            spans.append(_trim(m.group(), m.start()))
            for t in toks:
                piece_tokens.append(t)
                piece_word.append(len(spans) - 1)
    if not spans:
        # The normaliser found words the per-word pass could not (should not
        # happen); fall back to the whole text so quotes stay real substrings.
        whole = (0, len(text))
        return TokenizedText(text, tuple(Token(t, *whole) for t in global_tokens))

    if piece_tokens == global_tokens:
        return TokenizedText(text, tuple(Token(t, *spans[w]) for t, w in zip(global_tokens, piece_word, strict=True)))

    out: list[Token] = []
    blocks = _merge_non_equal(_opcodes(global_tokens, piece_tokens))
    for tag, g0, g1, p0, p1 in blocks:
        if tag == "equal" or (g1 - g0) == (p1 - p0):
            for k in range(g1 - g0):
                out.append(Token(global_tokens[g0 + k], *spans[piece_word[p0 + k]]))
            continue
        if p1 > p0:
            words = piece_word[p0:p1]
            span = (spans[words[0]][0], spans[words[-1]][1])
        else:
            # Tokens the per-word pass did not produce: attach them to the
            # word before (or after, at the very start).
            w = piece_word[p0 - 1] if p0 > 0 else piece_word[min(p0, len(piece_word) - 1)]
            span = spans[w]
        for k in range(g0, g1):
            out.append(Token(global_tokens[k], *span))
    return TokenizedText(text, tuple(out))


# Above this many tokens (both sides together) rapidfuzz gets a distance hint (see _opcodes).
_LONG = 20000


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """Levenshtein opcodes ``(tag, a0, a1, b0, b1)`` of two token lists: rapidfuzz's exact alignment.

    For long inputs (a 200k-word transcript pair) rapidfuzz is given a ``score_hint`` (an eighth of the
    longer side), which makes it start from a banded search that widens as needed: the same optimal
    alignment (the counts jiwer computes), in time that grows with length x distance instead of length
    squared for transcripts of one conversation.
    """
    hint = max(len(a), len(b)) // 8 if len(a) + len(b) > _LONG else None
    return [
        (o.tag, o.src_start, o.src_end, o.dest_start, o.dest_end) for o in Levenshtein.opcodes(a, b, score_hint=hint)
    ]


def _merge_non_equal(
    ops: list[tuple[str, int, int, int, int]],
) -> list[tuple[str, int, int, int, int]]:
    """Merge runs of adjacent non-equal opcodes into one ``diff`` block."""
    merged: list[tuple[str, int, int, int, int]] = []
    for op in ops:
        if op[1] == op[2] and op[3] == op[4]:
            continue
        if merged and op[0] != "equal" and merged[-1][0] != "equal":
            prev = merged[-1]
            merged[-1] = ("diff", prev[1], op[2], prev[3], op[4])
        else:
            merged.append(op if op[0] == "equal" else ("diff", *op[1:]))
    return merged


@dataclass(frozen=True)
class AlignOp:
    """One aligned block.

    Attributes:
        op: ``equal``, ``sub`` (same number of tokens on both sides), ``del``
            (reference tokens missing from the hypothesis) or ``ins``
            (hypothesis tokens absent from the reference).
        ref_start, ref_end: reference token range ``[ref_start, ref_end)``.
        hyp_start, hyp_end: hypothesis token range.
    """

    op: OpKind
    ref_start: int
    ref_end: int
    hyp_start: int
    hyp_end: int


@dataclass(frozen=True)
class AlignedPair:
    """Reference and hypothesis tokens with their word-level alignment.

    Attributes:
        ref: the tokenised reference.
        hyp: the tokenised hypothesis.
        ops: alignment blocks in order; they tile both token sequences.
    """

    ref: TokenizedText
    hyp: TokenizedText
    ops: tuple[AlignOp, ...]

    def ref_quote(self, i: int, j: int, context: int = 2) -> str:
        """Original reference text of tokens ``[i, j)`` with ``context`` tokens each side."""
        return self.ref.quote(i, j, context)

    def hyp_quote(self, i: int, j: int, context: int = 2) -> str:
        """Original hypothesis text of tokens ``[i, j)`` with ``context`` tokens each side."""
        return self.hyp.quote(i, j, context)

    def _count(self, kind: OpKind) -> int:
        if kind == "ins":
            return sum(o.hyp_end - o.hyp_start for o in self.ops if o.op == kind)
        return sum(o.ref_end - o.ref_start for o in self.ops if o.op == kind)

    @property
    def hits(self) -> int:
        """Reference tokens matched exactly."""
        return self._count("equal")

    @property
    def substitutions(self) -> int:
        """Substituted reference tokens (S)."""
        return self._count("sub")

    @property
    def deletions(self) -> int:
        """Deleted reference tokens (D)."""
        return self._count("del")

    @property
    def insertions(self) -> int:
        """Inserted hypothesis tokens (I)."""
        return self._count("ins")

    def hyp_index_for_ref(self, i: int) -> int:
        """Hypothesis token position aligned with reference position ``i``.

        For a reference token inside an equal or substituted block this is its
        counterpart; inside a deletion it is the insertion point. ``i`` may be
        ``len(ref)`` (end of text).
        """
        return self._ref_to_hyp[i]

    def ref_index_for_hyp(self, j: int) -> int:
        """Reference token position aligned with hypothesis position ``j`` (mirror of the above)."""
        return self._hyp_to_ref[j]

    def hyp_range_for_ref(self, i: int, j: int) -> tuple[int, int]:
        """Hypothesis tokens aligned with reference tokens ``[i, j)``.

        From the counterpart of token ``i`` to just after the counterpart of
        token ``j-1``; empty (an insertion point) when they are all deleted.
        Words inserted right after the range are not included.
        """
        return self._project(self._ref_to_hyp, self._ref_aligned, i, j)

    def ref_range_for_hyp(self, i: int, j: int) -> tuple[int, int]:
        """Reference tokens aligned with hypothesis tokens ``[i, j)`` (mirror of the above)."""
        return self._project(self._hyp_to_ref, self._hyp_aligned, i, j)

    @staticmethod
    def _project(mapping: list[int], aligned: list[bool], i: int, j: int) -> tuple[int, int]:
        a = mapping[i]
        if j <= i:
            return a, a
        b = mapping[j - 1] + (1 if aligned[j - 1] else 0)
        return a, max(a, b)

    @cached_property
    def _ref_aligned(self) -> list[bool]:
        out = [False] * len(self.ref)
        for o in self.ops:
            if o.op in ("equal", "sub"):
                out[o.ref_start : o.ref_end] = [True] * (o.ref_end - o.ref_start)
        return out

    @cached_property
    def _hyp_aligned(self) -> list[bool]:
        out = [False] * len(self.hyp)
        for o in self.ops:
            if o.op in ("equal", "sub"):
                out[o.hyp_start : o.hyp_end] = [True] * (o.hyp_end - o.hyp_start)
        return out

    @cached_property
    def _ref_to_hyp(self) -> list[int]:
        out: list[int] = []
        for o in self.ops:
            for k in range(o.ref_end - o.ref_start):
                out.append(o.hyp_start + k if o.op in ("equal", "sub") else o.hyp_start)
        out.append(len(self.hyp))
        return out

    @cached_property
    def _hyp_to_ref(self) -> list[int]:
        out: list[int] = []
        for o in self.ops:
            for k in range(o.hyp_end - o.hyp_start):
                out.append(o.ref_start + k if o.op in ("equal", "sub") else o.ref_start)
        out.append(len(self.ref))
        return out


def align(reference: str, hypothesis: str) -> AlignedPair:
    """Align two texts word by word on the documented normalisation.

    Args:
        reference: the reference (human) transcript, original text.
        hypothesis: the hypothesis (ASR) transcript, original text.

    Returns:
        The aligned pair; its S/D/I counts equal :func:`stresstest.metrics.wer.asr_errors`.
    """
    ref = tokenize(reference)
    hyp = tokenize(hypothesis)
    return align_tokens(ref, hyp)


def align_tokens(ref: TokenizedText, hyp: TokenizedText) -> AlignedPair:
    """Align two already tokenised texts (lets callers reuse a tokenisation)."""
    ops: list[AlignOp] = []
    for tag, a0, a1, b0, b1 in _opcodes(ref.words, hyp.words):
        if a0 == a1 and b0 == b1:
            continue
        ops.append(AlignOp(_RAPIDFUZZ_TAG[tag], a0, a1, b0, b1))
    return AlignedPair(ref, hyp, tuple(ops))
