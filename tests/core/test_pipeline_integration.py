"""Real TTS → mix → faster-whisper on one short OSCE encounter: WER rises from clean to babble 5 dB."""

from __future__ import annotations

from pathlib import Path

import pytest

from stresstest.asr.stage import ASRConfig, ASRItem, transcribe_items
from stresstest.metrics.wer import asr_errors
from stresstest.noise.stage import MixJob, build_mixtures

# The OSCE transcripts ship with the project (data/osce, CC BY 4.0): this test never skips for want of data.
OSCE = Path(__file__).resolve().parents[2] / "data" / "osce" / "transcripts"


@pytest.mark.integration
@pytest.mark.slow
def test_tts_mix_asr_wer_rises_under_babble(tmp_path):
    from stresstest.corpus import load_corpus
    from stresstest.noise import NoiseSpec, make_noise_source
    from stresstest.speech import speech_for

    encs = load_corpus("osce", OSCE, limit=12)
    enc = encs[0].truncated(6)
    cache = tmp_path / "cache"
    speech = speech_for(enc, cache)
    spec = NoiseSpec(family="babble", bank_max_sentences=24, n_talkers_min=4, n_talkers_max=5)
    source = make_noise_source(spec, encounters=encs, cache_dir=cache)
    got: dict[str, tuple] = {}
    job = MixJob(enc.encounter_id, "babble", (15.0, 5.0), ("babble_15db", "babble_5db"))
    build_mixtures(
        job,
        speech,
        source,
        spec.model_dump(mode="json"),
        seed=7,
        cache_dir=cache,
        on_done=lambda cond, path, info, err: got.__setitem__(cond, (path, info, err)),
    )
    assert all(v[2] is None for v in got.values()), got
    for cond, (_, info, _) in got.items():
        assert abs(info.measured_snr_db - info.target_snr_db) <= 0.1, cond

    items = [ASRItem(enc.encounter_id, "clean", Path(speech.path))] + [
        ASRItem(enc.encounter_id, c, p) for c, (p, _, _) in sorted(got.items())
    ]
    texts: dict[str, str] = {}
    transcribe_items(
        items,
        ASRConfig(),
        cache_dir=cache,
        on_done=lambda it, t, err: texts.__setitem__(it.condition, t.text if t else f"ERR {err}"),
    )
    ref = enc.reference_text()

    def wer(cond: str) -> float:
        e = asr_errors(ref, texts[cond])
        return (e.sub + e.dele + e.ins) / e.ref_words

    assert wer("clean") < 0.35, texts["clean"]
    assert wer("babble_5db") > wer("clean"), (texts["clean"], texts["babble_5db"])

    # Same seed again: bit-identical mixture files (read from the cache, and recomputed from scratch).
    again: dict[str, tuple] = {}
    build_mixtures(
        job,
        speech,
        source,
        spec.model_dump(mode="json"),
        seed=7,
        cache_dir=tmp_path / "fresh",
        on_done=lambda cond, path, info, err: again.__setitem__(cond, (path, info, err)),
    )
    for cond in got:
        import soundfile as sf

        a, b = sf.read(again[cond][0])[0], sf.read(got[cond][0])[0]
        assert a.shape == b.shape, (a.shape, b.shape, speech.duration_s)
        assert float(abs(a - b).max()) == 0.0
        assert Path(again[cond][0]).read_bytes() == Path(got[cond][0]).read_bytes()
        assert again[cond][1] == got[cond][1]
