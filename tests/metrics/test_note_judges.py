"""Note-quality judges through the real client + LLMSession against the scripted stub server (offline):
prompt rendering, per-call schemas, chunking, order swap, failures, caching, recorded outputs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.llm_stub import Reply, stub_server

from stresstest.llm.config import LLMConfig
from stresstest.llm.session import open_session
from stresstest.metrics.note_judges import (
    EntailmentTask,
    HallucinationTask,
    PairTask,
    judge_entailment,
    judge_hallucination,
    judge_pairs,
    keyed_model,
    prompt_fingerprint,
    quality_prompt,
)
from stresstest.metrics.note_quality import PAIRWISE_DIMENSIONS
from stresstest.metrics.statements import Statement

RECORDED = Path(__file__).parent / "data" / "note_judge_outputs.json"


def _cfg(url: str) -> LLMConfig:
    return LLMConfig(
        backend="openai",
        concurrency=1,
        max_retries=0,
        backoff_s=0.01,
        server={"mode": "external", "base_url": url, "model": "stub-model"},
    )


def _ids(body: dict[str, Any]) -> list[str]:
    return list(body["response_format"]["schema"]["required"])


def _user(body: dict[str, Any]) -> str:
    return str(body["messages"][1]["content"])


def _st(*texts: str) -> tuple[Statement, ...]:
    return tuple(Statement(f"h{i}", t, f"c{i}") for i, t in enumerate(texts, start=1))


def test_entailment_prompt_schema_chunking_and_cache(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> str:
        # label by content: statements mentioning "cough" are entailed, others not
        user = _user(body)
        out = {}
        for sid in _ids(body):
            line = re.search(rf"^{sid}: (.*)$", user, re.MULTILINE)
            assert line is not None
            out[sid] = {"lines": [1], "label": "entailed" if "cough" in line.group(1) else "not_entailed"}
        return json.dumps(out)

    task = EntailmentTask(
        "E1/clean",
        "groundedness",
        "transcript of the consultation",
        ("I have a cough.", "No fever."),
        _st("Symptom: cough.", "Symptom: fever.", "Symptom: cough (2 days).", "Triage: urgent.", "Symptom: dry cough."),
    )
    with stub_server([Reply(respond=respond)]) as srv:
        with open_session(_cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path) as s:
            (res,) = judge_entailment([task], s, batch=2)
        assert len(srv.requests) == 3  # 5 statements in calls of at most 2
        # one schema per call size (the 1-statement call first), each with exactly its ids required
        assert [_ids(b) for b in srv.requests] == [["h1"], ["h1", "h2"], ["h1", "h2"]]
        first = srv.requests[1]
        assert first["temperature"] == 0.0
        user = _user(first)
        assert "SOURCE (transcript of the consultation):\n[1] I have a cough.\n[2] No fever." in user
        assert "h1: Symptom: cough.\nh2: Symptom: fever." in user
        props = first["response_format"]["schema"]["properties"]
        assert set(props) == {"h1", "h2"} and first["response_format"]["schema"]["additionalProperties"] is False
        with open_session(_cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path) as s:
            (again,) = judge_entailment([task], s, batch=2)
        assert len(srv.requests) == 3 and again.cached == 3  # all from the cache
    assert [v["label"] for v in res.verdicts or []] == [
        "entailed",
        "not_entailed",
        "entailed",
        "not_entailed",
        "entailed",
    ]
    assert [v["field"] for v in res.verdicts or []] == ["c1", "c2", "c3", "c4", "c5"]
    assert res.score == pytest.approx(60.0) and res.error is None and again.score == res.score


def test_a_failed_call_leaves_the_item_unscored_with_the_reason(tmp_path: Path) -> None:
    task = EntailmentTask(
        "E1/babble_5db",
        "completeness",
        "generated clinical note",
        ("Triage: urgent.",),
        _st("Triage: urgent.", "Symptom: cough."),
    )
    with stub_server([Reply(json.dumps({"h1": {"lines": [], "label": "maybe"}}))]) as srv:
        with open_session(_cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path) as s:
            (res,) = judge_entailment([task], s)
    assert res.score is None and res.verdicts is None and res.error and "schema violation" in res.error


def test_hallucination_literal_vs_inference_prompts_and_grounding(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> str:
        key = "basis" if "basis" in json.dumps(body["response_format"]["schema"]) else "verdict"
        value = {"basis": "trade_generic", "verdict": "unsupported"}[key]
        return json.dumps({cid: {key: value} for cid in _ids(body)})

    task = HallucinationTask(
        "E1/clean", ("I take Coumadin every night.",), (Statement("h1", "Medication: warfarin.", "c1"),)
    )
    with stub_server([Reply(respond=respond)]) as srv:
        with open_session(_cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path) as s:
            (lex,), (inf,) = judge_hallucination([task], s)
    lex_body, inf_body = srv.requests
    assert "CLINICAL KNOWLEDGE" not in _user(lex_body) and "c1: Medication: warfarin." in _user(lex_body)
    assert "'warfarin' (note) and 'coumadin' (transcript) are the same drug" in _user(inf_body)
    assert lex.score == 100.0 and inf.score == 0.0  # the literal judge flags it, the inference-aware one accepts
    assert inf.knowledge
    assert inf.verdicts == [{"text": "Medication: warfarin.", "field": "c1", "basis": "trade_generic"}]


def test_pairwise_asks_both_orders_and_applies_the_agreement_rule(tmp_path: Path) -> None:
    note_x, note_y = "- Symptom: cough.", "- Symptom: cough.\n- Allergy: penicillin."

    def respond(body: dict[str, Any]) -> str:
        user = _user(body)
        a = user.split("NOTE A:\n", 1)[1].split("\n\nNOTE B:", 1)[0]
        x_is_a = a == note_x
        v: dict[str, str] = {"rationale": "X avoids the fabricated allergy."}
        for d in PAIRWISE_DIMENSIONS:
            if d in ("accurate", "succinct"):
                v[d] = "A" if x_is_a else "B"  # consistent: always X
            elif d == "thorough":
                v[d] = "A"  # position bias: A in both orders -> tie
            else:
                v[d] = "tie"
        return json.dumps(v)

    tasks = [
        PairTask("E1/babble_5db vs clean", "E1", ("I have a cough.",), note_x, note_y),
        PairTask("E2/babble_5db vs clean", "E2", ("Hi.",), note_x, note_x),
    ]
    with stub_server([Reply(respond=respond)]) as srv:
        with open_session(_cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path) as s:
            res = judge_pairs(tasks, s)
    assert len(srv.requests) == 2  # the identical pair needs no call
    a_notes = [_user(b).split("NOTE A:\n", 1)[1].split("\n\nNOTE B:", 1)[0] for b in srv.requests]
    assert a_notes == [note_x, note_y]  # the second pass swaps the positions
    out = res[0].outcomes or {}
    assert out["accurate"] == "x" and out["succinct"] == "x" and out["thorough"] == "tie"
    assert out["overall"] == "tie"  # 2 of 8 is no majority
    assert res[0].consistent == len(PAIRWISE_DIMENSIONS) - 1
    assert res[1].identical and set((res[1].outcomes or {}).values()) == {"tie"} and res[1].calls == 0


def test_recorded_judge_outputs_aggregate_by_the_rules(tmp_path: Path) -> None:
    """Raw outputs recorded from the real SmolLM2-135M server replayed through the client and the rules."""
    rec = json.loads(RECORDED.read_text("utf-8"))
    replies = [Reply(r) for r in rec["entailment"]["raw"]]
    task = EntailmentTask(
        "rec",
        "groundedness",
        "transcript of the consultation",
        tuple(rec["entailment"]["source"]),
        _st(*rec["entailment"]["statements"]),
    )
    with stub_server(replies) as srv:
        with open_session(_cfg(srv.base_url), cache_dir=tmp_path, log_dir=tmp_path) as s:
            (res,) = judge_entailment([task], s, batch=rec["entailment"]["batch"])
    assert [v["label"] for v in res.verdicts or []] == rec["entailment"]["labels"]
    assert res.score == pytest.approx(rec["entailment"]["score"])
    with stub_server([Reply(r) for r in rec["pairwise"]["raw"]]) as srv:
        with open_session(_cfg(srv.base_url), cache_dir=tmp_path / "p", log_dir=tmp_path) as s:
            (pr,) = judge_pairs([PairTask("rec", "rec", ("x",), "- note X", "- note Y")], s)
    assert pr.outcomes == rec["pairwise"]["outcomes"] and pr.consistent == rec["pairwise"]["consistent"]


def test_prompts_are_versioned_and_hashed() -> None:
    fp = prompt_fingerprint("v1")
    assert set(fp) == {"entailment_v1", "halluc_lexical_v1", "halluc_inference_v1", "pairwise_v1", "ontology_v1"}
    assert quality_prompt("pairwise").placeholders() == {"transcript", "note_a", "note_b"}
    assert quality_prompt("halluc_inference").placeholders() == {"transcript", "knowledge", "claims"}
    assert keyed_model("halluc_lexical", 3).model_json_schema()["required"] == ["c1", "c2", "c3"]
