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
    raw = resources.files("stresstest.clinical").joinpath("data", name).read_text(encoding="utf-8")
    rows: list[list[str]] = []
    for line in raw.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        rows.append([cell.strip() for cell in line.split("\t")])
    return rows


def data_bytes(name: str) -> bytes:
    """Raw bytes of a shipped data file (for fingerprints)."""
    return resources.files("stresstest.clinical").joinpath("data", name).read_bytes()


@functools.lru_cache(maxsize=1)
def _spelling() -> dict[str, str]:
    return {row[0].lower(): row[1].lower() for row in read_table("spelling.tsv") if len(row) >= 2}


def norm_word(word: str) -> str:
    """Lookup form of one word: lower-cased, straight apostrophe, American spelling."""
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
    return " ".join(t.norm for t in tokenize(text))
