"""The trigger dev set's second source: ``make_trigger_devset.py --run`` (a stresstest run over OSCE encounters,
TTS -> noise -> ASR) and ``validate_triggers.py`` scoring more than one labelled set."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import make_trigger_devset as mtd  # noqa: E402
import validate_triggers as vt  # noqa: E402

from stresstest.corpus.osce import parse_osce_file  # noqa: E402

OSCE = ROOT / "data" / "osce" / "transcripts"
OSCE_SET = ROOT / "data" / "trigger_devset_osce" / "pairs.jsonl"


def _reference(eid: str, n_turns: int) -> str:
    enc = parse_osce_file(OSCE / f"{eid}.txt")
    return " ".join(" ".join(t.text.split()) for t in enc.turns[:n_turns])


def _run(tmp_path: Path, items: list[dict[str, object]]) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return run


def _item(eid: str, cond: str, ref: str, hyp: str, mitigated: bool = False) -> dict[str, object]:
    return {
        "encounter_id": eid,
        "condition": cond,
        "reference_text": ref,
        "hypothesis_text": hyp,
        "mitigated": mitigated,
        "failed": False,
    }


def test_run_pairs_keep_a_lost_short_answer_with_its_question(tmp_path: Path) -> None:
    ref = _reference("CAR0001", 22)  # turn 19 is the patient's bare "No." to "is the pain radiating anywhere?"
    assert "radiating anywhere? No. OK," in ref
    hyp = ref.replace("radiating anywhere? No. OK,", "radiating anywhere? OK,").replace(
        "chest pain start", "chess pain start"
    )
    run = _run(
        tmp_path,
        [
            _item("CAR0001", "babble_0db", ref, hyp),
            _item("CAR0001", "babble_0db", ref, ref.replace("sharper", "sharp"), mitigated=True),
        ],
    )
    pairs = mtd.run_utterance_pairs(run, OSCE)
    by_ref = {str(p["reference"]): p for p in pairs}
    lost = by_ref["OK, do you find that the pain is radiating anywhere? No"]  # cut at the last word
    assert lost["speaker"] == "doctor+patient"
    assert lost["hypothesis"] == "OK, do you find that the pain is radiating anywhere"
    assert lost["source"] == "babble_0db" and lost["encounter_id"] == "CAR0001"
    chess = by_ref["OK, and so when did this chest pain start"]
    assert chess["speaker"] == "doctor" and "chess pain" in str(chess["hypothesis"])
    assert len(pairs) == 2  # the mitigated item is no source; equal sentences are no pair


def test_run_pairs_name_the_item_whose_reference_does_not_match(tmp_path: Path) -> None:
    ref = _reference("CAR0001", 4).replace("chest pain", "headache")
    run = _run(tmp_path, [_item("CAR0001", "clean", ref, ref)])
    with pytest.raises(SystemExit, match=r"items.jsonl:1: reference_text does not continue with turn 2"):
        mtd.run_utterance_pairs(run, OSCE)


def test_sample_is_per_condition_deduplicated_and_split_by_encounter() -> None:
    pairs: list[dict[str, object]] = [
        {
            "source": c,
            "encounter_id": e,
            "speaker": "patient",
            "reference": f"{e} says {k} things",
            "hypothesis": f"{e} {c} {k}",
        }
        for e in ("A1", "B2", "C3", "D4")
        for c in ("clean", "babble_0db")
        for k in range(10)
    ]
    pairs.append({**pairs[0], "source": "babble_0db"})  # the same texts under another condition: once
    sample = mtd.sample_run_pairs(pairs, 20, seed=10, split_seed=0)
    assert len(sample) == 20 and sum(p["source"] == "clean" for p in sample) == 10
    assert len({(p["reference"], p["hypothesis"]) for p in sample}) == 20
    splits = {str(p["encounter_id"]): p["split"] for p in sample}
    assert sorted(splits.values()).count("dev") == 2 and set(splits.values()) == {"dev", "test"}
    assert sample == mtd.sample_run_pairs(pairs, 20, seed=10, split_seed=0)
    assert [p["encounter_id"] for p in sample] == sorted(p["encounter_id"] for p in sample)


def test_validate_triggers_scores_each_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        ("Any chest pain? No.", "Any chest pain?", 2),
        ("I get chest pain when I walk.", "I get chess pain when I walk.", 2),
        ("I take 15 milligrams a day.", "I take 50 milligrams a day.", 2),
        ("I've been wheezing a lot.", "I've been weaving a lot.", 2),
        ("Okay, good morning to you.", "Okay, good morning.", 0),
        ("So I was like, well, okay.", "So I was, well, okay.", 0),
        ("It was a lovely day out.", "It was a lovely day.", 0),
        ("Thanks so much for that.", "Thanks for that.", 0),
        ("My name is Jenny Smith.", "My name is Jenny Smyth.", 0),
        ("I live on Elm Street.", "I live on Elm Road.", 0),
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "pair_id": f"o{k:03d}",
                    "reference": r,
                    "hypothesis": h,
                    "label": y,
                    "split": "dev" if k % 2 == 0 else "test",
                }
            )
            + "\n"
            for k, (r, h, y) in enumerate(rows)
        ),
        encoding="utf-8",
    )
    assert vt.main(["--pairs", str(path), str(path), "--resamples", "50"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"##### {path}") == 2
    assert "== dev: 5 pairs (2 significant, 0 minimal)" in out and "== test: 5 pairs (2 significant" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"reference": "a b c", "hypothesis": "a b", "label": 3, "split": "dev"}) + "\n")
    with pytest.raises(SystemExit, match=r"bad.jsonl:1: expected reference, hypothesis, label 0/1/2"):
        vt.main(["--pairs", str(bad)])


def test_validate_triggers_split_differences_and_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        ("Any chest pain? No.", "Any chest pain?", 2, "E1"),
        ("I get chest pain when I walk.", "I get chess pain when I walk.", 2, "E1"),
        ("Okay, good morning to you.", "Okay, good morning.", 0, "E2"),
        ("So I was like, well, okay.", "So I was, well, okay.", 0, "E2"),
        ("It was a lovely day out.", "It was a lovely day.", 0, "E3"),
        ("I take 15 milligrams a day.", "I take 50 milligrams a day.", 2, "E3"),
    ]
    pairs = tmp_path / "set" / "pairs.jsonl"
    pairs.parent.mkdir()
    pairs.write_text(
        "".join(
            json.dumps(
                {
                    "pair_id": f"q{k}",
                    "encounter_id": e,
                    "reference": r,
                    "hypothesis": h,
                    "label": y,
                    "split": "dev" if k < 4 else "test",
                }
            )
            + "\n"
            for k, (r, h, y, e) in enumerate(rows)
        ),
        encoding="utf-8",
    )
    dump = tmp_path / "old.json"
    assert vt.main(["--pairs", str(pairs), "--split", "dev", "--resamples", "30", "--dump-scores", str(dump)]) == 0
    out = capsys.readouterr().out
    assert "== dev: 4 pairs" in out and "== test" not in out  # --split dev never scores the test split
    assert "trigger − WER" in out and "trigger − content-word" in out and "pairs resampled" in out
    old = json.loads(dump.read_text())
    assert sorted(old["set"]) == ["q0", "q1", "q2", "q3"]
    old["set"] = {k: 0.0 for k in old["set"]}  # a reference detector that never fires
    dump.write_text(json.dumps(old))
    argv = ["--pairs", str(pairs), "--split", "dev", "--resamples", "30", "--reference", str(dump)]
    assert vt.main([*argv, "--resample", "encounters"]) == 0
    out = capsys.readouterr().out
    assert "old trigger risk      0.500" in out and "new − old trigger           +0.500" in out
    assert "encounters resampled" in out
    with pytest.raises(SystemExit, match=r"old.json: no score for set/q4"):
        vt.main(["--pairs", str(pairs), "--split", "test", "--reference", str(dump)])


#: The commit that added the labels, before validate_triggers.py first ran on the set
#: (data/trigger_devset_osce/README.md), and the SHA-256 of its
#: [pair_id, encounter_id, split, reference, hypothesis, label] rows.
LABELS_COMMIT = "6cd552ab5fb8eb7f61ab826c9c55c17289639d83"
LABELS_SHA256 = "033cacd9733f71c59db15e38aaf7ed6a1b33086060e278e020e65f9314685169"
OSCE_SPLIT = {
    "dev": ["MSK0006", "MSK0009", "RES0012", "RES0014", "RES0015"],
    "test": ["GEN0001", "MSK0007", "MSK0010", "RES0013", "RES0017"],
}


def _label_rows(text: str) -> list[list[object]]:
    rows = [json.loads(line) for line in text.splitlines()]
    return [[r["pair_id"], r["encounter_id"], r["split"], r["reference"], r["hypothesis"], r["label"]] for r in rows]


def test_the_osce_set_is_labelled_and_split_by_encounter_before_labelling() -> None:
    rows = [json.loads(line) for line in OSCE_SET.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 240 and [r["pair_id"] for r in rows] == [f"o{k:03d}" for k in range(240)]
    assert all(r["label"] in (0, 1, 2) and (r["label"] == 0) == ("label_note" not in r) for r in rows)
    split = {s: sorted({r["encounter_id"] for r in rows if r["split"] == s}) for s in ("dev", "test")}
    assert split == OSCE_SPLIT  # each encounter in one split: the README's lists
    ids = sorted(OSCE_SPLIT["dev"] + OSCE_SPLIT["test"])
    shuffled = mtd.sample_run_pairs(
        [{"source": "c", "encounter_id": e, "reference": e, "hypothesis": ""} for e in ids],
        len(ids),
        seed=0,
        split_seed=0,
    )
    assert {s: sorted(str(p["encounter_id"]) for p in shuffled if p["split"] == s) for s in OSCE_SPLIT} == split
    digest = hashlib.sha256(json.dumps(_label_rows(OSCE_SET.read_text(encoding="utf-8"))).encode()).hexdigest()
    assert digest == LABELS_SHA256, "labels changed since they were committed before the detector ran"


def test_the_osce_labels_equal_the_labelling_commit() -> None:
    try:
        old = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{LABELS_COMMIT}:data/trigger_devset_osce/pairs.jsonl"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"git history with the labelling commit {LABELS_COMMIT[:10]} is not available here")
    assert _label_rows(old) == _label_rows(OSCE_SET.read_text(encoding="utf-8"))


def test_validate_triggers_reproduces_the_recorded_osce_auroc(capsys: pytest.CaptureFixture[str]) -> None:
    # 2000 resamples, seed 0: the numbers in BENCHMARKS.md (issue 34's detector; the old one's are in
    # data/trigger_risk_before_issue34.json)
    assert vt.main(["--pairs", str(OSCE_SET)]) == 0
    out = capsys.readouterr().out
    dev, test = out.split("== test:")
    assert "== dev: 132 pairs (39 significant, 21 minimal); 59 pairs with ≥ 1 event (38/39 significant)" in dev
    assert "trigger risk          0.903 [0.846, 0.951]        0.955 [0.918, 0.987]" in dev
    assert "WER                   0.767 [0.674, 0.850]        0.782 [0.702, 0.854]" in dev
    assert " 108 pairs (17 significant, 25 minimal); 39 pairs with ≥ 1 event (15/17 significant)" in test
    assert "trigger risk          0.881 [0.769, 0.968]        0.867 [0.797, 0.931]" in test
    assert "content-word errors   0.860 [0.731, 0.964]        0.868 [0.798, 0.928]" in test
    assert "WER                   0.799 [0.698, 0.886]        0.782 [0.683, 0.866]" in test
