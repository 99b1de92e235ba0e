"""Benchmark: condition construction and ASR throughput, each against its alternative in the same run.

1. Mixing throughput (× real time) on the same speech and noise:
   ours (``stresstest.noise.mix.mix`` with the active-speech mask) vs
   ``audiomentations.AddBackgroundNoise`` vs ``torchaudio.functional.add_noise``
   (each skipped with a printed reason when not installed).
2. ASR × real time with faster-whisper: sequential windows vs batched windows
   across encounters, on the same audio; also checks both paths gave the same text.

Usage: python scripts/bench_conditions.py [--seconds 60] [--repeats 20] [--asr-items 4] [--batch 8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from stresstest.audio import SAMPLE_RATE_HZ as SR
from stresstest.audio import write_wav
from stresstest.noise.mix import active_mask, mix


def _speech(seconds: float, seed: int = 0) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Speech rendered with the embedded TTS (falls back to synthetic bursts without piper)."""
    try:
        from stresstest.speech import SpeakerVoice, synthesize

        sentence = (
            "I have had a dull ache in my chest for two hours and I take warfarin five milligrams. "
            "It gets worse when I climb three or four flights of stairs."
        )
        one = synthesize(sentence, SpeakerVoice())
        gap = np.zeros(int(0.5 * SR), np.float32)
        pieces, segs, t = [], [], 0.0
        while t < seconds:
            pieces += [one, gap]
            segs.append((t, t + one.size / SR))
            t += (one.size + gap.size) / SR
        x = np.concatenate(pieces)[: int(seconds * SR)]
        return x, segs
    except Exception as exc:  # keep the benchmark usable without the voice package
        print(f"(piper unavailable: {exc}; using synthetic speech)")
        rng = np.random.default_rng(seed)
        return rng.standard_normal(int(seconds * SR)).astype(np.float32) * 0.1, [(0.0, seconds)]


def _time(fn, repeats: int) -> float:
    fn()  # warm-up
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / repeats


def bench_mixing(seconds: float, repeats: int) -> dict[str, float]:
    speech, segs = _speech(seconds)
    noise = np.random.default_rng(1).standard_normal(speech.size).astype(np.float32)
    mask = active_mask(speech.size, segs)
    results: dict[str, float] = {}
    t = _time(lambda: mix(speech, noise, mask, 5.0), repeats)
    results["stresstest.mix"] = seconds / t
    try:
        from audiomentations import AddBackgroundNoise

        with tempfile.TemporaryDirectory() as d:
            write_wav(Path(d) / "noise.wav", noise)
            aug = AddBackgroundNoise(sounds_path=d, min_snr_db=5.0, max_snr_db=5.0, noise_rms="relative", p=1.0)
            t = _time(lambda: aug(samples=speech, sample_rate=SR), repeats)
            results["audiomentations.AddBackgroundNoise"] = seconds / t
    except ImportError:
        print("audiomentations: not installed (pip install audiomentations) - skipped")
    try:
        import torch
        import torchaudio.functional as taf

        s_t, n_t, snr = torch.from_numpy(speech)[None], torch.from_numpy(noise)[None], torch.tensor([5.0])
        t = _time(lambda: taf.add_noise(s_t, n_t, snr), repeats)
        results["torchaudio.functional.add_noise"] = seconds / t
    except ImportError as exc:
        print(f"torchaudio: not importable ({exc}) - skipped")
    return results


def bench_asr(n_items: int, seconds: float, batch: int) -> dict[str, float]:
    from stresstest.asr.backends import FasterWhisperBackend
    from stresstest.asr.base import DecodingOptions, split_windows

    be = FasterWhisperBackend()
    opts = DecodingOptions()
    base, _ = _speech(seconds)
    rng = np.random.default_rng(2)
    items = [base + 0.02 * rng.standard_normal(base.size).astype(np.float32) for _ in range(n_items)]
    windows = [w for x in items for w in split_windows(x)]
    be.transcribe_windows(windows[:1], opts)  # load the model outside the timing
    t0 = time.perf_counter()
    seq = be.transcribe_windows(windows, opts)
    t_seq = time.perf_counter() - t0
    t0 = time.perf_counter()
    bat = be.transcribe_windows_batched(windows, opts, batch)
    t_bat = time.perf_counter() - t0
    same = sum(a.split() == b.split() for a, b in zip(seq, bat, strict=True))
    audio_s = n_items * seconds
    print(f"ASR windows: {len(windows)}; identical text in {same}/{len(windows)} windows (sequential vs batched)")
    return {"sequential": audio_s / t_seq, f"batched (batch={batch})": audio_s / t_bat}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--asr-items", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--skip-asr", action="store_true")
    a = ap.parse_args()

    print(f"== mixing: {a.seconds:.0f} s of 16 kHz speech, {a.repeats} repeats ==")
    mixing = bench_mixing(a.seconds, a.repeats)
    ours = mixing["stresstest.mix"]
    for name, xrt in mixing.items():
        print(f"  {name:40s} {xrt:12.0f} x real time   ratio ours/this = {ours / xrt:6.2f}")
    if not a.skip_asr:
        print(f"== ASR: faster-whisper tiny.en int8, {a.asr_items} items x {a.seconds:.0f} s ==")
        asr = bench_asr(a.asr_items, a.seconds, a.batch)
        seq = asr["sequential"]
        for name, xrt in asr.items():
            print(f"  {name:40s} {xrt:12.2f} x real time   speed-up vs sequential = {xrt / seq:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
