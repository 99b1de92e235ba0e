"""Mixing rules of docs/spec.md §2 on synthetic and real-length audio."""

from __future__ import annotations

import numpy as np
import pytest

from stresstest.audio import SAMPLE_RATE_HZ as SR
from stresstest.audio import write_wav
from stresstest.errors import MixError
from stresstest.noise.mix import (
    CLIP_LIMIT,
    active_mask,
    fit_length,
    item_rng,
    measure_written_snr,
    mix,
    snr_db,
    write_mixture,
)


def _speechlike(duration_s: float, segments: list[tuple[float, float]], seed: int = 0) -> np.ndarray:
    """Amplitude-modulated harmonic bursts on the given segments, silence elsewhere."""
    rng = np.random.default_rng(seed)
    n = int(duration_s * SR)
    t = np.arange(n) / SR
    x = np.zeros(n)
    for a, b in segments:
        i, j = int(a * SR), int(b * SR)
        f0 = rng.uniform(100, 220)
        tt = t[i:j]
        burst = sum(np.sin(2 * np.pi * f0 * k * tt) / k for k in range(1, 6))
        x[i:j] = burst * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * tt)) * rng.uniform(0.2, 0.6)
    return x.astype(np.float32)


@pytest.mark.parametrize("target", [15.0, 10.0, 5.0, 0.0, -5.0])
def test_measured_snr_matches_target_synthetic(tmp_path, target):
    segs = [(0.5, 2.0), (2.6, 4.1)]
    speech = _speechlike(5.0, segs)
    noise = np.random.default_rng(1).standard_normal(speech.size).astype(np.float32)
    mask = active_mask(speech.size, segs)
    write_wav(tmp_path / "s.wav", speech)
    info = write_mixture(
        tmp_path / "m.wav",
        tmp_path / "s.wav",
        noise,
        mask,
        target,
        family="ambient",
        noise_source="white",
        noise_offset_s=0.0,
    )
    assert abs(info.measured_snr_db - target) <= 0.1
    assert abs(measure_written_snr(tmp_path / "s.wav", tmp_path / "m.wav", mask, info.clip_scale) - target) <= 0.1


def test_measured_snr_real_length_audio(tmp_path):
    """A 3-minute dialogue-length signal with 40 turns."""
    rng = np.random.default_rng(7)
    segs, t = [], 0.3
    for _ in range(40):
        d = float(rng.uniform(1.0, 6.0))
        segs.append((t, t + d))
        t += d + float(rng.uniform(0.2, 0.8))
    speech = _speechlike(t + 0.5, segs, seed=3)
    noise = np.cumsum(rng.standard_normal(speech.size)).astype(np.float32)  # brown noise
    noise -= noise.mean()
    mask = active_mask(speech.size, segs)
    write_wav(tmp_path / "s.wav", speech)
    for target in (15.0, 10.0, 5.0):
        info = write_mixture(
            tmp_path / f"m{target}.wav",
            tmp_path / "s.wav",
            noise,
            mask,
            target,
            family="ambient",
            noise_source="brown",
            noise_offset_s=0.0,
        )
        assert abs(info.measured_snr_db - target) <= 0.1


def test_leading_and_trailing_silence_do_not_move_snr():
    segs = [(0.0, 2.0)]
    speech = _speechlike(2.0, segs)
    noise = np.random.default_rng(2).standard_normal(speech.size).astype(np.float32)
    m1, g1, _, _ = mix(speech, noise, active_mask(speech.size, segs), 10.0)
    pad = np.zeros(SR * 20, dtype=np.float32)
    speech_p = np.concatenate([pad, speech, pad])
    noise_p = np.concatenate(
        [np.random.default_rng(3).standard_normal(pad.size), noise, np.random.default_rng(4).standard_normal(pad.size)]
    ).astype(np.float32)
    segs_p = [(20.0, 22.0)]
    mask_p = active_mask(speech_p.size, segs_p)
    m2, g2, c2, _ = mix(speech_p, noise_p, mask_p, 10.0)
    assert g2 == pytest.approx(g1, rel=1e-9)
    assert snr_db(c2 * speech_p, m2 - c2 * speech_p, mask_p) == pytest.approx(10.0, abs=0.01)
    # Whole-file RMS would have said otherwise: the silence would bias it by > 10 dB.
    whole = active_mask(speech_p.size, [(0.0, speech_p.size / SR)])
    assert abs(snr_db(speech_p, g2 * noise_p, whole) - 10.0) > 5.0


def test_same_seed_bit_identical_and_segment_reused(tmp_path):
    r1 = item_rng(1234, "CAR0001", "babble").standard_normal(1000)
    r2 = item_rng(1234, "CAR0001", "babble").standard_normal(1000)
    r3 = item_rng(1234, "CAR0001", "ambient").standard_normal(1000)
    r4 = item_rng(1235, "CAR0001", "babble").standard_normal(1000)
    assert np.array_equal(r1, r2)
    assert not np.array_equal(r1, r3) and not np.array_equal(r1, r4)

    segs = [(0.2, 1.8)]
    speech = _speechlike(2.0, segs)
    mask = active_mask(speech.size, segs)
    noise = item_rng(9, "e", "ambient").standard_normal(speech.size).astype(np.float32)
    write_wav(tmp_path / "s.wav", speech)
    a = write_mixture(
        tmp_path / "a.wav", tmp_path / "s.wav", noise, mask, 5.0, family="x", noise_source="n", noise_offset_s=0.0
    )
    b = write_mixture(
        tmp_path / "b.wav", tmp_path / "s.wav", noise, mask, 5.0, family="x", noise_source="n", noise_offset_s=0.0
    )
    assert (tmp_path / "a.wav").read_bytes() == (tmp_path / "b.wav").read_bytes()
    assert a == b
    # Across SNRs only the gain changes: the noise component is the same waveform up to a scalar.
    m15, g15, c15, _ = mix(speech, noise, mask, 15.0)
    m5, g5, c5, _ = mix(speech, noise, mask, 5.0)
    n15 = (m15.astype(np.float64) / c15 - speech) / g15
    n5 = (m5.astype(np.float64) / c5 - speech) / g5
    np.testing.assert_allclose(n15, noise, atol=2e-4)
    np.testing.assert_allclose(n5, noise, atol=2e-4)


def test_clipping_scales_whole_mixture_and_is_recorded(tmp_path):
    segs = [(0.0, 1.0)]
    speech = (0.98 * np.sin(2 * np.pi * 200 * np.arange(SR) / SR)).astype(np.float32)
    noise = np.random.default_rng(0).standard_normal(SR).astype(np.float32)
    mask = active_mask(SR, segs)
    mixture, _, clip, _ = mix(speech, noise, mask, 0.0)
    assert clip < 1.0
    assert np.max(np.abs(mixture)) <= CLIP_LIMIT + 1e-6
    write_wav(tmp_path / "s.wav", speech)
    info = write_mixture(
        tmp_path / "m.wav", tmp_path / "s.wav", noise, mask, 0.0, family="x", noise_source="n", noise_offset_s=0.0
    )
    assert info.clip_scale == pytest.approx(clip)
    assert abs(info.measured_snr_db) <= 0.1


def test_errors_are_clear():
    x = np.ones(100, dtype=np.float32)
    with pytest.raises(MixError, match="mask is empty"):
        mix(x, x, np.zeros(100, dtype=bool), 5.0)
    with pytest.raises(MixError, match="noise segment is silent"):
        mix(x, np.zeros(100, dtype=np.float32), np.ones(100, dtype=bool), 5.0)
    with pytest.raises(MixError, match="equal length"):
        mix(x, x[:50], np.ones(100, dtype=bool), 5.0)
    with pytest.raises(MixError, match="empty"):
        fit_length(np.zeros(0, dtype=np.float32), 10)


def test_fit_length_tiles_short_noise():
    n = np.arange(5, dtype=np.float32)
    assert fit_length(n, 12).tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]
    assert fit_length(n, 3).tolist() == [0, 1, 2]
