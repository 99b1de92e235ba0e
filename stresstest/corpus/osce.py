"""OSCE interviews (Fareez et al. 2022): one ``.txt`` per encounter, ``D:``/``P:`` turns.

Published layout::

    osce/
      transcripts/RES0001.txt ...   (file name = specialty code + case number)
      audio/RES0001.mp3 ...         (optional; attached when present)

Quirks survived (all seen in the real files): UTF-16-LE with BOM, UTF-8 with or
without BOM and typographic punctuation, mixed CRLF/LF, blank lines between turns,
turns wrapped over several lines (also after a blank line), and a handful of
mistyped speaker labels (``D;``, ``P::``, ``D :``, ``p:``, ``P.``, ``P No.``,
``DL OK``). See ``docs/corpora.md``.
"""

from __future__ import annotations

import re
from pathlib import Path

from stresstest.audio import AUDIO_SUFFIXES
from stresstest.corpus._text import (
    has_words,
    normalise_chars,
    read_text,
    split_lines,
    tidy_after_removal,
)
from stresstest.errors import CorpusError
from stresstest.ids import check_id
from stresstest.records import Encounter, Speaker, Turn

CORPUS = "osce"

_SPEAKERS: dict[str, Speaker] = {"D": "doctor", "P": "patient"}

# A turn label: D or P, then the separator the transcribers meant to type. Besides
# the canonical ':' the real files hold ';' (shift not pressed), '::', ' :', '.' and
# 'L' (the key next to ';'), and a bare capital 'P'/'D' followed by a space and a
# capitalised word ("P No."). A bare letter must be upper case and followed by a
# capital so that ordinary continuation lines are never mistaken for turns.
_LABEL = re.compile(
    r"""^(?:
        (?P<sep>[DP])\s*[:;.]+\s*          # D: D; D:: D : P.
      | (?P<low>[dp])\s*:+\s*              # p:  (lower case only with a colon: "p.m." is a word)
      | (?P<typo>[DP])L\s+                 # DL OK
      | (?P<bare>[DP])\s+(?=[A-Z])         # P No.
    )""",
    re.VERBOSE,
)
# Something that looks like a speaker label but names nobody we know ("Q: ...",
# "Dr: ..."): an error rather than a silent continuation, so that a file in another
# convention is not read as one giant doctor turn.
_OTHER_LABEL = re.compile(r"^[A-Za-z]{1,3}\s*:")


def transcripts_dir(path: Path) -> Path:
    """The folder of ``.txt`` files: ``path/transcripts`` when it exists, else ``path``."""
    sub = path / "transcripts"
    return sub if sub.is_dir() else path


def load_osce(path: str | Path) -> list[Encounter]:
    """Load every OSCE transcript under a folder.

    Args:
        path: the ``osce`` folder (holding ``transcripts/``) or the transcripts
            folder itself.

    Returns:
        One encounter per ``.txt`` file, sorted by id (the file stem).

    Raises:
        CorpusError: when the folder is missing, holds no ``.txt`` file, or a file
            is malformed (the message names file and line).
    """
    root = Path(path)
    folder = transcripts_dir(root)
    if root.is_file():
        raise CorpusError(f"{root}: is a file; corpus.path for kind osce is a folder of D:/P: .txt transcripts")
    if not folder.is_dir():
        raise CorpusError(
            f"{root}: OSCE folder not found (expected a folder of D:/P: .txt transcripts, or one holding "
            f"transcripts/): download the OSCE corpus (Fareez et al. 2022, doi:10.1038/s41597-022-01423-1) and "
            f"unpack its transcripts there, or set corpus.path (docs/corpora.md)"
        )
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".txt" and p.is_file())
    if not files:
        raise CorpusError(f"{folder}: expected OSCE transcripts (*.txt), found none")
    audio_dir = folder.parent / "audio" if folder.name == "transcripts" else folder / "audio"
    return [parse_osce_file(f, audio_dir=audio_dir) for f in files]


def parse_osce_file(path: Path, audio_dir: Path | None = None) -> Encounter:
    """Parse one OSCE transcript into an :class:`Encounter`.

    Args:
        path: the ``.txt`` file.
        audio_dir: folder where a recording named after the file stem may exist.

    Raises:
        CorpusError: naming the file and line of the first malformed line.
    """
    # Character normalisation once per file (typographic punctuation, stray BOMs),
    # whitespace per turn below: cheaper than cleaning every line twice.
    lines = split_lines(normalise_chars(read_text(path)))
    turns: list[tuple[Speaker, list[str]]] = []
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue  # blank lines separate turns but carry nothing
        speaker, rest = _split_label(line)
        if speaker is not None:
            turns.append((speaker, [rest]))
            continue
        if _OTHER_LABEL.match(line) or not turns:
            raise CorpusError(
                f"{path}:{lineno}: expected a turn starting with 'D:' or 'P:'"
                f"{'' if turns else ' (first line of the dialogue)'}, got {_preview(line)!r}"
            )
        # No label: the previous turn wrapped onto this line (sometimes after a
        # blank line, e.g. a trailing "Hey." at the end of RES0194).
        turns[-1][1].append(line)

    result = []
    for speaker, parts in turns:
        # Also joins stray spaces before punctuation ("a stroke ." in MSK0009).
        text = tidy_after_removal(" ".join(parts))
        if has_words(text):  # a bare "D:" with nothing said is not a turn
            result.append(Turn(speaker=speaker, text=text))
    if not result:
        raise CorpusError(f"{path}: expected at least one 'D:' or 'P:' turn with words, found none")

    stem = check_id(path.stem, where=str(path))  # the file name is the id
    specialty = stem[:3].upper() if re.match(r"^[A-Za-z]{3}", stem) else None
    return Encounter(
        encounter_id=stem,
        corpus=CORPUS,
        source_path=str(path),
        turns=tuple(result),
        audio_path=_find_audio(audio_dir, stem),
        specialty=specialty,
    )


def _split_label(line: str) -> tuple[Speaker | None, str]:
    m = _LABEL.match(line)
    if m is None:
        return None, line
    letter = next(g for g in m.groups() if g).upper()
    return _SPEAKERS[letter], line[m.end() :].strip()


def _find_audio(audio_dir: Path | None, stem: str) -> str | None:
    if audio_dir is None or not audio_dir.is_dir():
        return None
    for suffix in AUDIO_SUFFIXES:
        for candidate in (audio_dir / f"{stem}{suffix}", audio_dir / f"{stem}{suffix.upper()}"):
            if candidate.is_file():
                return str(candidate.resolve())
    return None


def _preview(line: str, width: int = 60) -> str:
    return line if len(line) <= width else line[: width - 3] + "..."
