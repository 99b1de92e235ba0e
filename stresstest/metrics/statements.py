"""Statements of a structured record and sentences of a transcript, for the note-quality judges.

The entailment, hallucination and pairwise judges (docs/spec.md §8) reason over *statements*: short,
self-contained sentences. Our notes are structured records, not prose, so the segmentation is
deterministic instead of model-made: every field of a :class:`~stresstest.schema.ClinicalRecord`
(or of a gold record, which has the same claim / flag models) becomes one statement:

================ ===================================================================
field            statement
================ ===================================================================
chief complaint  ``Chief complaint: <text>.``
triage           ``Triage: <level>.`` (the rationale is free text and is not a statement)
claim            ``<Category>: <concept> (<value unit>; <time>; <laterality>).`` with the
                 concept prefixed ``no`` when absent and ``possible`` when uncertain
safety flag      ``<Kind>: <name> (<detail>).``
================ ===================================================================

``field_evidence`` quotes are not statements (they are citations; the pairwise judge sees them next
to the statement they support). A statement keeps the id of the field it came from, so a verdict can
be traced back to the claim or flag it judged.

Transcripts are split into sentences at ``.``, ``?`` or ``!`` followed by white space (Whisper and the
corpora punctuate); a text without punctuation is one sentence. Sentences are numbered from 1 in the
prompt so a judge can cite them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from stresstest.schema import Claim, SafetyFlag, Triage

CATEGORY_LABELS: dict[str, str] = {
    "symptom": "Symptom",
    "finding": "Finding",
    "history": "History",
    "medication": "Medication",
    "allergy": "Allergy",
    "plan": "Plan",
    "social": "Social history",
    "family_history": "Family history",
    "vital": "Vital sign",
}
FLAG_LABELS: dict[str, str] = {
    "red_flag": "Red flag",
    "allergy": "Allergy flag",
    "high_risk_medication": "High-risk medication",
    "self_harm_risk": "Self-harm risk",
    "critical_vital": "Critical vital sign",
    "current_medication": "Current medication",
    "social_risk": "Social risk",
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WS = re.compile(r"\s+")


class NoteLike(Protocol):
    """What a statement list is made from: a ClinicalRecord or a GoldRecord."""

    chief_complaint: str | None
    triage: Triage
    claims: list[Claim]
    safety_flags: list[SafetyFlag]
    field_evidence: dict[str, list[str]]


@dataclass(frozen=True)
class Statement:
    """One statement of a note.

    Attributes:
        id: position id used in prompts (``h1``, ``h2``...), unique within one list.
        text: the sentence.
        field: the record field it came from (``chief_complaint``, ``triage``, a claim or flag id).
    """

    id: str
    text: str
    field: str


def _clean(s: str) -> str:
    return _WS.sub(" ", s).strip().rstrip(".")


def claim_text(c: Claim) -> str:
    """The statement of one claim (module docstring)."""
    concept = _clean(c.concept)
    if c.status == "absent":
        concept = f"no {concept}"
    elif c.status == "uncertain":
        concept = f"possible {concept}"
    details = []
    if c.value:
        details.append(_clean(f"{c.value} {c.unit}" if c.unit else c.value))
    if c.time:
        details.append(_clean(c.time))
    if c.laterality:
        details.append(c.laterality)
    label = CATEGORY_LABELS.get(c.category, c.category)
    return f"{label}: {concept}" + (f" ({'; '.join(details)})" if details else "") + "."


def flag_text(f: SafetyFlag) -> str:
    """The statement of one safety flag (module docstring)."""
    label = FLAG_LABELS.get(f.kind, f.kind)
    detail = f" ({_clean(f.detail)})" if f.detail and f.detail.strip() else ""
    return f"{label}: {_clean(f.name)}{detail}."


def note_statements(note: NoteLike, prefix: str = "h") -> list[Statement]:
    """Every statement of a record or gold record, in field order (chief complaint, triage, claims, flags).

    Args:
        note: a ClinicalRecord or GoldRecord.
        prefix: id prefix (``h`` gives ``h1``, ``h2``...).
    """
    out: list[tuple[str, str]] = []
    if note.chief_complaint and note.chief_complaint.strip():
        out.append((f"Chief complaint: {_clean(note.chief_complaint)}.", "chief_complaint"))
    out.append((f"Triage: {note.triage.level}.", "triage"))
    out += [(claim_text(c), c.id) for c in note.claims]
    out += [(flag_text(f), f.id) for f in note.safety_flags]
    return [Statement(f"{prefix}{i}", text, fld) for i, (text, fld) in enumerate(out, start=1)]


def note_text(note: NoteLike, *, with_evidence: bool = True) -> str:
    """The note as plain lines (one statement a line), optionally with its evidence quotes.

    This is how the pairwise judge sees a note: the statements, each followed by the verbatim quotes the
    record cites for that field.
    """
    lines = []
    for s in note_statements(note):
        quotes = note.field_evidence.get(s.field) if with_evidence else None
        cite = "; ".join(f'"{_clean(q)}"' for q in quotes if q.strip()) if quotes else ""
        lines.append(f"- {s.text}" + (f" [evidence: {cite}]" if cite else ""))
    return "\n".join(lines)


def transcript_sentences(text: str) -> list[str]:
    """Sentences of a transcript (module docstring); empty list for an empty text."""
    parts = [_WS.sub(" ", p).strip() for p in _SENTENCE_END.split(text.strip())]
    return [p for p in parts if p]


def numbered(lines: Sequence[str]) -> str:
    """``[1] first\\n[2] second`` — the premise layout every judge prompt uses."""
    return "\n".join(f"[{i}] {s}" for i, s in enumerate(lines, start=1))


def statement_lines(statements: Sequence[Statement]) -> str:
    """``h1: text`` lines — the hypothesis layout of the judge prompts."""
    return "\n".join(f"{s.id}: {s.text}" for s in statements)
