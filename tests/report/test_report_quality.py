"""Note-quality report section and ``compare --pairwise`` on synthetic run directories (stub judge server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.llm_stub import Reply, stub_server
from synthetic_run import make_run

from stresstest.llm.config import LLMConfig
from stresstest.llm.session import open_session
from stresstest.metrics.note_quality import PAIRWISE_DIMENSIONS
from stresstest.report import build_report
from stresstest.report.pairwise_compare import pairwise_compare
from stresstest.report.quality import quality_section
from stresstest.report.rundir import load_run
from stresstest.schema import RecordEnvelope


def _add_quality(run_dir: Path, adequate: bool) -> None:
    items = [json.loads(x) for x in (run_dir / "items.jsonl").read_text().splitlines()]
    for k, it in enumerate(items):
        if it.get("failed"):
            continue
        it["completeness"] = float(50 + k % 5 * 10)
        it["groundedness"] = 90.0
        it["halluc_lexical"], it["halluc_inference"] = 30.0, 10.0
        if it["condition"] != "clean" and not it.get("mitigated"):
            side = ("win", "tie", "loss")[k % 3]
            it["pairwise"] = {
                "vs": "clean",
                "outcomes": {d: side for d in (*PAIRWISE_DIMENSIONS, "overall")},
                "consistent": 7,
                "identical": False,
                "failed": False,
            }
    (run_dir / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    man = json.loads((run_dir / "manifest.json").read_text())
    man["note_quality"] = {
        "judge_model": "SmolLM2-135M-Instruct.Q4_1.gguf#x" if not adequate else "big-judge",
        "adequate": adequate,
        "adequacy": "the judge failed 3 of 6 calibration checks",
        "calibration": {
            "passed": adequate,
            "checks": [{"check": "c", "expected": ["x"], "got": "tie", "passed": adequate}],
        },
        "prompts": {"entailment_v1": "ab" * 32},
        "n_failures": 2,
    }
    (run_dir / "manifest.json").write_text(json.dumps(man))


def test_section_says_not_computed_without_judges(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", n_encounters=4, seed=3)
    sec = quality_section(load_run(run), 200, 0)
    assert not sec.computed
    paths = build_report(run, n_resamples=200, seed=0)
    assert "Not computed in this run" in paths.markdown.read_text()


@pytest.mark.parametrize("adequate", [False, True])
def test_section_tables_cis_and_adequacy_wording(tmp_path: Path, adequate: bool) -> None:
    run = make_run(tmp_path / "r", n_encounters=6, seed=3)
    _add_quality(run, adequate)
    sec = quality_section(load_run(run), 300, 0)
    assert sec.computed and sec.adequate is adequate and sec.n_failures == 2
    row = next(r.to_row() for r in sec.rows if r.condition == "babble_5db")
    assert row["halluc_lexical"] == 30.0 and row["halluc_lexical_lo"] == 30.0 and row["conciseness"] is None
    assert row["completeness_lo"] <= row["completeness"] <= row["completeness_hi"]
    pooled = [r for r in sec.pairwise if r.condition == "all noisy" and r.stat.dimension == "overall"]
    assert pooled and pooled[0].baseline == "clean" and pooled[0].stat.n > 0
    assert any(
        c["position_consistent_pct"] == pytest.approx(100 * 7 / len(PAIRWISE_DIMENSIONS)) for c in sec.consistency
    )
    md = build_report(run, n_resamples=200, seed=0).markdown.read_text()
    assert "## Note quality (docs/spec.md §8)" in md and "**Completeness**" in md
    if adequate:
        assert "Mechanics only" not in md
    else:
        assert "Not interpretable as note quality" in md and "### Mechanics only — not results" in md
    assert (run / "report" / "tables" / "note_quality.csv").is_file()
    assert (run / "report" / "tables" / "pairwise.csv").is_file()


def test_summary_disagreement_is_reported(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", n_encounters=4, seed=3)
    _add_quality(run, True)
    lines = (run / "summary.csv").read_text().splitlines()
    lines = [lines[0] + ",halluc_lexical"] + [ln + ",99" for ln in lines[1:]]
    (run / "summary.csv").write_text("\n".join(lines) + "\n")
    sec = quality_section(load_run(run), 200, 0)
    assert any("halluc_lexical" in p and "'99'" in p for p in sec.problems)


def _judge(body: dict[str, Any]) -> str:
    user = body["messages"][1]["content"]
    a = user.split("NOTE A:\n", 1)[1].split("\n\nNOTE B:", 1)[0]
    side = "B" if ("anaphylaxis" in a or "Extra claim" in a) else "A"
    return json.dumps({"rationale": "r", **{d: side for d in PAIRWISE_DIMENSIONS}})


def test_compare_pairwise_on_two_runs(tmp_path: Path) -> None:
    a = make_run(tmp_path / "A", n_encounters=4, seed=3, mitigation=False, failed=())
    b = make_run(tmp_path / "B", n_encounters=4, seed=3, mitigation=False, failed=())
    # B's babble_5db records gain a claim: those pairs differ, every other pair is identical
    changed = 0
    for p in sorted((b / "records" / "babble_5db").glob("*.json")):
        env = RecordEnvelope.model_validate_json(p.read_text())
        assert env.record is not None
        rec = env.record.model_copy(update={"chief_complaint": "Extra claim"})
        p.write_text(env.model_copy(update={"record": rec}).model_dump_json())
        changed += 1
    with stub_server([Reply(respond=_judge)], model="big-judge") as srv:
        cfg = LLMConfig(
            backend="openai",
            concurrency=1,
            max_retries=0,
            server={"mode": "external", "base_url": srv.base_url, "model": "big-judge"},
        )
        with open_session(cfg, cache_dir=tmp_path / "cache", log_dir=tmp_path) as s:
            res = pairwise_compare(a, b, tmp_path / "out", session=s, n_resamples=200)
        n_conditions = len(load_run(a).conditions)
        assert len(res.pairs) == 4 * n_conditions
        assert len(srv.requests) == 2 * changed + 2  # both orders per differing pair, plus calibration
    assert sum(p["identical"] for p in res.pairs) == len(res.pairs) - changed
    babble = [p for p in res.pairs if p["condition"] == "babble_5db"]
    assert {p["accurate"] for p in babble} == {"A"}  # A preferred in both orders
    overall = next(r.stat for r in res.summary if r.condition == "babble_5db" and r.stat.dimension == "overall")
    assert overall.loss == 100.0 and overall.ps == 0.0
    assert res.adequate and "Compared" in res.text and f"{len(res.pairs)} (encounter, condition) pairs" in res.text
    assert (tmp_path / "out" / "pairwise.md").is_file()
    assert (tmp_path / "out" / "tables" / "pairwise_pairs.csv").is_file()


def test_compare_pairwise_errors_name_what_is_missing(tmp_path: Path) -> None:
    from stresstest.errors import ReportError

    a = make_run(tmp_path / "A", n_encounters=3, seed=3, mitigation=False, failed=())
    b = make_run(tmp_path / "B", n_encounters=3, seed=3, mitigation=False, failed=())
    with pytest.raises(ReportError, match=r"condition\(s\) \['nope'\] are not in both runs"):
        pairwise_compare(a, b, tmp_path / "o", conditions=["nope"], session=object())
    with pytest.raises(ReportError, match="cannot read the judge config"):
        pairwise_compare(a, b, tmp_path / "o")  # the synthetic run's resolved config is not a run config
    (b / "config.resolved.yaml").unlink(missing_ok=True)
    with pytest.raises(ReportError, match="config.resolved.yaml not found; pass --config"):
        pairwise_compare(a, b, tmp_path / "o")
    rules_cfg = tmp_path / "rules.yaml"
    rules_cfg.write_text("corpus: {kind: osce, path: x}\n")
    with pytest.raises(ReportError, match="structure.backend 'rules'"):
        pairwise_compare(a, b, tmp_path / "o", config=rules_cfg, conditions=["clean"])


def test_items_dropped_by_the_pairing_rule_are_said_not_hidden(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", n_encounters=4, seed=3)
    _add_quality(run, True)
    items = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    for it in items:
        if it["encounter_id"] == "enc000":
            it["paired"], it["unpaired_reason"] = False, "enc000/clean failed"
    (run / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    sec = quality_section(load_run(run), 200, 0)
    n = sum(
        1
        for it in items
        if it["encounter_id"] == "enc000" and not it.get("failed") and it.get("completeness") is not None
    )
    assert n and sec.n_scored_unpaired == n
    md = build_report(run, n_resamples=200, seed=0).markdown.read_text()
    assert f"{n} judged item(s) belong to encounters the pairing rule (docs/spec.md §11) dropped" in md
