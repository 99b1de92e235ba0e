"""`stresstest check` sends what the run will send: each LLM role's real prompt on the grid's longest encounter,
counted by the started engine against n_ctx, and the configured ASR path (issue 39 item 3)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from stresstest.cli import main
from stresstest.config import load_config
from stresstest.pipeline.preflight import llm_role_requests, longest_encounter

REPO = Path(__file__).resolve().parents[2]
IDS = ["CAR0001", "RES0002", "RES0003"]


def _config(tmp_path: Path, **over: object) -> Path:
    cfg: dict[str, object] = {
        "corpus": {"kind": "osce", "path": str(REPO / "data/osce/transcripts"), "ids": IDS, "max_turns": 40},
        "noise": {"ambient": {"family": "ambient", "kind": "builtin"}},
        "snr_db": [5],
        "asr": {"backend": "faster-whisper"},
        "structure": {
            "backend": "openai",
            "server": {"mode": "managed", "engine": "llama.cpp", "n_ctx": 4096},
            "decoding": {"max_tokens": 768},
            "concurrency": 1,
            "prompt_version": "v2",
        },
        "mitigation": {"conditions": ["ambient_5db"]},
        "judge": {"backend": "llm"},
        "run": {"cache_dir": str(tmp_path / "cache")},
    }
    cfg.update(over)
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_every_role_of_the_run_gets_its_real_prompt_on_the_longest_encounter(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path))
    eid, text = longest_encounter(cfg)
    from stresstest.corpus import load_corpus

    encs = [e.truncated(40) for e in load_corpus("osce", REPO / "data/osce/transcripts", ids=IDS)]
    assert len(text.split()) == max(len(e.reference_text().split()) for e in encs)
    reqs = llm_role_requests(cfg, text)
    assert [r[0] for r in reqs] == ["structuring", "draft", "guard", "judge"]
    joined = {role: " ".join(m["content"] for m in msgs) for role, msgs, _, _ in reqs}
    assert text in joined["structuring"]  # the transcript itself, not a stand-in
    assert all(len(joined[r]) > len(text) for r in ("structuring", "draft", "guard"))
    assert reqs[0][2] == "RecordOutput" and reqs[3][2] == "JudgeVerdict" and reqs[0][3]["properties"]
    only = load_config(_config(tmp_path, mitigation={"conditions": []}, judge={"backend": "rules"}))
    assert [r[0] for r in llm_role_requests(only, text)] == ["structuring"]


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], cfg: Path) -> tuple[int, str, list[str]]:
    rc = main(["check", str(cfg), "--out", str(tmp_path / "run")])
    captured = capsys.readouterr()
    return rc, captured.out, [ln for ln in captured.err.splitlines() if ln.strip()]


def test_the_batched_asr_path_is_what_check_decodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(
        tmp_path,
        structure={"backend": "rules"},
        mitigation={"conditions": []},
        judge={"backend": "rules"},
        asr={"backend": "faster-whisper", "batch_size": 4},
    )
    rc, out, problems = _check(tmp_path, capsys, cfg)
    assert rc == 0 and problems == [], problems
    assert "batched path, batch_size 4" in out and "TTS " in out and "ASR " in out


@pytest.mark.integration
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed")
def test_role_prompts_are_counted_by_the_engine_and_a_too_small_context_fails_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, problems = _check(tmp_path, capsys, _config(tmp_path))
    assert rc == 0 and problems == [], problems
    lines = {ln.split(":")[0].split("  ")[-1]: ln for ln in out.splitlines() if "llm prompt" in ln}
    assert sorted(lines) == ["llm prompt draft", "llm prompt guard", "llm prompt judge", "llm prompt structuring"]
    tokens = {k: int(v.split(": ", 1)[1].split()[0]) for k, v in lines.items()}
    assert tokens["llm prompt structuring"] > 1000, tokens  # 40 turns + the v2 instruction with its schema
    assert "LLM structuring" in out and "LLM guard" in out  # the per-stage estimate
    assert not (tmp_path / "run").exists()  # a check makes no run directory and no audio

    small = _config(
        tmp_path,
        structure={
            "backend": "openai",
            "server": {"engine": "llama.cpp", "n_ctx": 1024},
            "decoding": {"max_tokens": 768},
            "concurrency": 1,
        },
        mitigation={"conditions": []},
        judge={"backend": "rules"},
    )
    rc, out, problems = _check(tmp_path, capsys, small)
    assert rc == 2 and len(problems) == 1, problems
    assert "llm prompt structuring" in problems[0] and "n_ctx" in problems[0], problems[0]
    assert "longest encounter" in problems[0] and "structure.server.n_ctx" in problems[0]


def test_the_longest_encounter_is_cut_as_the_run_cuts_it(tmp_path: Path) -> None:
    """A gold record's scope_turns wins over corpus.max_turns in the run (pipeline.runner), so in the check too:
    these three encounters have 40-turn gold, and max_turns 10 does not shorten what the LLM will read."""
    cfg = load_config(
        _config(
            tmp_path, corpus={"kind": "osce", "path": str(REPO / "data/osce/transcripts"), "ids": IDS, "max_turns": 10}
        )
    )
    from stresstest.corpus import load_corpus

    encs = {e.encounter_id: e for e in load_corpus("osce", REPO / "data/osce/transcripts", ids=IDS)}
    eid, text = longest_encounter(cfg)
    assert text == encs[eid].truncated(40).reference_text() != encs[eid].truncated(10).reference_text()
