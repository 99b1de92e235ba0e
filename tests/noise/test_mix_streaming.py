"""The streamed mixer is the whole-array mixer, bit for bit (its memory: tests/hostile/test_scale.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import stresstest.audio as audio_mod
import stresstest.noise.mix as mix_mod
from stresstest.audio import SAMPLE_RATE_HZ as SR
from stresstest.audio import float_wav_bytes, write_wav
from stresstest.noise.mix import (
    PairwiseSum,
    SpanMask,
    active_mask,
    fit_length,
    measure_written_snr,
    mix,
    tiled_noise,
    write_mixture,
)
from stresstest.noise.stage import MIX_CODE_VERSION, NOISE_PERIOD_MAX_S, mixture_key, noise_period_s
from stresstest.speech.recording import _frame_levels, energy_vad


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 3000 samples (not a multiple of 8 or of a frame): many blocks and many pairwise leaves."""
    monkeypatch.setattr(audio_mod, "BLOCK_SAMPLES", 3000)
    monkeypatch.setattr(mix_mod, "BLOCK_SAMPLES", 3000)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 128, 129, 1000, 4099, 65_537, 250_001])
@pytest.mark.parametrize("leaf", [128, 300, 4096])
def test_pairwise_sum_equals_np_sum_bit_for_bit(n, leaf):
    x = np.random.default_rng(n).standard_normal(n) ** 2 * 1e-3
    for piece in (97, 977, max(n, 1)):
        acc = PairwiseSum(n, leaf)
        for i in range(0, n, piece):
            acc.add(x[i : i + piece])
        assert acc.result() == float(np.sum(x))  # exact: a naive running sum differs in the last bits


def test_span_mask_is_active_mask():
    n = 50_000
    segs = [(0.5, 1.2), (1.0, 1.5), (2.9, 2.95), (-1.0, 0.1), (3.0, 9.0), (2.0, 1.0)]
    ref = active_mask(n, segs)
    m = SpanMask.from_segments(n, segs)
    assert m.count == int(ref.sum())
    got = np.concatenate([m.block(lo, min(n, lo + 777)) for lo in range(0, n, 777)])
    np.testing.assert_array_equal(got, ref)
    assert SpanMask.from_array(ref) == m


def _speech(n: int, segs: list[tuple[float, float]], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = 0.01 * rng.standard_normal(n)
    t = np.arange(n) / SR
    x += active_mask(n, segs) * 0.5 * np.sin(2 * np.pi * 180 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    return x.astype(np.float32)


@pytest.mark.parametrize(("target", "noise_len", "loud"), [(5.0, None, 1.0), (-5.0, 7001, 1.0), (0.0, None, 40.0)])
def test_streamed_mixture_is_the_whole_array_mixture(tmp_path, small_blocks, target, noise_len, loud):
    n = 40_123
    segs = [(0.1, 0.9), (0.8, 1.6), (2.0, 2.4)]
    speech = _speech(n, segs, 3)
    src = (loud * np.random.default_rng(4).standard_normal(noise_len or n)).astype(np.float32)
    noise = fit_length(src, n)
    mask = active_mask(n, segs)
    write_wav(tmp_path / "s.wav", speech)
    # The reference: the whole-array functions the mixer used before it streamed.
    ref_mix, gain, clip, s_rms = mix(speech, noise, mask, target)
    (tmp_path / "ref.wav").write_bytes(float_wav_bytes(ref_mix))
    ref_snr = measure_written_snr(tmp_path / "s.wav", tmp_path / "ref.wav", mask, clip)

    info = write_mixture(
        tmp_path / "m.wav",
        tmp_path / "s.wav",
        tiled_noise(src),
        SpanMask.from_segments(n, segs),
        target,
        family="x",
        noise_source="n",
        noise_offset_s=0.0,
    )
    assert (tmp_path / "m.wav").read_bytes() == (tmp_path / "ref.wav").read_bytes()
    assert (info.noise_gain, info.clip_scale, info.speech_rms) == (gain, clip, s_rms)
    assert info.measured_snr_db == round(ref_snr, 4)
    if loud > 1.0:
        assert info.clip_scale < 1.0  # the clipping guard ran on the streamed path too


def test_streamed_wav_writer_is_the_whole_file_writer(tmp_path, small_blocks):
    x = np.random.default_rng(0).standard_normal(10_001).astype(np.float32)
    write_wav(tmp_path / "a.wav", x)
    assert (tmp_path / "a.wav").read_bytes() == float_wav_bytes(x)
    assert list(tmp_path.iterdir()) == [tmp_path / "a.wav"]  # no temporary file left behind


def test_blockwise_vad_levels_are_the_whole_array_levels():
    x = 0.01 * np.random.default_rng(1).standard_normal(320 * 9000 + 17)
    x[(np.arange(x.size) // SR) % 3 == 0] *= 50  # one loud second in three
    x = x.astype(np.float32)
    n = x.size // 320
    ref = 10 * np.log10(np.mean(np.asarray(x[: n * 320], dtype=np.float64).reshape(n, 320) ** 2, axis=1) + 1e-12)
    np.testing.assert_array_equal(_frame_levels(x, 320, n, frames_per_block=1000), ref)
    assert len(energy_vad(x)) == 60  # and the VAD finds the 60 loud seconds in it


def test_noise_period_keeps_short_recordings_keys():
    args = ("a" * 64, "ambient", {"kind": "builtin"}, "tok", 1, 5.0)
    assert noise_period_s(NOISE_PERIOD_MAX_S) is None and noise_period_s(NOISE_PERIOD_MAX_S + 1) == NOISE_PERIOD_MAX_S
    from stresstest.cache import hash_obj

    assert mixture_key(*args) == hash_obj("mixture", MIX_CODE_VERSION, *args[:5], 5.0)
    assert mixture_key(*args, NOISE_PERIOD_MAX_S) != mixture_key(*args)


def _write_inputs(tmp_path: Path) -> dict[str, Path]:
    """The same dialogue-like signal as 16 kHz mono PCM-16, 44.1 kHz stereo float, 48 kHz FLAC; and a noise."""
    import soundfile as sf

    files = {}
    for name, sr, ch, subtype in (
        ("mono16k.wav", 16000, 1, "PCM_16"),
        ("stereo44k.wav", 44100, 2, "FLOAT"),
        ("flac48k.flac", 48000, 1, "PCM_24"),
    ):
        n = int(3.3 * sr)
        t = np.arange(n) / sr
        x = 0.4 * np.sin(2 * np.pi * 200 * t) * ((t % 1.0) < 0.6) + 0.003 * np.random.default_rng(sr).standard_normal(n)
        data = np.stack([x, 0.5 * x], axis=1) if ch == 2 else x
        sf.write(tmp_path / name, data, sr, subtype=subtype)
        files[name] = tmp_path / name
    sf.write(tmp_path / "noise.wav", np.random.default_rng(5).standard_normal(5 * 22050) * 0.1, 22050)
    files["noise"] = tmp_path / "noise.wav"
    sf.write(tmp_path / "short.wav", np.random.default_rng(6).standard_normal(7001) * 0.1, 16000)
    files["short noise"] = tmp_path / "short.wav"
    return files


def test_streamed_canonical_form_is_load_audio(tmp_path, small_blocks):
    from stresstest.audio import load_audio, scan_audio, write_canonical
    from stresstest.speech.recording import energy_vad_file

    for name, path in _write_inputs(tmp_path).items():
        ref = load_audio(path)
        n, peak = scan_audio(path)
        assert n == ref.size, name
        for keep in (n, n // 3):
            write_canonical(path, tmp_path / "c.wav", keep, peak)
            assert (tmp_path / "c.wav").read_bytes() == float_wav_bytes(ref[:keep]), name
        assert energy_vad_file(tmp_path / "c.wav") == energy_vad(ref[: n // 3]), name


def test_mix_command_output_is_the_whole_array_mixture(tmp_path, small_blocks, capsys):
    """`stresstest mix`, streamed, writes the bytes the whole-array code wrote (reference built here from
    load_audio, energy_vad, fit_length and mix), for a noise longer than, as long as and shorter than the speech."""
    from stresstest.audio import load_audio
    from stresstest.cli import main
    from stresstest.noise.mix import item_rng

    files = _write_inputs(tmp_path)
    for speech_name, noise_path in (
        ("stereo44k.wav", files["noise"]),
        ("mono16k.wav", files["flac48k.flac"]),
        ("flac48k.flac", files["short noise"]),
    ):
        speech_path = files[speech_name]
        speech, noise_full = load_audio(speech_path), load_audio(noise_path)
        n = speech.size
        rng = item_rng(3, speech_path.name, "file")
        offset = int(rng.integers(0, noise_full.size - n + 1)) if noise_full.size > n else 0
        noise = fit_length(noise_full[offset:] if noise_full.size > n else noise_full, n)
        ref, gain, clip, _ = mix(speech, noise, active_mask(n, energy_vad(speech)), 4.0)
        out = tmp_path / f"mix-{speech_name}.wav"
        assert (
            main(
                [
                    "mix",
                    "--speech",
                    str(speech_path),
                    "--noise",
                    str(noise_path),
                    "--snr",
                    "4",
                    "--seed",
                    "3",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        info = json.loads(capsys.readouterr().out)
        assert out.read_bytes() == float_wav_bytes(ref), speech_name
        assert (info["noise_gain"], info["clip_scale"], info["noise_offset_s"]) == (gain, clip, offset / SR)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # temporaries removed


def test_a_recording_longer_than_the_noise_period_hears_the_period_repeated(tmp_path, monkeypatch):
    """build_mixtures with a 2-s period on 5 s of speech: the segment is generated for 2 s, tiled, recorded in
    the recipe and the key; at the period itself nothing changes (same segment as before the cap existed)."""
    import stresstest.noise.stage as stage
    from stresstest.noise.ambient import AmbientNoise
    from stresstest.noise.mix import item_rng
    from stresstest.records import SpeechAudio

    monkeypatch.setattr(stage, "NOISE_PERIOD_MAX_S", 2.0)
    segs = [(0.2, 1.5), (2.0, 4.6)]
    speech = _speech(5 * SR, segs, 1)
    write_wav(tmp_path / "s.wav", speech)
    sp = SpeechAudio(
        encounter_id="E1",
        path=str(tmp_path / "s.wav"),
        duration_s=5.0,
        segments_s=tuple(segs),
        segments_source="vad",
        recipe={},
    )
    got = {}
    stage.build_mixtures(
        stage.MixJob("E1", "ambient", (5.0,), ("ambient_5db",)),
        sp,
        AmbientNoise(),
        {"k": 1},
        seed=7,
        cache_dir=tmp_path / "cache",
        on_done=lambda c, p, i, e: got.update(c=(p, i, e)),
    )
    path, info, err = got["c"]
    assert err is None and info.noise_recipe["loop_period_s"] == 2.0
    period = AmbientNoise().segment(2.0, item_rng(7, "E1", "ambient"), exclude_encounter_id="E1").audio
    ref, gain, clip, _ = mix(speech, fit_length(period, speech.size), active_mask(speech.size, segs), 5.0)
    assert path.read_bytes() == float_wav_bytes(ref)
    assert (info.noise_gain, info.clip_scale) == (gain, clip)
