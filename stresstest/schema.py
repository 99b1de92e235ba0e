"""Output schema S of the frozen clinical structuring step (SPEC §4).

``ClinicalRecord`` is what the LLM (or the deterministic ``rules`` extractor)
must produce; its JSON Schema is what constrained decoding enforces and its
hash is recorded with every record. ``RecordEnvelope`` wraps one record with
the provenance of how it was made (never sent to the LLM).

Triage scale (fixed, ordinal, ``ord`` larger = more urgent):

====== ============ =========================================================
ord    level        meaning
====== ============ =========================================================
0      routine      can wait for a scheduled appointment
1      urgent       needs assessment within hours / same day
2      emergency    needs immediate care (call an ambulance / go to ED now)
====== ============ =========================================================

Safety-critical subset G_crit: flags whose ``kind`` is in
:data:`CRITICAL_FLAG_KINDS` (red-flag symptoms, allergies, high-risk
medications such as anticoagulants / insulin / opioids, self-harm risk and
critical vital signs). ``current_medication`` and ``social_risk`` flags are
recorded but are not safety-critical.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RECORD_SCHEMA_VERSION: Literal[1] = 1

TriageLevel = Literal["routine", "urgent", "emergency"]
TRIAGE_LEVELS: tuple[str, ...] = ("routine", "urgent", "emergency")


def triage_ord(level: str) -> int:
    """Ordinal rank of a triage level (larger = more urgent)."""
    return TRIAGE_LEVELS.index(level)


ClaimCategory = Literal[
    "symptom", "finding", "history", "medication", "allergy", "plan", "social", "family_history", "vital"
]
ClaimStatus = Literal["present", "absent", "uncertain"]
Laterality = Literal["left", "right", "bilateral"]

FlagKind = Literal[
    "red_flag", "allergy", "high_risk_medication", "self_harm_risk", "critical_vital",
    "current_medication", "social_risk",
]
CRITICAL_FLAG_KINDS: frozenset[str] = frozenset(
    {"red_flag", "allergy", "high_risk_medication", "self_harm_risk", "critical_vital"}
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Triage(_Strict):
    """The triage decision on the fixed 3-point scale."""

    level: TriageLevel = Field(description="routine < urgent < emergency.")
    rationale: str = Field(default="", description="One sentence: why this level.")


class Claim(_Strict):
    """One atomic clinical claim."""

    id: str = Field(description="Short id unique in the record, e.g. 'c1'; key into field_evidence.")
    category: ClaimCategory
    concept: str = Field(description="What the claim is about, e.g. 'chest pain', 'warfarin'.")
    status: ClaimStatus = Field(description="present / absent (denied) / uncertain.")
    value: str | None = Field(default=None, description="A number or qualitative value, e.g. '5', 'severe'.")
    unit: str | None = Field(default=None, description="Unit of value, e.g. 'mg', 'flights of stairs'.")
    time: str | None = Field(default=None, description="Onset/duration/frequency, e.g. '2 days', 'twice daily'.")
    laterality: Laterality | None = None


class SafetyFlag(_Strict):
    """A safety-relevant flag; ``kind`` decides whether it is safety-critical."""

    id: str = Field(description="Short id unique in the record, e.g. 'f1'; key into field_evidence.")
    kind: FlagKind
    name: str = Field(description="Canonical name, e.g. 'chest pain at rest', 'penicillin', 'warfarin'.")
    detail: str | None = Field(default=None, description="Dose, reaction, value...")


class ClinicalRecord(_Strict):
    """The structured clinical record y = LLM(I, S, x; φ)."""

    schema_version: Literal[1] = RECORD_SCHEMA_VERSION
    chief_complaint: str | None = None
    triage: Triage
    claims: list[Claim] = Field(default_factory=list)
    safety_flags: list[SafetyFlag] = Field(default_factory=list)
    field_evidence: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Field id ('triage', a claim id or a flag id) -> verbatim transcript quotes.",
    )

    def critical_flags(self) -> list[SafetyFlag]:
        """Flags in the safety-critical subset."""
        return [f for f in self.safety_flags if f.kind in CRITICAL_FLAG_KINDS]


_NAME_WS = re.compile(r"[^a-z0-9]+")


def flag_key(flag: SafetyFlag) -> str:
    """Identity of a flag for set comparisons (kind + normalised name)."""
    return f"{flag.kind}:{_NAME_WS.sub(' ', flag.name.lower()).strip()}"


def record_json_schema() -> dict[str, object]:
    """JSON Schema of :class:`ClinicalRecord`, as sent for constrained decoding."""
    return ClinicalRecord.model_json_schema()


def schema_hash() -> str:
    """sha256 of the canonical JSON Schema; recorded in every record and manifest."""
    blob = json.dumps(record_json_schema(), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


class RecordEnvelope(BaseModel):
    """One structuring outcome for (encounter, condition), with provenance.

    ``record`` is None exactly when ``failed`` is True; a failed item keeps the
    raw model text and the reason, and is counted, never dropped.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = 1
    encounter_id: str
    condition: str
    backend: str = Field(description="'rules', 'openai' (served LLM) or 'vllm-offline'.")
    model: str
    prompt_hash: str
    schema_hash: str
    decoding: dict[str, object]
    transcript_sha256: str
    record: ClinicalRecord | None = None
    failed: bool = False
    error: str | None = None
    raw_text: str | None = None
    attempts: int = 1
    elapsed_s: float = 0.0
    extra: dict[str, object] = Field(default_factory=dict, description="Backend-specific facts (e.g. guard).")
