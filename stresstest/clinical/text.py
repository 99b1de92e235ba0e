"""Tokenisation with character offsets, shared by every clinical matcher.

All matchers in :mod:`stresstest.clinical` work on the same token stream so
their offsets agree: a token is a run of letters/digits with optional inner
apostrophes ("don't", "crohn's"); hyphens, punctuation and whitespace separate
tokens. Each token keeps its span in the *original* text, so every match can
be quoted back verbatim, and carries a normalised form (lower case, curly
apostrophes straightened, British spellings folded to American) used only for
lookups.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

_TOKEN = re.compile(r"[A-Za-z0-9\u00C0-\u024F]+(?:['\u2019][A-Za-z]+)*")


@dataclass(frozen=True, slots=True)
class Token:
    """One word token: its span in the original text and its lookup form."""

    start: int
    end: int
    text: str
    norm: str


def read_table(name: str) -> list[list[str]]:
    """Rows of a shipped tab-separated data file, comments and blank lines skipped.

    Args:
        name: File name under ``stresstest/clinical/data``.

    Returns:
        One list of stripped cells per data row.
    """
    raw = resources.files("stresstest.clinical").joinpath("data").joinpath(name).read_text(encoding="utf-8")
    rows: list[list[str]] = []
    for line in raw.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        rows.append([cell.strip() for cell in line.split("\t")])
    return rows


@functools.lru_cache(maxsize=1)
def _spelling() -> dict[str, str]:
    return {row[0].lower(): row[1].lower() for row in read_table("spelling.tsv") if len(row) >= 2}


@functools.lru_cache(maxsize=1 << 16)
def norm_word(word: str) -> str:
    """Lookup form of one word: lower-cased, straight apostrophe, American spelling (cached: words repeat)."""
    w = word.lower().replace("\u2019", "'")
    return _spelling().get(w, w)


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into word tokens with their original character offsets.

    Args:
        text: Any text (transcript, ASR output, a single term).

    Returns:
        Tokens in text order; ``text[t.start:t.end] == t.text`` for each.
    """
    return [Token(m.start(), m.end(), m.group(0), norm_word(m.group(0))) for m in _TOKEN.finditer(text)]


def norm_phrase(text: str) -> str:
    """Normalised phrase: lookup forms of the tokens joined by single spaces."""
    return " ".join(norm_words(text))


def norm_words(text: str) -> list[str]:
    """Lookup forms of the tokens of ``text`` (no offsets; the fast path for building tables)."""
    return [norm_word(w) for w in _TOKEN.findall(text)]


@dataclass(frozen=True, slots=True)
class Mention:
    """A clinical term found in a text.

    Attributes:
        start: Character offset of the first character in the searched text.
        end: Offset one past the last character (``text[start:end] == surface``).
        surface: The text as written.
        concept: Canonical concept name (lexicon concept or generic drug name).
        category: symptom | finding | history | body_site | social | risk | medication.
        red_flag: True when the concept is a red-flag symptom if present.
        triage_hint: "urgent" / "emergency" for red flags, else None.
    """

    start: int
    end: int
    surface: str
    concept: str
    category: str
    red_flag: bool = False
    triage_hint: str | None = None


_JOIN_GAP = re.compile(r"[\s\-/]*")


@functools.lru_cache(maxsize=1)
def fillers() -> dict[str, frozenset[str]]:
    """``fillers.tsv`` by kind: ``hesitation`` ("um", "uh"...) and ``discourse`` ("okay", "well"...)."""
    out: dict[str, set[str]] = {"hesitation": set(), "discourse": set()}
    for row in read_table("fillers.tsv"):
        kind = row[1] if len(row) > 1 and row[1] else "hesitation"
        out.setdefault(kind, set()).add(row[0].lower())
    return {k: frozenset(v) for k, v in out.items()}


@functools.lru_cache(maxsize=1)
def _inner_fillers() -> frozenset[str]:
    return fillers()["hesitation"]


def longest_matches(
    text: str,
    tokens: list[Token],
    keys: list[str],
    table: dict[tuple[str, ...], str],
    prefixes: frozenset[tuple[str, ...]],
) -> list[tuple[int, int, str]]:
    """Non-overlapping longest matches of ``table`` keys over ``keys`` (one per token), left to right.

    Args:
        text: The text the tokens index into (to refuse matches across punctuation).
        tokens: Its tokens.
        keys: Lookup form of each token.
        table: Token-tuple -> value.
        prefixes: Every proper and full prefix of every table key (lets the scan stop early).

    Returns:
        (first token, one past last token, value) triples in text order.
    """
    out: list[tuple[int, int, str]] = []
    n = len(tokens)
    i = 0
    while i < n:
        best: tuple[int, str] | None = None
        key: list[str] = []
        j = i
        while j < n:
            if j > i:
                if not _JOIN_GAP.fullmatch(text, tokens[j - 1].end, tokens[j].start):
                    break
                # Disfluencies inside a term ("short of uh breath", "blood in the the stool") are
                # stepped over so that speech and ASR output find the same term.
                if keys[j] in _inner_fillers() or keys[j] == keys[j - 1]:
                    j += 1
                    continue
            key.append(keys[j])
            tkey = tuple(key)
            if tkey not in prefixes:
                break
            value = table.get(tkey)
            if value is not None:
                best = (j + 1, value)
            j += 1
        if best is None:
            i += 1
            continue
        out.append((i, best[0], best[1]))
        i = best[0]
    return out


def prefix_set(keys: object) -> frozenset[tuple[str, ...]]:
    """All non-empty prefixes of the given token tuples."""
    out: set[tuple[str, ...]] = set()
    for key in keys:  # type: ignore[attr-defined]
        for n in range(1, len(key) + 1):
            out.add(tuple(key[:n]))
    return frozenset(out)
