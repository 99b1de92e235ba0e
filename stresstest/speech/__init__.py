"""Clean dialogue audio: piper TTS for text-only encounters, canonical copies of real recordings.

Public API::

    speech_for(encounter, cache_dir, config=None) -> SpeechAudio   # dispatches
    render_encounter(encounter, cache_dir, config=None) -> SpeechAudio
    load_recording(encounter, cache_dir) -> SpeechAudio
    TTSConfig, SpeakerVoice
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from stresstest.errors import StressTestError
from stresstest.records import Encounter, SpeechAudio
from stresstest.speech.recording import energy_vad, load_recording
from stresstest.speech.render import cached_envelope_path, render_encounter, turn_gap_s
from stresstest.speech.tts import CODE_VERSION, SpeakerVoice, TTSConfig, load_voice, synthesize


def speech_for(encounter: Encounter, cache_dir: Path, config: TTSConfig | None = None) -> SpeechAudio:
    """Clean audio for an encounter: its recording if it has one, else a TTS rendering.

    Args:
        encounter: The dialogue.
        cache_dir: Cache root (``cache_dir/tts`` or ``cache_dir/recordings``).
        config: TTS settings, used only for text-only encounters.
    """
    if encounter.audio_path:
        return load_recording(encounter, cache_dir)
    return render_encounter(encounter, cache_dir, config)


@dataclass(frozen=True)
class SpeechPlan:
    """What is known about an encounter's clean speech before the speech stage runs.

    Attributes:
        seconds: its duration, when known without rendering (a cached rendering, a recording's header).
        cached: whether the cache already holds the TTS rendering; None for a recording (its canonical copy is
            checked when the speech stage makes it).
    """

    seconds: float | None
    cached: bool | None


def planned_speech(encounter: Encounter, cache_dir: Path, config: TTSConfig | None = None) -> SpeechPlan:
    """Cheap look-ahead for a run's start line: reads a cache entry's metadata or a recording's header, never
    the audio, and verifies nothing (:func:`speech_for` verifies what it uses)."""
    if encounter.audio_path:
        import soundfile as sf

        try:
            seconds = float(sf.info(encounter.audio_path).duration)
        except (RuntimeError, OSError, ValueError):
            return SpeechPlan(None, None)
        end = encounter.audio_end_s
        return SpeechPlan(min(seconds, end) if end is not None else seconds, None)
    try:
        meta = cached_envelope_path(encounter, cache_dir, config or TTSConfig())
        value = json.loads(meta.read_text("utf-8"))["value"]
        return SpeechPlan(float(value["duration_s"]), True)
    except (OSError, ValueError, KeyError, TypeError, StressTestError):  # no voice, no entry: rendered later
        return SpeechPlan(None, False)


__all__ = [
    "CODE_VERSION",
    "SpeechPlan",
    "SpeakerVoice",
    "TTSConfig",
    "energy_vad",
    "load_recording",
    "load_voice",
    "planned_speech",
    "render_encounter",
    "speech_for",
    "synthesize",
    "turn_gap_s",
]
