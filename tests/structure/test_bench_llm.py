"""scripts/bench_llm.py against the scripted stub server: counts, rates and the truncated/invalid split."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from support.llm_stub import Reply, stub_server

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_llm.py"


def _bench():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("bench_llm", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_reports_rates_and_failure_split(tmp_path: Path, output_json: str) -> None:
    tdir = tmp_path / "transcripts" / "clean"
    tdir.mkdir(parents=True)
    for i in range(4):
        (tdir / f"E{i}.json").write_text(json.dumps({"text": f"Patient: cough for {i} days."}))
    script = [Reply(output_json), Reply('{"x"', finish_reason="length"), Reply("not json"), Reply(output_json)]
    with stub_server(script) as srv:
        rc = _bench().main(
            [
                "--base-url",
                srv.base_url,
                "--engine",
                "llama.cpp",
                "--model",
                "stub-model",
                "--transcripts",
                str(tmp_path / "transcripts"),
                "--n",
                "4",
                "--concurrency",
                "1",
                "--out",
                str(tmp_path / "out"),
                "--json",
                str(tmp_path / "r.json"),
            ]
        )
    assert rc == 0
    res = json.loads((tmp_path / "r.json").read_text())
    assert res["n"] == 4 and res["truncated_rate"] == 0.25 and res["invalid_rate"] == 0.25
    assert res["records_per_s"] > 0 and res["latency_p50_s"] is not None and res["latency_p95_s"] >= 0
    assert len(srv.requests) == 4  # no cache, no retries: one request per transcript
    assert res["phi_sent"]["repeat_penalty"] == 1.1
