"""JSONL manifest of the user's own recordings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from stresstest.audio import load_audio
from stresstest.corpus import load_corpus
from stresstest.errors import CorpusError


def _stereo_wav(path: Path, sr: int = 44100, seconds: float = 0.5) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(sr * seconds)) / sr
    x = np.stack([0.3 * np.sin(2 * np.pi * 220 * t), 0.2 * np.sin(2 * np.pi * 330 * t)], axis=1)
    sf.write(str(path), x.astype(np.float32), sr)
    return path


def _manifest(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_stereo_44k_relative_path_turns_and_reference_text(tmp_path: Path) -> None:
    wav = _stereo_wav(tmp_path / "audio" / "v1.wav")
    abs_wav = _stereo_wav(tmp_path / "elsewhere" / "v0.wav")
    m = _manifest(
        tmp_path / "my.jsonl",
        [
            {
                "encounter_id": "v1",
                "audio": "audio/v1.wav",
                "turns": [
                    {"speaker": "doctor", "text": "What brings  you in?", "start_s": 0.0, "end_s": 0.2},
                    {"speaker": "patient", "text": "Chest pain\u2014since Tuesday."},
                    {"speaker": "patient", "text": "   "},
                ],
                "reference_note": " CP 2/7 ",
            },
            "",
            {"encounter_id": "v0", "audio": str(abs_wav), "reference_text": "the whole  transcript"},
        ],
    )
    v0, v1 = load_corpus("manifest", m)
    assert v1.audio_path == str(wav.resolve()) and v1.reference_note == "CP 2/7" and v1.corpus == "manifest"
    assert [(t.speaker, t.text, t.start_s) for t in v1.turns] == [
        ("doctor", "What brings you in?", 0.0),
        ("patient", "Chest pain-since Tuesday.", None),
    ]
    assert v0.turns[0].speaker == "other" and v0.reference_text() == "the whole transcript"
    # The recording it points at is usable by the audio stage: mono, 16 kHz.
    x = load_audio(v1.audio_path or "")
    assert x.ndim == 1 and abs(len(x) - 8000) <= 1


def test_folder_with_manifest_jsonl(tmp_path: Path) -> None:
    _stereo_wav(tmp_path / "a.wav")
    _manifest(tmp_path / "manifest.jsonl", [{"encounter_id": "a", "audio": "a.wav", "reference_text": "hi"}])
    assert [e.encounter_id for e in load_corpus("manifest", tmp_path)] == ["a"]


@pytest.mark.parametrize(
    "entry,expected",
    [
        ({"encounter_id": "a", "audio": "missing.wav", "reference_text": "x"}, "audio file not found"),
        ({"encounter_id": "a", "audio": "a.txt", "reference_text": "x"}, "expected audio ending in"),
        ({"encounter_id": "a", "audio": "a.wav"}, "exactly one of 'turns' or 'reference_text'"),
        ({"encounter_id": "", "audio": "a.wav", "reference_text": "x"}, "'encounter_id' to be a non-empty"),
        ({"encounter_id": "a", "audio": "a.wav", "reference_txt": "x"}, "unknown key 'reference_txt'"),
        (
            {"encounter_id": "a", "audio": "a.wav", "turns": [{"speaker": "nurse", "text": "x"}]},
            "turn 1: expected speaker",
        ),
        (
            {
                "encounter_id": "a",
                "audio": "a.wav",
                "turns": [{"speaker": "doctor", "text": "x", "start_s": "0"}],
            },
            "start_s to be a number",
        ),
        (
            {
                "encounter_id": "a",
                "audio": "a.wav",
                "turns": [{"speaker": "doctor", "text": "x", "start_s": 2, "end_s": 1}],
            },
            "end_s >= start_s",
        ),
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
    ],
)
def test_bad_entries_name_manifest_and_line(tmp_path: Path, entry: object, expected: str) -> None:
    _stereo_wav(tmp_path / "a.wav")
    (tmp_path / "a.txt").write_text("not audio")
    good = {"encounter_id": "ok", "audio": "a.wav", "reference_text": "fine"}
    m = _manifest(tmp_path / "m.jsonl", [good, "", entry])
    with pytest.raises(CorpusError) as info:
        load_corpus("manifest", m)
    assert "m.jsonl:3:" in str(info.value) and expected in str(info.value)


def test_duplicate_id_and_missing_manifest(tmp_path: Path) -> None:
    _stereo_wav(tmp_path / "a.wav")
    e = {"encounter_id": "a", "audio": "a.wav", "reference_text": "x"}
    with pytest.raises(
        CorpusError, match=r"m\.jsonl:2: expected unique encounter_id, got 'a' again \(first on line 1\)"
    ):
        load_corpus("manifest", _manifest(tmp_path / "m.jsonl", [e, e]))
    with pytest.raises(CorpusError, match=r"nope\.jsonl: manifest not found"):
        load_corpus("manifest", tmp_path / "nope.jsonl")
