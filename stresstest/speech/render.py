"""Render a text-only encounter to one clean 16 kHz dialogue wav with a tight speech mask.

Placement rule (recorded in ``SpeechAudio.recipe``):

* A turn **without** ``start_s`` starts ``gap`` seconds after the previous
  turn's speech ends (``lead_in_s`` for the first turn). ``gap`` lies in
  ``[gap_min_s, gap_max_s]`` and is derived from ``sha256(encounter_id, turn
  index)``, so it is deterministic and differs between turns and encounters.
* A turn **with** ``start_s`` (PriMock57) is placed at ``start_s``. TTS speech is
  rarely as long as the human turn; when the previous rendered turn runs past
  this start, the turn is pushed to ``previous end + gap``. Later turns keep
  their own ``start_s`` when they can, so an overrun is absorbed by the next
  silence long enough rather than accumulating through the dialogue.

Every turn is trimmed of piper's leading/trailing silence before placement,
so ``segments_s`` are exactly the rendered speech spans.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from stresstest.audio import SAMPLE_RATE_HZ, peak_normalise, write_wav
from stresstest.cache import ENVELOPE_SUFFIX, hash_obj, read_verified_json, write_verified_json
from stresstest.errors import SpeechError
from stresstest.records import Encounter, SpeechAudio, Turn
from stresstest.speech.tts import (
    CODE_VERSION,
    SentenceProgress,
    SpeakerVoice,
    TTSConfig,
    semitones,
    synthesize,
    trim_silence,
    voice_sha256,
)

#: Turns at least this long (characters) report their progress on stderr, sentence by sentence: one turn of
#: 100 KB kept piper busy for more than 300 s on 2 CPU cores with nothing shown (issue 25).
LONG_TURN_CHARS = 2000
#: Seconds between two progress lines of one long turn.
PROGRESS_EVERY_S = 10.0


def _turn_progress(encounter_id: str, turn_index: int, n_chars: int) -> SentenceProgress | None:
    """A reporter for a long turn (one line on stderr at most every :data:`PROGRESS_EVERY_S`); ``None`` if short."""
    if n_chars < LONG_TURN_CHARS:
        return None
    from stresstest.console import notice

    t0 = time.monotonic()
    last = [t0]

    def report(sentences: int, rendered_s: float) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            notice(
                f"TTS: encounter {encounter_id}, turn {turn_index} ({n_chars} characters): {sentences} "
                f"sentences, {rendered_s:.0f} s of speech rendered in {now - t0:.0f} s"
            )

    notice(
        f"TTS: encounter {encounter_id}, turn {turn_index} has {n_chars} characters; rendering it sentence "
        f"by sentence takes a while (progress every {PROGRESS_EVERY_S:g} s)"
    )
    return report


def turn_gap_s(encounter_id: str, turn_index: int, config: TTSConfig) -> float:
    """Deterministic pause before turn ``turn_index`` (hash of id + index, uniform in range)."""
    u = int(hash_obj("tts-gap", encounter_id, turn_index)[:8], 16) / 0xFFFFFFFF
    lo, hi = sorted((config.gap_min_s, config.gap_max_s))
    return lo + (hi - lo) * u


def _speaker_voice(turn: Turn, config: TTSConfig) -> SpeakerVoice:
    return {"doctor": config.doctor, "patient": config.patient}.get(turn.speaker, config.other)


def _cache_key(encounter: Encounter, config: TTSConfig) -> str:
    turns = [(t.speaker, t.text, t.start_s, t.end_s) for t in encounter.turns]
    # encounter_id is part of the key because the gaps are derived from it.
    return hash_obj(CODE_VERSION, voice_sha256(config.voice), config.model_dump(), encounter.encounter_id, turns)


def _cache_paths(cache_dir: Path, key: str) -> tuple[Path, Path]:
    base = Path(cache_dir) / "tts" / key[:2]
    return base / f"{key}.wav", base / f"{key}{ENVELOPE_SUFFIX}"


def cached_envelope_path(encounter: Encounter, cache_dir: Path, config: TTSConfig) -> Path:
    """Where the rendering of ``encounter`` under ``config`` has (or will have) its cache metadata."""
    return _cache_paths(Path(cache_dir), _cache_key(encounter, config))[1]


def _read_cached(wav: Path, meta: Path) -> SpeechAudio | None:
    """The cached rendering, verified (WAV size + sha256 as written); damaged → warning + re-render."""
    return read_verified_json(
        meta, validate=lambda d: SpeechAudio.model_validate({**d, "path": str(wav)}), files={"wav": wav}
    )


def render_encounter(encounter: Encounter, cache_dir: Path, config: TTSConfig | None = None) -> SpeechAudio:
    """Render a text-only encounter with piper (cached by content hash).

    Args:
        encounter: The dialogue; turns with ``start_s`` are placed at that time.
        cache_dir: Cache root; audio goes to ``cache_dir/tts/<k[:2]>/<k>.wav``.
        config: Voices, gaps and trimming; defaults to ``TTSConfig()``.

    Returns:
        The clean dialogue with ``segments_s`` = exact span of every rendered
        turn and ``segments_source="tts_turns"``.

    Raises:
        SpeechError: when piper is missing or fails, or no turn produced speech.
    """
    config = config or TTSConfig()
    key = _cache_key(encounter, config)
    wav_path, meta_path = _cache_paths(Path(cache_dir), key)
    cached = _read_cached(wav_path, meta_path)
    if cached is not None:
        return cached

    pieces: list[tuple[int, np.ndarray]] = []  # (start sample, audio)
    segments: list[tuple[float, float]] = []
    placements: list[dict[str, object]] = []
    cursor = 0  # end of the last placed speech, in samples
    for i, turn in enumerate(encounter.turns):
        if not turn.text.strip():
            continue
        raw = synthesize(
            turn.text,
            _speaker_voice(turn, config),
            config.voice,
            _turn_progress(encounter.encounter_id, i, len(turn.text)),
        )
        audio = trim_silence(raw, config.trim_db)
        if audio.size == 0:
            placements.append({"turn": i, "skipped": "no speech produced"})
            continue
        gap = turn_gap_s(encounter.encounter_id, i, config) if pieces else config.lead_in_s
        earliest = cursor + round(gap * SAMPLE_RATE_HZ) if pieces else 0
        if config.honour_timings and turn.start_s is not None:
            wanted = round(max(turn.start_s, 0.0) * SAMPLE_RATE_HZ)
            start = max(wanted, earliest)
            rule = "start_s" if start == wanted else "start_s+overrun"
        else:
            start = cursor + round(gap * SAMPLE_RATE_HZ)
            rule = "gap"
        pieces.append((start, audio))
        cursor = start + audio.size
        segments.append((start / SAMPLE_RATE_HZ, cursor / SAMPLE_RATE_HZ))
        placements.append({"turn": i, "speaker": turn.speaker, "rule": rule, "start_s": start / SAMPLE_RATE_HZ})

    if not pieces:
        raise SpeechError(f"encounter {encounter.encounter_id}: no turn produced speech (all empty?)")
    total = cursor + round(config.tail_s * SAMPLE_RATE_HZ)
    out = np.zeros(total, dtype=np.float32)
    for start, audio in pieces:
        out[start : start + audio.size] = audio
    # Peak normalisation keeps relative turn levels (piper peak-normalises each sentence already).
    out = peak_normalise(out)
    write_wav(wav_path, out)

    speakers = {}
    for name in ("doctor", "patient", "other"):
        sv: SpeakerVoice = getattr(config, name)
        speakers[name] = {**sv.model_dump(), "semitones": semitones(sv.pitch_factor)}
    speech = SpeechAudio(
        encounter_id=encounter.encounter_id,
        path=str(wav_path),
        duration_s=total / SAMPLE_RATE_HZ,
        segments_s=tuple(segments),
        segments_source="tts_turns",
        recipe={
            "kind": "piper_tts",
            "code_version": CODE_VERSION,
            "voice": config.voice,
            "voice_sha256": voice_sha256(config.voice),
            "speakers": speakers,
            "gap_rule": f"uniform[{config.gap_min_s},{config.gap_max_s}] s from sha256(encounter_id, turn)",
            "timing_rule": "start_s honoured; overrun pushes the turn to previous end + gap",
            "config": config.model_dump(),
            "placements": placements,
            "cache_key": key,
        },
    )
    write_verified_json(meta_path, speech.model_dump(mode="json"), files={"wav": wav_path})
    return speech
