"""The gold set shipped in stresstest/gold/data: loads, is honest, covers what the demo needs, keeps
its test split apart, and every evidence quote is in the real transcript (OSCE: the transcripts shipped
in data/osce, always; PriMock57: when ../shared/corpora is present)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stresstest.gold.model import GoldRecord, default_gold_dir, gold_files, load_gold
from stresstest.gold.workflow import check_gold, gold_transcript_text

REPO = Path(__file__).resolve().parents[2]
CORPORA = REPO.parent / "shared" / "corpora"
SHIPPED = {"osce": REPO / "data" / "osce"}
SPECIALTIES = ("RES", "CAR", "GAS", "MSK", "DER")
DEMO_SCOPE = 40


@pytest.fixture(scope="module")
def gold() -> dict[str, GoldRecord]:
    return load_gold(default_gold_dir())


def _corpus_dir(kind: str) -> Path:
    if kind in SHIPPED:
        return SHIPPED[kind]
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


def _splits() -> dict[str, str]:
    rows = (default_gold_dir() / "splits.tsv").read_text("utf-8").splitlines()
    return {r.split("\t")[0]: r.split("\t")[1] for r in rows if r and not r.startswith(("#", "encounter_id"))}


def _config_ids(name: str) -> tuple[list[str], int | None]:
    from stresstest.config import load_config

    cfg = load_config(REPO / "configs" / name)
    return list(cfg.corpus.ids or []), cfg.corpus.max_turns


def test_scoped_gold_uses_the_demo_scope(gold: dict[str, GoldRecord]) -> None:
    scoped = {e: r.scope_turns for e, r in gold.items() if r.scope_turns is not None}
    assert set(scoped.values()) <= {16, DEMO_SCOPE}, scoped
    assert all(e[:3] in ("CAR", "RES", "MSK", "GEN") for e in scoped), scoped


@pytest.mark.parametrize("config", ["demo.yaml", "demo-llm.yaml"])
def test_demo_encounters_have_gold_and_shipped_transcripts(gold: dict[str, GoldRecord], config: str) -> None:
    ids, max_turns = _config_ids(config)
    if config == "demo.yaml":
        assert len(ids) >= 8 and max_turns == DEMO_SCOPE
    for eid in ids:
        assert eid in gold, f"{config}: {eid} has no gold"
        assert gold[eid].scope_turns == DEMO_SCOPE, eid
        assert (SHIPPED["osce"] / "transcripts" / f"{eid}.txt").is_file(), eid
        assert _splits().get(eid, "dev") == "dev", f"{eid}: the demo must not use test-split encounters"


def test_test_split_is_ten_scoped_osce_encounters(gold: dict[str, GoldRecord]) -> None:
    test = sorted(e for e, sp in _splits().items() if sp == "test")
    assert len(test) >= 10
    for eid in test:
        assert eid in gold and gold[eid].corpus == "osce", eid
        assert gold[eid].scope_turns == DEMO_SCOPE, eid
        assert "TEST split" in (default_gold_dir() / f"{eid}.yaml").read_text("utf-8"), eid
    assert set(_splits().values()) <= {"dev", "test"}


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


@pytest.mark.parametrize("kind", ["osce", "primock57"])
def test_every_gold_can_score_the_rules_record_of_its_own_transcript(gold: dict[str, GoldRecord], kind: str) -> None:
    """End to end on real text: rules structurer -> item fields and judge, deterministic."""
    from stresstest.corpus import load_corpus
    from stresstest.metrics.judge_rules import rule_judge
    from stresstest.metrics.safety import item_safety
    from stresstest.structure import rules

    recs = {e: r for e, r in gold.items() if r.corpus == kind}
    for enc in load_corpus(kind, _corpus_dir(kind), ids=sorted(recs)):
        g = recs[enc.encounter_id]
        rec = rules.extract_record(gold_transcript_text(enc, g))
        f = item_safety(rec, rec, g)
        assert (f["triage_match"], f["under_triage_new"], f["scer_new"], f["err_new"]) == (1, 0, 0, 0)
        j = rule_judge(rec, g)
        assert j.score in (1, 2, 3, 4, 5) and j == rule_judge(rec, g)


@pytest.mark.parametrize(
    ("folder", "split", "at_least"), [("gold_second_writer", "dev", 12), ("gold_second_writer_test", "test", 10)]
)
def test_second_writer_gold_is_one_split_unaudited_and_quoted(
    gold: dict[str, GoldRecord], folder: str, split: str, at_least: int
) -> None:
    """Dev second-writer files may be read while tuning, so they never cover a test encounter; the test
    folder's writers never tune the structurer, and it holds test encounters only."""
    from stresstest.corpus import load_corpus

    second = load_gold(REPO / "data" / folder)
    assert len(second) >= at_least
    splits = _splits()
    encounters = {e.encounter_id: e for e in load_corpus("osce", SHIPPED["osce"], ids=sorted(second))}
    problems = []
    for eid, rec in second.items():
        assert eid in gold and splits.get(eid, "dev") == split, eid
        assert rec.scope_turns == gold[eid].scope_turns, eid
        assert not rec.provenance.audited and "not clinician-audited" in rec.provenance.drafted_by, eid
        problems += [f"{eid}: {i}" for i in check_gold(rec, gold_transcript_text(encounters[eid], rec))]
    assert problems == []
