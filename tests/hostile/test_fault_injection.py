"""Fault injection between the client and a REAL llama.cpp server (SmolLM2-135M on 127.0.0.1).

A proxy (``tests/support/faultproxy.py``) answers every other chat request with a fault —
HTTP 503, a dropped connection, a body that is not JSON, the real body cut in
half, a request held past the client's timeout — rotating through all five
(10 requests: each kind once, between real answers; the smallest input on
which every kind is injected, issue 35).
Promise checked: every item ends either structured (a record valid against the
schema) or recorded as failed with its reason; none is lost or duplicated, and
each injected fault shows up as a failure naming what happened.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from support.faultproxy import FAULT_KINDS, FaultProxy

from stresstest.llm.config import LLMConfig
from stresstest.schema import ClinicalRecord
from stresstest.structure.stage import StructureItem, structure_many

pytestmark = [pytest.mark.integration, pytest.mark.slow]

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip("llama_cpp is not importable: install llama-cpp-python[server]", allow_module_level=True)

SNIPPETS = [
    "Doctor: What brings you in? Patient: Chest pain since last night, worse when I breathe in.",
    "Doctor: Any allergies? Patient: Penicillin, I get a rash.",
    "Doctor: Do you smoke? Patient: No, never.",
    "Doctor: Any medicines? Patient: I take metformin 500 mg twice a day.",
    "Doctor: How long have you had the cough? Patient: About three weeks, with some green phlegm.",
]
PERIOD = 2  # every other request is faulted (k % 2 == 1) ...
N_ITEMS = 10  # ... so 10 requests = 5 faults, one of each kind, each after a real answer
HOLD_S = 22.0  # longer than the client timeout (20 s), which a 64-token answer on 2 busy CPU cores stays under
# Answers are capped at 64 tokens to keep the suite in CI's budget: most real answers are then cut at max_tokens
# and recorded as failed with that reason — exactly the path a server fault takes, which is what is tested.
MAX_TOKENS = 64


def _cfg(**kw: object) -> LLMConfig:
    base: dict[str, object] = {
        "backend": "openai",
        "concurrency": 1,
        "max_retries": 0,
        "backoff_s": 0.1,
        "timeout_s": HOLD_S - 2,
        "decoding": {"max_tokens": MAX_TOKENS},
        "server": {"startup_timeout_s": 180},
    }
    base.update(kw)
    return LLMConfig.model_validate(base)


def test_every_item_is_structured_or_a_recorded_failure(llama_server, tmp_path: Path) -> None:
    server = llama_server(_cfg())  # the session's llama.cpp server (tests/conftest.py)
    proxy = FaultProxy(server.base_url, period=PERIOD, hold_s=HOLD_S).start()
    try:
        cfg = _cfg(server={"mode": "external", "base_url": proxy.base_url, "model": server.model})
        items = [
            StructureItem(
                encounter_id=f"E{i:02d}",
                condition="clean",
                transcript_text=f"{SNIPPETS[i % len(SNIPPETS)]} (visit {i})",
            )
            for i in range(N_ITEMS)
        ]
        envs = structure_many(items, cfg, cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs")
    finally:
        proxy.stop()
    faults = [(k, kind) for k, kind in proxy.log if kind != "ok"]
    assert {kind for _, kind in faults} == set(FAULT_KINDS), proxy.log  # every kind was injected
    assert proxy.n_posts == N_ITEMS and len(faults) == N_ITEMS // PERIOD == len(FAULT_KINDS)
    # None lost, none duplicated, same order.
    assert [(e.encounter_id, e.condition) for e in envs] == [(i.encounter_id, i.condition) for i in items]
    for env in envs:
        if env.failed:
            assert env.record is None and env.error, env
        else:
            ClinicalRecord.model_validate_json(env.record.model_dump_json())  # type: ignore[union-attr]
    # Each faulted request made its item fail, with a reason that says what happened.
    expect = {"http_5xx": "503", "drop": "connection", "invalid_json": "", "truncated_json": "", "timeout": "timeout"}
    for k, kind in faults:
        env = envs[k]
        assert env.failed, (kind, env)
        assert expect[kind] in (env.error or ""), (kind, env.error)
    # The answers that were not faulted came from the real server: a record, or a recorded reason (an answer
    # cut at max_tokens, or — on a very busy machine — the client's own timeout).
    for k, env in enumerate(envs):
        if k not in {f for f, _ in faults} and env.failed:
            assert env.error and (
                "max_tokens" in env.error or "timeout" in env.error or "schema" in env.error or "JSON" in env.error
            ), env.error
    n_ok = sum(not e.failed for e in envs)
    print(
        f"\nfault proxy: {len(faults)} faults injected ({', '.join(k for _, k in faults)}); "
        f"{n_ok}/{len(envs)} structured, {len(envs) - n_ok} recorded failures"
    )
