"""Schema S round-trip, prompt files and hashing, config strictness."""

from __future__ import annotations

import hashlib
import json
from importlib import resources

import pytest
from pydantic import ValidationError

from stresstest.errors import StructureError
from stresstest.llm.config import LLMConfig
from stresstest.llm.prompts import load_prompt, parse_prompt
from stresstest.schema import ClinicalRecord, record_json_schema, schema_hash


def test_record_round_trips_through_json(record: ClinicalRecord) -> None:
    text = record.model_dump_json()
    again = ClinicalRecord.model_validate_json(text)
    assert again == record
    assert json.loads(again.model_dump_json()) == json.loads(text)


def test_json_schema_export_names_every_field_and_forbids_extras() -> None:
    schema = record_json_schema()
    assert set(schema["properties"]) >= {
        "triage",
        "claims",
        "safety_flags",
        "field_evidence",
        "chief_complaint",
    }
    assert schema.get("additionalProperties") is False
    assert schema["$defs"]["Triage"]["properties"]["level"]["enum"] == ["routine", "urgent", "emergency"]
    with pytest.raises(ValidationError):
        ClinicalRecord.model_validate({"triage": {"level": "routine"}, "diagnosis": "x"})


def test_schema_hash_is_stable_and_is_the_canonical_json_hash() -> None:
    blob = json.dumps(record_json_schema(), sort_keys=True, separators=(",", ":")).encode()
    assert schema_hash() == schema_hash() == hashlib.sha256(blob).hexdigest()


PKG = {
    "structure": "stresstest.structure.prompts",
    "gold_draft": "stresstest.structure.prompts",
    "judge": "stresstest.metrics.prompts",
}


@pytest.mark.parametrize("name", ["structure", "gold_draft", "judge"])
def test_prompt_hash_is_sha256_of_the_file_bytes(name: str) -> None:
    p = load_prompt(name, "v1", PKG[name])
    raw = (resources.files(PKG[name]) / f"{name}_v1.md").read_bytes()
    assert p.sha256 == hashlib.sha256(raw).hexdigest()
    assert parse_prompt(name, "v1", raw.decode()).sha256 == p.sha256


def test_structure_prompt_demands_verbatim_evidence_and_fixed_triage() -> None:
    p = load_prompt("structure", "v1", "stresstest.structure.prompts")
    for word in ("VERBATIM", "routine", "urgent", "emergency", "field_evidence"):
        assert word in p.system
    assert p.placeholders() == {"transcript"}


def test_messages_fill_placeholders_once_and_check_names() -> None:
    p = parse_prompt("t", "v1", "### SYSTEM\nsys\n### USER\nA {{x}} B\n")
    msgs = p.messages(x="{{x}} literal")
    assert msgs == [{"role": "system", "content": "sys"}, {"role": "user", "content": "A {{x}} literal B"}]
    with pytest.raises(StructureError, match="expected values for"):
        p.messages(y="1")


def test_changing_one_character_changes_the_hash() -> None:
    a = parse_prompt("t", "v1", "### SYSTEM\nsys\n### USER\n{{x}}\n")
    b = parse_prompt("t", "v1", "### SYSTEM\nsys.\n### USER\n{{x}}\n")
    assert a.sha256 != b.sha256


@pytest.mark.parametrize("text", ["no sections", "### USER\nu\n### SYSTEM\ns\n### USER\nx", "lead\n### SYSTEM\ns"])
def test_malformed_prompt_files_are_rejected(text: str) -> None:
    with pytest.raises(StructureError, match="expected exactly one"):
        parse_prompt("bad", "v1", text)


def test_missing_prompt_version_names_available_ones() -> None:
    with pytest.raises(
        StructureError, match=r"structure_v99\.md not found; available: \['structure_v1\.md', 'structure_v2\.md'\]"
    ):
        load_prompt("structure", "v99", "stresstest.structure.prompts")


def test_config_is_strict_and_loopback_only() -> None:
    with pytest.raises(ValidationError, match="colour"):
        LLMConfig.model_validate({"backend": "openai", "colour": 1})
    with pytest.raises(ValidationError):
        LLMConfig.model_validate({"server": {"host": "0.0.0.0"}})
    cfg = LLMConfig()
    assert cfg.decoding.temperature == 0.0 and cfg.decoding.seed == 1234 and cfg.server.host == "127.0.0.1"


def test_response_format_auto_follows_the_engine() -> None:
    assert LLMConfig(backend="openai").resolved_response_format() == "json_object"
    vllm = LLMConfig(backend="openai", server={"engine": "vllm", "model": "m"})
    assert vllm.resolved_response_format() == "json_schema"
    forced = LLMConfig(backend="openai", response_format="json_schema")
    assert forced.resolved_response_format() == "json_schema"
