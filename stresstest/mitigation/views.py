"""Dual view of a transcript: raw (for evidence) and cleaned (for reasoning), docs/spec.md §7.

The raw view is the ASR text exactly as it came; every evidence quote is
checked against it. The cleaned view is only ever *read* by the Draft role, to
make disfluent speech easier to reason about; nothing is quoted from it.

Cleaning rule ``clean-v1`` (deterministic, applied to whitespace-separated tokens):

1. **Fillers** are dropped: ``um umm uh uhh er erm ah ahh hmm hm mm mmm``
   (case-insensitive, surrounding punctuation ignored). Sentence-final
   punctuation a dropped filler carried moves to the previous token. Not
   fillers, because they carry meaning: ``mhm``/``uh-huh`` (yes), ``uh-uh``
   (no), ``like``, ``you know``.
2. **Cut-off fragments** are dropped: a token ending in a hyphen (``th-``,
   ``I-``) and bare dashes (``-``, ``--``).
3. **Repeats**: an immediate repetition of the same 1–3 words (compared
   case-insensitively without punctuation) keeps only the second copy
   (``I, I was, I was going`` → ``I was going``). Exempt: sequences made only
   of numbers (``2 2`` may be a reading), and the grammatical doubles
   ``had had`` and ``that that``.
4. Whitespace is collapsed to single spaces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stresstest.clinical.vocab import hesitations, number_words

CLEAN_RULE_VERSION = "clean-v1"

# data/fillers.tsv, kind "hesitation"; clean-v1 never removed "uhm" (a new version would).
FILLERS: frozenset[str] = hesitations() - {"uhm"}
_GRAMMATICAL_DOUBLES: frozenset[str] = frozenset({"had", "that"})
_NUMBER_WORDS: frozenset[str] = frozenset(
    w for kind in ("small", "tens", "scale") for w in number_words(kind) if w != "fourty"
)
_STRIP = re.compile(r"^[^\w']+|[^\w']+$")
_FINAL_PUNCT = re.compile(r"[.?!]+$")


@dataclass(frozen=True)
class DualView:
    """Both views of one transcript."""

    raw: str
    clean: str


def _core(token: str) -> str:
    return _STRIP.sub("", token).lower()


def _is_number(core: str) -> bool:
    return core.isdigit() or core in _NUMBER_WORDS or bool(re.fullmatch(r"\d+([.,]\d+)?", core))


def clean_text(raw: str) -> str:
    """Apply cleaning rule ``clean-v1`` (see module docstring) to a transcript."""
    tokens: list[str] = []
    for tok in raw.split():
        core = _core(tok)
        if core in FILLERS:
            final = _FINAL_PUNCT.search(tok)
            if final and tokens and not _FINAL_PUNCT.search(tokens[-1]):
                tokens[-1] = tokens[-1].rstrip(",;:") + final.group(0)
            continue
        if re.fullmatch(r"-+", tok) or (tok.endswith("-") and core):
            continue
        tokens.append(tok)
    out: list[str] = []
    cores: list[str] = []
    for tok in tokens:
        out.append(tok)
        cores.append(_core(tok))
        # After each new token, drop an immediately preceding copy of the 1-3 words that just ended.
        changed = True
        while changed:
            changed = False
            for n in (3, 2, 1):
                if len(cores) < 2 * n:
                    continue
                first, second = cores[-2 * n : -n], cores[-n:]
                if first != second or not all(first):
                    continue
                if all(_is_number(c) for c in first):
                    continue
                if n == 1 and first[0] in _GRAMMATICAL_DOUBLES:
                    continue
                del out[-2 * n : -n]
                del cores[-2 * n : -n]
                changed = True
                break
    return " ".join(out)


def dual_view(raw: str) -> DualView:
    """The raw transcript (unchanged) and its cleaned view."""
    return DualView(raw=raw, clean=clean_text(raw))
