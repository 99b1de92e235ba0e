"""The gold set shipped in stresstest/gold/data: loads, is honest, covers what the demo needs,
and every evidence quote is in the real transcript (when ../shared/corpora is present)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stresstest.gold.model import GoldRecord, default_gold_dir, gold_files, load_gold
from stresstest.gold.workflow import check_gold, gold_transcript_text

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
SPECIALTIES = ("RES", "CAR", "GAS", "MSK", "DER")
DEMO_SCOPE = 16


@pytest.fixture(scope="module")
def gold() -> dict[str, GoldRecord]:
    return load_gold(default_gold_dir())


def _corpus_dir(kind: str) -> Path:
    path = CORPORA / kind
    if not path.is_dir():
        pytest.skip(f"real corpus not found at {path} (the shared corpora are not on this machine)")
    return path


def test_every_file_loads_and_is_labelled_unaudited(gold: dict[str, GoldRecord]) -> None:
    assert len(gold_files(default_gold_dir())) == len(gold)
    for eid, rec in gold.items():
        prov = rec.provenance
        assert not prov.audited and prov.audited_by is None, eid
        assert "not clinician-audited" in prov.drafted_by, eid
        assert rec.claims, eid
        assert rec.triage.rationale.strip(), eid


def test_coverage(gold: dict[str, GoldRecord]) -> None:
    osce = [e for e, r in gold.items() if r.corpus == "osce"]
    primock = [e for e, r in gold.items() if r.corpus == "primock57"]
    assert len(osce) >= 20
    assert {e[:3] for e in osce} >= set(SPECIALTIES)
    assert len(primock) >= 5
    assert {r.triage.level for r in gold.values()} == {"routine", "urgent", "emergency"}


def test_only_the_demo_encounters_are_scoped_and_to_16_turns(gold: dict[str, GoldRecord]) -> None:
    scoped = {e: r.scope_turns for e, r in gold.items() if r.scope_turns is not None}
    assert set(scoped.values()) == {DEMO_SCOPE}
    assert all(e[:3] in ("CAR", "RES") for e in scoped), scoped


def test_demo_encounters_have_scoped_gold(gold: dict[str, GoldRecord]) -> None:
    tdir = _corpus_dir("osce") / "transcripts"
    ids = sorted(p.stem for p in tdir.iterdir() if p.suffix == ".txt")
    for prefix, n in (("CAR", 4), ("RES", 6)):
        first = [i for i in ids if i.startswith(prefix)][:n]
        for eid in first:
            assert eid in gold, f"{eid} (one of the first {n} {prefix} encounters) has no gold"
            assert gold[eid].scope_turns == DEMO_SCOPE, eid


@pytest.mark.parametrize("kind", ["osce", "primock57"])
def test_ids_are_real_and_every_quote_is_in_the_transcript(gold: dict[str, GoldRecord], kind: str) -> None:
    from stresstest.corpus import load_corpus

    recs = {e: r for e, r in gold.items() if r.corpus == kind}
    encounters = {e.encounter_id: e for e in load_corpus(kind, _corpus_dir(kind), ids=sorted(recs))}
    assert sorted(encounters) == sorted(recs), "gold ids without a corpus file"
    problems = []
    for eid, rec in recs.items():
        enc = encounters[eid]
        if rec.scope_turns is not None:
            assert len(enc.turns) > rec.scope_turns, eid
        problems += [f"{eid}: {i}" for i in check_gold(rec, gold_transcript_text(enc, rec))]
    assert problems == []


def test_every_gold_can_score_the_rules_record_of_its_own_transcript(gold: dict[str, GoldRecord]) -> None:
    """End to end on real text: rules structurer -> item fields and judge, deterministic."""
    rules = pytest.importorskip("stresstest.structure.rules")
    from stresstest.corpus import load_corpus
    from stresstest.metrics.judge_rules import rule_judge
    from stresstest.metrics.safety import item_safety

    for kind in ("osce", "primock57"):
        recs = {e: r for e, r in gold.items() if r.corpus == kind}
        for enc in load_corpus(kind, _corpus_dir(kind), ids=sorted(recs)):
            g = recs[enc.encounter_id]
            rec = rules.extract_record(gold_transcript_text(enc, g))
            f = item_safety(rec, rec, g)
            assert (f["triage_match"], f["under_triage_new"], f["scer_new"], f["err_new"]) == (1, 0, 0, 0)
            j = rule_judge(rec, g)
            assert j.score in (1, 2, 3, 4, 5) and j == rule_judge(rec, g)
