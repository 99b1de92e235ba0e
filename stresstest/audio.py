"""Audio I/O and the canonical form every stage works in (docs/spec.md §2).

Canonical form: mono (channel mean), float32, 16 kHz, peak-normalised to
``PEAK_DBFS`` (amplitude normalisation). Resampling uses soxr (VHQ), which is
deterministic.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import soundfile as sf

from stresstest.errors import AudioError

SAMPLE_RATE_HZ = 16000
PEAK_DBFS = -1.0
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg")


def to_mono(x: np.ndarray) -> np.ndarray:
    """Downmix (frames, channels) to mono by averaging channels."""
    if x.ndim == 1:
        return x
    if x.ndim == 2:
        mono: np.ndarray = x.mean(axis=1)
        return mono
    raise AudioError(f"expected 1-D or 2-D audio, got shape {x.shape}")


def resample(x: np.ndarray, sr_in: int, sr_out: int = SAMPLE_RATE_HZ) -> np.ndarray:
    """Resample with soxr (very high quality); identity when the rates match."""
    if sr_in == sr_out:
        return x.astype(np.float32, copy=False)
    import soxr

    return np.asarray(soxr.resample(x.astype(np.float32), sr_in, sr_out, quality="VHQ"), dtype=np.float32)


def peak_normalise(x: np.ndarray, peak_dbfs: float = PEAK_DBFS) -> np.ndarray:
    """Scale so that the absolute peak is ``peak_dbfs``; silence stays silence."""
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    if peak == 0.0:
        return x.astype(np.float32, copy=False)
    return (x * (10 ** (peak_dbfs / 20) / peak)).astype(np.float32)


def wav_truncation(path: str | Path) -> str | None:
    """Why a RIFF/WAVE file is truncated (its header promises more than it holds), or ``None``.

    libsndfile silently reads whatever part of the data chunk is present, so a
    recording cut short by a failed copy would be accepted; this walks the chunk
    headers and compares the declared sizes with the file size. Non-RIFF files
    (flac, mp3, ogg, RF64) are not judged here (``None``).
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            head = fh.read(12)
            if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
                return None
            pos = 12
            while pos + 8 <= size:
                fh.seek(pos)
                hdr = fh.read(8)
                cid, clen = hdr[:4], struct.unpack("<I", hdr[4:8])[0]
                if cid == b"data":
                    if clen == 0xFFFFFFFF:  # streaming writers: size unknown, data runs to EOF
                        return None
                    have = size - pos - 8
                    if clen > have:
                        return f"truncated: its header declares {clen} bytes of audio data, the file holds {have}"
                    return None
                pos += 8 + clen + (clen & 1)
            return "truncated: no audio data chunk before the end of the file"
    except OSError:
        return None


def _read_any(path: Path) -> tuple[np.ndarray, int]:
    problem = wav_truncation(path)
    if problem is not None:
        raise AudioError(f"{path}: {problem} (re-copy or re-export the recording)")
    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=False)
        return np.asarray(data), int(sr)
    except Exception as sf_exc:  # libsndfile may lack a codec (older mp3 support): try PyAV
        try:
            import av
        except ImportError:
            raise AudioError(f"{path}: cannot read audio ({sf_exc})") from sf_exc
        try:
            with av.open(str(path)) as container:
                stream = container.streams.audio[0]
                sr = int(stream.rate or 0)
                frames = [f.to_ndarray() for f in container.decode(stream)]
        except Exception as av_exc:
            raise AudioError(f"{path}: cannot read audio ({av_exc})") from av_exc
        if not frames or sr <= 0:
            raise AudioError(f"{path}: no audio frames") from sf_exc
        arr = np.concatenate(frames, axis=1).astype(np.float32)  # (channels, samples), planar
        dtype = np.dtype(frames[0].dtype)
        if np.issubdtype(dtype, np.integer):
            arr /= float(np.iinfo(dtype.type).max)
        return arr.T, sr


def _checked_file(path: str | Path) -> Path:
    p = Path(path)
    if p.is_dir():
        raise AudioError(f"{p}: is a directory; expected an audio file (wav, flac, mp3, ogg)")
    if not p.is_file():
        raise AudioError(f"{p}: audio file not found")
    problem = wav_truncation(p)
    if problem is not None:
        raise AudioError(f"{p}: {problem} (re-copy or re-export the recording)")
    return p


def load_audio(path: str | Path, normalise: bool = True) -> np.ndarray:
    """Read wav/flac/mp3/ogg at any rate and channel count into canonical form.

    Raises:
        AudioError: naming the file when it is missing, unreadable or empty.
    """
    p = _checked_file(path)
    data, sr = _read_any(p)
    if data.size == 0:
        raise AudioError(f"{p}: audio file has no samples")
    x = resample(to_mono(data), sr)
    if not np.all(np.isfinite(x)):
        raise AudioError(f"{p}: audio contains NaN or infinite samples")
    return peak_normalise(x) if normalise else x


#: Samples per block when audio is streamed through a stage (2^18 samples, ~16 s at 16 kHz; 1 MB as float32).
BLOCK_SAMPLES = 1 << 18


def _file_blocks(path: Path) -> Iterator[np.ndarray]:
    """Mono float32 blocks of a file at its own rate (libsndfile a block at a time; PyAV whole, as a fallback)."""
    try:
        fh = sf.SoundFile(str(path))
    except Exception:
        data, _sr = _read_any(path)  # raises the clear error when neither reader can open it
        yield to_mono(data).astype(np.float32, copy=False)
        return
    with fh:
        while True:
            try:
                b = fh.read(BLOCK_SAMPLES, dtype="float32", always_2d=False)
            except Exception as exc:
                raise AudioError(f"{path}: cannot read audio ({exc})") from exc
            if len(b) == 0:
                return
            yield to_mono(np.asarray(b))


def _file_rate(path: Path) -> int:
    try:
        return int(sf.info(str(path)).samplerate)
    except Exception:
        return _read_any(path)[1]


def canonical_blocks(path: str | Path) -> Iterator[np.ndarray]:
    """The samples :func:`load_audio` (``normalise=False``) returns, as consecutive float32 blocks.

    Read a block at a time and resampled with soxr's streaming resampler, whose output is
    bit-identical to its one-shot :func:`resample`; memory is a block, whatever the length.

    Raises:
        AudioError: like :func:`load_audio` (missing, unreadable, truncated).
    """
    p = _checked_file(path)
    sr = _file_rate(p)
    if sr == SAMPLE_RATE_HZ:
        yield from _file_blocks(p)
        return
    import soxr

    stream = soxr.ResampleStream(sr, SAMPLE_RATE_HZ, 1, dtype="float32", quality="VHQ")
    for b in _file_blocks(p):
        yield np.asarray(stream.resample_chunk(b.astype(np.float32, copy=False), last=False), dtype=np.float32)
    yield np.asarray(stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True), dtype=np.float32)


def scan_audio(path: str | Path) -> tuple[int, float]:
    """(samples at 16 kHz, absolute peak) of a file, streamed; the checks of :func:`load_audio`.

    Raises:
        AudioError: naming the file when it is missing, unreadable, empty or not finite.
    """
    n, peak = 0, 0.0
    for b in canonical_blocks(path):
        if b.size:
            if not np.all(np.isfinite(b)):
                raise AudioError(f"{path}: audio contains NaN or infinite samples")
            peak = max(peak, float(np.max(np.abs(b))))
            n += b.size
    if n == 0:
        raise AudioError(f"{path}: audio file has no samples")
    return n, peak


def write_canonical(src: str | Path, dst: str | Path, n_samples: int, peak: float | None) -> None:
    """Write the first ``n_samples`` of ``src`` in canonical form to ``dst`` (:func:`write_wav`'s format).

    ``peak`` is the whole file's peak (:func:`scan_audio`): the samples are scaled exactly as
    :func:`peak_normalise` scales them; ``None`` writes them unnormalised. Streamed: the bytes are
    those of ``write_wav(dst, load_audio(src)[:n_samples])``.
    """
    gain = 10 ** (PEAK_DBFS / 20) / peak if peak else None

    def blocks() -> Iterator[np.ndarray]:
        left = n_samples
        for b in canonical_blocks(src):
            if left <= 0:
                return
            b = b[:left]
            left -= b.size
            yield (b * gain).astype(np.float32) if gain is not None else b

    write_wav_blocks(dst, n_samples, blocks())


def float_wav_header(n_samples: int, sr: int = SAMPLE_RATE_HZ) -> bytes:
    """The 58-byte header of a mono 32-bit IEEE-float WAV holding ``n_samples`` samples."""
    n_bytes = 4 * n_samples
    fmt = struct.pack("<HHIIHHH", 3, 1, sr, sr * 4, 4, 32, 0)  # IEEE float, mono, cbSize 0
    fact = struct.pack("<I", n_samples)
    body = (
        b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"fact"
        + struct.pack("<I", 4)
        + fact
        + b"data"
        + struct.pack("<I", n_bytes)
    )
    return b"RIFF" + struct.pack("<I", len(body) + n_bytes) + body


def float_wav_bytes(x: np.ndarray, sr: int = SAMPLE_RATE_HZ) -> bytes:
    """A mono 32-bit IEEE-float WAV, byte-for-byte a function of the samples.

    Written by hand rather than through libsndfile, whose float WAVs carry a
    PEAK chunk with a wall-clock timestamp: identical audio would then give
    different files, and "same seed ⇒ bit-identical mixtures" would be false.
    """
    data = np.ascontiguousarray(x, dtype="<f4").tobytes()
    return float_wav_header(len(data) // 4, sr) + data


def write_wav_blocks(path: str | Path, n_samples: int, blocks: Iterable[np.ndarray], sr: int = SAMPLE_RATE_HZ) -> None:
    """Write ``n_samples`` given as consecutive 1-D blocks as the file :func:`float_wav_bytes` would make.

    The file is written to a temporary name and renamed into place (atomic), one block at a
    time, so memory stays at one block whatever the length.

    Raises:
        AudioError: when the blocks do not add up to ``n_samples`` or one is not 1-D.
    """
    from stresstest.cache import atomic_write_stream

    def chunks() -> Iterator[bytes]:
        yield float_wav_header(n_samples, sr)
        written = 0
        for b in blocks:
            b = np.asarray(b)
            if b.ndim != 1:
                raise AudioError(f"{path}: expected mono audio, got a block of shape {b.shape}")
            written += b.size
            yield np.ascontiguousarray(b, dtype="<f4").tobytes()
        if written != n_samples:
            raise AudioError(f"{path}: {written} samples written, {n_samples} announced")

    atomic_write_stream(path, chunks())


def write_wav(path: str | Path, x: np.ndarray, sr: int = SAMPLE_RATE_HZ) -> None:
    """Write a deterministic float32 mono WAV atomically (temp file + rename), one block at a time."""
    x = np.asarray(x)
    if x.ndim != 1:
        raise AudioError(f"{path}: expected mono audio, got shape {x.shape}")
    write_wav_blocks(path, x.size, (x[i : i + BLOCK_SAMPLES] for i in range(0, x.size, BLOCK_SAMPLES)), sr)


def wav_frames(path: str | Path) -> int:
    """Number of samples of a file written by :func:`write_wav` (checked like :func:`read_wav_exact`)."""
    problem = wav_truncation(path)
    if problem is not None:
        raise AudioError(f"{path}: {problem}")
    info = sf.info(str(path))
    if info.samplerate != SAMPLE_RATE_HZ or info.channels != 1:
        raise AudioError(
            f"{path}: expected {SAMPLE_RATE_HZ} Hz mono, found {info.samplerate} Hz, {info.channels} channels"
        )
    return int(info.frames)


def iter_wav_blocks(path: str | Path, block: int | None = None) -> Iterator[np.ndarray]:
    """The samples of a file written by :func:`write_wav`, as float32 blocks of ``block`` samples
    (default :data:`BLOCK_SAMPLES`; the last block shorter)."""
    wav_frames(path)
    size = block or BLOCK_SAMPLES
    with sf.SoundFile(str(path)) as fh:
        while True:
            b = fh.read(size, dtype="float32", always_2d=False)
            if b.size == 0:
                return
            yield np.asarray(b)


def read_wav_exact(path: str | Path) -> np.ndarray:
    """Read a file written by :func:`write_wav` without any conversion (a truncated file is an error)."""
    problem = wav_truncation(path)
    if problem is not None:
        raise AudioError(f"{path}: {problem}")
    data, sr = sf.read(str(path), dtype="float32", always_2d=False)
    if sr != SAMPLE_RATE_HZ:
        raise AudioError(f"{path}: expected {SAMPLE_RATE_HZ} Hz, found {sr} Hz")
    return np.asarray(data)
