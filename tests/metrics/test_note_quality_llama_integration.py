"""Note-quality judges against the real llama.cpp server with the bundled SmolLM2-135M (integration).

The 135M model cannot judge clinical notes; these tests check the mechanics on real output: the prompts
render and are accepted, the per-call schemas constrain the output so it parses (or the call is a
recorded failure), the pairwise pair is asked in both orders, the agreement rule and the aggregation
are applied to what the model actually said, and the calibration marks the judge inadequate. Few,
short prompts with bounded max_tokens keep it to a few calls on 2 cores.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from stresstest.config import NoteQualityConfig
from stresstest.llm.config import LLMConfig
from stresstest.llm.session import LLMSession, open_session
from stresstest.metrics.note_judges import (
    EntailmentTask,
    HallucinationTask,
    PairTask,
    judge_entailment,
    judge_hallucination,
    judge_pairs,
)
from stresstest.metrics.note_quality import (
    ENTAILMENT_LABELS,
    INFERENCE_BASES,
    adjudicate_pair,
    entailment_score,
    inference_rate,
    lexical_rate,
)
from stresstest.metrics.quality_stage import adequacy, calibrate
from stresstest.metrics.statements import Statement

pytestmark = pytest.mark.integration

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip("llama_cpp is not importable: install llama-cpp-python[server]", allow_module_level=True)

SOURCE = ("I've had a cough for two days.", "No fever.", "I take Coumadin every night.")
STATEMENTS = (Statement("h1", "Symptom: cough (2 days).", "c1"), Statement("h2", "Symptom: fever.", "c2"))


def _cfg() -> LLMConfig:
    return LLMConfig.model_validate(
        {
            "backend": "openai",
            "concurrency": 1,
            "max_retries": 0,
            "timeout_s": 300,
            "decoding": {"max_tokens": 200},
            "server": {"startup_timeout_s": 180, "n_ctx": 2048},
        }
    )


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LLMSession, Path]]:
    """One managed server for the module (a server start costs tens of seconds on 2 cores)."""
    root = tmp_path_factory.mktemp("judge")
    with open_session(_cfg(), cache_dir=root / "cache", log_dir=root / "logs") as s:
        yield s, root / "cache"


def test_judges_render_parse_swap_and_aggregate_on_real_output(session: tuple[LLMSession, Path]) -> None:
    s, cache = session
    (ent,) = judge_entailment(
        [EntailmentTask("it/clean", "groundedness", "transcript of the consultation", SOURCE, STATEMENTS)], s
    )
    (lex,), (inf,) = judge_hallucination([HallucinationTask("it/clean", SOURCE, STATEMENTS)], s)
    (pair,) = judge_pairs(
        [
            PairTask(
                "it/noisy vs clean",
                "it",
                SOURCE,
                "- Symptom: cough (2 days).",
                "- Symptom: fever.\n- Allergy: penicillin.",
            )
        ],
        s,
    )
    model = s.model_id
    assert model.startswith("SmolLM2-135M-Instruct")
    for res, key, rule in (
        (ent, "label", entailment_score),
        (lex, "verdict", lexical_rate),
        (inf, "basis", inference_rate),
    ):
        if res.verdicts is None:  # a recorded failure, never a made-up score
            assert res.score is None and res.error
            continue
        assert [v["field"] for v in res.verdicts] == ["c1", "c2"]
        assert res.score == rule([v[key] for v in res.verdicts])
    if ent.verdicts is not None:
        assert {v["label"] for v in ent.verdicts} <= set(ENTAILMENT_LABELS)
    if inf.verdicts is not None:
        assert {v["basis"] for v in inf.verdicts} <= set(INFERENCE_BASES)
        assert any("same drug" in k for k in inf.knowledge) or not inf.knowledge
    assert pair.calls == 2  # both orders were asked
    if pair.error is None:
        assert pair.first is not None and pair.second is not None
        assert pair.outcomes == adjudicate_pair(pair.first, pair.second)["outcomes"]
    else:
        assert pair.outcomes is None
    if pair.error is None:  # the two orders are two distinct cached requests
        assert len(list((cache / "llm-quality-pairwise").rglob("*.json"))) == 2


def test_calibration_marks_the_embedded_model_inadequate(session: tuple[LLMSession, Path]) -> None:
    s, _ = session
    cal = calibrate(s, NoteQualityConfig(entailment=True))
    model = s.model_id
    assert len(cal["checks"]) == 3 and all(isinstance(c["passed"], bool) for c in cal["checks"])
    ok, why = adequacy(model, cal)
    assert not ok and "embedded 135M" in why
