"""Output contract v2 in vLLM's grammar engines (issue 26): the schema compiles on both of vLLM's structured-output
backends, and xgrammar — the default, with the compact-JSON settings vLLM uses under ``disable_any_whitespace`` —
accepts a valid record and rejects one that omits evidence for a safety flag, a medication claim or the triage.

xgrammar, llguidance and vLLM live in ``make install-vllm``'s venv, so a driver script runs there (as the other
real-vLLM tests do); nothing loads a model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from vllm_cpu import ROOT, require_vllm_python  # noqa: E402

from stresstest.schema import MAX_QUOTE_CHARS  # noqa: E402

VLLM_PY = require_vllm_python()

DRIVER = r"""
import json, sys

import llguidance
import xgrammar as xgr
from vllm.v1.structured_output.backend_xgrammar import has_xgrammar_unsupported_json_features
from xgrammar.testing import _is_grammar_accept_string  # matches a string without a tokenizer

from stresstest.schema import output_json_schema

schema = output_json_schema()
# What vLLM's xgrammar backend compiles with disable_any_whitespace (vllm/v1/structured_output/backend_xgrammar.py).
grammar = xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))
cases = json.loads(open(sys.argv[1]).read())
guidance = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
print("STRESSTEST-XGRAMMAR " + json.dumps({
    "accepts": {k: bool(_is_grammar_accept_string(grammar, v)) for k, v in cases.items()},
    "xgrammar_unsupported": has_xgrammar_unsupported_json_features(schema),
    "guidance_error": llguidance.LLMatcher.validate_grammar(guidance),
}))
"""


def _compact(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _cases(output_json: str) -> dict[str, str]:
    cases = {"valid": _compact(json.loads(output_json))}
    for where in ("flag", "medication claim", "triage"):
        for broken in ("missing", "empty"):
            out = json.loads(output_json)
            item = {"flag": out["safety_flags"][0], "medication claim": out["claims"][1], "triage": out["triage"]}
            target = item[where]
            assert where != "medication claim" or target["category"] == "medication"
            if broken == "missing":
                del target["evidence"]
            else:
                target["evidence"] = []
            cases[f"{where} evidence {broken}"] = _compact(out)
    for n in (MAX_QUOTE_CHARS, MAX_QUOTE_CHARS + 1):
        out = json.loads(output_json)
        out["safety_flags"][0]["evidence"] = ["x" * n]
        cases[f"quote of {n} chars"] = _compact(out)
    return cases


def test_vllm_grammar_engines_enforce_the_evidence_contract(tmp_path: Path, output_json: str) -> None:
    cases = _cases(output_json)
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "driver.py").write_text(DRIVER)
    done = subprocess.run(  # noqa: S603 - fixed argument list
        [str(VLLM_PY), str(tmp_path / "driver.py"), str(tmp_path / "cases.json")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("STRESSTEST-XGRAMMAR ")), None)
    assert done.returncode == 0 and line, done.stderr[-3000:]
    out = json.loads(line.split(" ", 1)[1])
    # With backend xgrammar (the default) vLLM refuses a schema using features xgrammar lacks; none are used;
    # backend guidance (structure.server.structured_outputs_backend) compiles it too.
    assert out["xgrammar_unsupported"] is False and out["guidance_error"] == ""
    accepted = {k for k, ok in out["accepts"].items() if ok}
    assert accepted == {"valid", f"quote of {MAX_QUOTE_CHARS} chars"}, out["accepts"]
