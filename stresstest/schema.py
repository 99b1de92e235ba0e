"""Output schema S of the frozen clinical structuring step (docs/spec.md §4).

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
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, StringConstraints, model_serializer

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
    "red_flag",
    "allergy",
    "high_risk_medication",
    "self_harm_risk",
    "critical_vital",
    "current_medication",
    "social_risk",
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
    """JSON Schema of :class:`ClinicalRecord` (the record as stored; the v1 output schema, and the rules').

    What an LLM is asked to write from prompt v2 on is :func:`output_json_schema`.
    """
    return ClinicalRecord.model_json_schema()


def _sha256_json(schema: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def schema_hash() -> str:
    """sha256 of :func:`record_json_schema`'s canonical JSON; recorded with every rules / v1 record."""
    return _sha256_json(record_json_schema())


# ---------------------------------------------------------------------------------------------------------
# Output schema v2: the record as an LLM writes it (prompt v2 on).
#
# ``ClinicalRecord.field_evidence`` is a map from ids to quotes, and a JSON Schema cannot say "one key per flag
# id": grammar-constrained decoding could (and did) leave it out, so no LLM record carried evidence. Here the
# quotes sit inside the items that need them, as a required, non-empty list: a schema-constrained output cannot
# omit evidence for the triage, a safety flag, or a medication / allergy / vital-sign claim. Every string and
# list is bounded so that a model repeating itself inside a quote or a list is stopped by the schema (the
# string / list must close) instead of running to max_tokens. ``RecordOutput.to_record`` turns it into the
# stored :class:`ClinicalRecord` (quotes moved into ``field_evidence``), so everything downstream is unchanged.
# ---------------------------------------------------------------------------------------------------------

OUTPUT_SCHEMA_VERSION = 2

# Bounds: generous for a capable model on a whole consultation, small enough that a loop inside one string or one
# list is cut short. A loop of whole items can still reach max_tokens (SmolLM2-135M repeats one 100-token claim;
# llama.cpp's repetition penalty looks back 64 tokens), which the client records as a truncated output.
MAX_CLAIMS = 40  # the 139 shipped gold records: 21 claims at the median, over 40 in 2 (44 at most)
MAX_FLAGS = 10  # ... and at most 4 safety flags
MAX_QUOTES = 2  # quotes per field: one verbatim span proves the field; a second for a split statement
MAX_QUOTE_CHARS = 160  # one sentence: 2 of the 4,060 quotes of the shipped gold records are longer (168)
MAX_TEXT_CHARS = 80  # concept, name, value, unit, time, detail, chief complaint
MAX_RATIONALE_CHARS = 200
MAX_ID_CHARS = 8

Quote = Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUOTE_CHARS)]
_Text = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]
_Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]
_EVIDENCE_DOC = "Verbatim quotes copied character for character from the transcript."
_EvidenceClaimCategory = Literal["medication", "allergy", "vital"]
_OtherClaimCategory = Literal["symptom", "finding", "history", "plan", "social", "family_history"]
# Claim categories whose claims must cite evidence (also the evidence filter's default high-stakes categories).
EVIDENCE_CLAIM_CATEGORIES: frozenset[str] = frozenset(get_args(_EvidenceClaimCategory))


def _evidence(required: bool) -> Any:
    # One description for both: whether the list may be left out or empty is what the schema says.
    if required:
        return Field(min_length=1, max_length=MAX_QUOTES, description=_EVIDENCE_DOC)
    return Field(default_factory=list, max_length=MAX_QUOTES, description=_EVIDENCE_DOC)


class TriageOutput(_Strict):
    """The triage decision with the quotes it rests on."""

    level: TriageLevel = Field(description="routine < urgent < emergency.")
    rationale: Annotated[str, StringConstraints(max_length=MAX_RATIONALE_CHARS)] = Field(
        description="One sentence: why this level."
    )
    evidence: list[Quote] = _evidence(required=True)


# Property order: required keys first, then optional ones. llama.cpp's JSON-schema grammar writes the required
# properties first whatever the schema's order, so any other order would show the model one order and force
# another. In a claim, ``evidence`` sits after ``status`` (required in QuotedClaimOutput, optional in ClaimOutput:
# a subclass's override keeps the field's place).
class _ClaimOutput(_Strict):
    id: _Id = Field(description="Unique in the record: c1, c2, ...")
    category: ClaimCategory
    concept: _Text = Field(description="What the claim is about, e.g. 'chest pain', 'warfarin'.")
    status: ClaimStatus = Field(description="present / absent (denied) / uncertain.")
    evidence: list[Quote] = _evidence(required=False)
    value: _Text | None = Field(default=None, description="A number or qualitative value, e.g. '5', 'severe'.")
    unit: _Text | None = Field(default=None, description="Unit of value, e.g. 'mg'.")
    time: _Text | None = Field(default=None, description="Onset/duration/frequency, e.g. '2 days'.")
    laterality: Laterality | None = None


class QuotedClaimOutput(_ClaimOutput):
    """A medication, allergy or vital-sign claim: evidence required."""

    category: _EvidenceClaimCategory
    evidence: list[Quote] = _evidence(required=True)


class ClaimOutput(_ClaimOutput):
    """Any other claim: evidence optional."""

    category: _OtherClaimCategory


class SafetyFlagOutput(_Strict):
    """A safety flag: evidence required."""

    id: _Id = Field(description="Unique in the record: f1, f2, ...")
    kind: FlagKind
    name: _Text = Field(description="Canonical name, e.g. 'chest pain at rest', 'penicillin'.")
    evidence: list[Quote] = _evidence(required=True)
    detail: _Text | None = Field(default=None, description="Dose, reaction, value...")


class RecordOutput(_Strict):
    """Output schema v2 (see the comment above): what the LLM roles write; :meth:`to_record` stores it.

    Only the triage is required, so it comes first (required keys first, see above); the lists may be left out.
    Requiring them would not make a model list anything (an empty list satisfies the schema), but it takes away
    the early close that lets a small model end in a valid record instead of at max_tokens: with required lists
    and the triage last, SmolLM2-135M (llama.cpp, CAR0001 and RES0002, 8 turns) repeated whole claims until
    max_tokens at 512 and at 1024; in this order both records closed within 384 tokens (6 turns).
    """

    triage: TriageOutput
    chief_complaint: _Text | None = Field(default=None, description="Main reason for the visit, a few words.")
    claims: list[QuotedClaimOutput | ClaimOutput] = Field(default_factory=list, max_length=MAX_CLAIMS)
    safety_flags: list[SafetyFlagOutput] = Field(default_factory=list, max_length=MAX_FLAGS)

    def to_record(self) -> ClinicalRecord:
        """The stored record: same items, quotes moved into ``field_evidence`` under the item's id.

        A repeated id (the schema cannot forbid one) gets the quotes of all its items, in order, once each.
        """
        evidence: dict[str, list[str]] = {"triage": list(dict.fromkeys(self.triage.evidence))}
        for item in (*self.claims, *self.safety_flags):
            if item.evidence:
                have = evidence.setdefault(item.id, [])
                have.extend(q for q in item.evidence if q not in have)
        return ClinicalRecord(
            chief_complaint=self.chief_complaint,
            triage=Triage(level=self.triage.level, rationale=self.triage.rationale),
            claims=[Claim.model_validate(c.model_dump(exclude={"evidence"})) for c in self.claims],
            safety_flags=[SafetyFlag.model_validate(f.model_dump(exclude={"evidence"})) for f in self.safety_flags],
            field_evidence=evidence,
        )

    @classmethod
    def from_record(cls, record: ClinicalRecord) -> RecordOutput:
        """The output that :meth:`to_record` turns into ``record`` (recorded outputs in tests, examples).

        Raises:
            pydantic.ValidationError: ``record`` breaks the contract (e.g. a flag without quotes).
        """

        def quoted(item: Triage | Claim | SafetyFlag, key: str) -> dict[str, Any]:
            return item.model_dump() | {"evidence": record.field_evidence.get(key, [])}

        return cls.model_validate(
            {
                "chief_complaint": record.chief_complaint,
                "triage": quoted(record.triage, "triage"),
                "claims": [quoted(c, c.id) for c in record.claims],
                "safety_flags": [quoted(f, f.id) for f in record.safety_flags],
            }
        )


def output_json_schema() -> dict[str, Any]:
    """JSON Schema of :class:`RecordOutput`: what constrained decoding enforces from prompt v2 on."""
    return RecordOutput.model_json_schema()


def output_schema_hash() -> str:
    """sha256 of :func:`output_json_schema`'s canonical JSON; recorded with every v2 record."""
    return _sha256_json(output_json_schema())


class AsWritten(BaseModel):
    """Facts whose keys a reader uses are typed; any other key is kept as written.

    Serialises to the keys that were set (declared or not), so the facts read back and are written
    again byte for byte, whatever a backend put into them.
    """

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        declared = type(self).model_fields
        return {k: v for k, v in data.items() if k in self.model_fields_set or k not in declared}


class RecordExtra(AsWritten):
    """A record envelope's ``extra``: backend facts of the record; what the guard rows and the report read is typed
    (the counts, the Draft, the guard's and the filter's reports), any other backend fact is kept as written."""

    guard: str | None = Field(default=None, description="Which guard ran (a guard row).")
    mitigation: bool | None = None
    stage: str | None = Field(default=None, description="The mitigation step that failed or ran alone (draft, guard).")
    fields_nulled: int | None = Field(default=None, description="Draft fields the guard set to null or removed.")
    fields_total: int | None = Field(default=None, description="Fields in the Draft.")
    abstention_rate: int | float | None = None  # written back as computed (3 stays 3, 3.0 stays 3.0)
    quotes_discarded: int | None = None
    quotes_total: int | None = None
    draft_record: ClinicalRecord | None = Field(default=None, description="The Draft.")
    filter_report: FilterReport | None = Field(default=None, description="What the evidence filter removed.")
    guard_report: GuardReport | None = Field(default=None, description="What the Guard removed (None: none ran).")
    cached: bool | None = Field(default=None, description="The structuring answer came from the cache.")
    prompt_id: str | None = None


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
    extra: RecordExtra = Field(default_factory=RecordExtra, description="Backend-specific facts (e.g. guard).")


# ------------------------------------------------------------------ the mitigation's reports (stresstest.mitigation)
# They travel with a guard row's record (``extra``, typed as stresstest.results.RecordExtra), so they live here.

#: Version of the evidence filter's rules (:func:`stresstest.mitigation.evidence.evidence_filter`).
FILTER_VERSION = "filter-v1"


class GuardReport(BaseModel):
    """What the Guard removed, and what it tried to add or change (undone)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    removed_claims: list[str] = Field(default_factory=list)
    removed_flags: list[str] = Field(default_factory=list)
    nulled_values: list[str] = Field(default_factory=list, description="'<id>.<field>' the Guard nulled.")
    added_dropped: list[str] = Field(default_factory=list, description="Ids not in the Draft, dropped.")
    changes_reverted: list[str] = Field(default_factory=list, description="'<id>.<field>' changes undone.")
    quotes_removed: int = 0
    quotes_added_dropped: int = 0

    @property
    def fields_removed(self) -> int:
        """Claims and flags the Guard deleted."""
        return len(self.removed_claims) + len(self.removed_flags)


class DiscardedQuote(BaseModel):
    """A quote the filter removed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: str
    quote: str
    reason: str = Field(description="'not a substring of the raw transcript', 'no letter or digit', ...")


class FilterReport(BaseModel):
    """What :func:`stresstest.mitigation.evidence.evidence_filter` removed, for the run artefacts and the abstention
    rate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = FILTER_VERSION
    quotes_total: int = 0
    quotes_discarded: int = 0
    discarded: list[DiscardedQuote] = Field(default_factory=list)
    dangling_keys: list[str] = Field(default_factory=list, description="Evidence keys naming no field.")
    high_stakes_total: int = Field(0, description="High-stakes claims + flags in the input record.")
    removed_claims: list[str] = Field(default_factory=list, description="Ids of high-stakes claims removed.")
    removed_flags: list[str] = Field(default_factory=list, description="Ids of high-stakes flags removed.")
    values_nulled: list[str] = Field(default_factory=list, description="'<id>.value' / '<id>.detail' nulled.")

    @property
    def fields_nulled(self) -> int:
        """Claims and flags removed by the filter."""
        return len(self.removed_claims) + len(self.removed_flags)


RecordExtra.model_rebuild()
RecordEnvelope.model_rebuild()
