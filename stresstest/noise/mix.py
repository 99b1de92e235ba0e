"""Speech + noise mixing at a controlled SNR (SPEC §2).

Rules, in order:

1. Speech and noise are in canonical form (mono, 16 kHz, float32).
2. The noise segment for an (encounter, family) pair is chosen once, from an RNG
   derived from (run seed, encounter id, family), and reused at every SNR: only
   the gain differs between the SNR conditions of one family.
3. SNR is RMS-based over **active speech only**: both the speech RMS and the
   noise RMS are measured on the active-speech mask (turn boundaries or a VAD
   mask), so long pauses neither lower the speech level nor change the noise
   level the listener hears while someone talks.
   ``SNR_dB = 20·log10(rms(speech[mask]) / rms(gain·noise[mask]))``.
4. No silent clipping: if ``max|speech + gain·noise|`` would exceed
   :data:`CLIP_LIMIT`, the whole mixture (speech and noise alike, so the SNR is
   unchanged) is scaled by ``clip_scale < 1`` and the factor is recorded.
5. The measured SNR is recomputed from the files as written (clean speech file
   and mixture file: noise = mixture − clip_scale·speech) and must agree with
   the target to ±0.1 dB.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from stresstest.audio import SAMPLE_RATE_HZ, read_wav_exact, write_wav
from stresstest.errors import MixError
from stresstest.records import MixInfo

CLIP_LIMIT = 0.99
SNR_TOLERANCE_DB = 0.1


def item_rng(seed: int, *parts: str) -> np.random.Generator:
    """A per-item RNG derived from the run seed and the item's identity.

    The identity strings are hashed (sha256) into entropy words, so the stream
    does not depend on Python's hash randomisation or on processing order.
    """
    digest = hashlib.sha256("\x1f".join([str(seed), *parts]).encode()).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 32, 4)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))


def active_mask(n_samples: int, segments_s: Sequence[tuple[float, float]], sr: int = SAMPLE_RATE_HZ) -> np.ndarray:
    """Boolean mask of active speech from (start, end) segments in seconds."""
    mask = np.zeros(n_samples, dtype=bool)
    for start, end in segments_s:
        a = max(0, int(round(start * sr)))
        b = min(n_samples, int(round(end * sr)))
        if b > a:
            mask[a:b] = True
    return mask


def _rms(x: np.ndarray) -> float:
    # float64 accumulation: a float32 BLAS dot rounds differently on different CPU kernels, and a gain that
    # differs in its last bits gives a different mixture (and, through greedy ASR, a different transcript).
    # In float64 the reduction error is far below float32 resolution, so the float32 gain is the same everywhere.
    # numpy's own pairwise sum, not a BLAS dot: a threaded BLAS splits the sum by its thread count, so a
    # process with OMP_NUM_THREADS=1 (a Ray worker) and one with 2+ threads disagreed in the last bits of
    # the recorded gain.
    x64 = np.asarray(x, dtype=np.float64)
    return float(np.sqrt(np.sum(x64 * x64) / x64.size)) if x64.size else 0.0


def snr_db(speech: np.ndarray, noise: np.ndarray, mask: np.ndarray) -> float:
    """SNR in dB of speech vs noise, both measured on the mask."""
    s, n = _rms(speech[mask]), _rms(noise[mask])
    if n == 0.0:
        return float("inf")
    if s == 0.0:
        return float("-inf")
    return 20.0 * np.log10(s / n)


def fit_length(noise: np.ndarray, n_samples: int) -> np.ndarray:
    """Noise of exactly ``n_samples``: trimmed, or tiled if the source is shorter."""
    if noise.size == 0:
        raise MixError("noise segment is empty")
    if noise.size >= n_samples:
        return noise[:n_samples]
    reps = -(-n_samples // noise.size)
    return np.tile(noise, reps)[:n_samples]


def mix(
    speech: np.ndarray,
    noise: np.ndarray,
    mask: np.ndarray,
    target_snr_db: float,
) -> tuple[np.ndarray, float, float, float]:
    """Mix ``noise`` into ``speech`` at ``target_snr_db`` over the active mask.

    Args:
        speech: canonical clean speech.
        noise: noise segment, same length as speech (see :func:`fit_length`).
        mask: active-speech mask, same length.
        target_snr_db: desired SNR.

    Returns:
        (mixture, noise_gain, clip_scale, speech_rms).

    Raises:
        MixError: if lengths differ, the mask is empty, or speech/noise is silent there.
    """
    if not (speech.shape == noise.shape == mask.shape) or speech.ndim != 1:
        raise MixError(
            f"speech, noise and mask must be 1-D of equal length, got {speech.shape}, {noise.shape}, {mask.shape}"
        )
    if not mask.any():
        raise MixError("active-speech mask is empty: cannot measure speech RMS")
    s_rms = _rms(speech[mask])
    n_rms = _rms(noise[mask])
    if s_rms == 0.0:
        raise MixError("speech is silent on its active segments")
    if n_rms == 0.0:
        raise MixError("noise segment is silent where speech is active")
    gain = s_rms / (n_rms * 10.0 ** (target_snr_db / 20.0))
    mixture = np.multiply(noise, np.float32(gain), dtype=np.float32)
    mixture += speech
    peak = max(float(mixture.max()), -float(mixture.min()))
    clip_scale = 1.0 if peak <= CLIP_LIMIT else CLIP_LIMIT / peak
    if clip_scale != 1.0:
        mixture *= np.float32(clip_scale)
    return mixture, gain, clip_scale, s_rms


def measure_written_snr(
    speech_path: str | Path, mixture_path: str | Path, mask: np.ndarray, clip_scale: float
) -> float:
    """SNR measured back from the files as written (see module rule 5)."""
    speech = read_wav_exact(speech_path).astype(np.float64)
    mixture = read_wav_exact(mixture_path).astype(np.float64)
    if speech.shape != mixture.shape:
        raise MixError(f"{mixture_path}: length {mixture.shape} differs from speech {speech.shape}")
    scaled = clip_scale * speech
    return snr_db(scaled, mixture - scaled, mask)


def write_mixture(
    out_path: str | Path,
    speech_path: str | Path,
    speech: np.ndarray,
    noise: np.ndarray,
    mask: np.ndarray,
    target_snr_db: float,
    *,
    family: str,
    noise_source: str,
    noise_offset_s: float,
    noise_recipe: dict[str, object] | None = None,
) -> MixInfo:
    """Mix, write the mixture atomically, measure the SNR back and check it.

    Raises:
        MixError: if the SNR measured from the written files is off by more
            than :data:`SNR_TOLERANCE_DB`.
    """
    mixture, gain, clip_scale, s_rms = mix(speech, noise, mask, target_snr_db)
    write_wav(out_path, mixture)
    measured = measure_written_snr(speech_path, out_path, mask, clip_scale)
    if not abs(measured - target_snr_db) <= SNR_TOLERANCE_DB:
        raise MixError(
            f"{out_path}: measured SNR {measured:.3f} dB differs from target {target_snr_db} dB "
            f"by more than {SNR_TOLERANCE_DB} dB"
        )
    return MixInfo(
        family=family,
        noise_source=noise_source,
        noise_offset_s=noise_offset_s,
        noise_recipe=dict(noise_recipe or {}),
        target_snr_db=float(target_snr_db),
        measured_snr_db=round(float(measured), 4),
        speech_rms=s_rms,
        noise_gain=gain,
        clip_scale=clip_scale,
    )
