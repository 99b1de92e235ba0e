"""Speech + noise mixing at a controlled SNR (docs/spec.md §2).

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

:func:`write_mixture` streams: speech is read from its file and noise asked for
in blocks of :data:`~stresstest.audio.BLOCK_SAMPLES`, so memory does not grow
with the recording's length. Every sum is numpy's pairwise sum of the whole
sequence (:class:`PairwiseSum` rebuilds its tree from blocks), so the gain,
the mixture's bytes and the measured SNR are bit-identical to the whole-array
functions :func:`mix` and :func:`measure_written_snr`.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from stresstest.audio import (
    BLOCK_SAMPLES,
    SAMPLE_RATE_HZ,
    iter_wav_blocks,
    read_wav_exact,
    wav_frames,
    write_wav_blocks,
)
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
    return _snr_from_rms(_rms(speech[mask]), _rms(noise[mask]))


def _snr_from_rms(s: float, n: float) -> float:
    """SNR in dB of a speech RMS over a noise RMS (no noise: +inf; noise but no speech: -inf)."""
    if n == 0.0:
        return float("inf")
    if s == 0.0:
        return float("-inf")
    snr_db: float = 20.0 * np.log10(s / n)
    return snr_db


def _gain(s_rms: float, n_rms: float, target_snr_db: float) -> float:
    """The noise gain for ``target_snr_db`` from the speech and noise RMS on the active mask (rule 3).

    Raises:
        MixError: the speech or the noise is silent there (no gain reaches the target).
    """
    if s_rms == 0.0:
        raise MixError("speech is silent on its active segments")
    if n_rms == 0.0:
        raise MixError("noise segment is silent where speech is active")
    gain: float = s_rms / (n_rms * 10.0 ** (target_snr_db / 20.0))
    return gain


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
    gain = _gain(s_rms, _rms(noise[mask]), target_snr_db)
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


#: ``noise(lo, hi)``: the float32 noise samples ``lo`` to ``hi`` of the segment fitted to the speech.
NoiseBlocks = Callable[[int, int], np.ndarray]


def _leaf_sizes(n: int, leaf: int) -> Iterator[int]:
    """Sizes, left to right, of the sub-sums numpy's pairwise sum of ``n`` values splits into (each ≤ ``leaf``)."""
    if n <= leaf:
        yield n
        return
    n2 = n // 2
    n2 -= n2 % 8  # numpy's split: half, rounded down to its 8-way unroll
    yield from _leaf_sizes(n2, leaf)
    yield from _leaf_sizes(n - n2, leaf)


class PairwiseSum:
    """The sum of ``total`` float64 values fed in pieces, bit-identical to ``np.sum`` of all of them at once.

    ``np.sum`` of a contiguous float64 array is a pairwise sum whose tree depends only on the length
    (split in halves rounded down to a multiple of 8). Each sub-tree of at most ``leaf`` values is
    summed by ``np.sum`` itself as soon as its values have arrived, and the sub-sums are added along
    the same tree at the end: memory is one leaf, the result the whole-array one.
    """

    def __init__(self, total: int, leaf: int | None = None) -> None:
        self._total, self._leaf = total, max(128, leaf or BLOCK_SAMPLES)  # numpy stops splitting at 128
        self._sizes = list(_leaf_sizes(total, self._leaf))
        self._sums: list[np.float64] = []
        self._buf: list[np.ndarray] = []
        self._have = 0
        self._fed = 0
        self._drain()  # an empty sum is one empty leaf

    def add(self, values: np.ndarray) -> None:
        """Feed the next values (float64, in order)."""
        values = np.asarray(values, dtype=np.float64)
        self._fed += values.size
        if self._fed > self._total:
            raise MixError(f"internal: {self._fed} values fed to a sum of {self._total}")
        if values.size:
            self._buf.append(values)
            self._have += values.size
        self._drain()

    def _drain(self) -> None:
        """Sum every leaf whose values have all arrived."""
        while len(self._sums) < len(self._sizes) and self._have >= self._sizes[len(self._sums)]:
            m = self._sizes[len(self._sums)]
            pending = self._buf[0] if len(self._buf) == 1 else np.concatenate([np.zeros(0), *self._buf])
            self._sums.append(np.sum(pending[:m]))
            rest = pending[m:]
            self._buf = [rest] if rest.size else []
            self._have -= m

    def result(self) -> float:
        """The sum; every value must have been fed."""
        if self._fed != self._total or len(self._sums) != len(self._sizes):
            raise MixError(f"internal: {self._fed} of {self._total} values fed to a pairwise sum")
        leaves = iter(self._sums)

        def combine(n: int) -> np.float64:
            if n <= self._leaf:
                return next(leaves)
            n2 = n // 2
            n2 -= n2 % 8
            return combine(n2) + combine(n - n2)

        return float(combine(self._total))


@dataclass(frozen=True)
class SpanMask:
    """The mask of :func:`active_mask` held as merged sample spans and cut into blocks on demand."""

    n: int
    spans: tuple[tuple[int, int], ...]
    """Sorted, disjoint, non-empty ``[a, b)`` sample ranges."""

    @classmethod
    def from_segments(
        cls, n_samples: int, segments_s: Sequence[tuple[float, float]], sr: int = SAMPLE_RATE_HZ
    ) -> SpanMask:
        """Same rounding and clipping as :func:`active_mask`."""
        raw = sorted((max(0, int(round(s * sr))), min(n_samples, int(round(e * sr)))) for s, e in segments_s)
        merged: list[list[int]] = []
        for a, b in raw:
            if b <= a:
                continue
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        return cls(n_samples, tuple((a, b) for a, b in merged))

    @classmethod
    def from_array(cls, mask: np.ndarray) -> SpanMask:
        """The spans of a boolean mask."""
        m = np.asarray(mask, dtype=bool)
        edges = np.flatnonzero(np.diff(np.concatenate([[False], m, [False]]).astype(np.int8)))
        return cls(int(m.size), tuple((int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)))

    @property
    def count(self) -> int:
        """Number of active samples."""
        return sum(b - a for a, b in self.spans)

    def block(self, lo: int, hi: int) -> np.ndarray:
        """The mask's samples ``lo`` to ``hi``."""
        out = np.zeros(hi - lo, dtype=bool)
        k = max(0, bisect.bisect_right(self.spans, (lo, self.n + 1)) - 1)
        while k < len(self.spans) and self.spans[k][0] < hi:
            a, b = self.spans[k]
            if b > lo:
                out[max(a, lo) - lo : min(b, hi) - lo] = True
            k += 1
        return out


def array_noise(noise: np.ndarray) -> NoiseBlocks:
    """Blocks of an in-memory noise array (already fitted to the speech's length)."""
    return lambda lo, hi: noise[lo:hi]


def tiled_noise(period: np.ndarray) -> NoiseBlocks:
    """Blocks of ``period`` repeated end to end: the samples of :func:`fit_length` without building them."""
    if period.size == 0:
        raise MixError("noise segment is empty")
    p = period.size

    def block(lo: int, hi: int) -> np.ndarray:
        if hi <= p:
            return period[lo:hi]
        return np.take(period, np.arange(lo, hi, dtype=np.int64) % p)

    return block


def wav_noise(path: str | Path, offset: int = 0) -> NoiseBlocks:
    """Blocks of a file written by :func:`~stresstest.audio.write_wav`, from sample ``offset`` on and
    repeated end to end when it runs out (:func:`tiled_noise` of ``file[offset:]``), read from disk."""
    period = wav_frames(path) - offset
    if period <= 0:
        raise MixError(f"{path}: noise segment is empty")

    def read(start: int, count: int) -> np.ndarray:
        with sf.SoundFile(str(path)) as fh:
            fh.seek(offset + start)
            return np.asarray(fh.read(count, dtype="float32", always_2d=False))

    def block(lo: int, hi: int) -> np.ndarray:
        parts, pos = [], lo
        while pos < hi:
            start = pos % period
            take = min(hi - pos, period - start)
            parts.append(read(start, take))
            pos += take
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    return block


def _squares(x: np.ndarray) -> np.ndarray:
    x64 = np.asarray(x, dtype=np.float64)
    return x64 * x64


def _noise_block(noise: NoiseBlocks, lo: int, hi: int) -> np.ndarray:
    b = np.asarray(noise(lo, hi), dtype=np.float32)
    if b.shape != (hi - lo,):
        raise MixError(f"noise block {lo}:{hi} has shape {b.shape}, expected ({hi - lo},)")
    return b


def _rms_from(acc: PairwiseSum, count: int) -> float:
    return float(np.sqrt(acc.result() / count)) if count else 0.0


def _masked_rms(pairs: Iterable[tuple[np.ndarray, np.ndarray]], mask: SpanMask) -> tuple[float, float]:
    """The RMS over ``mask`` of two signals fed as pairs of equal blocks, in order from sample 0.

    Each is :func:`_rms` of the whole signal's masked samples, bit for bit (:class:`PairwiseSum`).
    """
    a_acc, b_acc = PairwiseSum(mask.count), PairwiseSum(mask.count)
    lo = 0
    for a, b in pairs:
        hi = lo + a.size
        m = mask.block(lo, hi)
        a_acc.add(_squares(a[m]))
        b_acc.add(_squares(b[m]))
        lo = hi
    return _rms_from(a_acc, mask.count), _rms_from(b_acc, mask.count)


def _speech_and_noise(speech_path: str | Path, noise: NoiseBlocks) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The speech file's blocks, each with the noise block of the same samples."""
    lo = 0
    for sp in iter_wav_blocks(speech_path):
        hi = lo + sp.size
        yield sp, _noise_block(noise, lo, hi)
        lo = hi


def _mix_gain(speech_path: str | Path, noise: NoiseBlocks, mask: SpanMask, target_snr_db: float) -> tuple[float, float]:
    """(noise gain, speech RMS) as :func:`mix` computes them, streamed."""
    if mask.count == 0:
        raise MixError("active-speech mask is empty: cannot measure speech RMS")
    s_rms, n_rms = _masked_rms(_speech_and_noise(speech_path, noise), mask)
    return _gain(s_rms, n_rms, target_snr_db), s_rms


def _mixture_blocks(
    speech_path: str | Path, noise: NoiseBlocks, gain: float, clip_scale: float
) -> Iterator[np.ndarray]:
    """The mixture of :func:`mix`, block by block (same float32 operations in the same order)."""
    for sp, nz in _speech_and_noise(speech_path, noise):
        out = np.multiply(nz, np.float32(gain), dtype=np.float32)
        out += sp
        if clip_scale != 1.0:
            out *= np.float32(clip_scale)
        yield out


def _clip_scale(speech_path: str | Path, noise: NoiseBlocks, gain: float) -> float:
    peak = 0.0
    for out in _mixture_blocks(speech_path, noise, gain, 1.0):
        if out.size:
            peak = max(peak, float(out.max()), -float(out.min()))
    return 1.0 if peak <= CLIP_LIMIT else CLIP_LIMIT / peak


def _written_speech_and_noise(
    speech_path: str | Path, mixture_path: str | Path, clip_scale: float
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Blocks of the speech and the noise in the written mixture (rule 5: noise = mixture − clip_scale·speech)."""
    for sp, mx in zip(iter_wav_blocks(speech_path), iter_wav_blocks(mixture_path), strict=True):
        scaled = clip_scale * sp.astype(np.float64)
        yield scaled, mx.astype(np.float64) - scaled


def measure_written_snr_streamed(
    speech_path: str | Path, mixture_path: str | Path, mask: SpanMask, clip_scale: float
) -> float:
    """:func:`measure_written_snr`, reading both files a block at a time (bit-identical result)."""
    n = wav_frames(speech_path)
    if wav_frames(mixture_path) != n:
        raise MixError(f"{mixture_path}: length {wav_frames(mixture_path)} differs from speech {n}")
    return float(_snr_from_rms(*_masked_rms(_written_speech_and_noise(speech_path, mixture_path, clip_scale), mask)))


def write_mixture(
    out_path: str | Path,
    speech_path: str | Path,
    noise: NoiseBlocks | np.ndarray,
    mask: SpanMask | np.ndarray,
    target_snr_db: float,
    *,
    family: str,
    noise_source: str,
    noise_offset_s: float,
    noise_recipe: dict[str, object] | None = None,
) -> MixInfo:
    """Mix the speech file with ``noise``, write the mixture atomically, measure the SNR back and check it.

    Streamed (module docstring): ``noise`` is an array as long as the speech or a :data:`NoiseBlocks`
    function, ``mask`` a boolean array or a :class:`SpanMask`; the result is bit-identical to
    :func:`mix` + :func:`~stresstest.audio.write_wav` + :func:`measure_written_snr`.

    Raises:
        MixError: if lengths differ, the mask is empty, speech or noise is silent on it, or the SNR
            measured from the written files is off by more than :data:`SNR_TOLERANCE_DB`.
    """
    n = wav_frames(speech_path)
    if isinstance(noise, np.ndarray):
        if noise.shape != (n,):
            raise MixError(f"speech, noise and mask must be 1-D of equal length, got ({n},), {noise.shape}")
        noise = array_noise(noise)
    span_mask = mask if isinstance(mask, SpanMask) else SpanMask.from_array(mask)
    if span_mask.n != n:
        raise MixError(f"speech, noise and mask must be 1-D of equal length, got ({n},), mask ({span_mask.n},)")
    gain, s_rms = _mix_gain(speech_path, noise, span_mask, target_snr_db)
    clip_scale = _clip_scale(speech_path, noise, gain)
    write_wav_blocks(out_path, n, _mixture_blocks(speech_path, noise, gain, clip_scale))
    measured = measure_written_snr_streamed(speech_path, out_path, span_mask, clip_scale)
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
