"""Real recordings: canonical 16 kHz copy in the cache and an active-speech mask.

Several channels of one session (``Encounter.audio_channels``: PriMock57's doctor
and patient headset recordings) become one recording by this rule: each channel is
read at its recorded level (resampled to 16 kHz mono, *not* normalised on its own,
so the level difference between the speakers stays as recorded), the channels are
zero-padded to the longest and summed sample by sample, and the sum is then
peak-normalised like any single recording. The mixture's duration is the longest
channel's.

Mask source, in order of preference:

1. ``corpus_timings`` — when every non-empty turn has ``start_s``/``end_s``,
   the union of those spans (clipped to the audio).
2. ``vad`` — otherwise a deterministic energy VAD (:func:`energy_vad`):
   20-ms frames; a frame is speech when its level is above
   ``max(noise floor + 12 dB, loudest frame - 45 dB)``, with the noise floor
   taken as the 10th percentile of frame levels; speech runs closer than
   0.3 s are merged, runs shorter than 0.1 s dropped, and each run padded by
   50 ms. Simple on purpose: it only has to keep long pauses out of the
   speech-RMS estimate used for SNR scaling.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from stresstest.audio import (
    SAMPLE_RATE_HZ,
    iter_wav_blocks,
    load_audio,
    peak_normalise,
    scan_audio,
    wav_frames,
    write_canonical,
    write_wav,
)
from stresstest.cache import ENVELOPE_SUFFIX, hash_obj, read_verified_json, sha256_file, write_verified_json
from stresstest.errors import SpeechError
from stresstest.records import Encounter, SpeechAudio

# rec-3: timings are checked against the audio (beyond its end: an error), turn limits cut the audio
RECORDING_CODE_VERSION = "rec-3"

VAD_FRAME_S = 0.02
VAD_FLOOR_PERCENTILE = 10.0
VAD_ABOVE_FLOOR_DB = 12.0
VAD_BELOW_PEAK_DB = 45.0
VAD_MERGE_GAP_S = 0.3
VAD_MIN_RUN_S = 0.1
VAD_PAD_S = 0.05
#: How far a turn's timing may run past the recording's end (rounding in transcription tools) before it is an error.
TIMING_TOLERANCE_S = 0.5


def energy_vad(x: np.ndarray, sr: int = SAMPLE_RATE_HZ) -> tuple[tuple[float, float], ...]:
    """Deterministic energy VAD; returns (start, end) seconds of speech runs (see module doc)."""
    hop = max(1, round(VAD_FRAME_S * sr))
    n = len(x) // hop
    return _vad_runs(_frame_levels(x, hop, n) if n else np.zeros(0), hop, len(x), sr)


def _vad_runs(level: np.ndarray, hop: int, n_samples: int, sr: int) -> tuple[tuple[float, float], ...]:
    """The speech runs of :func:`energy_vad` from the frame levels of ``n_samples`` samples."""
    n = level.size
    if n == 0:
        return ()
    thr = max(
        float(np.percentile(level, VAD_FLOOR_PERCENTILE)) + VAD_ABOVE_FLOOR_DB,
        float(level.max()) - VAD_BELOW_PEAK_DB,
    )
    active = level > thr
    runs: list[list[float]] = []
    i = 0
    while i < n:
        if not active[i]:
            i += 1
            continue
        j = i
        while j < n and active[j]:
            j += 1
        start, end = i * hop / sr, j * hop / sr
        if runs and start - runs[-1][1] < VAD_MERGE_GAP_S:
            runs[-1][1] = end
        else:
            runs.append([start, end])
        i = j
    dur = n_samples / sr
    out = [(max(0.0, s - VAD_PAD_S), min(dur, e + VAD_PAD_S)) for s, e in runs if e - s >= VAD_MIN_RUN_S]
    return tuple(_merge(out))


def energy_vad_file(path: str | Path, sr: int = SAMPLE_RATE_HZ) -> tuple[tuple[float, float], ...]:
    """:func:`energy_vad` of a file written by :func:`~stresstest.audio.write_wav`, read a block at a time."""
    hop = max(1, round(VAD_FRAME_S * sr))
    levels, n_samples = [], 0
    for b in iter_wav_blocks(path, block=hop * 4096):  # whole frames per block: the frames of the whole file
        n_samples += b.size
        k = b.size // hop
        if k:
            levels.append(_frame_levels(b, hop, k))
    return _vad_runs(np.concatenate(levels) if levels else np.zeros(0), hop, n_samples, sr)


def _frame_levels(x: np.ndarray, hop: int, n: int, frames_per_block: int = 4096) -> np.ndarray:
    """dB level of each of the ``n`` frames of ``hop`` samples, computed a block of frames at a time.

    Each frame's mean is its own reduction, so the blocks give exactly the values of one
    whole-array computation while holding only one block in float64.
    """
    levels = []
    for f0 in range(0, n, frames_per_block):
        f1 = min(n, f0 + frames_per_block)
        frames = np.asarray(x[f0 * hop : f1 * hop], dtype=np.float64).reshape(f1 - f0, hop)
        levels.append(10 * np.log10(np.mean(frames**2, axis=1) + 1e-12))
    return np.concatenate(levels)


def _merge(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _timing_segments(encounter: Encounter, duration_s: float) -> tuple[tuple[float, float], ...] | None:
    turns = [t for t in encounter.turns if t.text.strip()]
    if not turns or any(t.start_s is None or t.end_s is None for t in turns):
        return None
    spans = [
        (max(0.0, float(t.start_s)), min(duration_s, float(t.end_s)))  # type: ignore[arg-type]
        for t in turns
    ]
    spans = [(s, e) for s, e in spans if e > s]
    return tuple(_merge(spans)) or None


def check_timings(encounter: Encounter, duration_s: float) -> list[str]:
    """Check turn timings against the recording; returns warnings, raises on contradictions.

    Errors (the mask and the reference would describe another recording): a
    timed turn that starts or ends beyond the audio's end (by more than
    :data:`TIMING_TOLERANCE_S`). Warnings (recorded in the speech recipe, shown
    in the report): overlapping turns, turns timed only in part (the VAD mask
    is used), and a recording cut with its reference by a turn limit.

    Raises:
        SpeechError: naming the encounter, the turn and both durations.
    """
    turns = [t for t in encounter.turns if t.text.strip()]
    warnings: list[str] = []
    for k, t in enumerate(turns, start=1):
        for name, v in (("start_s", t.start_s), ("end_s", t.end_s)):
            if v is not None and v > duration_s + TIMING_TOLERANCE_S:
                raise SpeechError(
                    f"encounter {encounter.encounter_id}: turn {k} has {name}={v:g} s but the recording is "
                    f"{duration_s:.2f} s long; the turn timings and the audio disagree (wrong file or timings?)"
                )
    timed = [(float(t.start_s), float(t.end_s)) for t in turns if t.start_s is not None and t.end_s is not None]
    overlaps = sum(1 for (_s0, e0), (s1, _e1) in zip(timed, timed[1:], strict=False) if s1 < e0 - TIMING_TOLERANCE_S)
    if overlaps:
        warnings.append(
            f"{overlaps} turns start more than {TIMING_TOLERANCE_S:g} s before the previous one ends "
            "(overlapping speech: the ASR hears both while the reference has them one after the other)"
        )
    n_timed = len(timed)
    if 0 < n_timed < len(turns):
        warnings.append(f"{len(turns) - n_timed} of {len(turns)} turns have no timings: the energy VAD mask is used")
    if encounter.audio_end_s is not None:
        warnings.append(
            f"turn limit: the recording is cut at {encounter.audio_end_s:g} s of {duration_s:.2f} s "
            f"with the reference ({len(encounter.turns)} turns kept)"
        )
    return warnings


def mix_channels(paths: list[Path]) -> np.ndarray:
    """One recording from per-speaker channels (rule in the module docstring)."""
    chans = [load_audio(p, normalise=False) for p in paths]
    n = max(len(c) for c in chans)
    out = np.zeros(n, dtype=np.float64)
    for c in chans:
        out[: len(c)] += np.asarray(c, dtype=np.float64)
    return peak_normalise(out.astype(np.float32))


def _canonical_writer(sources: list[Path]) -> tuple[int, Callable[[Path, int | None], None]]:
    """(uncut length in samples, ``write(wav, end_sample)``) of the canonical recording of ``sources``.

    One file is streamed (:func:`~stresstest.audio.scan_audio` now, :func:`~stresstest.audio.write_canonical`
    when written: memory is a block); several channels are summed in memory.
    """
    if len(sources) == 1:
        n, peak = scan_audio(sources[0])
        return n, lambda wav, end: write_canonical(sources[0], wav, n if end is None else min(n, end), peak)
    x = mix_channels(sources)
    return int(x.size), lambda wav, end: write_wav(wav, x if end is None else x[:end])


def load_recording(encounter: Encounter, cache_dir: Path) -> SpeechAudio:
    """Canonicalise an encounter's real recording into the cache and compute its speech mask.

    Args:
        encounter: Must have ``audio_path``.
        cache_dir: Cache root; the 16 kHz copy goes to ``cache_dir/recordings/``.

    Raises:
        SpeechError: when the encounter has no ``audio_path``.
        AudioError: when the file is missing or unreadable (from ``load_audio``).
    """
    if not encounter.audio_path:
        raise SpeechError(f"encounter {encounter.encounter_id}: no audio_path to load")
    sources = [Path(p) for p in (encounter.audio_channels or (encounter.audio_path,))]
    for src in sources:
        if not src.is_file():
            raise SpeechError(f"encounter {encounter.encounter_id}: recording not found: {src}")
    src = sources[0]
    digests = [sha256_file(p) for p in sources]
    timings = [(t.start_s, t.end_s) for t in encounter.turns]
    # audio_end_s joins the key only when set, so the entries of uncut recordings keep their keys.
    cut = () if encounter.audio_end_s is None else (("audio_end_s", encounter.audio_end_s),)
    key = hash_obj(RECORDING_CODE_VERSION, digests, encounter.encounter_id, timings, *cut)
    base = Path(cache_dir) / "recordings" / key[:2]
    wav, meta = base / f"{key}.wav", base / f"{key}{ENVELOPE_SUFFIX}"
    # Verified read (WAV size + sha256 as written); a damaged entry is warned about and rebuilt below.
    cached = read_verified_json(
        meta, validate=lambda d: SpeechAudio.model_validate({**d, "path": str(wav)}), files={"wav": wav}
    )
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    n_full, write = _canonical_writer(sources)
    warnings = check_timings(encounter, n_full / SAMPLE_RATE_HZ)
    # a turn limit cut the reference: cut the audio with it
    write(wav, None if encounter.audio_end_s is None else int(round(encounter.audio_end_s * SAMPLE_RATE_HZ)))
    duration = wav_frames(wav) / SAMPLE_RATE_HZ
    segs = _timing_segments(encounter, duration)
    source = "corpus_timings"
    if segs is None:
        segs, source = energy_vad_file(wav), "vad"
    speech = SpeechAudio(
        encounter_id=encounter.encounter_id,
        path=str(wav),
        duration_s=duration,
        segments_s=segs,
        segments_source=source,  # type: ignore[arg-type]
        recipe={
            "kind": "recording",
            "source_path": str(src),
            "source_sha256": digests[0],
            **(
                {
                    "channels": [str(p) for p in sources],
                    "channels_sha256": digests,
                    "mix": "sum at recorded levels, then peak-normalised",
                }
                if len(sources) > 1
                else {}
            ),
            "mask": source,
            "code_version": RECORDING_CODE_VERSION,
            **({"cut_at_s": encounter.audio_end_s} if encounter.audio_end_s is not None else {}),
            **({"warnings": warnings} if warnings else {}),
        },
    )
    write_verified_json(meta, speech.model_dump(mode="json"), files={"wav": wav})
    return speech
