"""Output contract v2 (issue 26): the schema is in the instruction, evidence is required where it matters, every
string and list is bounded, and v1 keeps its own contract."""

from __future__ import annotations

import copy
import json
from typing import Any, get_args

import jsonschema
import pytest

from stresstest.errors import StructureError
from stresstest.llm.client import parse_output
from stresstest.llm.prompts import load_prompt, parse_prompt
from stresstest.llm.schema_text import render_schema
from stresstest.mitigation.evidence import DEFAULT_HIGH_STAKES
from stresstest.schema import (
    EVIDENCE_CLAIM_CATEGORIES,
    MAX_CLAIMS,
    MAX_QUOTE_CHARS,
    MAX_QUOTES,
    Claim,
    ClaimCategory,
    ClinicalRecord,
    RecordOutput,
    SafetyFlag,
    output_json_schema,
    output_schema_hash,
    schema_hash,
)
from stresstest.structure.contract import output_contract

ROLE_PROMPTS = [
    ("structure", "stresstest.structure.prompts", {"transcript": "T"}),
    ("gold_draft", "stresstest.structure.prompts", {"transcript": "T"}),
    ("draft", "stresstest.mitigation.prompts", {"raw": "R", "clean": "C"}),
    ("guard", "stresstest.mitigation.prompts", {"raw": "R", "draft": "{}"}),
]


def _walk(node: Any) -> Any:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _valid(output_json: str) -> dict[str, Any]:
    return json.loads(output_json)


def _rejects(instance: dict[str, Any]) -> str:
    """The JSON Schema the engine enforces rejects ``instance``, and so does the client's validator."""
    with pytest.raises(jsonschema.ValidationError) as exc:
        jsonschema.validate(instance, output_json_schema())
    with pytest.raises(ValueError, match="schema violation"):
        parse_output(json.dumps(instance), RecordOutput)
    return exc.value.message


# -- the schema is in the instruction ------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "package", "values"), ROLE_PROMPTS)
def test_every_record_writing_prompt_v2_shows_the_enforced_schema(
    name: str, package: str, values: dict[str, str]
) -> None:
    contract = output_contract("v2")
    prompt = load_prompt(name, "v2", package)
    system = contract.messages(prompt, **values)[0]["content"]
    assert render_schema(contract.schema) in system
    # every key, enum value and bound of the enforced schema is spelled out
    for node in _walk(contract.schema):
        for key in node.get("properties", {}):
            assert f'"{key}"' in system, key
        for value in node.get("enum", []):
            assert json.dumps(value) in system, value
    assert f"≤{MAX_CLAIMS} items" in system and f"1–{MAX_QUOTE_CHARS} chars" in system
    assert f"1–{MAX_QUOTES} items" in system


def test_v1_prompts_stay_as_they_were_and_show_no_schema() -> None:
    contract = output_contract("v1")
    assert contract.model is ClinicalRecord and contract.schema_hash == schema_hash() and not contract.shown
    prompt = load_prompt("structure", "v1", "stresstest.structure.prompts")
    system = contract.messages(prompt, transcript="T")[0]["content"]
    assert '"evidence"' not in system and "field_evidence" in system


def test_a_contract_and_a_prompt_that_disagree_on_showing_the_schema_are_an_error() -> None:
    v1_prompt = load_prompt("structure", "v1", "stresstest.structure.prompts")
    with pytest.raises(StructureError, match=r"prompt structure_v1: output schema v2 must be shown"):
        output_contract("v2").messages(v1_prompt, transcript="T")
    shows = parse_prompt("x", "v1", "### SYSTEM\n{{schema}}\n### USER\n{{transcript}}\n")
    with pytest.raises(StructureError, match="is not shown in the instruction"):
        output_contract("v1").messages(shows, transcript="T")


def test_prompt_and_schema_versions_are_bumped_and_hashed() -> None:
    v1, v2 = output_contract("v1"), output_contract("v2")
    assert (v1.version, v2.version) == (1, 2) and v2.model is RecordOutput
    assert v2.schema_hash == output_schema_hash() != v1.schema_hash
    assert v2.fingerprint() == {"schema_version": 2, "schema_hash": output_schema_hash()}
    assert (
        load_prompt("structure", "v2", "stresstest.structure.prompts").sha256
        != load_prompt("structure", "v1", "stresstest.structure.prompts").sha256
    )


# -- evidence is required where it matters -------------------------------------------------------------------


def test_a_valid_output_passes_the_schema_and_becomes_the_record(output_json: str, record: ClinicalRecord) -> None:
    jsonschema.validate(_valid(output_json), output_json_schema())
    assert parse_output(output_json, RecordOutput).to_record() == record


def test_the_schema_rejects_a_safety_flag_without_evidence(output_json: str) -> None:
    for broken in ("missing", "empty"):
        out = _valid(output_json)
        if broken == "missing":
            del out["safety_flags"][0]["evidence"]
            assert "'evidence' is a required property" in _rejects(out)
        else:
            out["safety_flags"][0]["evidence"] = []
            assert "should be non-empty" in _rejects(out)


@pytest.mark.parametrize("category", sorted(EVIDENCE_CLAIM_CATEGORIES))
def test_the_schema_rejects_a_medication_allergy_or_vital_claim_without_evidence(
    output_json: str, category: str
) -> None:
    out = _valid(output_json)
    out["claims"].append({"id": "c9", "category": category, "concept": "x", "status": "present"})
    _rejects(out)
    out["claims"][-1]["evidence"] = ["a quote"]
    jsonschema.validate(out, output_json_schema())


def test_the_schema_rejects_a_triage_without_evidence_but_not_a_symptom_without(output_json: str) -> None:
    out = _valid(output_json)
    del out["triage"]["evidence"]
    _rejects(out)
    out = _valid(output_json)
    assert out["claims"][0]["category"] == "symptom"
    del out["claims"][0]["evidence"]
    jsonschema.validate(out, output_json_schema())


def test_the_schema_bounds_claims_quotes_and_every_string(output_json: str) -> None:
    out = _valid(output_json)
    out["safety_flags"][0]["evidence"] = ["x" * (MAX_QUOTE_CHARS + 1)]
    _rejects(out)
    out = _valid(output_json)
    out["safety_flags"][0]["evidence"] = ["q"] * (MAX_QUOTES + 1)
    _rejects(out)
    out = _valid(output_json)
    out["claims"] = [
        {"id": f"c{i}", "category": "symptom", "concept": "cough", "status": "present"} for i in range(MAX_CLAIMS + 1)
    ]
    _rejects(out)
    # no string and no list without an upper bound: a model repeating itself inside one must be stopped
    for node in _walk(output_json_schema()):
        if node.get("type") == "string" and "enum" not in node:
            assert "maxLength" in node, node
        if node.get("type") == "array":
            assert "maxItems" in node, node


def test_required_keys_come_first_in_every_object() -> None:
    # llama.cpp's JSON-schema grammar writes required properties first whatever the schema's order: with any
    # other order the instruction would show one order and the grammar force another.
    for node in _walk(output_json_schema()):
        if "properties" in node:
            req = [k in node.get("required", []) for k in node["properties"]]
            assert req == sorted(req, reverse=True), list(node["properties"])


# -- one record type downstream ------------------------------------------------------------------------------


def test_output_items_carry_exactly_the_record_fields_plus_evidence() -> None:
    defs = output_json_schema()["$defs"]
    for out_name, rec_cls in (("QuotedClaimOutput", Claim), ("ClaimOutput", Claim), ("SafetyFlagOutput", SafetyFlag)):
        assert set(defs[out_name]["properties"]) == {*rec_cls.model_fields, "evidence"}, out_name
    cats = [set(defs[n]["properties"]["category"]["enum"]) for n in ("QuotedClaimOutput", "ClaimOutput")]
    assert cats[0] == EVIDENCE_CLAIM_CATEGORIES and cats[0] | cats[1] == set(get_args(ClaimCategory))
    assert not cats[0] & cats[1]
    # the claims that must cite evidence are the ones the evidence filter removes without it
    assert DEFAULT_HIGH_STAKES.claim_categories == EVIDENCE_CLAIM_CATEGORIES


def test_a_repeated_id_keeps_every_quote_once(output_json: str) -> None:
    out = _valid(output_json)
    again = {**copy.deepcopy(out["safety_flags"][0]), "evidence": ["rash", "I'm allergic to penicillin"]}
    out["safety_flags"].append(again)
    rec = RecordOutput.model_validate(out).to_record()
    assert rec.field_evidence["f1"] == ["I'm allergic to penicillin", "rash"]


def test_from_record_refuses_a_record_that_breaks_the_contract(record: ClinicalRecord) -> None:
    bare = record.model_copy(update={"field_evidence": {"triage": ["chest pain"]}})
    with pytest.raises(ValueError, match="evidence"):
        RecordOutput.from_record(bare)


# -- the rendering -------------------------------------------------------------------------------------------


def test_render_marks_optional_keys_bounds_and_unions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 5, "description": "the a"},
            "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "c": {"type": "array", "items": {"$ref": "#/$defs/D"}, "maxItems": 2},
        },
        "required": ["a"],
        "$defs": {"D": {"type": "object", "properties": {"k": {"enum": ["x", "y"]}}, "required": ["k"]}},
    }
    assert render_schema(schema) == "\n".join(
        [
            "{",
            '  "a": string ≤5 chars  // the a',
            '  "b"?: integer | null',
            '  "c"?: list of ≤2 items, each {',
            '    "k": "x" | "y"',
            "  }",
            "}",
        ]
    )
    with pytest.raises(ValueError, match=r"\$ref '#/\$defs/E' names no entry of \$defs \(have \['D'\]\)"):
        render_schema({**schema, "properties": {"e": {"$ref": "#/$defs/E"}}})
