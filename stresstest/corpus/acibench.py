"""ACI-BENCH (Yim et al. 2023): CSV files of dialogue -> visit note pairs.

Published layout::

    aci-bench/
      challenge_data/train.csv valid.csv clinicalnlp_taskB_test1.csv clinicalnlp_taskC_test2.csv
      src_experiment_data/test1_virtscribe_asr.csv test1_virtscribe_humantrans.csv ...
      (*_metadata.csv files sit next to them and are not dialogues)

Columns: ``dataset, encounter_id, dialogue, note`` (``src_experiment_data`` names
the id column ``id``). The dialogue is one turn per line, each opened by a speaker
tag. Quirks survived (all in the real files):

- tags ``[doctor]``, ``[patient]`` and ``[patient_guest]`` (a relative or carer ->
  speaker ``other``); ``[ inaudible 00:09:25 ]`` markers are dropped;
- lines without a tag continue the previous turn; a dialogue whose first line has
  no tag starts with the speaker opposite to the first tagged one;
- empty turns (``[patient]`` with nothing after it) are dropped;
- the text is PTB-tokenised (``do n't``, ``gon na``, ``okay .``); it is joined back
  (``don't``, ``gonna``, ``okay.``) so that it reads like speech for the TTS and
  compares fairly with an ASR hypothesis;
- speaker tags are sometimes swapped by the upstream ASR; the loader keeps them as
  published (the reference transcript drops speaker labels, so WER is unaffected).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from stresstest.corpus._text import clean_text, has_words, read_text, tidy_after_removal
from stresstest.errors import CorpusError
from stresstest.ids import check_id
from stresstest.records import Encounter, Speaker, Turn, revise

CORPUS = "aci-bench"

SPEAKER_TAGS: dict[str, Speaker] = {
    "doctor": "doctor",
    "patient": "patient",
    # A companion of the patient (parent, spouse, carer) who speaks in the visit.
    "patient_guest": "other",
    "guest": "other",
    "nurse": "other",
    "other": "other",
}
# Non-speech markers left by transcribers, e.g. "[ inaudible 00:09:25 ]".
_MARKER = re.compile(r"^\s*(?:inaudible|unintelligible|crosstalk|laughter|laughs|pause|noise)\b", re.I)
_BRACKET = re.compile(r"\[([^\]\n]*)\]")

_CLITIC = re.compile(r"(\w) (n't)\b", re.IGNORECASE)
_SPLIT_WORDS = re.compile(r"\b(gon|wan|got) (na|ta)\b", re.IGNORECASE)

_ID_COLUMNS = ("encounter_id", "id")


def detokenise(text: str) -> str:
    """Join PTB-style tokens back: ``do n't`` -> ``don't``, ``gon na`` -> ``gonna``, ``ok .`` -> ``ok.``."""
    text = _CLITIC.sub(r"\1\2", text)
    text = _SPLIT_WORDS.sub(r"\1\2", text)
    return tidy_after_removal(text)


def split_name(path: Path) -> str:
    """The split a CSV holds, used to prefix ids that repeat across files.

    ``clinicalnlp_taskB_test1.csv`` -> ``test1``; other files -> their stem
    (``train``, ``test1_virtscribe_asr``).
    """
    return re.sub(r"^clinicalnlp_task[A-Z]_", "", path.stem)


def csv_files(path: Path) -> list[Path]:
    """The dialogue CSVs a path designates (a file, a folder, or the corpus root)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise CorpusError(
            f"{path}: ACI-BENCH path not found (expected a CSV with columns "
            f"dataset,encounter_id,dialogue,note, a folder of them, or the aci-bench folder)"
        )
    folder = path / "challenge_data" if (path / "challenge_data").is_dir() else path
    files = sorted(
        f for f in folder.iterdir() if f.is_file() and f.suffix.lower() == ".csv" and not f.stem.endswith("_metadata")
    )
    if not files:
        raise CorpusError(f"{folder}: expected ACI-BENCH dialogue CSVs (*.csv), found none")
    return files


def load_acibench(path: str | Path) -> list[Encounter]:
    """Load ACI-BENCH encounters from one CSV or every dialogue CSV of a folder.

    Given the ``aci-bench`` root, its ``challenge_data/`` folder is read. When an id
    occurs in more than one file (e.g. ``src_experiment_data`` holds the same
    encounters as ASR output and as human transcript), every id is prefixed with
    its file's split: ``test1_virtscribe_asr-VS017``.

    Args:
        path: a CSV file, a folder of CSVs, or the ``aci-bench`` folder.

    Returns:
        The encounters, sorted by id, with the visit note as ``reference_note``.

    Raises:
        CorpusError: when the path is missing, a CSV lacks a column, an id repeats
            within a file, or a dialogue is malformed (the message names file and line).
    """
    per_file = [(f, _load_csv(f)) for f in csv_files(Path(path))]
    seen: set[str] = set()
    clash = False
    for _, encounters in per_file:
        ids = {e.encounter_id for e in encounters}
        clash = clash or bool(ids & seen)
        seen |= ids
    result = []
    for f, encounters in per_file:
        for e in encounters:
            if clash:
                eid = check_id(f"{split_name(f)}-{e.encounter_id}", where=str(f))
                e = revise(e, encounter_id=eid)
            result.append(e)
    return sorted(result, key=lambda e: e.encounter_id)


def _load_csv(path: Path) -> list[Encounter]:
    text = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            raise CorpusError(f"{path}:1: expected a header row dataset,encounter_id,dialogue,note, got an empty file")
        columns = [h.strip() for h in header]
        id_col = next((c for c in _ID_COLUMNS if c in columns), None)
        if id_col is None or "dialogue" not in columns:
            # The header is not echoed: a wrong file may hold anything (patient text included).
            raise CorpusError(
                f"{path}:1: expected a header row with columns dataset,encounter_id,dialogue,note "
                f"(encounter_id may be 'id'); the first row has {len(columns)} field(s) and "
                f"{'no dialogue column' if 'dialogue' not in columns else 'no encounter_id/id column'}"
            )
        idx_id, idx_dialogue = columns.index(id_col), columns.index("dialogue")
        idx_note = columns.index("note") if "note" in columns else None
        encounters: list[Encounter] = []
        first_line: dict[str, int] = {}
        start = reader.line_num + 1
        for row in reader:
            if not row or all(not c.strip() for c in row):
                start = reader.line_num + 1
                continue
            if len(row) != len(columns):
                raise CorpusError(
                    f"{path}:{start}: expected {len(columns)} fields ({','.join(columns)}), got {len(row)}"
                )
            eid = row[idx_id].strip()
            if not eid:
                raise CorpusError(f"{path}:{start}: expected a non-empty {id_col}")
            if eid in first_line:
                raise CorpusError(
                    f"{path}:{start}: expected unique {id_col}s, got {eid!r} again (first on line {first_line[eid]})"
                )
            check_id(eid, what=id_col, where=f"{path}:{start}")
            first_line[eid] = start
            turns = parse_dialogue(row[idx_dialogue], path, start, eid)
            note = row[idx_note].replace("\r\n", "\n").strip() if idx_note is not None else ""
            encounters.append(
                Encounter(
                    encounter_id=eid,
                    corpus=CORPUS,
                    source_path=str(path),
                    turns=turns,
                    reference_note=note or None,
                )
            )
            start = reader.line_num + 1
    except csv.Error as exc:
        raise CorpusError(f"{path}:{reader.line_num}: expected valid CSV, got a parse error ({exc})") from exc
    return encounters


def parse_dialogue(dialogue: str, path: Path | str = "<dialogue>", line: int = 1, eid: str = "?") -> tuple[Turn, ...]:
    """Split an ACI-BENCH dialogue into clean turns.

    Args:
        dialogue: the ``dialogue`` field.
        path: CSV file, for messages.
        line: the file line where the dialogue field starts, for messages.
        eid: the encounter id, for messages.

    Raises:
        CorpusError: on an unknown bracketed tag or a dialogue with no speaker tag.
    """
    dialogue = dialogue.replace("\r\n", "\n").replace("\r", "\n")
    segments: list[tuple[Speaker | None, list[str]]] = [(None, [])]
    pos = 0
    for m in _BRACKET.finditer(dialogue):
        segments[-1][1].append(dialogue[pos : m.start()])
        pos = m.end()
        tag = m.group(1).strip().lower()
        if tag in SPEAKER_TAGS:
            segments.append((SPEAKER_TAGS[tag], []))
        elif _MARKER.match(tag):
            segments[-1][1].append(" ")  # a non-speech marker: drop it, keep the turn going
        else:
            at = line + dialogue.count("\n", 0, m.start())
            # A short tag is shown (it is what to fix); a long bracket is dialogue text and is not echoed.
            shown = repr(m.group(0)) if len(m.group(0)) <= 24 else f"a bracketed text of {len(m.group(0))} characters"
            raise CorpusError(
                f"{path}:{at}: expected a speaker tag {', '.join(f'[{t}]' for t in SPEAKER_TAGS)} "
                f"or a marker like [inaudible], got {shown} (encounter {eid})"
            )
    segments[-1][1].append(dialogue[pos:])

    tagged = [s for s, _ in segments[1:]]
    if not tagged:
        raise CorpusError(
            f"{path}:{line}: expected [doctor]/[patient] speaker tags in the dialogue of {eid}, found none"
        )
    # Text before the first tag (a few dialogues open untagged): it is the other
    # party's opening line, since the dialogues alternate.
    opener: Speaker = "patient" if tagged[0] == "doctor" else "doctor"
    turns = []
    for speaker, parts in segments:
        text = detokenise(clean_text(" ".join(parts)))
        if has_words(text):
            turns.append(Turn(speaker=speaker or opener, text=text))
    if not turns:
        raise CorpusError(f"{path}:{line}: expected at least one turn with words in the dialogue of {eid}")
    return tuple(turns)
