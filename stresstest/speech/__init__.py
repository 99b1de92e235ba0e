"""Clean dialogue audio: piper TTS for text-only encounters, canonical copies of real recordings.

Public API::

    speech_for(encounter, cache_dir, config=None) -> SpeechAudio   # dispatches
    render_encounter(encounter, cache_dir, config=None) -> SpeechAudio
    load_recording(encounter, cache_dir) -> SpeechAudio
    TTSConfig, SpeakerVoice
"""

from __future__ import annotations

from pathlib import Path

from stresstest.records import Encounter, SpeechAudio
from stresstest.speech.recording import energy_vad, load_recording
from stresstest.speech.render import render_encounter, turn_gap_s
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


__all__ = [
    "CODE_VERSION",
    "SpeakerVoice",
    "TTSConfig",
    "energy_vad",
    "load_recording",
    "load_voice",
    "render_encounter",
    "speech_for",
    "synthesize",
    "turn_gap_s",
]
