"""The note-quality stage over a run's rows (stub server behind the real LLMSession), and its config rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.llm_stub import Reply, stub_server

from stresstest.config import NoteQualityConfig, RunConfig
from stresstest.grid import ConditionGrid
from stresstest.llm.config import LLMConfig
from stresstest.llm.session import open_session
from stresstest.metrics.note_quality import PAIRWISE_DIMENSIONS
from stresstest.metrics.quality_stage import QualityItem, adequacy, score_note_quality
from stresstest.schema import Claim, ClinicalRecord, Triage

CONDS = ConditionGrid.build(["babble"], [5.0], ["babble_5db"])


def _good_judge(body: dict[str, Any]) -> str:
    """A judge that gets the calibration right: entails what the source says, prefers the faithful note."""
    schema = json.dumps(body["response_format"]["schema"])
    user = body["messages"][1]["content"]
    req = body["response_format"]["schema"].get("required", [])
    if "rationale" in req:
        a = user.split("NOTE A:\n", 1)[1].split("\n\nNOTE B:", 1)[0]
        side = "B" if "penicillin" in a else "A"
        return json.dumps({"rationale": "r", **{d: side for d in PAIRWISE_DIMENSIONS}})
    src = user.split("\n\n", 1)[0].lower()
    out = {}
    for sid in req:
        line = next(ln for ln in user.splitlines() if ln.startswith(f"{sid}: ")).lower()
        bad = "penicillin" in line or ("chest pain" in line and "no chest pain" in src)
        if '"basis"' in schema:
            out[sid] = {"basis": "fabricated" if bad else "trade_generic"}
        elif '"verdict"' in schema:
            out[sid] = {"verdict": "unsupported" if bad or "warfarin" in line else "supported"}
        else:
            out[sid] = {"lines": [] if bad else [1], "label": "not_entailed" if bad else "entailed"}
    return json.dumps(out)


def _rec(extra: bool) -> ClinicalRecord:
    claims = [Claim(id="c1", category="symptom", concept="cough", status="present")]
    if extra:
        claims.append(Claim(id="c2", category="allergy", concept="penicillin", status="present"))
    return ClinicalRecord(triage=Triage(level="routine"), claims=claims)


def test_stage_fills_rows_details_pairwise_and_manifest(tmp_path: Path) -> None:
    gold = _rec(False)
    rows: list[dict[str, Any]] = [{"encounter_id": "E1", "condition": c.id} for c in CONDS]
    items = [
        QualityItem(k, "E1", c.id, _rec(c.id == "babble_5db"), "I have a cough.", "I have a cough.", gold)
        for k, c in enumerate(CONDS)
    ]
    cfg = NoteQualityConfig(entailment=True, hallucination=True, pairwise=["noisy_vs_clean", "guard_vs_unmitigated"])
    scfg = LLMConfig(
        backend="openai",
        concurrency=1,
        max_retries=0,
        server={"mode": "external", "base_url": "x", "model": "big-judge"},
    )
    with stub_server([Reply(respond=_good_judge)], model="big-judge") as srv:
        scfg = scfg.model_copy(update={"server": scfg.server.model_copy(update={"base_url": srv.base_url})})
        with open_session(scfg, cache_dir=tmp_path / "cache", log_dir=tmp_path) as s:
            updates, man = score_note_quality(items, CONDS, cfg, s, tmp_path)
    rows = [{**r, **(updates[k].fields() if k in updates else {})} for k, r in enumerate(rows)]
    assert man["calibration"]["passed"], man["calibration"]
    assert man["adequate"] and "passed all" in man["adequacy"]
    clean, noisy, guard = rows
    assert clean["completeness"] == 100.0 and clean["conciseness"] == 100.0 and clean["groundedness"] == 100.0
    # the noisy record adds a penicillin allergy: not in gold, not in the transcript
    assert noisy["completeness"] == 100.0 and noisy["conciseness"] == pytest.approx(200 / 3, abs=1e-3)
    assert noisy["groundedness"] == pytest.approx(200 / 3, abs=1e-3)
    assert noisy["halluc_inference"] == pytest.approx(100 / 3, abs=1e-3)
    assert noisy["pairwise"].vs == "clean" and noisy["pairwise"].outcomes["accurate"] == "loss"
    assert guard["pairwise"].vs == "babble_5db" and guard["pairwise"].outcomes["overall"] == "win"
    assert "pairwise" not in clean and clean["quality_errors"] == []
    detail = json.loads((tmp_path / clean["quality_path"]).read_text())
    assert [v["label"] for v in detail["groundedness"]["verdicts"]] == ["entailed", "entailed"]
    assert man["pairwise_comparisons"] == [
        {"condition": "babble_5db", "baseline": "clean"},
        {"condition": "babble_5db_guard", "baseline": "babble_5db"},
    ]
    assert man["n_failures"] == 0 and set(man["prompts"]) >= {"entailment_v1", "ontology_v1"}


def test_failures_are_recorded_not_dropped(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [{"encounter_id": "E1", "condition": "clean"}]
    items = [QualityItem(0, "E1", "clean", _rec(False), "I have a cough.", "I have a cough.", None)]
    cfg = NoteQualityConfig(entailment=True)
    with stub_server([Reply("not json")]) as srv:
        scfg = LLMConfig(
            backend="openai",
            concurrency=1,
            max_retries=0,
            server={"mode": "external", "base_url": srv.base_url, "model": "m"},
        )
        with open_session(scfg, cache_dir=tmp_path / "cache", log_dir=tmp_path) as s:
            updates, man = score_note_quality(items, CONDS, cfg, s, tmp_path)
    rows = [{**r, **(updates[k].fields() if k in updates else {})} for k, r in enumerate(rows)]
    assert rows[0]["groundedness"] is None and "completeness" not in rows[0]  # no gold: not computed
    assert rows[0]["quality_errors"] and "invalid JSON" in rows[0]["quality_errors"][0]
    assert man["n_failures"] == 1 and man["failures"][0]["measure"] == "groundedness"
    assert not man["calibration"]["passed"] and not man["adequate"]


def test_adequacy_rules() -> None:
    ok = {"checks": [{"passed": True}]}
    assert adequacy("qwen", ok)[0]
    assert not adequacy("qwen", {"checks": [{"passed": False}, {"passed": True}]})[0]
    good, why = adequacy("SmolLM2-135M-Instruct.Q4_1.gguf#ab", ok)
    assert not good and "embedded 135M" in why


def test_note_quality_needs_an_llm_in_the_run() -> None:
    base: dict[str, Any] = {"corpus": {"kind": "osce", "path": "x"}, "judge": {"note_quality": {"entailment": True}}}
    with pytest.raises(ValueError, match="structure.backend is 'rules'"):
        RunConfig.model_validate(base)
    RunConfig.model_validate({**base, "structure": {"backend": "openai"}})
    with pytest.raises(ValueError):
        RunConfig.model_validate({**base, "judge": {"note_quality": {"pairwise": ["noisy_vs_gold"]}}})
