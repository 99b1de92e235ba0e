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

from typing import Protocol

import numpy as np

from stresstest.audio import SAMPLE_RATE_HZ

# The decoding options travel with every transcript (Transcript.decoding), so they live in the base layer.
from stresstest.records import MIN_WINDOW_S as MIN_WINDOW_S  # re-exported
from stresstest.records import WINDOW_S as WINDOW_S  # re-exported
from stresstest.records import DecodingOptions as DecodingOptions  # re-exported


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
