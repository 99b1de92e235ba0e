"""Drug finding, trade -> generic resolution and high-risk classes."""

from __future__ import annotations

import pytest

from stresstest.clinical import find_drugs, high_risk_class, resolve_drug


@pytest.mark.parametrize(
    ("name", "generic"),
    [
        ("Eliquis", "apixaban"),
        ("apixaban", "apixaban"),
        ("Xarelto", "rivaroxaban"),
        ("Coumadin", "warfarin"),
        # Canonical for paracetamol is the US adopted name, as the drug dictionary uses it.
        ("Tylenol", "acetaminophen"),
        ("paracetamol", "acetaminophen"),
        ("Advil", "ibuprofen"),
        ("Ventolin", "albuterol"),
        ("salbutamol", "albuterol"),
        ("Lipitor", "atorvastatin"),
        ("blood thinners", "anticoagulant"),
        ("ASA", "aspirin"),
        ("Lantus", "insulin glargine"),
    ],
)
def test_resolve_drug(name: str, generic: str) -> None:
    assert resolve_drug(name) == generic


@pytest.mark.parametrize("word", ["he", "more", "alcohol", "water", "caps", "marijuana", "cocaine", "unknownium"])
def test_not_medications(word: str) -> None:
    assert resolve_drug(word) is None
    assert find_drugs(f"and {word} too") == []


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("warfarin", "anticoagulant"),
        ("Eliquis", "anticoagulant"),
        ("insulin", "insulin"),
        ("Lantus", "insulin"),
        ("morphine", "opioid"),
        ("Percocet", "opioid"),
        ("clopidogrel", "antiplatelet"),
        ("metformin", None),
        ("acetaminophen", None),
    ],
)
def test_high_risk_class(name: str, cls: str | None) -> None:
    assert high_risk_class(name) == cls


def test_find_drugs_offsets_and_punctuation() -> None:
    text = "I take Eliquis, Tylenol; and paracetamol. Sodium, oxalate."
    ms = find_drugs(text)
    assert [(m.surface, m.concept, m.category) for m in ms] == [
        ("Eliquis", "apixaban", "medication"),
        ("Tylenol", "acetaminophen", "medication"),
        ("paracetamol", "acetaminophen", "medication"),
    ]
    for m in ms:
        assert text[m.start : m.end] == m.surface


def test_multiword_brand() -> None:
    (m,) = find_drugs("she uses her blue inhaler")
    assert m.concept == "albuterol" and m.surface == "blue inhaler"
