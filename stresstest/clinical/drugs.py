"""Drug mentions, trade -> generic resolution and high-risk drug classes.

Drug names come from the ``drug-named-entity-recognition`` package, which ships
its dictionary (DrugBank/MeSH/NHS synonyms, brand names) inside the wheel and
needs no network. We read that dictionary once and match it ourselves on the
shared token stream (:mod:`stresstest.clinical.text`) because we need
character offsets, punctuation-robust matching ("Tylenol," is a drug) and a
longest-match policy consistent with the lexicon.

Canonical names are the package's generic names in lower case (US adopted
names: Tylenol and paracetamol both resolve to **acetaminophen**, Ventolin and
salbutamol to **albuterol**). ``data/drug_overrides.tsv`` adds consultation
vocabulary (puffer, blood thinner, GTN...) and removes entries that are not
medications in speech ("caps", recreational drugs, which the lexicon treats as
social history). ``data/drug_classes.tsv`` maps generics to the high-risk
classes that raise a safety-critical flag.
"""

from __future__ import annotations

import bz2
import functools
import importlib.util
import pickle
from pathlib import Path

from stresstest.clinical.text import (
    Mention,
    Token,
    longest_matches,
    norm_phrase,
    norm_word,
    norm_words,
    prefix_set,
    read_table,
    tokenize,
)

_MAX_SPAN = 4


def _package_dir() -> Path:
    spec = importlib.util.find_spec("drug_named_entity_recognition")
    if spec is None or spec.origin is None:
        raise ImportError(
            "drug-named-entity-recognition is not installed; expected it as a dependency "
            "(pip install drug-named-entity-recognition)"
        )
    return Path(spec.origin).parent


def _package_variants() -> dict[str, list[str]]:
    """The package's variant -> canonical table, read straight from its shipped dictionary.

    Importing the package also builds a fuzzy-matching n-gram index over all 107k variants
    (several seconds) that we never use, so we unpickle its data file ourselves. The file
    is part of the installed wheel (trusted, offline).
    """
    with bz2.open(_package_dir() / "drug_ner_dictionary.pkl.bz2", "rb") as fh:
        data = pickle.load(fh)  # noqa: S301 - the installed package's own data file
    return dict(data["drug_variant_to_canonical"])


@functools.lru_cache(maxsize=1)
def _index() -> tuple[dict[tuple[str, ...], str], frozenset[tuple[str, ...]]]:
    """Token-tuple surface -> canonical generic (empty string = suppressed)."""
    variants = _package_variants()

    index: dict[tuple[str, ...], str] = {}
    for variant, canonicals in sorted(variants.items()):
        if not canonicals:
            continue
        if variant.count(" ") >= _MAX_SPAN:
            continue
        low = variant.lower()
        key = (norm_word(low),) if low.isalpha() and low.isascii() else tuple(norm_words(variant))
        if not 0 < len(key) <= _MAX_SPAN or key in index:
            continue
        # The dictionary holds lab codes and abbreviations ("he", "at10", "il-2") that collide with
        # ordinary speech: short single words and number-led variants are dropped
        # (data/drug_overrides.tsv re-adds the few real short names: asa, hctz, gtn...). Of the
        # package's own English stopword list only "colgate" (longer than 4) is a variant; it is
        # suppressed in the overrides table.
        if key[0][0].isdigit() or (len(key) == 1 and len(key[0]) <= 4):
            continue
        index[key] = str(canonicals[0]).lower()
    for row in read_table("drug_overrides.tsv"):
        if len(row) < 2:
            continue
        key = tuple(norm_phrase(row[0]).split())
        index[key] = "" if row[1] == "-" else row[1].lower()
    return index, prefix_set(index)


@functools.lru_cache(maxsize=1)
def _classes() -> dict[str, str]:
    return {row[0].lower(): row[1] for row in read_table("drug_classes.tsv") if len(row) >= 2}


def match_drug_tokens(text: str, tokens: list[Token]) -> list[Mention]:
    """Longest-match drug lookup over an already tokenised text (see :func:`find_drugs`).

    Args:
        text: The text the tokens were made from.
        tokens: ``tokenize(text)``.

    Returns:
        Medication mentions in text order, offsets into ``text``.
    """
    index, prefixes = _index()
    out: list[Mention] = []
    for i, j, generic in longest_matches(text, tokens, [t.norm for t in tokens], index, prefixes):
        if not generic:
            continue  # suppressed entry ("caps", recreational drugs...)
        start, end = tokens[i].start, tokens[j - 1].end
        cls = _classes().get(generic)
        out.append(
            Mention(start, end, text[start:end], generic, "medication", False, None if cls is None else "high_risk")
        )
    return out


def find_drugs(text: str) -> list[Mention]:
    """Find medication mentions in ``text``.

    Args:
        text: Any text.

    Returns:
        Mentions with category ``"medication"`` and ``concept`` = canonical
        generic name (lower case); ``triage_hint`` is ``"high_risk"`` when the
        generic belongs to a high-risk class (see :func:`high_risk_class`).
    """
    return match_drug_tokens(text, tokenize(text))


def resolve_drug(name: str) -> str | None:
    """Canonical generic name of a drug (trade or generic), or None if unknown.

    Args:
        name: "Eliquis", "apixaban", "Tylenol", "paracetamol"...

    Returns:
        Lower-case generic, e.g. "apixaban", "acetaminophen"; None when the
        name is not a known medication.
    """
    key = tuple(norm_phrase(name).split())
    index = _index()[0]
    generic = index.get(key)
    if generic is None and key and key[-1].endswith("s"):
        generic = index.get((*key[:-1], key[-1][:-1]))
    return generic or None


def high_risk_class(generic: str) -> str | None:
    """High-risk class of a generic drug (anticoagulant, insulin, opioid...), or None.

    Args:
        generic: A canonical generic as returned by :func:`resolve_drug`; trade
            names are resolved first.

    Returns:
        The class name from ``data/drug_classes.tsv`` or None.
    """
    key = generic.lower().strip()
    cls = _classes().get(key)
    if cls is None:
        resolved = resolve_drug(generic)
        if resolved is not None:
            cls = _classes().get(resolved)
        if cls is None and resolved and resolved.startswith("insulin"):
            cls = "insulin"
    return cls
