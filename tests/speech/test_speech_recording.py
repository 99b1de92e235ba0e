"""Real recordings: canonical copy in the cache, mask from timings or the energy VAD."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from stresstest.audio import read_wav_exact
from stresstest.errors import SpeechError
from stresstest.records import Encounter, Turn
from stresstest.speech import energy_vad, load_recording, speech_for

SR_IN = 44100
BURSTS = ((1.0, 2.5), (4.0, 4.6), (7.0, 9.0))  # seconds of "speech" in a 10-s file


def _recording(path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 10 * SR_IN
    t = np.arange(n) / SR_IN
    x = 1e-4 * rng.standard_normal(n)  # faint room floor
    for s, e in BURSTS:
        a, b = int(s * SR_IN), int(e * SR_IN)
        x[a:b] += 0.3 * np.sin(2 * np.pi * 180 * t[a:b]) * (1 + 0.5 * np.sin(2 * np.pi * 4 * t[a:b]))
    stereo = np.stack([x, 0.8 * x], axis=1)
    sf.write(str(path), stereo.astype(np.float32), SR_IN)
    return path


def _enc(audio: Path | None, timed: bool) -> Encounter:
    turns = tuple(
        Turn(
            speaker="doctor" if i % 2 == 0 else "patient",
            text=f"turn {i}",
            start_s=s if timed else None,
            end_s=e if timed else None,
        )
        for i, (s, e) in enumerate(BURSTS)
    )
    return Encounter(
        encounter_id="REC1",
        corpus="manifest",
        source_path="mem",
        turns=turns,
        audio_path=str(audio) if audio else None,
    )


def test_vad_mask_finds_bursts(tmp_path: Path) -> None:
    wav = _recording(tmp_path / "rec.wav")
    sp = speech_for(_enc(wav, timed=False), tmp_path / "cache")
    assert sp.segments_source == "vad"
    assert len(sp.segments_s) == len(BURSTS)
    for (s, e), (ts, te) in zip(sp.segments_s, BURSTS, strict=True):
        assert abs(s - ts) <= 0.08 and abs(e - te) <= 0.08
    x = read_wav_exact(sp.path)
    assert len(x) == 10 * 16000 and sp.duration_s == pytest.approx(10.0)
    assert Path(sp.path).is_relative_to(tmp_path / "cache")


def test_timings_mask_and_cache(tmp_path: Path) -> None:
    wav = _recording(tmp_path / "rec.wav")
    enc = _enc(wav, timed=True)
    sp = load_recording(enc, tmp_path / "cache")
    assert sp.segments_source == "corpus_timings"
    assert sp.segments_s == BURSTS
    assert load_recording(enc, tmp_path / "cache") == sp


def test_vad_is_deterministic_and_handles_silence() -> None:
    rng = np.random.default_rng(1)
    x = (0.01 * rng.standard_normal(32000)).astype(np.float32)
    assert energy_vad(x) == energy_vad(x.copy())
    assert energy_vad(np.zeros(10, dtype=np.float32)) == ()


def test_missing_recording_errors(tmp_path: Path) -> None:
    with pytest.raises(SpeechError, match="no audio_path"):
        load_recording(_enc(None, timed=False), tmp_path)
    with pytest.raises(SpeechError, match="not found"):
        load_recording(_enc(tmp_path / "gone.wav", timed=False), tmp_path)


def test_osce_mp3_recording_is_read_through_the_loader(tmp_path: Path) -> None:
    """The OSCE layout with a real .mp3 beside the transcripts: attached by the loader, decoded, VAD mask."""
    from stresstest.corpus import load_corpus

    root = tmp_path / "osce"
    (root / "transcripts").mkdir(parents=True)
    (root / "transcripts" / "RES0001.txt").write_text("D: Any cough?\nP: Yes, for two days.\n")
    (root / "audio").mkdir()
    wav = _recording(tmp_path / "rec.wav")
    x, sr = sf.read(str(wav))
    sf.write(str(root / "audio" / "RES0001.mp3"), x.astype(np.float32), sr, format="MP3")
    (enc,) = load_corpus("osce", root)
    assert enc.audio_path == str((root / "audio" / "RES0001.mp3").resolve())
    sp = speech_for(enc, tmp_path / "cache")
    assert sp.segments_source == "vad" and sp.duration_s == pytest.approx(10.0, abs=0.1)
    assert len(sp.segments_s) == len(BURSTS)
