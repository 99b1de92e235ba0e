"""Benchmark LLM structuring: records/s, prompt and output tokens/s, latency, invalid/truncated rate.

The requests are the project's own structuring requests (instruction I, schema S, the run's φ) for real
transcripts — corpus reference texts, or the ASR transcripts of a finished run (``--transcripts RUN/transcripts``)
— sent without the stage cache, so every one is decoded. The engine is the run's
:class:`~stresstest.llm.engine.LLMEngine`: a managed llama.cpp / vLLM server, any OpenAI-compatible server
(``--base-url``), or the offline ``vllm.LLM`` (``--offline``); its start-up time is reported apart from the
throughput. ``--compare-rules`` also times the deterministic rules structurer on the same transcripts (a ratio
measured in the same run, since absolute numbers on a shared machine say little).

Usage::

    python scripts/bench_llm.py --config configs/demo-llm.yaml --n 6                 # managed llama.cpp, CPU
    python scripts/bench_llm.py --base-url http://127.0.0.1:8000 --engine vllm --model Qwen/Qwen2.5-7B-Instruct \\
        --n 512 --concurrency 128                                                      # served vLLM
    python scripts/bench_llm.py --offline --model Qwen/Qwen2.5-7B-Instruct --n 512     # vllm.LLM, one batch
    python scripts/bench_llm.py ... --batch-invariant                                  # cost of batch invariance
    python scripts/bench_llm.py --config configs/demo-vllm.yaml --corpus data/osce/transcripts \
        --preset default                                                               # vLLM CPU, vs deterministic

Prints one Markdown table row per run (and ``--json`` writes the numbers).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from stresstest.llm.client import CallResult
from stresstest.llm.config import LLMConfig
from stresstest.llm.engine import LLMEngine
from stresstest.structure.contract import output_contract
from stresstest.structure.stage import structure_prompt

ROOT = Path(__file__).resolve().parents[1]


def _transcripts(args: argparse.Namespace) -> list[tuple[str, str]]:
    if args.transcripts:
        out = []
        for p in sorted(Path(args.transcripts).rglob("*.json")):
            t = json.loads(p.read_text())
            out.append((f"{p.parent.name}/{p.stem}", str(t["text"])))
        return out[: args.n]
    from stresstest.corpus import load_corpus

    encs = load_corpus(args.corpus_kind, args.corpus, limit=args.n)
    return [(e.encounter_id, e.truncated(args.max_turns).reference_text()) for e in encs]


def _config(args: argparse.Namespace) -> LLMConfig:
    if args.config:
        from stresstest.config import load_config

        cfg = load_config(args.config).structure
    elif args.offline:
        cfg = LLMConfig(backend="vllm-offline", server={"model": args.model})
    else:
        if not args.base_url:
            raise SystemExit("bench_llm: give --config, --base-url or --offline")
        cfg = LLMConfig(
            backend="openai",
            server={"mode": "external", "base_url": args.base_url, "model": args.model, "engine": args.engine},
        )
    upd: dict[str, Any] = {"max_retries": 0}
    if args.concurrency:
        upd["concurrency"] = args.concurrency
    if args.max_tokens:
        upd["decoding"] = cfg.decoding.model_copy(update={"max_tokens": args.max_tokens})
    srv_upd: dict[str, Any] = {}
    if args.batch_invariant:
        srv_upd["batch_invariant"] = True
    if args.preset:
        srv_upd["preset"] = args.preset
    if srv_upd:
        upd["server"] = cfg.server.model_copy(update=srv_upd)
    return cfg.model_copy(update=upd)


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))
    return xs[k]


def bench(cfg: LLMConfig, texts: list[tuple[str, str]], log_dir: Path) -> dict[str, Any]:
    """Structure every transcript once (no cache) and measure; returns the numbers."""
    prompt = structure_prompt(cfg)
    contract = output_contract(cfg.prompt_version)
    convs = [contract.messages(prompt, transcript=t) for _, t in texts]
    with LLMEngine(cfg, cache_dir=log_dir, log_dir=log_dir, progress=True) as engine:
        t_start = time.monotonic()
        engine.start()
        startup_s = time.monotonic() - t_start
        t0 = time.monotonic()
        results: list[CallResult[Any]]
        if cfg.backend == "vllm-offline":
            from stresstest.llm.offline import generate_offline

            results = generate_offline(convs, contract.model, contract.schema, cfg, llm=engine.llm())
            per_call = False
        else:
            client = engine.client()
            with ThreadPoolExecutor(max_workers=engine.concurrency) as pool:
                results = list(
                    pool.map(
                        lambda m: client.complete(
                            m, contract.model, schema_name=contract.schema_name, schema=contract.schema, label="bench"
                        ),
                        convs,
                    )
                )
            per_call = True
        wall = time.monotonic() - t0
        info = engine.info()
    n = len(results)
    truncated = sum(1 for r in results if r.finish_reason == "length")
    invalid = sum(1 for r in results if r.failed and r.finish_reason != "length")
    p_tok = [r.prompt_tokens for r in results if r.prompt_tokens is not None]
    o_tok = [r.completion_tokens for r in results if r.completion_tokens is not None]
    lat = [r.elapsed_s for r in results] if per_call else []
    return {
        "engine": info["engine"],
        "model": info["model"],
        "n": n,
        "concurrency": info["concurrency"] if per_call else "batch",
        "startup_s": round(startup_s, 2),
        "wall_s": round(wall, 2),
        "records_per_s": n / wall if wall else None,
        "prompt_tokens_per_s": sum(p_tok) / wall if p_tok and wall else None,
        "output_tokens_per_s": sum(o_tok) / wall if o_tok and wall else None,
        "mean_prompt_tokens": statistics.mean(p_tok) if p_tok else None,
        "mean_output_tokens": statistics.mean(o_tok) if o_tok else None,
        "latency_p50_s": _pct(lat, 0.5),
        "latency_p95_s": _pct(lat, 0.95),
        "invalid_rate": invalid / n if n else None,
        "truncated_rate": truncated / n if n else None,
        "phi_sent": info["phi_sent"],
        "batch_invariant": bool(info.get("batch_invariant")),
        "preset": info.get("preset"),
        "engine_options": info.get("engine_options"),
    }


def rules_rate(texts: list[tuple[str, str]]) -> float:
    """Records/s of the deterministic rules structurer on the same transcripts (after one warm-up call)."""
    from stresstest.structure.rules import extract_record

    extract_record(texts[0][1])
    t0 = time.perf_counter()
    for _, t in texts:
        extract_record(t)
    return len(texts) / (time.perf_counter() - t0)


def _fmt(v: Any, nd: int = 2) -> str:
    return "–" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="run config whose `structure` section is used (managed server etc.)")
    ap.add_argument("--base-url", help="an OpenAI-compatible server (external mode)")
    ap.add_argument("--engine", choices=["llama.cpp", "vllm"], default="vllm", help="dialect of --base-url")
    ap.add_argument("--offline", action="store_true", help="the offline vllm.LLM engine (GPU)")
    ap.add_argument("--model", help="model id (--base-url: name sent; --offline: HF id or dir)")
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpora" / "osce" / "transcripts"))
    ap.add_argument("--corpus-kind", default="osce")
    ap.add_argument("--transcripts", help="a run's transcripts/ dir (ASR output) instead of the corpus")
    ap.add_argument("--n", type=int, default=8, help="number of transcripts")
    ap.add_argument("--max-turns", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=0, help="requests in flight (default: the config's)")
    ap.add_argument("--max-tokens", type=int, default=0, help="override φ's max_tokens")
    ap.add_argument("--batch-invariant", action="store_true", help="vLLM batch-invariant kernels")
    ap.add_argument(
        "--preset",
        choices=["default", "deterministic"],
        help="vLLM engine preset (default: the config's); the cost of determinism is the ratio",
    )
    ap.add_argument("--compare-rules", action="store_true", help="also time the rules structurer")
    ap.add_argument("--out", default="runs/bench-llm", help="where the server log goes (OUT/logs)")
    ap.add_argument("--json", help="write the numbers here")
    args = ap.parse_args(argv)

    texts = _transcripts(args)
    if not texts:
        print("bench_llm: no transcripts found", file=sys.stderr)
        return 2
    cfg = _config(args)
    res = bench(cfg, texts, Path(args.out) / "logs")
    if args.compare_rules:
        r = rules_rate(texts)
        res["rules_records_per_s"] = r
        res["llm_over_rules"] = res["records_per_s"] / r if res["records_per_s"] else None
    cols = [
        "engine",
        "preset",
        "n",
        "concurrency",
        "startup_s",
        "records_per_s",
        "prompt_tokens_per_s",
        "output_tokens_per_s",
        "latency_p50_s",
        "latency_p95_s",
        "invalid_rate",
        "truncated_rate",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    print("| " + " | ".join(_fmt(res[c], 3 if c == "records_per_s" else 2) for c in cols) + " |")
    if args.compare_rules:
        print(f"rules structurer: {res['rules_records_per_s']:.1f} records/s; LLM/rules = {res['llm_over_rules']:.2e}")
    print(
        f"model {res['model']}; mean prompt {_fmt(res['mean_prompt_tokens'], 0)} tokens, "
        f"mean output {_fmt(res['mean_output_tokens'], 0)} tokens; φ sent {res['phi_sent']}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
