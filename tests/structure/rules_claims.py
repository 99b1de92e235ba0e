"""The ``rules`` record of a short dialogue snippet, by concept, for the reading tests in this folder."""

from __future__ import annotations

from stresstest.schema import Claim
from stresstest.structure.rules import extract_record


def grounded_claims(text: str) -> dict[str, Claim]:
    """Claims of ``extract_record(text)`` by concept, after checking the evidence contract every reading must
    keep: each claim has evidence, and each quote is an exact substring of ``text``."""
    rec = extract_record(text)
    for c in rec.claims:
        assert rec.field_evidence.get(c.id), c
        assert all(q in text for q in rec.field_evidence[c.id])
    return {c.concept: c for c in rec.claims}
