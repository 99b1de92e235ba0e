"""The structuring contract: which output schema S goes with an instruction version, and how S is shown.

Every LLM role that writes a clinical record (structure, the guard agent's Draft and Guard, gold drafting)
asks through one :class:`OutputContract`, chosen by ``structure.prompt_version``:

* ``v1``: S = :class:`~stresstest.schema.ClinicalRecord` (evidence an optional id → quotes map), never shown
  in the instruction. Kept so that a v1 config still reproduces its records.
* ``v2`` and later: S = :class:`~stresstest.schema.RecordOutput` (quotes inside the triage, every safety flag
  and every medication / allergy / vital-sign claim, required and non-empty; every string and list bounded),
  and the instruction shows it: the prompt's ``{{schema}}`` placeholder is filled with
  :func:`~stresstest.llm.schema_text.render_schema` of the very JSON Schema the engine enforces.

Whatever S is, :meth:`OutputContract.to_record` turns the parsed output into the stored ``ClinicalRecord``, so
the evidence filter, the guard's projection, the metrics and the report read one record type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pydantic import BaseModel

from stresstest.errors import StructureError
from stresstest.llm.prompts import Prompt
from stresstest.llm.schema_text import render_schema
from stresstest.schema import (
    OUTPUT_SCHEMA_VERSION,
    RECORD_SCHEMA_VERSION,
    ClinicalRecord,
    RecordOutput,
    output_json_schema,
    output_schema_hash,
    record_json_schema,
    schema_hash,
)

SCHEMA_PLACEHOLDER = "schema"


@dataclass(frozen=True)
class OutputContract:
    """What a record-writing LLM call is constrained to, and how its output becomes a record.

    Attributes:
        version: output schema version (1: ``ClinicalRecord``; 2: ``RecordOutput``).
        model: pydantic model every output is validated against.
        schema: the JSON Schema sent for constrained decoding (generated from ``model``).
        schema_hash: sha256 of ``schema``'s canonical JSON (recorded with every record and in the manifest).
        shown: whether the instruction must show ``schema`` (in its ``{{schema}}`` placeholder).
    """

    version: int
    model: type[ClinicalRecord] | type[RecordOutput]
    schema: dict[str, Any] = field(repr=False)
    schema_hash: str
    shown: bool

    @property
    def schema_name(self) -> str:
        """The schema's name in the request (the model's class name)."""
        return self.model.__name__

    def schema_text(self) -> str:
        """The rendering of ``schema`` that the instruction shows."""
        return render_schema(self.schema)

    def messages(self, prompt: Prompt, **values: str) -> list[dict[str, str]]:
        """``prompt``'s chat messages, with the schema filled in when this contract shows it.

        Raises:
            StructureError: a contract that shows S with a prompt that has no ``{{schema}}`` placeholder (or
                the reverse): the instruction would not say what the engine enforces.
        """
        asks = SCHEMA_PLACEHOLDER in prompt.placeholders()
        if asks != self.shown:
            raise StructureError(
                f"prompt {prompt.id}: output schema v{self.version} "
                + (
                    "must be shown, but the prompt has no {{schema}} placeholder"
                    if self.shown
                    else "is not shown in the instruction, but the prompt has a {{schema}} placeholder"
                )
            )
        if self.shown:
            values = {**values, SCHEMA_PLACEHOLDER: self.schema_text()}
        return prompt.messages(**values)

    def to_record(self, parsed: BaseModel) -> ClinicalRecord:
        """The stored record of a validated output."""
        if isinstance(parsed, RecordOutput):
            return parsed.to_record()
        if isinstance(parsed, ClinicalRecord):
            return parsed
        raise StructureError(f"output contract v{self.version}: expected {self.schema_name}, got {type(parsed)}")

    def fingerprint(self) -> dict[str, object]:
        """``schema_version`` and ``schema_hash``, for the run manifest."""
        return {"schema_version": self.version, "schema_hash": self.schema_hash}


@cache
def output_contract(prompt_version: str) -> OutputContract:
    """The contract of an instruction version (see module docstring)."""
    if prompt_version == "v1":
        return OutputContract(RECORD_SCHEMA_VERSION, ClinicalRecord, record_json_schema(), schema_hash(), False)
    return OutputContract(OUTPUT_SCHEMA_VERSION, RecordOutput, output_json_schema(), output_schema_hash(), True)
