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

from stresstest.schema import ClinicalRecord, RecordEnvelope
from stresstest.structure.config import StructureConfig
from stresstest.structure.server import ServerProcess
from stresstest.structure.stage import StructureItem, structure_many

pytestmark = pytest.mark.integration

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip(
        "llama_cpp is not importable: install llama-cpp-python[server] to run the real-server tests",
        allow_module_level=True,
    )

OSCE = Path(__file__).resolve().parents[2].parent / "shared" / "corpora" / "osce"


def _osce_items(ids: list[str], max_turns: int, condition: str = "clean") -> list[StructureItem]:
    from stresstest.corpus.osce import load_osce

    if not OSCE.is_dir():
        pytest.skip(f"OSCE corpus not found at {OSCE}")
    encs = {e.encounter_id: e for e in load_osce(OSCE)}
    return [
        StructureItem(
            encounter_id=i, condition=condition, transcript_text=encs[i].truncated(max_turns).reference_text()
        )
        for i in ids
    ]


def _cfg(**kw: object) -> StructureConfig:
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
    return StructureConfig.model_validate(base)


def _check_outcome(env: RecordEnvelope) -> None:
    if env.failed:
        assert env.record is None and env.error and env.raw_text is not None, env
    else:
        assert env.record is not None
        ClinicalRecord.model_validate_json(env.record.model_dump_json())


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
    print(
        f"\nSmolLM2-135M: {ok}/{len(first)} valid records, {len(first) / dt:.3f} records/s incl. server start"
    )
    # A fresh cache and a fresh server: same records (or the same failures) again.
    second = structure_many(items, cfg, cache_dir=tmp_path / "cache2", log_dir=tmp_path / "logs2")
    assert [e.record for e in second] == [e.record for e in first]
    assert [e.raw_text for e in second] == [e.raw_text for e in first]
    assert all(not e.extra["cached"] for e in second)
    assert list((tmp_path / "logs1").glob("llm-server-llama.cpp-*.log"))


def test_sigkill_mid_batch_records_failures_and_rerun_completes(tmp_path: Path) -> None:
    items = _osce_items(["CAR0001", "RES0002"], max_turns=6) + _osce_items(
        ["CAR0001", "RES0002"], max_turns=8, condition="babble_5db"
    )
    cache, logs = tmp_path / "cache", tmp_path / "logs"
    base = _cfg()
    proc = ServerProcess(base, logs).start()
    port = proc.port
    cfg = base.model_copy(
        update={
            "server": base.server.model_copy(
                update={"mode": "external", "base_url": proc.base_url, "model": None}
            )
        }
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
            assert b.extra["cached"] is True and b.record == a.record
        else:
            assert not b.extra["cached"]
            assert b.error is None or "connection error" not in b.error


def test_guard_agent_and_judge_on_the_real_server(tmp_path: Path) -> None:
    from stresstest.metrics.judge_llm import llm_judge_many
    from stresstest.mitigation import mitigate_many

    items = _osce_items(["CAR0001"], max_turns=6, condition="babble_5db")
    cfg = _cfg()
    (env,) = mitigate_many(items, cfg, cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs")
    _check_outcome(env)
    if not env.failed:
        draft = ClinicalRecord.model_validate(env.extra["draft_record"])
        ids = {c.id for c in env.record.claims} | {f.id for f in env.record.safety_flags}
        assert ids <= {c.id for c in draft.claims} | {f.id for f in draft.safety_flags}
        assert env.extra["fields_nulled"] <= env.extra["fields_total"]
        print(
            f"\nguard agent: {env.extra['fields_total']} draft fields, {env.extra['fields_nulled']} nulled, "
            f"{env.extra['quotes_discarded']}/{env.extra['quotes_total']} quotes discarded, "
            f"{env.extra['guard_added_dropped']} guard additions dropped"
        )
        (jr,) = llm_judge_many(
            [("CAR0001/babble_5db_guard", env.record, draft)],
            cfg,
            cache_dir=tmp_path / "cache",
            log_dir=tmp_path / "logs",
        )
        assert jr.judge.startswith("llm:SmolLM2-135M-Instruct.Q4_1.gguf#") and jr.judge.endswith("@judge_v1")
        assert jr.score in {1, 2, 3, 4, 5} or (jr.score is None and "judge call failed" in jr.reasons[0])
        print(f"LLM judge: score {jr.score}")
    else:
        print(f"\nguard agent: recorded failure: {env.error}")


def test_serve_background_binds_loopback_and_stops(tmp_path: Path) -> None:
    import httpx

    from stresstest.structure.server import serve

    proc = serve(_cfg(), foreground=False, log_dir=tmp_path)
    try:
        assert proc.base_url.startswith("http://127.0.0.1:")
        models = httpx.get(f"{proc.base_url}/v1/models", timeout=10).json()["data"]
        assert models[0]["id"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    finally:
        proc.stop()
    assert proc.health() is not None and "exited" in proc.health()
