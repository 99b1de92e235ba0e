"""The trigger dev set's third source: ``make_trigger_devset.py --run`` over a PriMock57 run (speakers and turns
from the PriMock57 TextGrids) and the committed, labelled ``data/trigger_devset_primock/pairs.jsonl``."""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import make_trigger_devset as mtd  # noqa: E402

from stresstest.corpus import load_corpus  # noqa: E402

PRIMOCK = ROOT.parent / "shared" / "corpora" / "primock57"  # real corpus, next to the checkout (CC BY 4.0)
PRIMOCK_DIR = ROOT / "data" / "trigger_devset_primock"


@pytest.fixture(scope="module")
def primock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PriMock57 folder holding three real consultations (loading all 57 TextGrid pairs takes seconds)."""
    if not (PRIMOCK / "transcripts").is_dir():
        pytest.skip(f"PriMock57 not found at {PRIMOCK} (it lives in ../shared/corpora next to the repo)")
    folder = tmp_path_factory.mktemp("primock57") / "transcripts"
    folder.mkdir()
    for eid in ("day1_consultation02", "day1_consultation04", "day1_consultation07"):
        for channel in ("doctor", "patient"):
            name = f"{eid}_{channel}.TextGrid"
            (folder / name).write_bytes((PRIMOCK / "transcripts" / name).read_bytes())
    return folder.parent


@cache
def _reference(corpus: Path, eid: str, n_turns: int) -> str:
    enc = load_corpus("primock57", corpus, ids=[eid])[0]
    return " ".join(t.text for t in enc.turns[:n_turns])


def _run(tmp_path: Path, items: list[dict[str, object]], name: str = "run") -> Path:
    run = tmp_path / name
    run.mkdir()
    (run / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return run


def _item(eid: str, cond: str, ref: str, hyp: str) -> dict[str, object]:
    return {
        "encounter_id": eid,
        "condition": cond,
        "reference_text": ref,
        "hypothesis_text": hyp,
        "mitigated": False,
        "failed": False,
    }


def test_primock_run_pairs_take_speakers_from_the_textgrids(primock: Path, tmp_path: Path) -> None:
    ref = _reference(primock, "day1_consultation02", 14)
    # Turn 4 (doctor) asks "So how can I help you sir?", turn 5 (patient) opens with a bare "Yes."
    assert "So how can I help you sir? Yes. So, it's been a few days now." in ref
    hyp = ref.replace("help you sir? Yes. So,", "help you sir? So,").replace(
        "prescribed for my eczema", "prescribed for my exam"
    )
    run = _run(tmp_path, [_item("day1_consultation02", "ambient0", ref, hyp)])
    pairs = mtd.run_utterance_pairs(run, primock, "primock57")
    assert len(pairs) == 2
    lost, eczema = pairs
    assert lost["speaker"] == "doctor+patient"  # the lost short answer is judged with its question
    assert lost["reference"] == "So how can I help you sir? Yes"
    assert lost["hypothesis"] == "So how can I help you sir"
    # Turn 13 is the doctor's bare "OK.": joined to the patient's sentence before it.
    assert eczema["speaker"] == "patient+doctor" and eczema["encounter_id"] == "day1_consultation02"
    # The pair starts at its first normalised word: the filler "Uh" is no word of the alignment.
    assert eczema["reference"] == "earlier I was like prescribed for my eczema. OK"
    assert eczema["hypothesis"] == "earlier I was like prescribed for my exam. OK"
    assert {p["source"] for p in pairs} == {"ambient0"}


def test_primock_run_pairs_name_a_missing_encounter_or_a_foreign_reference(primock: Path, tmp_path: Path) -> None:
    ref = _reference(primock, "day1_consultation02", 3)
    run = _run(tmp_path, [_item("day9_consultation99", "ambient0", ref, ref)])
    with pytest.raises(SystemExit, match=r"items.jsonl:1: transcript of day9_consultation99 not found in the primock"):
        mtd.run_utterance_pairs(run, primock, "primock57")
    run2 = _run(tmp_path, [_item("day1_consultation04", "ambient0", ref, ref)], "run2")  # 02's text under 04
    with pytest.raises(SystemExit, match=r"items.jsonl:1: reference_text does not continue with turn 1"):
        mtd.run_utterance_pairs(run2, primock, "primock57")


def test_cli_draws_only_the_named_conditions_with_the_prefix(primock: Path, tmp_path: Path) -> None:
    ref = _reference(primock, "day1_consultation02", 14)
    hyp = ref.replace("prescribed for my eczema", "prescribed for my exam")
    items = [
        _item("day1_consultation02", "clean", ref, ref.replace("really itchy", "really itching")),
        _item("day1_consultation02", "ambient0", ref, hyp),
        _item("day1_consultation07", "ambient0", *([_reference(primock, "day1_consultation07", 6)] * 2)),
    ]
    run = _run(tmp_path, items)
    out = tmp_path / "pairs.jsonl"
    argv = ["--run", str(run), "--corpus-kind", "primock57", "--corpus", str(primock), "--out", str(out)]
    assert mtd.main([*argv, "--conditions", "ambient0", "--prefix", "m", "--n", "10"]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["pair_id"], r["source"]) for r in rows] == [("m000", "ambient0")]
    assert "eczema" in rows[0]["reference"]
    with pytest.raises(SystemExit):
        mtd.main([*argv, "--conditions", "babble10"])  # not among the run's conditions
    with pytest.raises(SystemExit):
        mtd.main(["--run", str(run), "--corpus-kind", "primock57", "--out", str(out)])  # no --corpus
