"""The offline ``vllm.LLM`` engine (backend 'vllm-offline') for real, on the vLLM CPU build (integration).

vLLM is importable only in ``make install-vllm``'s venv, so the test runs a driver script with that interpreter:
the project's own :class:`~stresstest.llm.engine.LLMEngine` builds one ``vllm.LLM`` (float32, eager, no prefix
caching: the deterministic preset), structures two OSCE encounters in one batched ``LLM.chat`` call with the
record schema as a structured-output constraint, then again one at a time; a second engine cuts one at
``max_tokens``. The
driver has the ``__main__`` guard that vLLM's spawned workers need.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from vllm_cpu import ROOT, require_vllm_python

from stresstest.schema import ClinicalRecord

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VLLM_PY = require_vllm_python()

DRIVER = r"""
import json, sys
from pathlib import Path

from stresstest.cache import default_cache_dir
from stresstest.corpus.osce import load_osce
from stresstest.llm.checkpoint import find_smollm2_safetensors
from stresstest.llm.config import LLMConfig
from stresstest.llm.engine import LLMEngine
from stresstest.structure.stage import StructureItem, structure_many


def main() -> None:
    root, osce = Path(sys.argv[1]), Path(sys.argv[2])
    model = str(find_smollm2_safetensors(default_cache_dir()))
    base = {"backend": "vllm-offline", "decoding": {"max_tokens": 384, "repetition_penalty": 1.1},
            "server": {"engine": "vllm", "model": model, "preset": "deterministic", "cpu_kv_cache_gib": 1,
                       "max_num_seqs": 4, "n_ctx": 4096}}
    cfg = LLMConfig.model_validate(base)
    encs = {e.encounter_id: e for e in load_osce(osce)}
    items = [StructureItem(encounter_id=i, condition="clean", transcript_text=encs[i].truncated(5).reference_text())
             for i in ("CAR0001", "RES0002")]
    out = {}
    with LLMEngine(cfg, cache_dir=root / "cache", log_dir=root / "logs", progress=False) as eng:
        batch = structure_many(items, cfg, cache_dir=root / "cache-batch", log_dir=root / "logs", engine=eng)
        alone = [structure_many([it], cfg, cache_dir=root / f"cache-{it.encounter_id}", log_dir=root / "logs",
                                engine=eng)[0] for it in items]
        out["info"] = eng.info()
    # One engine serves one φ; a cut at max_tokens needs an engine of its own.
    short = cfg.model_copy(update={"decoding": cfg.decoding.model_copy(update={"max_tokens": 12})})
    with LLMEngine(short, cache_dir=root / "cache", log_dir=root / "logs", progress=False) as eng:
        cut = structure_many(items[:1], short, cache_dir=root / "cache-cut", log_dir=root / "logs", engine=eng)
    dump = lambda envs: [json.loads(e.model_dump_json()) for e in envs]  # noqa: E731
    out["batch"], out["alone"], out["cut"] = dump(batch), dump(alone), dump(cut)
    print("STRESSTEST-OFFLINE " + json.dumps(out))


if __name__ == "__main__":
    main()
"""


def test_offline_engine_structures_in_one_batch_deterministically(tmp_path: Path) -> None:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    done = subprocess.run(  # noqa: S603 - fixed argument list
        [str(VLLM_PY), str(script), str(tmp_path), str(ROOT / "data" / "osce" / "transcripts")],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        check=False,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("STRESSTEST-OFFLINE ")), None)
    assert done.returncode == 0 and line, done.stderr[-3000:]
    out = json.loads(line.split(" ", 1)[1])
    info = out["info"]
    assert info["engine"] == "vllm-offline" and info["starts"] == 1 and info["roles"] == ["structure"]
    kw = info["engine_kwargs"]
    assert kw["dtype"] == "float32" and kw["enforce_eager"] is True and kw["enable_prefix_caching"] is False
    assert kw["generation_config"] == "vllm" and info["phi_sent"]["repetition_penalty"] == 1.1
    batch, alone = out["batch"], out["alone"]
    assert [e["encounter_id"] for e in batch] == ["CAR0001", "RES0002"]
    for env in batch:
        if env["failed"]:
            assert env["error"] and env["raw_text"] is not None
        else:
            ClinicalRecord.model_validate(env["record"])
    assert any(not e["failed"] for e in batch), [e["error"] for e in batch]
    # Batch-independent bytes: the raw text of each item is the same alone and inside the batch.
    assert [e["raw_text"] for e in batch] == [e["raw_text"] for e in alone]
    (cut,) = out["cut"]
    assert cut["failed"] and "finish_reason=length at max_tokens=12" in cut["error"]
