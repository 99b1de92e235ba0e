"""Scoring rules of the note-quality judges (entailment, hallucination, pairwise agreement and summaries)."""

from __future__ import annotations

import pytest

from stresstest.errors import MetricError
from stresstest.grid import Condition
from stresstest.metrics.note_quality import (
    CORE_DIMENSIONS,
    PAIRWISE_DIMENSIONS,
    adjudicate,
    adjudicate_pair,
    entailment_score,
    inference_rate,
    lexical_rate,
    overall,
    pairwise_summary,
    preference_score,
    to_side,
)
from stresstest.metrics.summary import QUALITY_COLUMNS, aggregate_quality, summary_rows


def test_entailment_weights_and_not_applicable_excluded() -> None:
    labels = ["entailed", "partially_entailed", "not_entailed", "not_applicable"]
    assert entailment_score(labels) == pytest.approx(100 * 1.5 / 3)
    assert entailment_score(["entailed", "not_applicable"]) == 100.0
    assert entailment_score(["not_applicable", "not_applicable"]) == 100.0  # boilerplate only: not penalised
    assert entailment_score(["not_entailed"]) == 0.0
    assert entailment_score([]) is None
    with pytest.raises(MetricError, match="unknown label"):
        entailment_score(["entailed", "maybe"])


def test_hallucination_rates() -> None:
    assert lexical_rate(["supported", "unsupported", "unsupported", "supported"]) == 50.0
    assert lexical_rate([]) is None
    bases = ["direct", "paraphrase", "trade_generic", "abstraction", "inference", "fabricated", "contradicted"]
    assert inference_rate(bases) == pytest.approx(100 * 2 / 7)
    assert inference_rate(["trade_generic"]) == 0.0
    with pytest.raises(MetricError):
        inference_rate(["guess"])
    with pytest.raises(MetricError):
        lexical_rate(["yes"])


def test_order_mapping_and_agreement_rule() -> None:
    # pass 1: X is Note A; pass 2: Y is Note A
    assert to_side("A", False) == "x" and to_side("B", False) == "y"
    assert to_side("A", True) == "y" and to_side("B", True) == "x"
    assert to_side("tie", True) == "tie"
    with pytest.raises(MetricError):
        to_side("C", False)
    assert adjudicate("x", "x") == "x" and adjudicate("y", "y") == "y"
    assert adjudicate("x", "y") == "tie" and adjudicate("x", "tie") == "tie" and adjudicate("tie", "tie") == "tie"


def _verdict(value: str) -> dict[str, str]:
    return {d: value for d in PAIRWISE_DIMENSIONS}


def test_a_position_biased_judge_gives_only_ties() -> None:
    # Always "A": pass 1 names X, pass 2 names Y -> never both -> tie everywhere, 0 consistent.
    res = adjudicate_pair(_verdict("A"), _verdict("A"))
    assert set(res["outcomes"].values()) == {"tie"} and res["consistent"] == 0


def test_consistent_preference_counts_and_overall_majority() -> None:
    first = _verdict("B")  # Y as Note B preferred
    second = _verdict("A")  # Y as Note A preferred
    res = adjudicate_pair(first, second)
    assert res["outcomes"]["overall"] == "y" and res["consistent"] == len(PAIRWISE_DIMENSIONS)
    # Y wins exactly 5 of the 8 core dimensions: overall Y; 4: tie. 'cited' does not count.
    out = {d: ("y" if i < 5 else "x") for i, d in enumerate(CORE_DIMENSIONS)}
    assert overall(out) == "y"
    out = {d: ("y" if i < 4 else "tie") for i, d in enumerate(CORE_DIMENSIONS)}
    assert overall({**out, "cited": "y"}) == "tie"
    with pytest.raises(MetricError, match="missing"):
        overall({"accurate": "x"})


def test_preference_score() -> None:
    assert preference_score(["y", "x", "tie", "tie"]) == 50.0
    assert preference_score(["y", "y", "tie", "x"]) == pytest.approx(62.5)
    assert preference_score([]) is None


def test_pairwise_summary_counts_and_encounter_clusters() -> None:
    pairs = []
    for e in range(6):
        sides = ["y", "y", "tie"] if e < 3 else ["x", "tie", "tie"]
        for cond, s in zip(("a", "b", "c"), sides, strict=True):
            outcomes = {d: s for d in (*PAIRWISE_DIMENSIONS, "overall")}
            pairs.append({"encounter_id": f"e{e}", "condition": cond, "outcomes": outcomes})
    rows = {r.dimension: r.to_row() for r in pairwise_summary(pairs, n_resamples=300, seed=1)}
    acc = rows["accurate"]
    assert acc["n"] == 18
    assert acc["win"] == pytest.approx(100 * 6 / 18) and acc["loss"] == pytest.approx(100 * 3 / 18)
    assert acc["tie"] == pytest.approx(100 * 9 / 18)
    assert acc["ps"] == pytest.approx(100 * (6 + 4.5) / 18)
    assert acc["ps_lo"] <= acc["ps"] <= acc["ps_hi"] and acc["ps_hi"] - acc["ps_lo"] > 0
    assert list(rows) == [*PAIRWISE_DIMENSIONS, "overall"]
    assert pairwise_summary([])[0].to_row() == {"dimension": "accurate", "n": 0}


def test_quality_columns_are_means_of_item_scores_and_empty_when_not_computed() -> None:
    items = [
        {"encounter_id": "a", "condition": "c", "completeness": 50.0, "halluc_lexical": 20.0},
        {"encounter_id": "b", "condition": "c", "completeness": 100.0, "halluc_lexical": None},
    ]
    agg = aggregate_quality(items)
    assert agg["completeness"] == 75.0 and agg["halluc_lexical"] == 20.0 and agg["groundedness"] is None
    rows = summary_rows(
        items + [{"encounter_id": "c", "condition": "c", "failed": True, "completeness": 0.0}],
        [Condition(id="c", family="ambient", snr_db=5)],
    )
    assert rows[0].completeness == 75.0  # the failed item is left out
    assert set(QUALITY_COLUMNS) <= set(rows[0].cells())
