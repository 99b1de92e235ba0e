"""ASR front-end: pinned decoding, fixed 30-second windows, pluggable backends (docs/spec.md §3).

Decoding is pinned for every backend: greedy (beam 1, best_of 1), temperature
exactly 0 with no temperature fallback, English, no conditioning on previous
text, and **fixed 30-second windows**: the audio is cut into consecutive,
non-overlapping 30 s windows (the last one shorter) and each window is decoded
independently. Timestamp tokens stay on (Whisper's native mode): measured on
TTS dialogue, decoding a full 30-s window *without* timestamps often skips its
first turns or stops after one sentence, which would be an artefact of the
tool, not of the noise. Because windows are independent, the
sequential and the batched paths decode exactly the same inputs, and a window's
text never depends on what the model said in another window.
"""

from __future__ import annotations

from typing import Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from stresstest.audio import SAMPLE_RATE_HZ

WINDOW_S = 30.0
#: Shortest window accepted: a window shorter than a second holds less than one word.
MIN_WINDOW_S = 1.0


class DecodingOptions(BaseModel):
    """Pinned decoding; recorded with every transcript."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    language: Literal["en"] = "en"
    temperature: float = Field(default=0.0, ge=0.0, le=1.0,
                               description="0 (the study's setting); no fallback temperatures. 0 to 1.")
    beam_size: int = Field(default=1, ge=1, le=16, description="Greedy decoding (1); 1 to 16.")
    best_of: int = Field(default=1, ge=1, le=16, description="Candidates when sampling (temperature > 0); 1 to 16.")
    condition_on_previous_text: bool = False
    without_timestamps: bool = Field(default=False, description="Keep Whisper's timestamp mode (see module doc).")
    window_s: float = Field(default=WINDOW_S, ge=MIN_WINDOW_S, le=WINDOW_S,
                            description=f"Fixed window length; windows do not overlap. {MIN_WINDOW_S:g} to "
                            f"{WINDOW_S:g} s (Whisper decodes at most 30 s at once).")
    no_speech_threshold: float | None = Field(
        default=0.6, ge=0.0, le=1.0,
        description="Whisper's default silence skipping (window dropped if no-speech prob is high "
        "and the average log-prob is below log_prob_threshold)."
    )
    log_prob_threshold: float | None = Field(default=-1.0, ge=-20.0, le=0.0,
                                             description="Average log-probability threshold (-20 to 0).")
    suppress_blank: bool = True


class ASRBackend(Protocol):
    """What every ASR backend implements."""

    name: str
    model_id: str

    def transcribe_windows(self, windows: list[np.ndarray], options: DecodingOptions) -> list[str]:
        """Decode independent 16 kHz windows (≤ 30 s each); one text per window, in order."""
        ...


def split_windows(audio: np.ndarray, window_s: float = WINDOW_S, sr: int = SAMPLE_RATE_HZ) -> list[np.ndarray]:
    """Consecutive non-overlapping windows of ``window_s`` (the last may be shorter)."""
    step = int(round(window_s * sr))
    if audio.size == 0:
        return []
    return [audio[i : i + step] for i in range(0, audio.size, step)]


def join_windows(texts: list[str]) -> str:
    """Join window texts with single spaces (whitespace collapsed)."""
    return " ".join(" ".join(t.split()) for t in texts if t.strip())
