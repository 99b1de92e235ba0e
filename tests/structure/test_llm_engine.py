"""The run's single LLM engine: every role shares it, it starts once (lazily), and it describes itself for the
manifest. Served through the scripted stub on 127.0.0.1 (external mode); the real llama.cpp server is in
test_structure_llama_integration.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.llm_stub import Reply, stub_server

from stresstest.errors import StructureError
from stresstest.llm.client import phi_payload
from stresstest.llm.config import LLMConfig
from stresstest.llm.engine import LLMEngine
from stresstest.llm.gpu import default_gpu_memory_utilization
from stresstest.schema import ClinicalRecord
from stresstest.structure.stage import StructureItem, structure_many


def _cfg(base_url: str) -> LLMConfig:
    return LLMConfig.model_validate(
        {
            "backend": "openai",
            "server": {"mode": "external", "base_url": base_url, "model": "stub-model"},
            "max_retries": 0,
            "backoff_s": 0.0,
        }
    )


def test_structure_guard_and_judge_share_one_engine(tmp_path: Path, record: ClinicalRecord, output_json: str) -> None:
    from stresstest.metrics.judge_llm import llm_judge_many
    from stresstest.mitigation import mitigate_many

    items = [StructureItem(encounter_id="E1", condition="clean", transcript_text="Patient: chest pain.")]
    judge = '{"rationale": "same", "score": 5}'
    script = [Reply(output_json), Reply(output_json), Reply(output_json), Reply(judge)]
    with stub_server(script) as srv:
        cfg = _cfg(srv.base_url)
        with LLMEngine(cfg, cache_dir=tmp_path / "c", log_dir=tmp_path / "logs") as engine:
            assert engine.started_at is None  # lazy: nothing started before a cache miss
            (env,) = structure_many(items, cfg, cache_dir=tmp_path / "c", log_dir=tmp_path / "logs", engine=engine)
            g_items = [it.model_copy(update={"condition": "clean_guard"}) for it in items]
            mitigate_many(g_items, cfg, cache_dir=tmp_path / "c", log_dir=tmp_path / "logs", engine=engine)
            (jr,) = llm_judge_many(
                [("E1/clean", env.record, record)],
                cfg,
                cache_dir=tmp_path / "c",
                log_dir=tmp_path / "logs",
                engine=engine,
            )
            assert jr.score == 5
            client = engine.client()
            info = engine.info()
        assert client._http.is_closed  # closing the run's engine closes the shared client
    assert info["starts"] == 1 and info["started_at"] is not None
    assert info["roles"] == ["structure", "mitigation-draft", "mitigation-guard", "judge"]
    assert info["engine"] == "external" and info["model"] == "stub-model" and info["ready_s"] is None
    assert info["phi_sent"] == phi_payload(cfg)
    assert len(srv.requests) == 4
    for body in srv.requests:  # every role sent exactly the recorded φ
        assert {k: body[k] for k in info["phi_sent"]} == info["phi_sent"]


def test_fully_cached_rerun_starts_nothing(tmp_path: Path, output_json: str) -> None:
    items = [StructureItem(encounter_id="E1", condition="clean", transcript_text="t")]
    with stub_server([Reply(output_json)]) as srv:
        cfg = _cfg(srv.base_url)
        structure_many(items, cfg, cache_dir=tmp_path, log_dir=tmp_path)
        with LLMEngine(cfg, cache_dir=tmp_path, log_dir=tmp_path) as engine:
            (env,) = structure_many(items, cfg, cache_dir=tmp_path, log_dir=tmp_path, engine=engine)
        assert env.extra.cached is True
    info = engine.info()
    assert info["started_at"] is None and info["starts"] == 0 and info["roles"] == ["structure"]


def test_a_session_with_another_config_is_refused(tmp_path: Path) -> None:
    from stresstest.llm.session import LLMSession, open_session

    cfg = _cfg("http://127.0.0.1:9")
    engine = LLMEngine(cfg, cache_dir=tmp_path, log_dir=tmp_path)
    other = cfg.model_copy(update={"decoding": cfg.decoding.model_copy(update={"max_tokens": 64})})
    with pytest.raises(StructureError, match="one engine per run"):
        open_session(other, cache_dir=tmp_path, log_dir=tmp_path, engine=engine)
    s = open_session(cfg, cache_dir=tmp_path / "ignored", log_dir=tmp_path, engine=engine, role="judge-entailment")
    assert s.role == "judge-entailment" and s.engine is engine and s.cache_dir == tmp_path
    s.close()
    assert not engine.closed  # a session never closes an engine it was handed
    with LLMSession(engine, role="judge") as s2:
        assert s2.config is cfg
    assert not engine.closed


def test_closed_engine_does_not_restart(tmp_path: Path) -> None:
    engine = LLMEngine(_cfg("http://127.0.0.1:9"), cache_dir=tmp_path, log_dir=tmp_path)
    engine.close()
    with pytest.raises(StructureError, match="already closed"):
        engine.start()


@pytest.mark.parametrize(
    ("free", "total", "expected"),
    [(140_000, 143_000, 0.9), (100_000, 140_000, 0.65), (20_000, 80_000, 0.23), (100, 80_000, 0.05)],
)
def test_gpu_memory_default_follows_free_memory(free: float, total: float, expected: float) -> None:
    assert default_gpu_memory_utilization(free, total) == expected


def test_vllm_gpu_memory_is_measured_at_start_unless_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("stresstest.llm.gpu.measure_gpu_memory", lambda: (50_000.0, 100_000.0))
    cfg = LLMConfig(backend="vllm-offline", server={"model": "m"})
    eng = LLMEngine(cfg, cache_dir=tmp_path, log_dir=tmp_path)
    assert eng._resolved_config().server.gpu_memory_utilization == 0.46
    assert eng.gpu_memory == {
        "gpu_memory_utilization": 0.46,
        "source": "measured",
        "free_mib": 50_000.0,
        "total_mib": 100_000.0,
    }
    fixed = LLMConfig(backend="vllm-offline", server={"model": "m", "gpu_memory_utilization": 0.5})
    eng = LLMEngine(fixed, cache_dir=tmp_path, log_dir=tmp_path)
    assert eng._resolved_config().server.gpu_memory_utilization == 0.5 and eng.gpu_memory["source"] == "config"
    monkeypatch.setattr("stresstest.llm.gpu.measure_gpu_memory", lambda: None)
    monkeypatch.setattr("stresstest.llm.gpu.shutil.which", lambda exe: "/usr/bin/nvidia-smi")
    eng = LLMEngine(cfg, cache_dir=tmp_path, log_dir=tmp_path)
    assert eng._resolved_config().server.gpu_memory_utilization == 0.85
    assert eng.gpu_memory["source"].startswith("fallback")  # a driver that does not answer: warned
    monkeypatch.setattr("stresstest.llm.gpu.shutil.which", lambda exe: None)
    eng = LLMEngine(cfg, cache_dir=tmp_path, log_dir=tmp_path)
    assert eng._resolved_config().server.gpu_memory_utilization == 0.85
    assert eng.gpu_memory["source"].startswith("no GPU")  # vLLM's CPU build: nothing to warn about


def test_startup_timeout_defaults_per_engine() -> None:
    assert LLMConfig(server={"engine": "vllm", "model": "m"}).server.resolved_startup_timeout_s() >= 900
    assert LLMConfig().server.resolved_startup_timeout_s() == 300
    assert LLMConfig(server={"startup_timeout_s": 42}).server.resolved_startup_timeout_s() == 42


def test_vllm_serve_args_pin_phi_and_compact_json(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from support.llm_stub import VLLM_032

    from stresstest.llm.served import server_env, vllm_serve_args

    monkeypatch.setattr("stresstest.llm.served.cuda_visible", lambda: True)
    cfg = LLMConfig(
        backend="openai",
        server={
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "revision": "a09a3545",
            "n_ctx": 8192,
            "gpu_memory_utilization": 0.8,
            "batch_invariant": True,
        },
    )
    args = vllm_serve_args(cfg, 8000, VLLM_032)
    opt = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
    assert opt["--host"] == "127.0.0.1" and opt["--generation-config"] == "vllm" and opt["--revision"] == "a09a3545"
    assert opt["--gpu-memory-utilization"] == "0.8" and opt["--max-model-len"] == "8192" and opt["--seed"] == "1234"
    assert json.loads(opt["--structured-outputs-config"]) == {"backend": "xgrammar", "disable_any_whitespace": True}
    assert "--no-enable-log-requests" in args and "--disable-log-requests" not in args  # 0.32 has no --disable
    assert not {"--dtype", "--enforce-eager", "--no-enable-prefix-caching"} & set(args)  # default preset: vLLM's
    assert server_env(cfg)["VLLM_BATCH_INVARIANT"] == "1"
    plain = cfg.model_copy(update={"server": cfg.server.model_copy(update={"batch_invariant": False})})
    assert "VLLM_BATCH_INVARIANT" not in server_env(plain) or server_env(plain)["VLLM_BATCH_INVARIANT"] != "1"


def test_every_vllm_flag_is_one_the_installed_version_knows(monkeypatch: pytest.MonkeyPatch) -> None:
    from stresstest.llm.served import vllm_serve_args
    from stresstest.llm.vllm_cli import VllmCli

    monkeypatch.setattr("stresstest.llm.served.cuda_visible", lambda: False)
    cfg = LLMConfig(backend="openai", server={"engine": "vllm", "model": "m", "preset": "deterministic"})
    base = {
        "--host",
        "--port",
        "--seed",
        "--max-model-len",
        "--served-model-name",
        "--generation-config",
        "--structured-outputs-config",
        "--dtype",
        "--enforce-eager",
        "--no-enable-prefix-caching",
    }
    older = VllmCli("0.10-like", frozenset(base | {"--disable-log-requests"}))
    args = vllm_serve_args(cfg, 8000, older)
    assert "--disable-log-requests" in args and "--no-enable-log-requests" not in args
    assert "--gpu-memory-utilization" not in args  # this parser has none: nothing it lacks is passed
    assert {a for a in args if a.startswith("--")} <= older.options
    lacking = VllmCli("9.9", frozenset(base - {"--no-enable-prefix-caching"}))
    with pytest.raises(StructureError, match=r"vLLM 9.9 has no --no-enable-prefix-caching option.*prefix_caching"):
        vllm_serve_args(cfg, 8000, lacking)


def test_deterministic_preset_and_explicit_engine_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from support.llm_stub import VLLM_032

    from stresstest.llm.served import server_env, vllm_serve_args

    monkeypatch.setattr("stresstest.llm.served.cuda_visible", lambda: False)
    det = LLMConfig(
        backend="openai",
        server={"engine": "vllm", "model": "m", "preset": "deterministic", "cpu_kv_cache_gib": 2, "max_num_seqs": 16},
    )
    args = vllm_serve_args(det, 8000, VLLM_032)
    assert args[args.index("--dtype") + 1] == "float32" and "--enforce-eager" in args
    assert "--no-enable-prefix-caching" in args and args[args.index("--max-num-seqs") + 1] == "16"
    env = server_env(det)
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2" and env.get("VLLM_BATCH_INVARIANT") != "1"  # no GPU: no kernels
    assert det.server.engine_options(gpu=True).batch_invariant  # on a GPU the preset adds batch invariance
    mixed = LLMConfig(
        backend="openai",
        server={
            "engine": "vllm",
            "model": "m",
            "preset": "deterministic",
            "dtype": "bfloat16",
            "enable_prefix_caching": True,
        },
    )
    opts = mixed.server.engine_options(gpu=False)
    assert (opts.dtype, opts.enforce_eager, opts.enable_prefix_caching) == ("bfloat16", True, True)
    with pytest.raises(ValueError, match="preset"):
        LLMConfig(backend="openai", server={"engine": "vllm", "model": "m", "preset": "fast"})


def test_offline_engine_kwargs_follow_the_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    from stresstest.llm.config import EngineOptions
    from stresstest.llm.offline import engine_kwargs

    cfg = LLMConfig(backend="vllm-offline", server={"model": "m", "preset": "deterministic"})
    kw = engine_kwargs(cfg, cfg.server.engine_options(gpu=False))
    assert kw["dtype"] == "float32" and kw["enforce_eager"] is True and kw["enable_prefix_caching"] is False
    assert "dtype" not in engine_kwargs(cfg, EngineOptions())


def test_the_run_engine_is_passed_to_the_structure_worker_and_the_judge(
    tmp_path: Path, record: ClinicalRecord, output_json: str
) -> None:
    from stresstest.metrics.judge_llm import llm_judge_many
    from stresstest.pipeline.executor import InProcessExecutor
    from stresstest.pipeline.tasks import StructureInit, StructureTask, StructureWorker

    judge = '{"rationale": "same", "score": 4}'
    with stub_server([Reply(output_json), Reply(judge)]) as srv:
        cfg = _cfg(srv.base_url)
        logs = tmp_path / "logs"
        engine = LLMEngine(cfg, cache_dir=tmp_path, log_dir=logs)
        (env,) = InProcessExecutor().map_pool(
            "structure",
            StructureWorker,
            StructureInit(cfg, tmp_path, logs, engine),
            [StructureTask("E1", "clean", "t")],
        )
        assert not engine.closed  # the worker never closes the run's engine
        (jr,) = llm_judge_many([("E1/clean", env.record, record)], cfg, cache_dir=tmp_path, log_dir=logs, engine=engine)
        assert jr.score == 4
        assert engine.info()["roles"] == ["structure", "judge"] and engine.starts == 1
        engine.close()
    assert len(srv.requests) == 2


def test_structure_worker_without_a_run_engine_owns_one_and_closes_it(tmp_path: Path, output_json: str) -> None:
    from stresstest.pipeline.tasks import StructureInit, StructureTask, StructureWorker

    with stub_server([Reply(output_json)]) as srv:
        cfg = _cfg(srv.base_url)
        worker = StructureWorker(StructureInit(cfg, tmp_path, tmp_path / "logs"))
        worker.run([StructureTask("E1", "clean", "a"), StructureTask("E1", "clean_guard", "a", guarded=True)])
        own = worker._own_engine
        assert own is not None and own.starts == 1
        assert own.info()["roles"] == ["structure", "mitigation-draft", "mitigation-guard"]
        worker.close()
    assert own.closed and worker._own_engine is None


def test_info_of_an_unreachable_external_server_records_why(tmp_path: Path) -> None:
    cfg = LLMConfig.model_validate(
        {"backend": "openai", "server": {"mode": "external", "base_url": "http://127.0.0.1:9"}, "timeout_s": 2}
    )
    info = LLMEngine(cfg, cache_dir=tmp_path, log_dir=tmp_path).info()
    assert info["model"] is None and "GET /v1/models failed" in info["model_error"]


def test_concurrency_default_comes_from_the_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Unset ``concurrency``: a vLLM this run starts on a GPU gets enough requests in flight to fill its batches
    (≥ 128), every other engine a small number; a set value always wins; the manifest records which."""
    from stresstest.llm.config import DEFAULT_CONCURRENCY, VLLM_GPU_CONCURRENCY

    gpu = {"on": True}
    monkeypatch.setattr("stresstest.llm.gpu.measure_gpu_memory", lambda: (50_000.0, 100_000.0) if gpu["on"] else None)
    managed = LLMConfig(backend="openai", server={"mode": "managed", "engine": "vllm", "model": "m"})
    offline = LLMConfig(backend="vllm-offline", server={"model": "m"})
    for cfg in (managed, offline):
        eng = LLMEngine(cfg, cache_dir=tmp_path, log_dir=tmp_path)
        assert eng.concurrency == VLLM_GPU_CONCURRENCY >= 128
        assert eng._resolved_config().concurrency == VLLM_GPU_CONCURRENCY  # the client's pool is sized by it
        info = eng.info()
        assert (info["concurrency"], info["concurrency_source"]) == (256, "engine default: vLLM on a GPU")
    seqs = LLMConfig(backend="vllm-offline", server={"model": "m", "max_num_seqs": 512})
    assert LLMEngine(seqs, cache_dir=tmp_path, log_dir=tmp_path).concurrency == 512
    set_ = LLMConfig(backend="vllm-offline", server={"model": "m"}, concurrency=8)
    eng = LLMEngine(set_, cache_dir=tmp_path, log_dir=tmp_path)
    assert eng.concurrency == 8 and eng.info()["concurrency_source"] == "config"
    gpu["on"] = False  # vLLM's CPU build, llama.cpp, an external server: small
    assert LLMEngine(managed, cache_dir=tmp_path, log_dir=tmp_path).concurrency == DEFAULT_CONCURRENCY
    llama = LLMConfig(backend="openai")
    external = _cfg("http://127.0.0.1:9")
    gpu["on"] = True
    for cfg, where in ((llama, "llama.cpp"), (external, "external server")):
        eng = LLMEngine(cfg, cache_dir=tmp_path, log_dir=tmp_path)
        assert eng.concurrency == DEFAULT_CONCURRENCY <= 4 and eng.info()["concurrency_source"].endswith(where)


@pytest.mark.parametrize("bad", [0, -1, 5000, "many"])
def test_concurrency_is_validated(bad: object, tmp_path: Path) -> None:
    from pydantic import ValidationError

    from stresstest.config import load_config
    from stresstest.errors import ConfigError

    with pytest.raises(ValidationError, match="concurrency"):
        LLMConfig(backend="openai", concurrency=bad)
    path = tmp_path / "run.yaml"
    path.write_text(f"structure:\n  backend: openai\n  concurrency: {bad}\n")
    with pytest.raises(ConfigError, match="structure.concurrency"):
        load_config(path)
