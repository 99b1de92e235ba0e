"""OSCE loader on small synthetic files, one quirk at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from stresstest.corpus import load_corpus
from stresstest.corpus.osce import parse_osce_file
from stresstest.errors import CorpusError


def _write(folder: Path, name: str, text: str, encoding: str = "utf-8", bom: bytes = b"") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_bytes(bom + text.encode(encoding))
    return p


def test_utf16le_with_bom_and_crlf(tmp_path: Path) -> None:
    p = _write(tmp_path, "RES0001.txt", "D: Hello there.\r\n\r\nP: I’ve a cough.\r\n", "utf-16-le", b"\xff\xfe")
    e = parse_osce_file(p)
    assert [(t.speaker, t.text) for t in e.turns] == [
        ("doctor", "Hello there."),
        ("patient", "I've a cough."),
    ]
    assert e.encounter_id == "RES0001" and e.specialty == "RES" and e.corpus == "osce"


def test_utf8_bom_mixed_line_endings_blank_lines(tmp_path: Path) -> None:
    text = "D: How long\u2014two days?\r\n\n\nP: Yes \u201cabout\u201d that\u2026\rD: OK.\n"
    e = parse_osce_file(_write(tmp_path, "CAR0002.txt", text, bom=b"\xef\xbb\xbf"))
    assert [t.text for t in e.turns] == ["How long-two days?", 'Yes "about" that...', "OK."]


def test_utf16_without_bom(tmp_path: Path) -> None:
    e = parse_osce_file(_write(tmp_path, "GAS0001.txt", "D: Hi.\nP: Hello.\n", "utf-16-le"))
    assert e.reference_text() == "Hi. Hello."


def test_multiline_turns_join_with_one_space(tmp_path: Path) -> None:
    text = "D: Do you have\nany pain   in your\n\nchest?\nP: No.\n\nNot really.\n"
    e = parse_osce_file(_write(tmp_path, "MSK0001.txt", text))
    assert [t.text for t in e.turns] == ["Do you have any pain in your chest?", "No. Not really."]


@pytest.mark.parametrize(
    "line,speaker,text",
    [
        ("D; Any fever?", "doctor", "Any fever?"),
        ("P:: Yes.", "patient", "Yes."),
        ("D : OK.", "doctor", "OK."),
        ("p: fine", "patient", "fine"),
        ("P. Uh, no.", "patient", "Uh, no."),
        ("P No.", "patient", "No."),
        ("DL OK, next.", "doctor", "OK, next."),
        ("D:No space", "doctor", "No space"),
    ],
)
def test_mistyped_labels_seen_in_the_corpus(tmp_path: Path, line: str, speaker: str, text: str) -> None:
    e = parse_osce_file(_write(tmp_path, "RES0003.txt", f"P: First.\n\n{line}\n"))
    assert (e.turns[1].speaker, e.turns[1].text) == (speaker, text)


def test_unknown_label_names_file_and_line(tmp_path: Path) -> None:
    p = _write(tmp_path, "CAR0001.txt", "D: Hello.\n\nP: Hi.\n\nQ: Who is this?\n")
    with pytest.raises(CorpusError) as info:
        parse_osce_file(p)
    msg = str(info.value)
    assert "CAR0001.txt:5:" in msg and "'D:' or 'P:'" in msg and "Q: Who is this?" in msg


def test_text_before_first_turn_is_an_error(tmp_path: Path) -> None:
    p = _write(tmp_path, "CAR0009.txt", "\n\nInterview transcript\nD: Hello.\n")
    with pytest.raises(CorpusError, match=r"CAR0009\.txt:3: expected a turn starting with 'D:' or 'P:'"):
        parse_osce_file(p)


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "RES0009.txt"
    p.write_bytes(b"D: Hi.\nP: caf\xe9 au lait\n")
    with pytest.raises(CorpusError, match=r"RES0009\.txt:2: expected UTF-8 or UTF-16"):
        parse_osce_file(p)


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="RES0010.txt: expected at least one"):
        parse_osce_file(_write(tmp_path, "RES0010.txt", "\n\n"))


def test_folder_layout_sorting_and_audio(tmp_path: Path) -> None:
    root = tmp_path / "osce"
    _write(root / "transcripts", "RES0002.txt", "D: b\n")
    _write(root / "transcripts", "CAR0001.txt", "D: a\n")
    (root / "audio").mkdir()
    (root / "audio" / "RES0002.mp3").write_bytes(b"")
    encounters = load_corpus("osce", root)
    assert [e.encounter_id for e in encounters] == ["CAR0001", "RES0002"]
    assert encounters[0].audio_path is None
    assert encounters[1].audio_path == str((root / "audio" / "RES0002.mp3").resolve())
    # The transcripts folder itself works too.
    assert [e.encounter_id for e in load_corpus("osce", root / "transcripts")] == ["CAR0001", "RES0002"]


def test_missing_folder_names_expected_path(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=str(tmp_path / "nowhere")):
        load_corpus("osce", tmp_path / "nowhere")
