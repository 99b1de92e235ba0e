"""Shared clinical NLP core: lexicon, negation, numbers/units and drugs.

Used by the deterministic ``rules`` structurer, the cause-side trigger
detector / NegErr, and gold claim matching. Everything is deterministic and
driven by data files shipped under ``stresstest/clinical/data``.
"""

from stresstest.clinical.drugs import find_drugs, high_risk_class, resolve_drug
from stresstest.clinical.lexicon import (
    ConceptInfo,
    Mention,
    canonical_concept,
    concept_info,
    find_mentions,
    lexicon_concepts,
)
from stresstest.clinical.negation import Assertion, ContextAnalyzer, mention_assertion, mention_status
from stresstest.clinical.numbers import Quantity, find_quantities, normalise_numbers
from stresstest.clinical.text import Token, tokenize

__all__ = [
    "Assertion",
    "ConceptInfo",
    "ContextAnalyzer",
    "Mention",
    "Quantity",
    "Token",
    "canonical_concept",
    "concept_info",
    "find_drugs",
    "find_mentions",
    "find_quantities",
    "high_risk_class",
    "lexicon_concepts",
    "mention_assertion",
    "mention_status",
    "normalise_numbers",
    "resolve_drug",
    "tokenize",
]
