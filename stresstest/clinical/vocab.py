"""One loader for the word lists and term vocabularies shipped under ``stresstest/clinical/data``.

Every module that needs a list of words (hesitation fillers, discourse fillers, number words, clinical
terms by category, category weights) gets it from here, so each list exists once, as a data file with its
provenance in the file header and in ``data/README.md``. Tables are read with
:func:`stresstest.clinical.text.read_table` and cached.

Word rarity (for "a rare content word lost") comes from the ``wordfreq`` package (Speer, 2022; word
frequencies from Wikipedia, subtitles, news, books, web text and more), which ships its data in the wheel
and needs no network.
"""

from __future__ import annotations

import functools

from stresstest.clinical.text import (
    Mention,
    Token,
    fillers,
    longest_matches,
    norm_phrase,
    prefix_set,
    read_table,
    tokenize,
)
from stresstest.textnorm import normalise

__all__ = [
    "TERM_CATEGORIES",
    "all_fillers",
    "answer_fillers",
    "category_weight",
    "clinical_terms",
    "discourse_fillers",
    "hesitations",
    "match_terms",
    "medwer_terms",
    "number_words",
    "qualifiers",
    "set_phrases",
    "term_vocabulary",
    "unit_words",
    "zipf",
]

#: Categories of ``clinical_terms.tsv``.
TERM_CATEGORIES: tuple[str, ...] = (
    "symptom",
    "finding",
    "history",
    "test",
    "procedure",
    "body_site",
    "habit",
    "contraception",
    "family",
    "family_member",
    "device",
    "medication",
)
#: Category of a term of the ``medwer`` list that the project's overlay does not type.
MEDWER_CATEGORY = "medical_term"
#: A one-word ``medwer`` entry this common in English (wordfreq Zipf) is an ordinary word in conversation
#: ("water", "wife", "fall", "caught", "stairs"), not a clinical term: left out.
MEDWER_COMMON_ZIPF = 4.0


def hesitations() -> frozenset[str]:
    """Hesitation sounds ("um", "uh", "erm", "hmm"...): never content, skipped inside terms and answers."""
    return fillers()["hesitation"]


def answer_fillers() -> frozenset[str]:
    """Hesitations and discourse fillers ("um", "well", "so", "okay"...): skipped when reading an answer."""
    return fillers()["hesitation"] | fillers()["discourse"]


def discourse_fillers() -> frozenset[str]:
    """Discourse fillers ("okay", "well", "so", "like", "actually"...), hesitations and backchannels excluded."""
    return fillers()["discourse"]


def all_fillers() -> frozenset[str]:
    """Every filler kind: hesitations, discourse fillers and backchannels ("yeah", "right", "just"...)."""
    return frozenset().union(*fillers().values())


@functools.lru_cache(maxsize=1)
def _numbers() -> dict[str, tuple[str, float]]:
    return {row[0].lower(): (row[2], float(row[1])) for row in read_table("number_words.tsv") if len(row) >= 3}


def number_words(kind: str | None = None) -> dict[str, float]:
    """Spelled-out numbers -> value; ``kind`` picks one class (small, tens, scale, multiplier, approx).

    Without ``kind``: every class but ``approx`` ("half", "single", "couple" only count in claim keys).
    """
    return {w: v for w, (k, v) in _numbers().items() if (k != "approx" if kind is None else k == kind)}


@functools.lru_cache(maxsize=1)
def clinical_terms() -> dict[tuple[str, ...], str]:
    """Normalised token tuple -> category of every term of ``clinical_terms.tsv`` (first line wins)."""
    out: dict[tuple[str, ...], str] = {}
    for row in read_table("clinical_terms.tsv"):
        if len(row) < 2 or row[1] not in TERM_CATEGORIES:
            continue
        key = tuple(norm_phrase(row[0]).split())
        if key:
            out.setdefault(key, row[1])
    return out


@functools.lru_cache(maxsize=1)
def medwer_terms() -> dict[tuple[str, ...], str]:
    """The ``medwer`` package's fixed medical term list (ICD-10-CM + Health Canada drug products, 19,373
    entries, read through its own loader), as token tuples -> :data:`MEDWER_CATEGORY`.

    Entries with digits or symbols (product strengths such as "0.9% sodium chloride injection"), one-word
    entries of Zipf >= :data:`MEDWER_COMMON_ZIPF` and units ("gram") are left out.
    """
    import medwer  # the dependency that owns the list; imported on first use

    entries, _ = medwer.load_terms(medwer.default_terms_path())
    out: dict[tuple[str, ...], str] = {}
    for entry in sorted(entries):
        key = tuple(norm_phrase(entry).split())
        if not key or not all(w.replace("'", "").isalpha() for w in key):
            continue
        if len(key) == 1 and (zipf(key[0]) >= MEDWER_COMMON_ZIPF or key[0] in unit_words()):
            continue  # an ordinary word, or a unit ("gram": number_unit_conflict's business)
        out[key] = MEDWER_CATEGORY
    return out


@functools.lru_cache(maxsize=1)
def term_vocabulary() -> dict[tuple[str, ...], str]:
    """Every clinical term the trigger detector and the clinical-term WER match: the ``medwer`` list, with the
    project's own overlay (``clinical_terms.tsv``: colloquial symptoms, body sites, habits...) typing the
    terms it lists and adding the ones medwer lacks."""
    return {**medwer_terms(), **clinical_terms()}


@functools.lru_cache(maxsize=1)
def _term_prefixes() -> frozenset[tuple[str, ...]]:
    return prefix_set(term_vocabulary())


def match_terms(text: str, tokens: list[Token] | None = None) -> list[Mention]:
    """Longest-match lookup of :func:`term_vocabulary` in ``text`` (concept = the normalised term); a
    multi-word term is one unit.

    A plural "-s" falls back to the singular when only that is listed ("lumps" -> "lump").
    """
    toks = tokenize(text) if tokens is None else tokens
    table = term_vocabulary()
    keys = []
    for t in toks:
        w = t.norm
        if (w,) not in table and len(w) > 3 and w.endswith("s") and (w[:-1],) in table:
            w = w[:-1]
        keys.append(w)
    out = []
    for i, j, category in longest_matches(text, toks, keys, table, _term_prefixes()):
        start, end = toks[i].start, toks[j - 1].end
        out.append(Mention(start, end, text[start:end], " ".join(keys[i:j]), category))
    return out


@functools.lru_cache(maxsize=1)
def set_phrases() -> frozenset[tuple[str, ...]]:
    """Phrases of ``set_phrases.tsv`` whose time words are no time anchor, as normalised word tuples."""
    # normalise: the alignment's own normalisation, so the tuples match it
    return frozenset(tuple(normalise(row[0]).split()) for row in read_table("set_phrases.tsv") if row and row[0])


@functools.lru_cache(maxsize=1)
def qualifiers() -> dict[str, tuple[str, str]]:
    """Qualifier word -> (scale, value) of ``qualifiers.tsv`` ("worse" -> ("course", "worse"))."""
    return {row[0]: (row[1], row[2]) for row in read_table("qualifiers.tsv") if len(row) >= 3}


@functools.lru_cache(maxsize=1)
def unit_words() -> frozenset[str]:
    """Every unit spelling of ``units.tsv`` ("mg", "milligrams", "ml", "hours"...), normalised."""
    return frozenset(norm_phrase(row[0]) for row in read_table("units.tsv") if row and row[0])


@functools.lru_cache(maxsize=1)
def _weights() -> dict[str, float]:
    return {row[0]: float(row[1]) for row in read_table("category_weights.tsv") if len(row) >= 2}


def category_weight(key: str) -> float:
    """Weight of a category or trigger kind from ``category_weights.tsv`` (KeyError names the key)."""
    try:
        return _weights()[key]
    except KeyError:
        raise KeyError(f"category_weights.tsv has no weight for {key!r}") from None


@functools.lru_cache(maxsize=65536)
def zipf(word: str) -> float:
    """Zipf frequency of an English word (wordfreq; 0 for unknown words, ~7 for "the")."""
    from wordfreq import zipf_frequency  # imported on first use: loading its tables takes a moment

    return float(zipf_frequency(word, "en"))
