"""The structure stage: envelopes, caching, failure recording, rules backend, fingerprints, servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.llm_stub import Reply, stub_server

from stresstest.errors import StructureError
from stresstest.llm import served as server_mod
from stresstest.llm.config import LLMConfig
from stresstest.llm.prompts import load_prompt
from stresstest.schema import ClinicalRecord, RecordOutput, output_schema_hash, schema_hash
from stresstest.structure.stage import (
    StructureItem,
    structure_fingerprint,
    structure_many,
    structure_prompt,
    transcript_sha256,
)


def _cfg(url: str, **kw: object) -> LLMConfig:
    base: dict[str, object] = {
        "backend": "openai",
        "max_retries": 1,
        "backoff_s": 0.01,
        "timeout_s": 5.0,
        "concurrency": 1,
        "server": {"mode": "external", "base_url": url},
    }
    base.update(kw)
    return LLMConfig.model_validate(base)


ITEMS = [
    StructureItem(encounter_id="E1", condition="clean", transcript_text="Patient: chest pain."),
    StructureItem(encounter_id="E1", condition="babble_5db", transcript_text="Patient: chest pain, aspirin."),
    StructureItem(encounter_id="E2", condition="clean", transcript_text="Patient: a cough."),
]


def _by_transcript(record: ClinicalRecord, bad: str | None = None):  # noqa: ANN202
    """Stub behaviour: valid record unless the user message contains ``bad``; in the output form the request's
    instruction shows (v2: quotes inside the items), else ClinicalRecord's (v1)."""

    def respond(body: dict) -> str:
        user = body["messages"][1]["content"]
        if bad and bad in user:
            return "{broken"
        rec = record.model_copy(update={"chief_complaint": user[-12:]})
        shown = '"evidence"' in body["messages"][0]["content"]
        return RecordOutput.from_record(rec).model_dump_json() if shown else rec.model_dump_json()

    return respond


def test_envelopes_in_order_with_provenance(tmp_path: Path, record: ClinicalRecord) -> None:
    with stub_server([Reply(respond=_by_transcript(record))]) as srv:
        envs = structure_many(ITEMS, _cfg(srv.base_url), cache_dir=tmp_path / "c", log_dir=tmp_path / "l")
    prompt = load_prompt("structure", "v2", "stresstest.structure.prompts")
    assert [(e.encounter_id, e.condition) for e in envs] == [(i.encounter_id, i.condition) for i in ITEMS]
    for e, it in zip(envs, ITEMS, strict=True):
        assert not e.failed and e.record is not None
        assert e.record.chief_complaint == f"user: <<<\n{it.transcript_text}\n>>>"[-12:]
        assert e.backend == "openai" and e.model == "stub-model"
        assert e.prompt_hash == prompt.sha256 and e.schema_hash == output_schema_hash() != schema_hash()
        assert e.record.field_evidence == record.field_evidence  # quotes moved back under their ids
        assert e.transcript_sha256 == transcript_sha256(it.transcript_text)
        assert e.decoding == {
            "temperature": 0.0,
            "seed": 1234,
            "max_tokens": 1536,
            "top_p": 1.0,
            "top_k": 0,
            "min_p": 0.0,
            "repetition_penalty": 1.1,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "response_format": "json_object",
        }
    # the transcript goes to the model inside the versioned user template
    assert srv.requests[0]["messages"][1]["content"] == f"Transcript:\n<<<\n{ITEMS[0].transcript_text}\n>>>"


def test_failed_items_are_recorded_not_cached_and_retried_on_rerun(tmp_path: Path, record: ClinicalRecord) -> None:
    cache, logs = tmp_path / "c", tmp_path / "l"
    with stub_server([Reply(respond=_by_transcript(record, bad="aspirin"))]) as srv:
        first = structure_many(ITEMS, _cfg(srv.base_url), cache_dir=cache, log_dir=logs)
    assert [e.failed for e in first] == [False, True, False]
    bad = first[1]
    assert bad.record is None and bad.raw_text == "{broken" and "invalid JSON" in bad.error and bad.attempts == 2
    assert len(srv.requests) == 4  # 1 + 2 attempts + 1

    with stub_server([Reply(respond=_by_transcript(record))]) as srv2:
        second = structure_many(ITEMS, _cfg(srv2.base_url), cache_dir=cache, log_dir=logs)
    assert len(srv2.requests) == 1  # only the failed item went to the server again
    assert not any(e.failed for e in second)
    assert second[0].record == first[0].record and second[0].extra.cached is True
    assert second[1].extra.cached is False


def test_cache_key_covers_phi_and_prompt_version(tmp_path: Path, record: ClinicalRecord) -> None:
    cache = tmp_path / "c"
    with stub_server([Reply(respond=_by_transcript(record))]) as srv:
        structure_many(ITEMS[:1], _cfg(srv.base_url), cache_dir=cache, log_dir=tmp_path)
        structure_many(ITEMS[:1], _cfg(srv.base_url), cache_dir=cache, log_dir=tmp_path)
        assert len(srv.requests) == 1
        structure_many(ITEMS[:1], _cfg(srv.base_url, decoding={"seed": 7}), cache_dir=cache, log_dir=tmp_path)
        assert len(srv.requests) == 2
        structure_many(ITEMS[:1], _cfg(srv.base_url, response_format="json_schema"), cache_dir=cache, log_dir=tmp_path)
        assert len(srv.requests) == 3
        # prompt v1 keeps its own contract (ClinicalRecord, schema not shown): a miss, and a valid record
        (v1,) = structure_many(ITEMS[:1], _cfg(srv.base_url, prompt_version="v1"), cache_dir=cache, log_dir=tmp_path)
        assert len(srv.requests) == 4 and not v1.failed and v1.schema_hash == schema_hash()
        assert '"evidence"' not in srv.requests[-1]["messages"][0]["content"]


def test_cache_hit_needs_no_server(tmp_path: Path, record: ClinicalRecord) -> None:
    cache = tmp_path / "c"
    with stub_server([Reply(respond=_by_transcript(record))]) as srv:
        cfg = _cfg(srv.base_url, server={"mode": "external", "base_url": srv.base_url, "model": "stub-model"})
        first = structure_many(ITEMS, cfg, cache_dir=cache, log_dir=tmp_path)
    # server gone: everything comes from the cache (model named in the config, so nothing is asked)
    again = structure_many(ITEMS, cfg, cache_dir=cache, log_dir=tmp_path)
    assert [e.record for e in again] == [e.record for e in first]


def test_server_down_gives_failures_with_reason(tmp_path: Path) -> None:
    cfg = _cfg("http://127.0.0.1:9", server={"mode": "external", "base_url": "http://127.0.0.1:9", "model": "m"})
    envs = structure_many(ITEMS[:2], cfg, cache_dir=tmp_path, log_dir=tmp_path)
    assert all(e.failed and "connection error" in e.error and e.attempts == 2 for e in envs)


def test_external_key_env_missing_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STRESSTEST_TEST_KEY", raising=False)
    cfg = _cfg(
        "http://127.0.0.1:9",
        server={"mode": "external", "base_url": "http://127.0.0.1:9", "api_key_env": "STRESSTEST_TEST_KEY"},
    )
    with pytest.raises(StructureError, match="STRESSTEST_TEST_KEY.*not set"):
        structure_many(ITEMS[:1], cfg, cache_dir=tmp_path, log_dir=tmp_path)


def test_external_key_is_read_from_env_and_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: ClinicalRecord
) -> None:
    monkeypatch.setenv("STRESSTEST_TEST_KEY", "sk-very-secret")
    with stub_server([Reply(record.model_dump_json())]) as srv:
        cfg = _cfg(
            srv.base_url,
            server={"mode": "external", "base_url": srv.base_url, "api_key_env": "STRESSTEST_TEST_KEY"},
        )
        envs = structure_many(ITEMS[:1], cfg, cache_dir=tmp_path / "c", log_dir=tmp_path / "l")
    assert srv.headers[-1]["authorization"] == "Bearer sk-very-secret"
    on_disk = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert "sk-very-secret" not in on_disk and "sk-very-secret" not in envs[0].model_dump_json()


def test_rules_backend_uses_the_extractor(tmp_path: Path, fake_rules: list[str], record: ClinicalRecord) -> None:
    envs = structure_many(ITEMS, LLMConfig(backend="rules"), cache_dir=tmp_path, log_dir=tmp_path)
    assert [e.record for e in envs] == [record] * 3
    assert {(e.backend, e.model, e.prompt_hash) for e in envs} == {("rules", "rules-test1", "fp-test1")}
    assert fake_rules == [i.transcript_text for i in ITEMS]
    structure_many(ITEMS, LLMConfig(backend="rules"), cache_dir=tmp_path, log_dir=tmp_path)
    assert len(fake_rules) == 3  # second run served from the cache


def test_fingerprints(fake_rules: list[str], record: ClinicalRecord) -> None:
    fp = structure_fingerprint(LLMConfig(backend="rules"))
    assert fp["model"] == "rules-test1" and fp["prompt_hash"] == "fp-test1" and fp["schema_hash"] == schema_hash()
    with stub_server([Reply(record.model_dump_json())]) as srv:
        fp2 = structure_fingerprint(_cfg(srv.base_url))
    assert fp2["model"] == "stub-model" and fp2["prompt_hash"] == structure_prompt(LLMConfig()).sha256
    assert json.dumps(fp2)  # manifest-serialisable


def test_managed_llama_command_binds_loopback_and_is_an_arg_list(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 64)
    cfg = LLMConfig(backend="openai", server={"model": str(gguf), "n_threads": 2})
    if server_mod.importlib.util.find_spec("llama_cpp") is None:
        with pytest.raises(StructureError, match="llama-cpp-python"):
            server_mod.server_command(cfg, 8123)
        return
    cmd = server_mod.server_command(cfg, 8123)
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--port") + 1] == "8123"
    assert cmd[cmd.index("--seed") + 1] == "1234" and cmd[cmd.index("--model_alias") + 1] == "m.gguf"
    assert server_mod.model_identity(cfg).startswith("m.gguf#")


def test_missing_gguf_and_vllm_without_model_are_config_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StructureError, match="expected an existing GGUF file"):
        server_mod.resolve_model(LLMConfig(backend="openai", server={"model": str(tmp_path / "no.gguf")}))
    # An external vLLM server without a model name has nothing to resolve.
    with pytest.raises(StructureError, match="needs a model id"):
        server_mod.resolve_model(
            LLMConfig(backend="openai", server={"engine": "vllm", "mode": "external", "base_url": "http://x"})
        )
    # A managed one without a model serves the bundled SmolLM2 checkpoint (converted in the server's interpreter).
    seen: list[tuple[str, Path]] = []

    def fake_checkpoint(python: str, cache_dir: Path) -> Path:
        seen.append((python, cache_dir))
        return tmp_path / "smollm2-135m-instruct-abc"

    monkeypatch.setattr(server_mod, "bundled_vllm_checkpoint", fake_checkpoint)
    monkeypatch.setenv("STRESSTEST_CACHE", str(tmp_path / "cache"))
    cfg = LLMConfig(backend="openai", server={"engine": "vllm"})
    assert server_mod.resolve_model(cfg) == str(tmp_path / "smollm2-135m-instruct-abc")
    assert server_mod.model_identity(cfg) == "smollm2-135m-instruct-abc"  # the same on every machine
    assert seen[0] == (server_mod.sys.executable, tmp_path / "cache")


def test_vllm_offline_without_vllm_gives_install_hint(tmp_path: Path) -> None:
    if server_mod.importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here; the install-hint path cannot be exercised")
    cfg = LLMConfig(backend="vllm-offline", server={"model": "Qwen/Qwen2.5-0.5B-Instruct"})
    with pytest.raises(StructureError, match="pip install"):
        structure_many(ITEMS[:1], cfg, cache_dir=tmp_path, log_dir=tmp_path)


def test_managed_server_that_dies_names_its_log(tmp_path: Path) -> None:
    if server_mod.importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp not importable: cannot start a managed llama.cpp server")
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"this is not a gguf file")
    cfg = LLMConfig(backend="openai", server={"model": str(bogus), "startup_timeout_s": 60})
    with pytest.raises(StructureError, match=r"exited with code .*log: .*llm-server-llama\.cpp-\d+\.log"):
        with server_mod.managed_server(cfg, tmp_path / "logs"):
            pass
    assert list((tmp_path / "logs").glob("llm-server-*.log"))
