"""PriMock57 (Papadopoulos Korfiatis et al. 2022): two TextGrid channels + a clinician note.

Published layout::

    primock57/
      transcripts/day1_consultation01_doctor.TextGrid
      transcripts/day1_consultation01_patient.TextGrid ...
      audio/day1_consultation01_doctor.wav      (optional: the upstream recordings,
      audio/day1_consultation01_patient.wav      one headset channel per speaker)
      notes/day1_consultation01.json ...  (presenting_complaint, note, highlights)

Recordings are looked for in ``audio/`` beside ``transcripts/`` (or in the
transcripts folder itself), as ``<id>_doctor`` and ``<id>_patient`` with any
suffix of :data:`stresstest.audio.AUDIO_SUFFIXES`. Both channels present: the
encounter carries both in ``audio_channels`` and the speech stage mixes them into
one recording (rule in :mod:`stresstest.speech.recording`), with the TextGrid
timings as its active-speech mask. One channel without its partner is an error
naming the missing file.

Each channel holds one interval tier of utterances with start/end times; empty
intervals are silence. The loader merges both channels by start time, one turn per
non-empty utterance, and resolves the transcriber tags:

- ``<UNSURE>x</UNSURE>`` -> ``x`` (the transcriber's best guess is kept);
- ``<UNIN/>`` and ``<INAUDIBLE_SPEECH/>`` (unintelligible) -> dropped;
- any other tag is an error (naming file and line), so a new convention is never
  silently read as words.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from stresstest.audio import AUDIO_SUFFIXES
from stresstest.corpus._text import clean_text, has_words, read_text, tidy_after_removal
from stresstest.corpus.textgrid import read_textgrid
from stresstest.errors import CorpusError
from stresstest.ids import check_id
from stresstest.records import Encounter, Speaker, Turn

CORPUS = "primock57"

_CHANNELS: dict[str, Speaker] = {"doctor": "doctor", "patient": "patient"}
_CHANNEL_FILE = re.compile(r"^(?P<stem>.+)_(?P<channel>doctor|patient)$", re.IGNORECASE)

_KEEP_TAG = re.compile(r"</?\s*UNSURE\s*>", re.IGNORECASE)
_DROP_TAG = re.compile(r"<\s*(?:UNIN|INAUDIBLE_SPEECH)\s*/\s*>", re.IGNORECASE)
_ANY_TAG = re.compile(r"</?\s*[A-Za-z_][\w-]*\s*/?\s*>")


def resolve_tags(text: str, where: str = "<text>") -> str:
    """Resolve PriMock57 transcriber tags and tidy the spacing they leave.

    Args:
        text: an utterance as transcribed.
        where: ``file:line`` for the error message.

    Returns:
        Clean text (may be empty when the utterance was only unintelligible).

    Raises:
        CorpusError: on a tag other than ``<UNSURE>``, ``</UNSURE>``, ``<UNIN/>`` and
            ``<INAUDIBLE_SPEECH/>``.
    """
    text = _DROP_TAG.sub(" ", _KEEP_TAG.sub(" ", clean_text(text)))
    unknown = _ANY_TAG.search(text)
    if unknown:
        raise CorpusError(
            f"{where}: expected only the tags <UNSURE>...</UNSURE>, <UNIN/> or <INAUDIBLE_SPEECH/>, "
            f"got {unknown.group(0)!r}"
        )
    return tidy_after_removal(text)


def _layout(path: Path) -> tuple[Path, Path]:
    """(transcripts folder, notes folder) for a corpus root or its transcripts folder."""
    if (path / "transcripts").is_dir():
        return path / "transcripts", path / "notes"
    return path, path.parent / "notes"


def load_primock57(path: str | Path) -> list[Encounter]:
    """Load every PriMock57 consultation.

    Args:
        path: the ``primock57`` folder (holding ``transcripts/`` and ``notes/``) or
            the transcripts folder itself (notes are then looked for next to it).

    Returns:
        One encounter per consultation, sorted by id (``day1_consultation01``...),
        with timed turns and, where a note exists, ``reference_note``.

    Raises:
        CorpusError: when the folder is missing, a channel lacks its partner, or a
            file is malformed (the message names file and line).
    """
    root = Path(path)
    transcripts, notes = _layout(root)
    if not transcripts.is_dir():
        raise CorpusError(
            f"{root}: PriMock57 folder not found (expected transcripts/<id>_doctor.TextGrid and "
            f"<id>_patient.TextGrid, optionally notes/<id>.json)"
        )
    channels: dict[str, dict[str, Path]] = {}
    for f in sorted(transcripts.iterdir()):
        if f.suffix.lower() != ".textgrid" or not f.is_file():
            continue
        m = _CHANNEL_FILE.match(f.stem)
        if m is None:
            raise CorpusError(f"{f}: expected a file name ending in _doctor.TextGrid or _patient.TextGrid")
        channels.setdefault(m.group("stem"), {})[m.group("channel").lower()] = f
    if not channels:
        raise CorpusError(f"{transcripts}: expected PriMock57 TextGrid files (*_doctor.TextGrid), found none")

    encounters = []
    for stem, files in sorted(channels.items()):
        missing = sorted(set(_CHANNELS) - set(files))
        if missing:
            present = next(iter(files.values()))
            raise CorpusError(
                f"{present}: expected its partner channel {transcripts / f'{stem}_{missing[0]}.TextGrid'}, not found"
            )
        check_id(stem, where=str(files.get("doctor") or next(iter(files.values()))))
        encounters.append(_load_one(stem, files, notes, _find_channels(stem, transcripts)))
    return encounters


def _find_channels(stem: str, transcripts: Path) -> tuple[str, ...]:
    """(doctor, patient) recordings of one consultation, or () when there are none.

    Raises:
        CorpusError: when only one of the two channels exists.
    """
    folders = [transcripts.parent / "audio", transcripts / "audio", transcripts]
    found: dict[str, Path] = {}
    for channel in _CHANNELS:
        for folder in folders:
            if not folder.is_dir():
                continue
            hit = next(
                (
                    folder / f"{stem}_{channel}{suf}"
                    for suf in AUDIO_SUFFIXES
                    if (folder / f"{stem}_{channel}{suf}").is_file()
                ),
                None,
            )
            if hit is not None:
                found[channel] = hit
                break
    if not found:
        return ()
    missing = [c for c in _CHANNELS if c not in found]
    if missing:
        present = next(iter(found.values()))
        raise CorpusError(
            f"{present}: expected its partner channel {present.parent / f'{stem}_{missing[0]}.wav'} "
            f"(PriMock57 recordings come as <id>_doctor and <id>_patient), not found"
        )
    return tuple(str(found[c].resolve()) for c in _CHANNELS)


def _load_one(stem: str, files: dict[str, Path], notes: Path, channels: tuple[str, ...] = ()) -> Encounter:
    timed: list[tuple[float, float, int, Turn]] = []
    for channel, f in files.items():
        speaker = _CHANNELS[channel]
        tiers = [t for t in read_textgrid(f) if t.tier_class == "IntervalTier"]
        if not tiers:
            raise CorpusError(f"{f}: expected an IntervalTier of utterances, found none")
        # One tier per channel in the published files; a second tier (e.g. added
        # annotations) is not speech of this speaker, so only the first is read.
        for iv in tiers[0].items:
            text = resolve_tags(iv.text, f"{f}:{iv.line}")
            if not has_words(text):
                continue  # silence, or an utterance that was wholly unintelligible
            order = 0 if speaker == "doctor" else 1
            timed.append(
                (
                    iv.start_s,
                    iv.end_s,
                    order,
                    Turn(speaker=speaker, text=text, start_s=iv.start_s, end_s=iv.end_s),
                )
            )
    if not timed:
        raise CorpusError(f"{files['doctor']}: expected at least one utterance with words in either channel")
    # Merge by start time; at equal starts the doctor goes first, so the order is
    # total and the result deterministic.
    timed.sort(key=lambda x: (x[0], x[1], x[2]))
    return Encounter(
        encounter_id=stem,
        corpus=CORPUS,
        source_path=str(files["doctor"]),
        turns=tuple(t for *_, t in timed),
        reference_note=_read_note(notes / f"{stem}.json"),
        audio_path=channels[0] if channels else None,
        audio_channels=channels,
    )


def _read_note(path: Path) -> str | None:
    if not path.is_file():
        return None
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path}:{exc.lineno}: expected a JSON object, got invalid JSON ({exc.msg})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("note"), str):
        raise CorpusError(f"{path}:1: expected a JSON object with a string field 'note'")
    # Keep the note's own layout (paragraphs, "Plan:" lines); only trim the ends.
    note = data["note"].replace("\r\n", "\n").strip()
    return note or None
