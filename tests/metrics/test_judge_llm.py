"""LLM judge: rubric prompt, constrained verdicts, failures as score None, caching."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.llm_stub import Reply, stub_server

from stresstest.errors import StructureError
from stresstest.llm.config import LLMConfig
from stresstest.metrics.judge_llm import JudgeVerdict, judge_prompt, llm_judge_many

REC = {"triage": {"level": "routine"}, "claims": []}
GOLD = {"triage": {"level": "emergency"}, "claims": [{"concept": "chest pain"}]}


def _cfg(url: str) -> LLMConfig:
    return LLMConfig(
        backend="openai",
        concurrency=1,
        max_retries=1,
        backoff_s=0.01,
        server={"mode": "external", "base_url": url, "model": "stub-model"},
    )


def test_rubric_prompt_has_the_five_levels() -> None:
    p = judge_prompt("v1")
    for level in (
        "5 = clinically equivalent",
        "4 = minor",
        "3 = potentially actionable",
        "2 = high-risk",
        "1 = critical failure",
    ):
        assert level in p.system
    assert p.placeholders() == {"record", "gold"}


def test_scores_come_back_with_judge_id_and_are_cached(tmp_path: Path) -> None:
    verdict = json.dumps({"rationale": "missed red flag, under-triage", "score": 1})
    with stub_server([Reply(verdict)]) as srv:
        pairs = [("E1/clean", json.dumps(REC), GOLD), ("E2/clean", REC, json.dumps(GOLD))]
        res = llm_judge_many(pairs, _cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path)
        # identical content (key order irrelevant) hits the same cache entry
        assert len(srv.requests) == 1
        res2 = llm_judge_many(pairs, _cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path)
        assert len(srv.requests) == 1 and res2 == res
    assert [r.score for r in res] == [1, 1]
    assert res[0].judge == "llm:stub-model@judge_v1" and res[0].reasons == ["missed red flag, under-triage"]
    body = srv.requests[0]
    assert body["temperature"] == 0.0
    assert body["response_format"]["schema"] == JudgeVerdict.model_json_schema()
    assert body["response_format"]["schema"]["properties"]["score"]["enum"] == [1, 2, 3, 4, 5]
    user = body["messages"][1]["content"]
    assert user.index("GOLD RECORD") < user.index("GENERATED RECORD")


def test_out_of_range_score_is_a_failure_not_a_score(tmp_path: Path) -> None:
    with stub_server([Reply(json.dumps({"rationale": "x", "score": 7}))]) as srv:
        (res,) = llm_judge_many([("E1/c", REC, GOLD)], _cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path)
    assert res.score is None and "schema violation" in res.reasons[0] and res.judge.startswith("llm:")
    with stub_server([Reply(json.dumps({"rationale": "ok", "score": 5}))]) as srv:
        (res,) = llm_judge_many([("E1/c", REC, GOLD)], _cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path)
    assert res.score == 5  # the failure was not cached


def test_rules_backend_and_bad_json_are_errors(tmp_path: Path) -> None:
    with pytest.raises(StructureError, match="expected 'openai'"):
        llm_judge_many([("a", REC, GOLD)], LLMConfig(), cache_dir=tmp_path, log_dir=tmp_path)
    with pytest.raises(StructureError, match="judge item a: record is not valid JSON"):
        llm_judge_many([("a", "{", GOLD)], _cfg("http://127.0.0.1:9"), cache_dir=tmp_path, log_dir=tmp_path)


def test_gold_draft_with_llm(tmp_path: Path) -> None:
    from stresstest.structure.gold_draft import draft_gold_with_llm

    rec = {  # output contract v2: the triage cites its quote
        "triage": {"level": "urgent", "rationale": "cough", "evidence": ["I have a cough"]},
        "claims": [{"id": "c1", "category": "symptom", "concept": "cough", "status": "present"}],
    }
    with stub_server([Reply(json.dumps(rec))]) as srv:
        out = draft_gold_with_llm(
            "Patient: I have a cough.", _cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path, item_id="E1"
        )
    assert out.claims[0].concept == "cough" and out.field_evidence == {"triage": ["I have a cough"]}
    assert "reference (gold) record" in srv.requests[0]["messages"][0]["content"]
    with (
        stub_server([Reply("nope")]) as srv,
        pytest.raises(StructureError, match="gold draft for E2: no valid"),
    ):
        draft_gold_with_llm("x", _cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path, item_id="E2")
