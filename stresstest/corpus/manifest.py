"""A JSONL manifest for users' own recordings.

One JSON object per line::

    {"encounter_id": "visit-01", "audio": "audio/visit-01.flac",
     "turns": [{"speaker": "doctor", "text": "What brings you in?", "start_s": 0.4, "end_s": 1.9},
               {"speaker": "patient", "text": "Chest pain since last night."}],
     "reference_note": "optional clinician note"}
    {"encounter_id": "visit-02", "audio": "/data/visit-02.wav", "reference_text": "the human transcript"}

``audio`` is absolute or relative to the manifest file; any format the audio
module reads (wav, flac, mp3, ogg), any rate, mono or stereo. Give either
``turns`` (speaker ``doctor``, ``patient`` or ``other``; times optional) or
``reference_text`` (one turn, speaker ``other``). Blank lines are skipped; an
unknown key is an error, so a typo never silently drops a field.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, get_args

from stresstest.audio import AUDIO_SUFFIXES
from stresstest.corpus._text import clean_text, has_words, read_text, split_lines
from stresstest.errors import CorpusError
from stresstest.ids import check_id
from stresstest.records import Encounter, Speaker, Turn

CORPUS = "manifest"

_KEYS = {"encounter_id", "audio", "turns", "reference_text", "reference_note", "specialty"}
_TURN_KEYS = {"speaker", "text", "start_s", "end_s"}
_SPEAKERS: tuple[str, ...] = get_args(Speaker)


def manifest_file(path: Path) -> Path:
    """The manifest a path designates: the file itself, or ``manifest.jsonl`` in a folder."""
    if path.is_dir():
        candidate = path / "manifest.jsonl"
        if not candidate.is_file():
            raise CorpusError(f"{candidate}: manifest not found (expected a JSONL file, one encounter per line)")
        return candidate
    if not path.is_file():
        raise CorpusError(f"{path}: manifest not found (expected a JSONL file, one encounter per line)")
    return path


def load_manifest(path: str | Path) -> list[Encounter]:
    """Load a JSONL manifest of the user's own recordings.

    Args:
        path: the ``.jsonl`` file, or a folder holding ``manifest.jsonl``.

    Returns:
        One encounter per line, sorted by id, each with an absolute ``audio_path``.

    Raises:
        CorpusError: when the manifest is missing, a line is not a valid entry, an
            id repeats, or an audio file does not exist (the message names the
            manifest and the line).
    """
    mpath = manifest_file(Path(path))
    seen: dict[str, int] = {}
    encounters = []
    for lineno, raw in enumerate(split_lines(read_text(mpath)), start=1):
        if not raw.strip():
            continue
        where = f"{mpath}:{lineno}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{where}: expected one JSON object per line, got invalid JSON ({exc.msg})") from exc
        enc = _entry(obj, mpath, where)
        if enc.encounter_id in seen:
            raise CorpusError(
                f"{where}: expected unique encounter_id, got {enc.encounter_id!r} again "
                f"(first on line {seen[enc.encounter_id]})"
            )
        seen[enc.encounter_id] = lineno
        encounters.append(enc)
    if not encounters:
        raise CorpusError(f"{mpath}: expected at least one encounter (one JSON object per line), found none")
    return sorted(encounters, key=lambda e: e.encounter_id)


def _entry(obj: Any, mpath: Path, where: str) -> Encounter:
    if not isinstance(obj, dict):
        raise CorpusError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - _KEYS)
    if unknown:
        raise CorpusError(f"{where}: unknown key {unknown[0]!r} (expected keys: {', '.join(sorted(_KEYS))})")
    eid = obj.get("encounter_id")
    if not isinstance(eid, str) or not eid.strip():
        raise CorpusError(f"{where}: expected 'encounter_id' to be a non-empty string, got {eid!r}")
    eid = check_id(eid.strip(), where=where)
    has_turns, has_text = "turns" in obj, "reference_text" in obj
    if has_turns == has_text:
        raise CorpusError(f"{where}: expected exactly one of 'turns' or 'reference_text' for {eid!r}")
    if has_turns:
        turns = _turns(obj["turns"], where)
    else:
        text = obj["reference_text"]
        if not isinstance(text, str) or not has_words(clean_text(text)):
            raise CorpusError(f"{where}: expected 'reference_text' to be a non-empty string")
        turns = (Turn(speaker="other", text=clean_text(text)),)
    note = obj.get("reference_note")
    if note is not None and not isinstance(note, str):
        raise CorpusError(f"{where}: expected 'reference_note' to be a string, got {type(note).__name__}")
    specialty = obj.get("specialty")
    if specialty is not None and not isinstance(specialty, str):
        raise CorpusError(f"{where}: expected 'specialty' to be a string, got {type(specialty).__name__}")
    return Encounter(
        encounter_id=eid.strip(),
        corpus=CORPUS,
        source_path=str(mpath),
        turns=turns,
        audio_path=_audio(obj.get("audio"), mpath, where),
        reference_note=(note.strip() or None) if note is not None else None,
        specialty=specialty,
    )


def _audio(value: Any, mpath: Path, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise CorpusError(f"{where}: expected 'audio' to be a path to a recording, got {value!r}")
    p = Path(value).expanduser()
    # Relative to the manifest, not to the working directory, so a manifest and its
    # recordings can be moved together.
    p = p if p.is_absolute() else mpath.parent / p
    if p.suffix.lower() not in AUDIO_SUFFIXES:
        raise CorpusError(f"{where}: expected audio ending in {', '.join(AUDIO_SUFFIXES)}, got {value!r}")
    if not p.is_file():
        raise CorpusError(f"{where}: audio file not found: {p}")
    return str(p.resolve())


def _turns(value: Any, where: str) -> tuple[Turn, ...]:
    if not isinstance(value, list) or not value:
        raise CorpusError(f"{where}: expected 'turns' to be a non-empty list of {{speaker, text}} objects")
    turns = []
    prev_start: tuple[int, float] | None = None
    for k, t in enumerate(value, start=1):
        at = f"{where}: turn {k}"
        if not isinstance(t, dict):
            raise CorpusError(f"{at}: expected an object {{speaker, text, start_s?, end_s?}}, got {t!r}")
        unknown = sorted(set(t) - _TURN_KEYS)
        if unknown:
            raise CorpusError(f"{at}: unknown key {unknown[0]!r} (expected: speaker, text, start_s, end_s)")
        speaker = t.get("speaker")
        if speaker not in _SPEAKERS:
            raise CorpusError(f"{at}: expected speaker one of {', '.join(_SPEAKERS)}, got {speaker!r}")
        text = t.get("text")
        if not isinstance(text, str):
            raise CorpusError(f"{at}: expected 'text' to be a string, got {text!r}")
        start, end = _time(t.get("start_s"), at, "start_s"), _time(t.get("end_s"), at, "end_s")
        if start is not None and end is not None and end < start:
            raise CorpusError(f"{at}: expected end_s >= start_s, got start_s={start:g}, end_s={end:g}")
        if start is not None:
            # Turns are the reference in order; timings that contradict the order describe another dialogue.
            if prev_start is not None and start < prev_start[1]:
                raise CorpusError(
                    f"{at}: starts at {start:g} s, before turn {prev_start[0]} ({prev_start[1]:g} s); "
                    "expected turns in the order they were spoken (start_s not decreasing)"
                )
            prev_start = (k, start)
        text = clean_text(text)
        if has_words(text):  # an empty turn carries nothing to transcribe
            turns.append(Turn(speaker=speaker, text=text, start_s=start, end_s=end))
    if not turns:
        raise CorpusError(f"{where}: expected at least one turn with words")
    return tuple(turns)


def _time(value: Any, at: str, key: str) -> float | None:
    if value is None:
        return None
    # bool is an int subclass: reject it explicitly, "true" is not a time.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CorpusError(f"{at}: expected {key} to be a number of seconds >= 0, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise CorpusError(f"{at}: expected {key} to be a number of seconds >= 0, got {value!r}")
    return float(value)
