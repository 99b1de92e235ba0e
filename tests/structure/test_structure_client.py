"""Retry / validation paths of the OpenAI-compatible client against a local stub server."""

from __future__ import annotations

import json

import pytest
from support.llm_stub import Reply, stub_server

from stresstest.llm.client import ChatClient, Endpoint, parse_output
from stresstest.llm.config import LLMConfig
from stresstest.schema import ClinicalRecord, record_json_schema

MSGS = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def _cfg(**kw: object) -> LLMConfig:
    base: dict[str, object] = {"backend": "openai", "max_retries": 2, "backoff_s": 0.01, "timeout_s": 5.0}
    base.update(kw)
    return LLMConfig.model_validate(base)


def _call(srv_url: str, cfg: LLMConfig, model: str = "stub-model"):  # noqa: ANN202
    with ChatClient(Endpoint(base_url=srv_url, model=model), cfg) as client:
        return client.complete(MSGS, ClinicalRecord, schema_name="ClinicalRecord", schema=record_json_schema())


def test_valid_answer_is_parsed_and_request_carries_phi_and_schema(record: ClinicalRecord) -> None:
    with stub_server([Reply(record.model_dump_json())]) as srv:
        res = _call(srv.base_url, _cfg())
    assert not res.failed and res.parsed == record and res.attempts == 1
    body = srv.requests[0]
    assert body["temperature"] == 0.0 and body["seed"] == 1234 and body["top_p"] == 1.0
    assert body["max_tokens"] == 1536 and body["messages"] == MSGS and body["model"] == "stub-model"
    # the whole φ, in llama-cpp-python's dialect (its own defaults: repeat_penalty 1.1, top_k 40, min_p 0.05);
    # φ's own default repetition penalty is 1.1 (issue 26: small models loop at 1.0)
    assert body["repeat_penalty"] == 1.1 and body["top_k"] == 0 and body["min_p"] == 0.0
    assert body["presence_penalty"] == 0.0 and body["frequency_penalty"] == 0.0
    assert "repetition_penalty" not in body
    # llama.cpp dialect by default for engine llama.cpp
    assert body["response_format"] == {"type": "json_object", "schema": record_json_schema()}
    # exactly what the manifest records as phi_sent
    from stresstest.llm.client import phi_payload

    phi = phi_payload(_cfg())
    assert {k: body[k] for k in phi} == phi
    assert set(body) == set(phi) | {"model", "messages", "stream", "response_format"}
    assert res.finish_reason == "stop"


def test_json_schema_dialect_for_vllm(record: ClinicalRecord) -> None:
    cfg = _cfg(server={"engine": "vllm", "model": "m"})
    with stub_server([Reply(record.model_dump_json())]) as srv:
        assert not _call(srv.base_url, cfg).failed
    body = srv.requests[0]
    assert body["repetition_penalty"] == 1.1 and body["top_k"] == -1 and "repeat_penalty" not in body
    rf = body["response_format"]
    assert rf == {
        "type": "json_schema",
        "json_schema": {"name": "ClinicalRecord", "schema": record_json_schema()},
    }


def test_malformed_json_is_retried_then_succeeds(record: ClinicalRecord) -> None:
    with stub_server([Reply('{"triage": {"level": '), Reply(record.model_dump_json())]) as srv:
        res = _call(srv.base_url, _cfg())
    assert res.parsed == record and res.attempts == 2 and len(srv.requests) == 2


def test_malformed_json_every_time_is_a_recorded_failure_with_raw_text() -> None:
    with stub_server([Reply("not json at all")]) as srv:
        res = _call(srv.base_url, _cfg())
    assert res.failed and res.parsed is None
    assert res.raw_text == "not json at all"
    assert "invalid JSON" in res.error and "after 3 attempts" in res.error and srv.base_url in res.error
    assert len(srv.requests) == 3


def test_500s_are_retried_with_backoff(record: ClinicalRecord) -> None:
    script = [
        Reply(status=500, body='{"error":"boom"}'),
        Reply(status=503, body="busy"),
        Reply(record.model_dump_json()),
    ]
    with stub_server(script) as srv:
        res = _call(srv.base_url, _cfg())
    assert res.parsed == record and res.attempts == 3


def test_persistent_500_fails_with_status_and_body() -> None:
    with stub_server([Reply(status=500, body='{"error":"model crashed"}')]) as srv:
        res = _call(srv.base_url, _cfg(max_retries=1))
    assert res.failed and "HTTP 500" in res.error and "model crashed" in res.error
    assert res.raw_text == '{"error":"model crashed"}' and res.attempts == 2


def test_client_errors_are_not_retried() -> None:
    with stub_server([Reply(status=400, body='{"error":"bad request"}')]) as srv:
        res = _call(srv.base_url, _cfg())
    assert res.failed and res.attempts == 1 and "HTTP 400" in res.error and len(srv.requests) == 1


def test_slow_answer_times_out_then_recovers(record: ClinicalRecord) -> None:
    script = [Reply(record.model_dump_json(), delay_s=1.5), Reply(record.model_dump_json())]
    with stub_server(script) as srv:
        res = _call(srv.base_url, _cfg(timeout_s=0.5))
    assert res.parsed == record and res.attempts == 2


def test_always_slow_is_a_timeout_failure(record: ClinicalRecord) -> None:
    with stub_server([Reply(record.model_dump_json(), delay_s=1.0)]) as srv:
        res = _call(srv.base_url, _cfg(timeout_s=0.3, max_retries=1))
    assert res.failed and "timeout after 0.3s" in res.error and res.attempts == 2


def test_truncated_output_at_temperature_0_fails_at_once_with_the_partial_text(record: ClinicalRecord) -> None:
    partial = record.model_dump_json()[:40]
    with stub_server([Reply(partial, finish_reason="length")]) as srv:
        res = _call(srv.base_url, _cfg())
    assert res.failed and "truncated output (finish_reason=length at max_tokens=1536" in res.error
    assert "not retried" in res.error and "whitespace runaway" not in res.error
    assert res.raw_text == partial and res.attempts == 1 and len(srv.requests) == 1


def test_truncated_output_above_temperature_0_is_retried(record: ClinicalRecord) -> None:
    partial = record.model_dump_json()[:40]
    with stub_server([Reply(partial, finish_reason="length"), Reply(record.model_dump_json())]) as srv:
        res = _call(srv.base_url, _cfg(decoding={"temperature": 0.7}))
    assert res.parsed == record and res.attempts == 2


def test_whitespace_runaway_is_named_in_the_reason() -> None:
    runaway = '{"chief_complaint": "cough",' + "\n" * 300
    with stub_server([Reply(runaway, finish_reason="length")]) as srv:
        res = _call(srv.base_url, _cfg())
    assert res.failed and res.attempts == 1
    assert "whitespace runaway: output ends in 300 whitespace characters" in res.error


def test_schema_violation_is_a_failure_naming_the_field() -> None:
    bad = json.dumps({"triage": {"level": "critical"}})
    with stub_server([Reply(bad)]) as srv:
        res = _call(srv.base_url, _cfg(max_retries=0))
    assert res.failed and "schema violation" in res.error and "triage.level" in res.error
    assert res.raw_text == bad


def test_dropped_connection_is_retried(record: ClinicalRecord) -> None:
    with stub_server([Reply(drop=True), Reply(record.model_dump_json())]) as srv:
        res = _call(srv.base_url, _cfg())
    assert res.parsed == record and res.attempts == 2


def test_malformed_response_body_is_retried_and_reported() -> None:
    with stub_server([Reply(body='{"unexpected": true}')]) as srv:
        res = _call(srv.base_url, _cfg(max_retries=0))
    assert res.failed and "malformed response" in res.error


def test_connection_refused_reports_server_health(record: ClinicalRecord) -> None:
    with stub_server([Reply(record.model_dump_json())]) as srv:
        url = srv.base_url
    ep = Endpoint(base_url=url, model="m", health=lambda: "managed LLM server exited with code -9 (log: x.log)")
    with ChatClient(ep, _cfg(max_retries=1)) as client:
        res = client.complete(MSGS, ClinicalRecord, schema_name="ClinicalRecord")
    assert res.failed and "connection error" in res.error and "exited with code -9" in res.error
    assert res.attempts == 2


def test_code_fence_is_tolerated(record: ClinicalRecord) -> None:
    assert parse_output(f"```json\n{record.model_dump_json()}\n```", ClinicalRecord) == record


def test_api_key_is_sent_as_bearer_and_kept_out_of_repr(record: ClinicalRecord) -> None:
    with stub_server([Reply(record.model_dump_json())]) as srv:
        ep = Endpoint(base_url=srv.base_url, model="m", api_key="sk-secret")
        with ChatClient(ep, _cfg()) as client:
            assert not client.complete(MSGS, ClinicalRecord, schema_name="r").failed
    assert srv.headers[0]["authorization"] == "Bearer sk-secret"
    assert "sk-secret" not in repr(ep)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_bounded_concurrency_client_is_thread_safe(record: ClinicalRecord, concurrency: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    cfg = _cfg(concurrency=concurrency)
    with (
        stub_server([Reply(record.model_dump_json(), delay_s=0.05)]) as srv,
        ChatClient(Endpoint(base_url=srv.base_url, model="m"), cfg) as client,
        ThreadPoolExecutor(concurrency) as pool,
    ):
        results = list(pool.map(lambda _: client.complete(MSGS, ClinicalRecord, schema_name="r"), range(8)))
    assert all(r.parsed == record for r in results) and len(srv.requests) == 8


def test_a_dead_proxy_in_the_environment_never_stands_between_us_and_a_loopback_server(
    monkeypatch: pytest.MonkeyPatch, record: ClinicalRecord
) -> None:
    from stresstest.llm.client import list_models
    from stresstest.net import is_loopback_url

    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # nothing listens there: a proxied request fails
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with stub_server([Reply(record.model_dump_json())]) as srv:
        res = _call(srv.base_url, _cfg(max_retries=0))
        assert not res.failed and res.parsed == record
        assert list_models(srv.base_url) == ["stub-model"]
    assert is_loopback_url("http://127.0.0.1:8000") and is_loopback_url("http://localhost:1")
    assert is_loopback_url("http://[::1]:80") and not is_loopback_url("https://api.example.com/v1")
