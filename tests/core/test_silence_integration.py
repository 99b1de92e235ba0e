"""Real TTS → silence probes → faster-whisper tiny.en → scoring, on the first turns of one OSCE encounter."""

from __future__ import annotations

from pathlib import Path

import pytest

from stresstest.asr.stage import ASRConfig, ASRItem, transcribe_items
from stresstest.audio import wav_frames
from stresstest.grid import Condition, ConditionGrid

OSCE = Path(__file__).resolve().parents[2] / "data" / "osce" / "transcripts"


@pytest.mark.integration
@pytest.mark.slow
def test_probe_audio_is_transcribed_and_scored(tmp_path: Path) -> None:
    from stresstest.corpus import load_corpus
    from stresstest.noise.chain import build_chain
    from stresstest.pipeline.score import ConditionOutputs, EncounterOutputs, score_encounter
    from stresstest.records import Transcript
    from stresstest.speech import speech_for

    enc = load_corpus("osce", OSCE, limit=1)[0].truncated(6)
    cache = tmp_path / "cache"
    speech = speech_for(enc, cache)
    steps = [{"silence": {"pause_s": 8, "every": 2}}, {"room": {"rt60_s": 0.3}}]
    wav, info, err = build_chain(enc.encounter_id, steps, speech, {}, {}, seed=7, cache_dir=cache)
    assert err is None and wav is not None and info is not None
    entry = info.chain[0]
    stretches = entry.stretches
    assert stretches and all(isinstance(s.after_turn, int) for s in stretches)
    assert wav_frames(wav) == wav_frames(speech.path) + round(float(entry.inserted_s) * 16000)
    # same seed, fresh cache: the same audio bit for bit; the cached entry is read back as written
    wav2, info2, _ = build_chain(enc.encounter_id, steps, speech, {}, {}, seed=7, cache_dir=tmp_path / "fresh")
    assert wav2 is not None and Path(wav2).read_bytes() == Path(wav).read_bytes() and info2 == info
    assert build_chain(enc.encounter_id, steps, speech, {}, {}, seed=7, cache_dir=cache)[1] == info

    probe = Condition.chained("probe", steps)
    texts: dict[str, object] = {}
    transcribe_items(
        [ASRItem(enc.encounter_id, "clean", Path(speech.path)), ASRItem(enc.encounter_id, "probe", wav)],
        ASRConfig(),
        cache_dir=cache,
        on_done=lambda it, t, e: texts.__setitem__(it.condition, t or e),
    )
    assert all(not isinstance(t, str) for t in texts.values()), texts
    clean_t, probe_t = texts["clean"], texts["probe"]
    assert isinstance(clean_t, Transcript) and isinstance(probe_t, Transcript)
    x = EncounterOutputs(
        encounter=enc,
        conditions={
            "clean": ConditionOutputs(transcript=clean_t),
            "probe": ConditionOutputs(transcript=probe_t, mix=info),
        },
    )
    rows = {it.row.condition: it for it in score_encounter(x, ConditionGrid([Condition.clean(), probe]), "none")}
    row = rows["probe"].row
    assert row.probe_s == pytest.approx(8.0 * len(stretches))
    assert row.probe_words is not None and row.probe_words >= 0
    assert row.ref_words_clinician and row.ref_words_patient  # the speaker split is still computed
    assert row.item_wer is not None and row.item_wer < 60.0, row.hypothesis_text  # the speech came through
    detail = rows["probe"].detail["silence_probes"]
    assert sum(s["words"] for s in detail["stretches"]) == row.probe_words
