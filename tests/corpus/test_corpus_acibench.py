"""ACI-BENCH loader on small synthetic CSVs."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from stresstest.corpus import load_corpus
from stresstest.corpus.acibench import detokenise, parse_dialogue, split_name
from stresstest.errors import CorpusError


def _csv(path: Path, rows: list[tuple[str, str, str, str]], id_col: str = "encounter_id") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["dataset", id_col, "dialogue", "note"])
        w.writerows(rows)
    return path


def test_tags_markers_guest_and_detokenising(tmp_path: Path) -> None:
    dialogue = (
        "[doctor] hi , anna . how are you ?\n"
        "[patient] i do n't know , i 'm gon na say okay .\n"
        "and i wan na go home [ inaudible 00:09:25 ] soon .\n"
        "[patient_guest] she has n't slept .\n"
        "[doctor]\n"
        "[doctor] okay ."
    )
    p = _csv(tmp_path / "train.csv", [("aci", "D2N001", dialogue, "CHIEF COMPLAINT\r\n\r\nCough.\r\n")])
    (e,) = load_corpus("aci-bench", p)
    assert [(t.speaker, t.text) for t in e.turns] == [
        ("doctor", "hi, anna. how are you?"),
        ("patient", "i don't know, i 'm gonna say okay. and i wanna go home soon."),
        ("other", "she hasn't slept."),
        ("doctor", "okay."),
    ]
    assert e.reference_note == "CHIEF COMPLAINT\n\nCough."
    assert e.corpus == "aci-bench" and e.source_path == str(p)


def test_untagged_opening_line_goes_to_the_other_speaker() -> None:
    turns = parse_dialogue("hi , susan .\n[patient] good .\n[doctor] great .")
    assert [t.speaker for t in turns] == ["doctor", "patient", "doctor"]
    turns = parse_dialogue("so the pain ?\n[doctor] and then ?")
    assert turns[0].speaker == "patient"


def test_detokenise() -> None:
    assert detokenise("we ca n't , wo n't ; got ta go . 50 %") == "we can't, won't; gotta go. 50%"
    assert detokenise("'cause it 's") == "'cause it 's"  # only n't is split upstream


def test_unknown_tag_names_file_line_and_encounter(tmp_path: Path) -> None:
    p = _csv(
        tmp_path / "valid.csv",
        [("aci", "D2N001", "[doctor] hi .", "n"), ("aci", "D2N002", "[doctor] hi .\n[nurse2] hello .", "n")],
    )
    with pytest.raises(CorpusError) as info:
        load_corpus("aci-bench", p)
    msg = str(info.value)
    assert "valid.csv:4:" in msg and "[nurse2]" in msg and "D2N002" in msg and "[doctor]" in msg


def test_no_tags_and_bad_header_and_duplicate_ids(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"a\.csv:2: expected \[doctor\]/\[patient\] speaker tags"):
        load_corpus("aci-bench", _csv(tmp_path / "a.csv", [("aci", "X1", "no tags here", "n")]))
    bad = tmp_path / "b.csv"
    bad.write_text("dataset,key,text\naci,1,hi\n")
    with pytest.raises(CorpusError, match=r"b\.csv:1: expected a header row with columns dataset,encounter_id"):
        load_corpus("aci-bench", bad)
    dup = _csv(tmp_path / "c.csv", [("aci", "X1", "[doctor] a", "n"), ("aci", "X1", "[doctor] b", "n")])
    with pytest.raises(CorpusError, match=r"c\.csv:3: expected unique encounter_ids, got 'X1' again"):
        load_corpus("aci-bench", dup)


def test_folder_ids_prefixed_only_when_they_repeat(tmp_path: Path) -> None:
    root = tmp_path / "aci-bench"
    _csv(root / "challenge_data" / "train.csv", [("aci", "D2N002", "[doctor] b", "n")])
    _csv(root / "challenge_data" / "clinicalnlp_taskB_test1.csv", [("aci", "D2N001", "[doctor] a", "n")])
    (root / "challenge_data" / "train_metadata.csv").write_text("dataset,encounter_id,id\naci,D2N002,VA1\n")
    assert [e.encounter_id for e in load_corpus("aci-bench", root)] == ["D2N001", "D2N002"]

    src = root / "src_experiment_data"
    _csv(src / "test1_virtscribe_asr.csv", [("virtscribe", "VS1", "[doctor] helo", "n")], id_col="id")
    _csv(src / "test1_virtscribe_humantrans.csv", [("virtscribe", "VS1", "[doctor] hello", "n")], id_col="id")
    encounters = load_corpus("aci-bench", src)
    assert [e.encounter_id for e in encounters] == [
        "test1_virtscribe_asr-VS1",
        "test1_virtscribe_humantrans-VS1",
    ]
    assert [e.reference_text() for e in encounters] == ["helo", "hello"]
    assert split_name(Path("clinicalnlp_taskC_test2.csv")) == "test2"


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"ACI-BENCH path not found"):
        load_corpus("aci-bench", tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match=r"expected ACI-BENCH dialogue CSVs"):
        load_corpus("aci-bench", tmp_path / "empty")
