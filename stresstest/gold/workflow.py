"""Gold workflow: draft -> check -> clinician audit (docs/spec.md §5; see docs/gold.md).

* :func:`draft_from_record` turns any structurer's output (the served LLM, or the
  deterministic ``rules`` extractor run on the human transcript) into an
  *unaudited* gold draft.
* :func:`check_gold` lists every problem a reviewer must fix before auditing:
  schema errors, evidence quotes that are not in the transcript, duplicate claims,
  flags without evidence, unknown evidence keys.
* :func:`mark_audited` records the clinician's sign-off in the file.

Evidence matching rule (documented in docs/gold.md): a quote counts as present
when, after both the quote and the transcript are normalised by
:func:`normalise_quote_text` (typographic quotes/dashes to ASCII, every run of
whitespace to one space, ends stripped), the quote is a substring of the
transcript. Matching is case-sensitive: a quote is copied, not paraphrased.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from stresstest.cache import atomic_write_text
from stresstest.clinical.claims import canonical_claim
from stresstest.errors import GoldError
from stresstest.gold.model import (
    GoldRecord,
    Provenance,
    dump_gold,
    read_gold_file,
    today,
    validation_messages,
)
from stresstest.records import Encounter, revise
from stresstest.schema import ClinicalRecord

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class GoldIssue:
    """One problem found in a gold record.

    Attributes:
        code: machine-readable kind, e.g. ``evidence_not_in_transcript``.
        where: key path in the record, e.g. ``field_evidence.c3[0]``.
        message: what was expected and what came.
        severity: ``error`` blocks an audit; ``warning`` is for the reviewer's eyes.
    """

    code: str
    where: str
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.severity}: {self.where}: {self.message} [{self.code}]"


_TYPO = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2026": "...",
        "\u00a0": " ",
    }
)
_WS = re.compile(r"\s+")


def normalise_quote_text(text: str) -> str:
    """The normalisation applied to quotes and transcript before substring search.

    NFKC, typographic quotes/dashes/ellipsis to ASCII, whitespace runs to one
    space, ends stripped. Case and punctuation are kept.
    """
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).translate(_TYPO)).strip()


def quote_in_transcript(quote: str, transcript_text: str) -> bool:
    """True when ``quote`` is present in the transcript under :func:`normalise_quote_text`."""
    q = normalise_quote_text(quote)
    return bool(q) and q in normalise_quote_text(transcript_text)


def gold_transcript_text(encounter: Encounter, record: GoldRecord) -> str:
    """The transcript a gold record is checked against: the first ``scope_turns`` turns, or all."""
    return encounter.truncated(record.scope_turns).reference_text()


def check_gold(record: GoldRecord | Mapping[str, Any], transcript_text: str | None) -> list[GoldIssue]:
    """Every problem of a gold record that a reviewer must look at.

    Args:
        record: a validated record, or a raw mapping (schema errors are then
            reported as issues instead of raised).
        transcript_text: the human transcript the gold was written from (for a
            scoped record, only its first ``scope_turns`` turns: see
            :func:`gold_transcript_text`); None skips the evidence check.

    Returns:
        Issues in a stable order (record order); empty when the record is clean.
    """
    if not isinstance(record, GoldRecord):
        try:
            record = GoldRecord.model_validate(dict(record))
        except ValidationError as err:
            return [
                GoldIssue("schema", m.split(":", 1)[0], m.split(":", 1)[1].strip()) for m in validation_messages(err)
            ]
    issues: list[GoldIssue] = []
    seen_ids: dict[str, str] = {}
    ids = [("claims", i, c.id) for i, c in enumerate(record.claims)]
    ids += [("safety_flags", i, f.id) for i, f in enumerate(record.safety_flags)]
    for kind, i, ident in ids:
        if ident in seen_ids:
            issues.append(
                GoldIssue("duplicate_id", f"{kind}[{i}].id", f"id {ident!r} is already used by {seen_ids[ident]}")
            )
        else:
            seen_ids[ident] = f"{kind}[{i}]"
    keys: dict[str, str] = {}
    for i, c in enumerate(record.claims):
        key = canonical_claim(c).key
        if key in keys:
            issues.append(
                GoldIssue(
                    "duplicate_claim",
                    f"claims[{i}]",
                    f"claim {c.id!r} has the same canonical key as {keys[key]}: {key}",
                )
            )
        else:
            keys[key] = f"claims[{i}] ({c.id!r})"
    for key in record.field_evidence:
        if key != "triage" and key not in seen_ids:
            issues.append(
                GoldIssue(
                    "evidence_unknown_field",
                    f"field_evidence.{key}",
                    f"expected 'triage' or a claim/flag id, got {key!r}",
                )
            )
    for i, f in enumerate(record.safety_flags):
        quotes = [q for q in record.field_evidence.get(f.id, []) if q.strip()]
        if not quotes:
            issues.append(
                GoldIssue(
                    "flag_without_evidence",
                    f"safety_flags[{i}]",
                    f"flag {f.id!r} ({f.kind}: {f.name}) has no quote in field_evidence.{f.id}",
                )
            )
    if not record.triage.rationale.strip():
        issues.append(
            GoldIssue(
                "triage_without_rationale",
                "triage.rationale",
                "expected one sentence saying why this level, got an empty rationale",
                "warning",
            )
        )
    if transcript_text is not None:
        norm = normalise_quote_text(transcript_text)
        for key, quotes in record.field_evidence.items():
            for j, q in enumerate(quotes):
                nq = normalise_quote_text(q)
                if not nq:
                    issues.append(
                        GoldIssue(
                            "evidence_empty",
                            f"field_evidence.{key}[{j}]",
                            "expected a verbatim quote, got an empty string",
                        )
                    )
                elif nq not in norm:
                    scope = f" (within the first {record.scope_turns} turns)" if record.scope_turns is not None else ""
                    issues.append(
                        GoldIssue(
                            "evidence_not_in_transcript",
                            f"field_evidence.{key}[{j}]",
                            f"quote {q!r} not found in the transcript of {record.encounter_id}{scope}",
                        )
                    )
    return issues


def draft_from_record(
    encounter: Encounter,
    record: ClinicalRecord,
    drafted_by: str,
    *,
    scope_turns: int | None = None,
    date: str | None = None,
) -> GoldRecord:
    """An unaudited gold draft from any structurer's output on the human transcript.

    Args:
        encounter: the encounter the record was made from.
        record: the structured record (LLM or ``rules`` backend) of its human transcript.
        drafted_by: how it was made, e.g. ``"rules-v1 on the human transcript"``.
        scope_turns: when the record was made from only the first N turns.
        date: ISO date to stamp (default today, UTC).

    Returns:
        A :class:`GoldRecord` with ``audited: false``; run :func:`check_gold` on it
        and have a clinician edit it before :func:`mark_audited`.
    """
    return GoldRecord(
        encounter_id=encounter.encounter_id,
        corpus=encounter.corpus,
        scope_turns=scope_turns,
        chief_complaint=record.chief_complaint,
        triage=record.triage.model_copy(),
        claims=[c.model_copy() for c in record.claims],
        safety_flags=[f.model_copy() for f in record.safety_flags],
        field_evidence={k: list(v) for k, v in record.field_evidence.items()},
        provenance=Provenance(
            drafted_by=drafted_by, audited_by=None, audited=False, date=date or today(), notes="draft: not reviewed"
        ),
    )


_PROV_LINE = re.compile(r"^(?P<indent>[ \t]+)(?P<key>audited|audited_by|date):[^\n]*$", re.MULTILINE)


def mark_audited(path: str | Path, auditor: str, *, date: str | None = None) -> GoldRecord:
    """Record a clinician's sign-off: ``audited: true``, ``audited_by``, ``date``.

    The three provenance lines are rewritten in place so the reviewer's layout and
    comments survive; when they cannot be found as plain lines, the file is
    re-written from the model (comments are then lost).

    Args:
        path: the gold file.
        auditor: who audited it (name and role), e.g. ``"Dr A. Smith (GP)"``.
        date: ISO date (default today, UTC).

    Returns:
        The audited record as now on disk.

    Raises:
        GoldError: the file is invalid, already audited, or ``auditor`` is empty.
    """
    p = Path(path)
    if not auditor.strip():
        raise GoldError(f"{p}: expected the auditor's name, got an empty string")
    rec = read_gold_file(p)  # a symlink loop, FIFO or missing file is a one-line error here
    # A symlink (a gold file shared between folders) is written through: the shared file is the one audited,
    # and the link stays a link (an atomic write on the link's path would replace it with a copy).
    p = p.resolve()
    if rec.provenance.audited:
        raise GoldError(f"{p}: already audited by {rec.provenance.audited_by!r} on {rec.provenance.date}")
    when = date or today()
    want = revise(rec, provenance=revise(rec.provenance, audited=True, audited_by=auditor, date=when))
    text = p.read_text(encoding="utf-8")
    new = {
        "audited": "true",
        "audited_by": yaml.safe_dump(auditor, default_style='"').strip().split("\n")[0],
        "date": f"'{when}'",
    }
    hits = [m for m in _PROV_LINE.finditer(text)]
    edited = None
    if sorted(m.group("key") for m in hits) == ["audited", "audited_by", "date"]:
        edited = _PROV_LINE.sub(lambda m: f"{m.group('indent')}{m.group('key')}: {new[m.group('key')]}", text)
        try:
            if GoldRecord.model_validate(yaml.safe_load(edited)) != want:
                edited = None
        except (yaml.YAMLError, ValidationError):
            edited = None
    atomic_write_text(p, edited if edited is not None else dump_gold(want))
    return read_gold_file(p)
