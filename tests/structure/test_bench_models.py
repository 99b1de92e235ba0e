"""scripts/bench_models.py: evidence coverage and the table row (the LLM runs themselves are in BENCHMARKS.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from stresstest.schema import ClinicalRecord

REPO = Path(__file__).resolve().parents[2]


def _load(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


def test_evidence_coverage_counts_high_stakes_fields_whose_quote_survives_the_filter(
    record: ClinicalRecord, transcript: str
) -> None:
    sys.path.insert(0, str(REPO / "scripts"))  # bench_models imports bench_rules as the script run does
    try:
        bench = _load("bench_models")
    finally:
        sys.path.remove(str(REPO / "scripts"))
    rec = record
    # c2 (medication), f1 (allergy), f2 (high-risk medication) are high-stakes and quoted verbatim
    assert bench.coverage([(rec, transcript)]) == (3, 3)
    # a quote the transcript does not hold is discarded, and its flag loses its evidence
    bad = rec.model_copy(update={"field_evidence": {**rec.field_evidence, "f1": ["allergic to amoxicillin"]}})
    assert bench.coverage([(bad, transcript)]) == (2, 3)
    assert bench.coverage([(rec, transcript), (bad, transcript)]) == (5, 6)


def test_row_scores_against_a_reference(record: ClinicalRecord) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        bench = _load("bench_models")
    finally:
        sys.path.remove(str(REPO / "scripts"))
    rec = record
    score = bench.SplitScore()
    bench.score_against_gold(rec, rec, score, "X")
    line = bench.row("m", 2, 1, 1, score, (2, 3), 12.4)
    assert line == ("| m | 2 | 1/2 | 1/2 | 0.67 (2/3) | 1.00 (P 1.00 R 1.00) | 1/1 (under 0) | 1.00 (2/2) | 12 |")
