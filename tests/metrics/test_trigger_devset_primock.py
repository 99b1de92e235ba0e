"""The trigger dev set's third source: ``make_trigger_devset.py --run`` over a PriMock57 run (speakers and turns
from the PriMock57 TextGrids) and the committed, labelled ``data/trigger_devset_primock/pairs.jsonl``."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import make_trigger_devset as mtd  # noqa: E402

from stresstest.config import load_config  # noqa: E402
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


#: The commit that added the labels, before the detector (``stresstest triggers``, validate_triggers.py) first ran on
#: the set (data/trigger_devset_primock/README.md), and the SHA-256 of its
#: [pair_id, encounter_id, split, reference, hypothesis, label] rows.
LABELS_COMMIT = "d308ab8738dbb0473352c0ca9978330c18f5ca89"
LABELS_SHA256 = "7080b979b60e2d961ba35f10a88fb9006158acbbab49cfaae933c3c06dcdf850"
N_PAIRS = 285
PRIMOCK_SPLIT = {
    "dev": [
        "day1_consultation10",
        "day2_consultation05",
        "day3_consultation02",
        "day3_consultation04",
        "day3_consultation05",
        "day4_consultation08",
    ],
    "test": [
        "day1_consultation04",
        "day2_consultation10",
        "day3_consultation03",
        "day3_consultation08",
        "day4_consultation04",
        "day5_consultation09",
    ],
}
PRIMOCK_SET = PRIMOCK_DIR / "pairs.jsonl"


def _label_rows(text: str) -> list[list[object]]:
    rows = [json.loads(line) for line in text.splitlines()]
    return [[r["pair_id"], r["encounter_id"], r["split"], r["reference"], r["hypothesis"], r["label"]] for r in rows]


def test_the_primock_set_is_labelled_and_split_by_encounter_before_labelling() -> None:
    rows = [json.loads(line) for line in PRIMOCK_SET.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == N_PAIRS and [r["pair_id"] for r in rows] == [f"m{k:03d}" for k in range(N_PAIRS)]
    assert len({(r["reference"], r["hypothesis"]) for r in rows}) == N_PAIRS
    assert all(r["label"] in (0, 1, 2) and (r["label"] == 0) == ("label_note" not in r) for r in rows)
    assert {r["source"] for r in rows} == {"ambient0", "babble10", "rt0.8_g711"}
    split = {s: sorted({r["encounter_id"] for r in rows if r["split"] == s}) for s in ("dev", "test")}
    assert split == PRIMOCK_SPLIT  # each encounter in one split: the README's lists
    ids = sorted(PRIMOCK_SPLIT["dev"] + PRIMOCK_SPLIT["test"])
    shuffled = mtd.sample_run_pairs(
        [{"source": "c", "encounter_id": e, "reference": e, "hypothesis": ""} for e in ids],
        len(ids),
        seed=0,
        split_seed=34,  # the --split-seed of the README's command
    )
    assert {s: sorted(str(p["encounter_id"]) for p in shuffled if p["split"] == s) for s in PRIMOCK_SPLIT} == split
    digest = hashlib.sha256(json.dumps(_label_rows(PRIMOCK_SET.read_text(encoding="utf-8"))).encode()).hexdigest()
    assert digest == LABELS_SHA256, "labels changed since they were committed before the detector ran"


def test_the_primock_labels_equal_the_labelling_commit() -> None:
    try:
        old = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{LABELS_COMMIT}:data/trigger_devset_primock/pairs.jsonl"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"git history with the labelling commit {LABELS_COMMIT[:10]} is not available here")
    assert _label_rows(old) == _label_rows(PRIMOCK_SET.read_text(encoding="utf-8"))


def test_the_run_config_holds_the_seeded_encounter_draw(primock: Path) -> None:
    """run.yaml's targets are the README's rule (12 of the non-gold consultations, random.Random(34)); its babble
    bank is the other non-gold ones, never a target."""
    cfg = yaml.safe_load((PRIMOCK_DIR / "run.yaml").read_text(encoding="utf-8"))
    grid = load_config(PRIMOCK_DIR / "run.yaml").chains.expand()  # still a valid run config
    assert [name for name, _, _ in grid] == ["ambient0", "babble10", "rt0.8_g711"]
    ids = sorted(f.name[: -len("_doctor.TextGrid")] for f in (PRIMOCK / "transcripts").glob("*_doctor.TextGrid"))
    gold = {f.stem for f in (ROOT / "stresstest" / "gold" / "data").glob("*.yaml")}
    pool = [i for i in ids if i not in gold]
    assert len(ids) == 57 and len(pool) == 52
    targets = sorted(random.Random(34).sample(pool, 12))
    assert cfg["corpus"]["ids"] == targets
    assert cfg["noise"]["babble"]["bank_encounters"] == [i for i in pool if i not in targets]
    assert sorted(PRIMOCK_SPLIT["dev"] + PRIMOCK_SPLIT["test"]) == targets
