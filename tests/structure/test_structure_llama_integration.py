"""Real llama.cpp server on 127.0.0.1 with the bundled SmolLM2-135M-Instruct (integration, minutes on CPU).

The 135M model is there to prove the served path end to end, not to make good
records: under the schema grammar it usually emits a valid but sparse record.
Every outcome must be a record valid against S or a recorded failure with raw
text and a reason.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from outcome_checks import check_outcome

from stresstest.llm.config import LLMConfig
from stresstest.llm.served import ServerProcess
from stresstest.schema import EVIDENCE_CLAIM_CATEGORIES, RecordEnvelope, output_schema_hash
from stresstest.structure.stage import StructureItem, structure_many

pytestmark = pytest.mark.integration

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip(
        "llama_cpp is not importable: install llama-cpp-python[server] to run the real-server tests",
        allow_module_level=True,
    )

# Shipped with the project (data/osce, CC BY 4.0).
OSCE = Path(__file__).resolve().parents[2] / "data" / "osce"


def _osce_items(ids: list[str], max_turns: int, condition: str = "clean") -> list[StructureItem]:
    from stresstest.corpus.osce import load_osce

    encs = {e.encounter_id: e for e in load_osce(OSCE)}
    return [
        StructureItem(
            encounter_id=i, condition=condition, transcript_text=encs[i].truncated(max_turns).reference_text()
        )
        for i in ids
    ]


def _cfg(**kw: object) -> LLMConfig:
    base: dict[str, object] = {
        "backend": "openai",
        "concurrency": 1,
        "max_retries": 1,
        "backoff_s": 0.5,
        "timeout_s": 600,
        "decoding": {"max_tokens": 512},
        "server": {"startup_timeout_s": 180},
    }
    base.update(kw)
    return LLMConfig.model_validate(base)


def _check_outcome(env: RecordEnvelope) -> None:
    check_outcome(env)
    if env.record is not None and env.schema_hash == output_schema_hash() and not env.extra.mitigation:
        # Output contract v2 under the grammar: the triage, every flag and every medication / allergy / vital
        # claim came with quotes (a mitigated record's were filtered after decoding, so not checked here).
        rec = env.record
        must = ["triage", *(f.id for f in rec.safety_flags)]
        must += [c.id for c in rec.claims if c.category in EVIDENCE_CLAIM_CATEGORIES]
        assert all(rec.field_evidence.get(k) for k in must), (must, rec.field_evidence)


def test_llama_cpp_grammar_rejects_an_output_without_evidence(output_json: str) -> None:
    """The grammar llama-cpp-python's server builds from the request's schema (LlamaGrammar.from_json_schema ->
    json_schema_to_gbnf), run by llama.cpp's own grammar sampler over the bundled model's tokens: it accepts a
    valid record and rejects one whose safety flag or triage has no evidence, or whose quote is over the bound."""
    import ctypes
    import json

    import llama_cpp
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from stresstest.llm.checkpoint import bundled_gguf_path
    from stresstest.schema import MAX_QUOTE_CHARS, output_json_schema

    llm = llama_cpp.Llama(model_path=str(bundled_gguf_path()), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    gbnf = json_schema_to_gbnf(json.dumps(output_json_schema())).encode()
    eos = llama_cpp.llama_vocab_eos(vocab)

    def accepts(obj: dict) -> bool:
        smpl = llama_cpp.llama_sampler_init_grammar(vocab, gbnf, b"root")
        try:
            for tok in [*llm.tokenize(json.dumps(obj).encode(), add_bos=False, special=False), eos]:
                # One candidate: the grammar sampler sets its logit to -inf when the grammar forbids it (the end
                # of text is allowed only once the grammar is complete).
                cand = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(tok, 0.0, 0.0))
                arr = llama_cpp.llama_token_data_array(cand, 1, -1, False)
                llama_cpp.llama_sampler_apply(smpl, ctypes.byref(arr))
                if cand[0].logit == float("-inf"):
                    return False
                if tok != eos:
                    llama_cpp.llama_sampler_accept(smpl, tok)
            return True
        finally:
            llama_cpp.llama_sampler_free(smpl)

    valid = json.loads(output_json)
    assert accepts(valid)
    for path in (("safety_flags", 0), ("claims", 1), ("triage",)):
        for broken in (None, []):
            out = json.loads(output_json)
            item = out[path[0]] if len(path) == 1 else out[path[0]][path[1]]
            if broken is None:
                del item["evidence"]
            else:
                item["evidence"] = broken
            assert not accepts(out), (path, broken)
    out = json.loads(output_json)
    out["safety_flags"][0]["evidence"] = ["x" * (MAX_QUOTE_CHARS + 1)]
    assert not accepts(out)


def test_managed_server_structures_osce_deterministically(tmp_path: Path) -> None:
    items = _osce_items(["CAR0001", "RES0002"], max_turns=8)
    cfg = _cfg()
    t0 = time.monotonic()
    first = structure_many(items, cfg, cache_dir=tmp_path / "cache1", log_dir=tmp_path / "logs1")
    dt = time.monotonic() - t0
    for env in first:
        _check_outcome(env)
        assert env.model.startswith("SmolLM2-135M-Instruct.Q4_1.gguf#") and env.decoding["temperature"] == 0.0
    ok = sum(not e.failed for e in first)
    print(f"\nSmolLM2-135M: {ok}/{len(first)} valid records, {len(first) / dt:.3f} records/s incl. server start")
    # A fresh cache and a fresh server: same records (or the same failures) again. (Its own managed servers, not
    # the session's shared one: the managed start and a restart are the subject.)
    second = structure_many(items, cfg, cache_dir=tmp_path / "cache2", log_dir=tmp_path / "logs2")
    assert [e.record for e in second] == [e.record for e in first]
    assert [e.raw_text for e in second] == [e.raw_text for e in first]
    assert all(not e.extra.cached for e in second)
    assert len(list((tmp_path / "logs1").glob("llm-server-llama.cpp-*.log"))) == 1


def test_sigkill_mid_batch_records_failures_and_rerun_completes(tmp_path: Path) -> None:
    items = _osce_items(["CAR0001", "RES0002"], max_turns=6) + _osce_items(
        ["CAR0001", "RES0002"], max_turns=8, condition="babble_5db"
    )
    cache, logs = tmp_path / "cache", tmp_path / "logs"
    # The subject here is kill/resume, not φ: a repetition penalty keeps the 135M model out of the loops it
    # falls into at 1.0 (which end at max_tokens, a deterministic failure), as llama.cpp's hidden default did.
    base = _cfg(decoding={"max_tokens": 512, "repetition_penalty": 1.1})
    proc = ServerProcess(base, logs).start()  # its own server (not the session's shared one): it is killed
    port = proc.port
    cfg = base.model_copy(
        update={"server": base.server.model_copy(update={"mode": "external", "base_url": proc.base_url, "model": None})}
    )

    def kill_after_first_record() -> None:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            if list((cache / "llm-structure").rglob("*.json")):
                os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_after_first_record, daemon=True)
    killer.start()
    try:
        first = structure_many(items, cfg, cache_dir=cache, log_dir=logs)
    finally:
        killer.join(timeout=5)
        proc.stop()
    assert proc.proc is not None and proc.proc.returncode == -signal.SIGKILL
    assert not first[0].failed, first[0].error
    failed = [e for e in first if e.failed]
    assert failed, "the kill should have hit the batch"
    for env in failed:
        assert env.record is None and env.attempts == 2 and "connection error" in env.error, env.error
    print(f"\nafter SIGKILL: {len(failed)}/{len(first)} recorded failures, e.g. {failed[-1].error}")

    # Restart on the same port (the external URL stays valid); the re-run only sends the failed items.
    proc2 = ServerProcess(
        base.model_copy(update={"server": base.server.model_copy(update={"port": port})}), logs
    ).start()
    try:
        second = structure_many(items, cfg, cache_dir=cache, log_dir=logs)
    finally:
        proc2.stop()
    for a, b in zip(first, second, strict=True):
        _check_outcome(b)
        if not a.failed:
            assert b.extra.cached is True and b.record == a.record
        else:
            assert not b.extra.cached
            assert b.error is None or "connection error" not in b.error


def _external(cfg: LLMConfig, proc: ServerProcess) -> LLMConfig:
    """``cfg`` sent to an already running server (the session's shared one: tests/conftest.py)."""
    return cfg.model_copy(
        update={
            "server": cfg.server.model_copy(update={"mode": "external", "base_url": proc.base_url, "model": proc.model})
        }
    )


def test_guard_agent_and_judge_on_the_real_server(tmp_path: Path, llama_server) -> None:
    from stresstest.metrics.judge_llm import llm_judge_many
    from stresstest.mitigation import mitigate_many

    items = _osce_items(["CAR0001"], max_turns=6, condition="babble_5db")
    proc = llama_server(_cfg())
    cfg = _external(_cfg(), proc)
    (env,) = mitigate_many(items, cfg, cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs")
    _check_outcome(env)
    if not env.failed:
        draft = env.extra.draft_record
        assert draft is not None
        ids = {c.id for c in env.record.claims} | {f.id for f in env.record.safety_flags}
        assert ids <= {c.id for c in draft.claims} | {f.id for f in draft.safety_flags}
        assert env.extra.fields_nulled <= env.extra.fields_total
        print(
            f"\nguard agent: {env.extra.fields_total} draft fields, {env.extra.fields_nulled} nulled, "
            f"{env.extra.quotes_discarded}/{env.extra.quotes_total} quotes discarded, "
            f"{env.extra.guard_added_dropped} guard additions dropped"
        )
        (jr,) = llm_judge_many(
            [("CAR0001/babble_5db_guard", env.record, draft)],
            cfg,
            cache_dir=tmp_path / "cache",
            log_dir=tmp_path / "logs",
        )
        # external mode: the judge is named by the model the server answers to (managed: + '#<fingerprint>',
        # test_one_engine_serves_structure_guard_and_judge)
        assert jr.judge == "llm:SmolLM2-135M-Instruct.Q4_1.gguf@judge_v1"
        assert jr.score in {1, 2, 3, 4, 5} or (jr.score is None and "judge call failed" in jr.reasons[0])
        print(f"LLM judge: score {jr.score}")
    else:
        print(f"\nguard agent: recorded failure: {env.error}")


def test_serve_background_binds_loopback_and_stops(tmp_path: Path) -> None:
    import httpx

    from stresstest.llm.served import serve

    proc = serve(_cfg(), foreground=False, log_dir=tmp_path)  # its own: starting and stopping it is the subject
    try:
        assert proc.base_url.startswith("http://127.0.0.1:")
        models = httpx.get(f"{proc.base_url}/v1/models", timeout=10).json()["data"]
        assert models[0]["id"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    finally:
        proc.stop()
    assert proc.health() is not None and "exited" in proc.health()


# --- issue 12: one engine per run (1), φ pinned and recorded (3), robust structured output (4) ---------------


def test_one_engine_serves_structure_guard_and_judge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stresstest.llm.engine import LLMEngine
    from stresstest.metrics.judge_llm import llm_judge_many
    from stresstest.mitigation import mitigate_many

    items = _osce_items(["CAR0001"], max_turns=4)
    cfg, cache, logs = _cfg(), tmp_path / "cache", tmp_path / "run" / "logs"
    # Its own engine (not the session's shared server): that one run starts exactly one server is the subject.
    with LLMEngine(cfg, cache_dir=cache, log_dir=logs) as engine:
        (env,) = structure_many(items, cfg, cache_dir=cache, log_dir=logs, engine=engine)
        g_items = [it.model_copy(update={"condition": "clean_guard"}) for it in items]
        (genv,) = mitigate_many(g_items, cfg, cache_dir=cache, log_dir=logs, engine=engine)
        pid = engine._server.pid
        judged = [(f"{e.encounter_id}/{e.condition}", e.record, e.record) for e in (env, genv) if e.record]
        llm_judge_many(judged, cfg, cache_dir=cache, log_dir=logs, engine=engine)
        assert engine._server.pid == pid  # the same process served every role
        info = engine.info()
    _check_outcome(env)
    _check_outcome(genv)
    assert info["starts"] == 1 and info["engine"] == "llama.cpp" and info["ready_s"] > 0
    expected_roles = ["structure", "mitigation-draft"] + (["mitigation-guard"] if genv.extra.stage != "draft" else [])
    assert info["roles"][: len(expected_roles)] == expected_roles
    assert (info["roles"][-1] == "judge") == bool(judged)
    assert info["model"].startswith("SmolLM2-135M-Instruct.Q4_1.gguf#") and info["revision"]
    assert Path(info["log"]).parent == logs and Path(info["log"]).is_file()
    assert len(list(logs.glob("llm-server-*.log"))) == 1  # exactly one server was started
    err = capsys.readouterr().err
    assert "starting llama.cpp server" in err and "server ready after" in err and str(logs) in err


def test_phi_is_sent_whole_and_overrides_server_defaults(llama_server) -> None:
    """llama-cpp-python's server defaults to repeat_penalty=1.1 (and top_k=40, min_p=0.05); the client sends
    the whole φ, so the server's defaults never bend a record — and the field names are the ones it honours."""
    import httpx

    from stresstest.llm.client import ChatClient, phi_payload
    from stresstest.llm.prompts import load_prompt
    from stresstest.schema import record_json_schema

    (item,) = _osce_items(["RES0002"], max_turns=4)
    # φ's repetition penalty is pinned away from the server's 1.1 (the project's default is 1.1 as well,
    # under which "left out" and "sent" cannot differ)
    cfg = _cfg(decoding={"max_tokens": 96, "repetition_penalty": 1.0})
    messages = load_prompt("structure", "v1", "stresstest.structure.prompts").messages(transcript=item.transcript_text)
    # The session's shared server (tests/conftest.py): other tests' requests came before these, which is what
    # "the same bytes whatever the server answered before" is about.
    proc = llama_server(cfg)
    with ChatClient(proc.endpoint(), cfg) as client:
        body = client.request_body(messages, "ClinicalRecord", record_json_schema())
        assert {k: body[k] for k in phi_payload(cfg)} == phi_payload(cfg)

        def text(b: dict[str, object]) -> str:
            r = httpx.post(f"{proc.base_url}/v1/chat/completions", json=b, timeout=600)
            assert r.status_code == 200, r.text[:300]
            return str(r.json()["choices"][0]["message"]["content"])

        ours = text(body)
        shorter = {**body, "messages": [*body["messages"][:-1], {"role": "user", "content": "Hello."}]}
        text(shorter)  # shares the system prompt's tokens with `body`
        assert text(body) == ours  # temperature 0 + seed: the same bytes whatever the server answered before
        # ... because no request reuses the previous one's KV cache: llama-cpp-python would evaluate the last
        # prompt token alone (logging "prefix-match hit"), on another kernel path than inside the batch, and
        # on some CPUs the greedy decode then takes another token (seen in CI; not on every machine)
        log = proc.log_path.read_text(errors="replace")
        assert "Llama.generate:" not in log and "prefix-match" not in log, log[-2000:]
        server_default = {k: v for k, v in body.items() if k not in ("repeat_penalty", "top_k", "min_p")}
        penalised = {**body, "repeat_penalty": 1.1, "top_k": 40, "min_p": 0.05}
        assert text(server_default) == text(penalised)  # what the server does when φ is left out
        assert text(penalised) != ours  # ... which is not what the pinned φ produces


def _whitespace_runs_outside_strings(text: str) -> int:
    """Longest run of whitespace between JSON tokens (string contents excluded)."""
    longest = run = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str, run = True, 0
        elif ch.isspace():
            run += 1
            longest = max(longest, run)
        else:
            run = 0
    return longest


def test_truncation_at_temperature_0_fails_once_and_json_stays_compact(tmp_path: Path, llama_server) -> None:
    items = _osce_items(["CAR0001", "RES0002"], max_turns=4)
    cfg = _cfg(decoding={"max_tokens": 16}, max_retries=3)
    proc = llama_server(cfg)  # the session's shared server (tests/conftest.py)
    ext = _external(cfg, proc)
    t0 = time.monotonic()
    envs = structure_many(items, ext, cache_dir=tmp_path / "c1", log_dir=tmp_path / "logs")
    dt = time.monotonic() - t0
    for env in envs:
        assert env.failed and env.attempts == 1, env.error  # not retried
        assert "finish_reason=length at max_tokens=16" in env.error and "not retried" in env.error
        assert env.raw_text
    assert dt < 4 * 60  # three retries of each would have been 4x the work
    # A full-length answer: the grammar keeps JSON compact (no whitespace runaway possible).
    full = _external(_cfg(decoding={"max_tokens": 512}), proc)
    (ok,) = structure_many(items[:1], full, cache_dir=tmp_path / "c2", log_dir=tmp_path / "logs")
    _check_outcome(ok)
    assert ok.raw_text is not None and _whitespace_runs_outside_strings(ok.raw_text) <= 1, ok.raw_text[:200]
