"""GPU ASR benchmark: every Whisper implementation side by side on the same 30-s windows.

The windows are the pipeline's own mixtures (TTS speech of the config's corpus, clean, babble 5 dB and
ambient 5 dB, built by the same stage functions and seed as a run), cut into the pipeline's fixed 30-s
windows. Implementations:

- ``openai-whisper as written``: the reference backend as it was before issue 11 (one ``whisper.decode``
  per window, no remainder pass, output cut at 224 tokens, fp32 weights cast to fp16 on every call,
  log-Mel on the CPU), batch 16; the baseline.
- ``openai-whisper reference``: :class:`OpenAIWhisperBackend` (batched ``whisper.transcribe`` seek loop,
  fp16 weights, log-Mel on the device), batch 16.
- ``faster-whisper bN``: :class:`FasterWhisperBackend` batched path (remainder pass kept), compute type
  ``auto`` (float16 on CUDA, int8 on CPU), batch 16 and 32.
- ``transformers sdpa``: Hugging Face ``WhisperForConditionalGeneration`` with SDPA attention, one
  ``generate`` per batch of 16 windows, when ``transformers`` is importable.
- ``vLLM offline no-ts``: ``asr.backend: vllm`` (:mod:`stresstest.asr.vllm_backend`), 64 windows per
  ``generate``, without timestamps (its agreement with the timestamped reference includes that difference),
  when ``vllm`` is importable; large-v3 from the HF cache (or ``--hf-model``), random weights as an HF folder.

Per implementation: × real time, windows/s, tokens per window, share of windows at the token limit, peak
GPU memory, agreement with the reference (1 − WER against the fixed reference's text, pooled), and
efficiency against the floor: a window needs ≥ the encoder + decoder FLOPs at the GPU's peak rate and ≥
the decoder's cross-attention KV reads (every generated token reads every layer's 1500-frame K and V) at
its memory bandwidth; ``floor = max(flop_time, byte_time)`` per window (large-v3, 150 tokens: ≈ 2.9 TFLOP
and ≈ 37 GB, ≈ 8 ms on an H200), efficiency = floor / measured time per window.

Without large-v3 weights (``--random`` or none found) it builds randomly initialised large-v3-sized models
(English vocabulary) and forces fixed decode lengths of 150 and 224 tokens (end-of-text and timestamps
suppressed): throughput only, labelled so; agreement is then not reported.

``--device cpu --tiny``: smoke mode on the bundled tiny.en (real weights; converted for openai-whisper),
a few windows; prints the same table. No network is used in any mode.

Usage::

    python scripts/bench_gpu.py                        # CUDA, large-v3 (HF cache / ~/.cache/whisper) or random
    python scripts/bench_gpu.py --device cpu --tiny    # CI smoke
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stresstest.asr.backends import (  # noqa: E402
    BUNDLED_TINY_EN,
    FasterWhisperBackend,
    OpenAIWhisperBackend,
    WindowResult,
    bundled_tiny_en_path,
    release_asr_models,
)
from stresstest.asr.base import DecodingOptions, split_windows  # noqa: E402
from stresstest.audio import SAMPLE_RATE_HZ  # noqa: E402

LARGE_V3 = dict(n_mels=128, n_audio_ctx=1500, n_audio_state=1280, n_audio_head=20, n_audio_layer=32,
                n_vocab=51864, n_text_ctx=448, n_text_state=1280, n_text_head=20, n_text_layer=32)
# Dense fp16 tensor peak (FLOP/s) and HBM bandwidth (B/s) by device-name substring.
PEAKS = {"H200": (989e12, 4.8e12), "H100": (989e12, 3.35e12), "A100": (312e12, 2.0e12), "L40S": (362e12, 0.864e12),
         "A10": (125e12, 0.6e12), "L4": (121e12, 0.3e12), "4090": (165e12, 1.0e12)}


# ----------------------------------------------------------------------------------------------- windows


def pipeline_windows(config: Path, n_min: int, cache: Path, max_turns: int | None, n_enc: int | None) -> list[dict]:
    """≥ ``n_min`` 30-s windows of the pipeline's own clean / babble 5 dB / ambient 5 dB mixtures."""
    from stresstest.audio import read_wav_exact
    from stresstest.config import load_config
    from stresstest.corpus import load_corpus
    from stresstest.noise import NoiseSpec, make_noise_source
    from stresstest.noise.stage import MixJob, build_mixtures
    from stresstest.speech import speech_for

    cfg = load_config(config)
    all_encs = load_corpus(cfg.corpus.kind, cfg.corpus.path)  # the babble bank draws on the whole corpus
    encs = load_corpus(cfg.corpus.kind, cfg.corpus.path, ids=cfg.corpus.ids, limit=cfg.corpus.limit)
    if n_enc is not None:
        encs = encs[:n_enc]
    small = n_min < 16  # smoke mode: a small babble bank (its TTS dominates a cold smoke run)
    babble = (NoiseSpec(family="babble", kind="builtin", bank_max_sentences=12, n_talkers_min=3, n_talkers_max=4)
              if small else NoiseSpec(family="babble", kind="builtin", bank_max_sentences=120))
    specs = {"babble": babble, "ambient": NoiseSpec(family="ambient", kind="builtin")}
    sources = {f: make_noise_source(s, encounters=all_encs, cache_dir=cache) for f, s in specs.items()}
    out: list[dict] = []
    for enc in encs:
        enc = enc.truncated(max_turns) if max_turns else enc
        speech = speech_for(enc, cache)
        paths = {"clean": Path(speech.path)}
        for fam, spec in specs.items():
            got: dict[str, Any] = {}
            build_mixtures(MixJob(enc.encounter_id, fam, (5.0,), (f"{fam}_5db",)), speech, sources[fam],
                           spec.model_dump(mode="json"), seed=cfg.run.seed, cache_dir=cache,
                           on_done=lambda c, p, i, e, got=got: got.__setitem__(c, (p, e)))
            path, err = got[f"{fam}_5db"]
            if err is not None:
                raise SystemExit(f"bench_gpu: mixing {enc.encounter_id} {fam}: {err}")
            paths[f"{fam}_5db"] = Path(path)
        for cond, p in paths.items():
            for k, w in enumerate(split_windows(read_wav_exact(p))):
                out.append({"id": f"{enc.encounter_id}/{cond}/{k}", "audio": w})
        if len(out) >= n_min:
            break
    if len(out) < n_min:
        print(f"bench_gpu: only {len(out)} windows from {config} (asked for {n_min})", file=sys.stderr)
    return out


# ------------------------------------------------------------------------------------- implementations


def baseline_openai_whisper(model: Any, windows: list[np.ndarray], batch_size: int, fp16: bool) -> list[WindowResult]:
    """openai-whisper exactly as the backend was written before issue 11 (kept here as the baseline)."""
    import torch
    import whisper

    dec = whisper.DecodingOptions(task="transcribe", language="en", temperature=0.0, without_timestamps=False,
                                  suppress_blank=True, fp16=fp16)
    device = next(model.parameters()).device
    out: list[WindowResult] = []
    for i in range(0, len(windows), batch_size):
        chunk = windows[i : i + batch_size]
        mels = torch.stack([
            whisper.log_mel_spectrogram(whisper.pad_or_trim(torch.from_numpy(w.astype(np.float32))),
                                        n_mels=model.dims.n_mels)
            for w in chunk
        ]).to(device)
        with torch.inference_mode():
            results = whisper.decode(model, mels, dec)
        for r in results:
            skip = r.no_speech_prob > 0.6 and r.avg_logprob < -1.0
            out.append(WindowResult(text="" if skip else r.text.strip(), n_tokens=len(r.tokens),
                                    token_limit_hits=int(len(r.tokens) >= model.dims.n_text_ctx // 2)))
    return out


def hf_transformers(model: Any, windows: list[np.ndarray], batch_size: int, forced: int | None,
                    n_mels: int) -> list[WindowResult]:
    """HF transformers Whisper (SDPA): one ``generate`` per batch, 30-s windows, greedy, no remainder pass."""
    import torch
    import whisper

    device, dtype = next(model.parameters()).device, next(model.parameters()).dtype
    out: list[WindowResult] = []
    for i in range(0, len(windows), batch_size):
        chunk = windows[i : i + batch_size]
        feats = torch.stack([
            whisper.log_mel_spectrogram(whisper.pad_or_trim(torch.from_numpy(w.astype(np.float32)).to(device)),
                                        n_mels=n_mels)
            for w in chunk
        ]).to(dtype)
        kw: dict[str, Any] = {"do_sample": False, "num_beams": 1}
        if forced:
            kw.update(min_new_tokens=forced, max_new_tokens=forced)
        else:
            kw.update(max_new_tokens=220, return_timestamps=True, language="en", task="transcribe")
        with torch.inference_mode():
            seqs = model.generate(input_features=feats, **kw)
        seqs = seqs.sequences if hasattr(seqs, "sequences") else seqs
        for s in seqs.tolist():
            n = len(s)
            out.append(WindowResult(text="" if forced else _hf_decode(model, s), n_tokens=n,
                                    token_limit_hits=int(forced is not None or n >= 220)))
    return out


def _hf_decode(model: Any, ids: list[int]) -> str:
    import whisper

    tok = whisper.tokenizer.get_tokenizer(model.config.vocab_size >= 51865, num_languages=100)
    return str(tok.decode([t for t in ids if t < tok.eot])).strip()


# ----------------------------------------------------------------------------------------------- metrics


class GpuMemPeak:
    """Peak device memory in use (all allocators, CTranslate2 included) sampled every 10 ms."""

    def __init__(self, device: str) -> None:
        self.on = device.startswith("cuda")
        self.peak = 0
        self._stop = threading.Event()

    def __enter__(self) -> GpuMemPeak:
        if self.on:
            import torch

            torch.cuda.synchronize()
            free, total = torch.cuda.mem_get_info()
            self.base = total - free
            self._t = threading.Thread(target=self._poll, daemon=True)
            self._t.start()
        return self

    def _poll(self) -> None:
        import torch

        while not self._stop.is_set():
            free, total = torch.cuda.mem_get_info()
            self.peak = max(self.peak, total - free)
            time.sleep(0.01)

    def __exit__(self, *a: object) -> None:
        if self.on:
            self._stop.set()
            self._t.join()

    def gib(self) -> str:
        return f"{self.peak / 2**30:.1f}" if self.on else "–"


def floor_seconds(dims: dict, tokens: float, peaks: tuple[float, float] | None, bytes_per: int = 2) -> float | None:
    """Roofline lower bound for one 30-s window decoded to ``tokens`` tokens (see module doc)."""
    if peaks is None or tokens <= 0:
        return None
    da, dt, na, nt, ctx, v = (dims["n_audio_state"], dims["n_text_state"], dims["n_audio_layer"],
                              dims["n_text_layer"], dims["n_audio_ctx"], dims["n_vocab"])
    enc = 2 * na * ctx * 12 * da * da + 2 * na * 2 * ctx * ctx * da + 2 * (2 * ctx) * 3 * da * (dims["n_mels"] + da)
    cross_kv = 2 * nt * ctx * 2 * dt * da
    per_token = 2 * nt * 14 * dt * dt + 2 * nt * 2 * ctx * dt + 2 * dt * v
    flops = enc + cross_kv + tokens * per_token
    kv_bytes = tokens * nt * 2 * ctx * dt * bytes_per
    return max(flops / peaks[0], kv_bytes / peaks[1])


def agreement(ref: list[str], hyp: list[str]) -> float:
    from stresstest.metrics.wer import asr_errors

    err = words = 0
    for r, h in zip(ref, hyp, strict=True):
        e = asr_errors(r, h)
        err += e.sub + e.dele + e.ins
        words += e.ref_words
    return 1.0 - err / words if words else float("nan")


@dataclass
class Row:
    name: str
    note: str = ""
    windows: int = 0
    audio_s: float = 0.0
    wall_s: float = 0.0
    results: list[WindowResult] = field(default_factory=list)
    mem: str = "–"
    skipped: str = ""


def run_impl(name: str, fn: Callable[[list[np.ndarray]], list[WindowResult]], windows: list[np.ndarray],
             device: str, budget_s: float, chunk: int, note: str = "") -> Row:
    """Warm up on one chunk, then time chunks until all windows are done or ``budget_s`` is spent."""
    row = Row(name, note)
    try:
        fn(windows[: min(len(windows), max(1, chunk // 4))])  # load + warm-up (not timed)
        with GpuMemPeak(device) as mem:
            t0 = time.perf_counter()
            for i in range(0, len(windows), chunk):
                part = windows[i : i + chunk]
                row.results += fn(part)
                _sync(device)
                row.windows += len(part)
                row.audio_s += sum(w.size for w in part) / SAMPLE_RATE_HZ
                if time.perf_counter() - t0 > budget_s:
                    break
            row.wall_s = time.perf_counter() - t0
        row.mem = mem.gib()
    except Exception as exc:  # one implementation failing must not hide the others
        row.skipped = f"failed: {type(exc).__name__}: {str(exc)[:120]}"
    return row


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


# -------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--tiny", action="store_true", help="bundled tiny.en, few windows (smoke mode)")
    ap.add_argument("--random", action="store_true", help="random-init models, forced decode lengths")
    ap.add_argument("--windows", type=int, default=None, help="minimum number of windows (default 128; tiny 3)")
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml", help="corpus + seed source")
    ap.add_argument("--encounters", type=int, default=None, help="at most this many encounters")
    ap.add_argument("--max-turns", type=int, default=None, help="truncate encounters (default: config's)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="timed seconds per implementation at most (default 40; 25 with forced lengths; 30 tiny)")
    ap.add_argument("--deadline-s", type=float, default=None,
                    help="start no implementation after this many seconds in all (default 450, so a GPU run fits "
                    "8 min; none with --tiny)")
    ap.add_argument("--fw-model", default="large-v3", help="faster-whisper model name/dir (real weights)")
    ap.add_argument("--ow-model", default="large-v3", help="openai-whisper model name/checkpoint (real weights)")
    ap.add_argument("--hf-model", default=None, help="HF transformers Whisper dir (real weights)")
    ap.add_argument("--peak-tflops", type=float, default=None)
    ap.add_argument("--peak-tbps", type=float, default=None)
    ap.add_argument("--cpu-threads", type=int, default=None,
                    help="torch / CTranslate2 CPU threads (default: 1 with --tiny, else the libraries' default)")
    ap.add_argument("--out", type=Path, default=None, help="also write the table (.md) and rows (.json) here")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    import torch
    import whisper

    device = args.device
    threads = args.cpu_threads if args.cpu_threads is not None else (1 if args.tiny else 0)
    if threads:
        torch.set_num_threads(threads)
    if device == "cuda" and not torch.cuda.is_available():
        print("bench_gpu: --device cuda but no CUDA device; use --device cpu --tiny", file=sys.stderr)
        return 2
    from stresstest.cache import default_cache_dir

    cache = default_cache_dir()
    n_min = args.windows or (3 if args.tiny else 128)
    max_turns = args.max_turns or (4 if args.tiny else None)
    n_enc = args.encounters or (1 if args.tiny else None)
    items = pipeline_windows(args.config, n_min, cache, max_turns, n_enc)
    if args.tiny:
        items = items[:n_min]  # smoke: exactly the asked number (the full run keeps every window it made)
    windows = [it["audio"] for it in items]
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    peaks = None
    if args.peak_tflops and args.peak_tbps:
        peaks = (args.peak_tflops * 1e12, args.peak_tbps * 1e12)
    elif device == "cuda":
        peaks = next((p for k, p in PEAKS.items() if k in gpu), None)
    opts = DecodingOptions()
    tmp = Path(tempfile.mkdtemp(prefix="bench-gpu-", dir=cache))

    # Models: tiny.en (smoke), large-v3 real weights, or random large-v3-sized (throughput only).
    forced_lengths: list[int | None] = [None]
    if args.tiny:
        fw_src, ow_src = BUNDLED_TINY_EN, BUNDLED_TINY_EN
        dims = None
    else:
        fw_src, ow_src = args.fw_model, args.ow_model
        dims = dict(LARGE_V3)
    random_mode = args.random or (not args.tiny and not _large_v3_available(args.ow_model, args.fw_model))
    if random_mode:
        dims = dict(LARGE_V3) if not args.tiny else None
        ow_src, fw_src = _random_models(tmp, dims)
        forced_lengths = [150, 224]
    if dims is None:
        ck = torch.load(OpenAIWhisperBackend(ow_src, device="cpu", cache_dir=cache)._checkpoint()
                        if ow_src == BUNDLED_TINY_EN else ow_src, map_location="cpu", weights_only=True)
        dims = dict(ck["dims"])
        del ck
    fp16 = device == "cuda"
    budget = args.budget_s or (30.0 if args.tiny else 25.0 if random_mode else 40.0)

    def timed(name: str, make: Callable[[], Row]) -> Row:
        """Run one implementation unless the overall deadline has passed (then say so in its row)."""
        deadline = args.deadline_s or (float("inf") if args.tiny else 450.0)
        if time.perf_counter() - t_start > deadline:
            return Row(name, skipped=f"skipped: past the {deadline:.0f}-s deadline")
        return make()

    rows: list[Row] = []
    for forced in forced_lengths:
        label = f" [random, {forced} tok]" if forced else ""
        ow_over: dict[str, Any] = {}
        fw_over: dict[str, Any] = {}
        o = opts
        if forced:
            tb = whisper.tokenizer.get_tokenizer(False).timestamp_begin
            eot = whisper.tokenizer.get_tokenizer(False).eot
            suppress = [eot, *range(tb, dims["n_vocab"])]
            ow_over = {"sample_len": forced, "suppress_tokens": suppress}
            # CTranslate2's Whisper generates at most max_length / 2 tokens (448 → 224, like openai-whisper's
            # sample_len); max_length = prompt (sot, notimestamps: 2) + max_new_tokens.
            fw_over = {"max_new_tokens": 2 * forced - 2, "suppress_tokens": suppress}
            o = DecodingOptions(without_timestamps=True, no_speech_threshold=None)

        # 1. baseline: openai-whisper as written (fp32 weights, per-call cast, CPU mel, one decode per window)
        def base_fn(ws: list[np.ndarray], forced: int | None = forced, ow_over: dict = ow_over) -> list[WindowResult]:
            model = _plain_openai(ow_src, device, cache)
            if forced:
                return _forced_baseline(model, ws, 16, fp16, ow_over)
            return baseline_openai_whisper(model, ws, 16, fp16)

        rows.append(timed("openai-whisper as written (b16)" + label, lambda label=label, base_fn=base_fn: run_impl(
            "openai-whisper as written (b16)" + label, base_fn, windows, device, budget, 32)))
        _plain_openai.cache_clear()
        release_asr_models()

        ref_be = OpenAIWhisperBackend(ow_src, device=device, batch_size=16, cache_dir=cache)
        ref_be.decode_overrides = ow_over
        rows.append(timed("openai-whisper reference (b16)" + label, lambda label=label, be=ref_be, o=o: run_impl(
            "openai-whisper reference (b16)" + label, lambda ws: be.decode_windows(ws, o), windows, device,
            budget, 32)))
        release_asr_models()
        for bs in (16, 32):
            fw_be = FasterWhisperBackend(fw_src, device=device, compute_type="auto", cpu_threads=threads)
            fw_be.decode_overrides = fw_over
            name = f"faster-whisper {fw_be.compute_type} (b{bs})" + label
            rows.append(timed(name, lambda name=name, be=fw_be, bs=bs, o=o: run_impl(
                name, lambda ws: be.decode_windows_batched(ws, o, bs), windows, device, budget, 2 * bs)))
            release_asr_models()
        rows.append(timed("transformers sdpa (b16)" + label, lambda label=label, forced=forced: _hf_row(
            args, device, dims, windows, budget, forced, label, fp16)))
        _free(device)
        rows.append(timed("vLLM offline no-ts (seqs 64)" + label, lambda label=label, forced=forced: _vllm_row(
            args, device, windows, budget, forced, label, tmp, cache)))

    table = render(rows, dims, peaks, gpu, random_mode, args, len(windows), time.perf_counter() - t_start)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(table + "\n")
        args.out.with_suffix(".json").write_text(json.dumps([_row_json(r, dims, peaks) for r in rows], indent=1))
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(not r.skipped or r.skipped.startswith(("not importable", "no HF", "skipped")) for r in rows) else 1


def _large_v3_available(ow_model: str, fw_model: str) -> bool:
    from stresstest.cache import user_cache_home

    ow_ok = os.path.isfile(ow_model) or (user_cache_home() / "whisper" / f"{ow_model}.pt").is_file()
    fw_ok = os.path.isdir(fw_model)
    if not fw_ok:
        try:
            from faster_whisper.utils import download_model

            download_model(fw_model, local_files_only=True)
            fw_ok = True
        except Exception:
            fw_ok = False
    return ow_ok and fw_ok


def _random_models(tmp: Path, dims: dict | None) -> tuple[str, str]:
    """Random-init openai-whisper checkpoint + the same weights as a CTranslate2 float16 model."""
    import torch
    import whisper

    from stresstest.asr.convert import openai_to_ct2

    if dims is None:  # tiny smoke of the random path: tiny.en dims
        dims = dict(LARGE_V3, n_mels=80, n_audio_state=384, n_audio_head=6, n_audio_layer=4, n_text_state=384,
                    n_text_head=6, n_text_layer=4)
    torch.manual_seed(0)
    model = whisper.model.Whisper(whisper.model.ModelDimensions(**dims))
    ck = {"dims": dims, "model_state_dict": {k: v.half() for k, v in model.state_dict().items()}}
    del model
    ow = tmp / "random-openai.pt"
    torch.save(ck, ow)
    fw = openai_to_ct2(ck, tmp / "random-ct2", template_dir=bundled_tiny_en_path(), quantization="float16")
    return str(ow), str(fw)


_PLAIN: dict[tuple[str, str], Any] = {}


def _plain_openai(src: str, device: str, cache: Path) -> Any:
    """The model as the old backend loaded it: fp32 weights (cast to fp16 inside every Linear call)."""
    key = (src, device)
    if key not in _PLAIN:
        from stresstest.asr.convert import load_openai_checkpoint

        path = OpenAIWhisperBackend(src, device="cpu", cache_dir=cache)._checkpoint()
        if os.path.isfile(path):
            m = load_openai_checkpoint(path, device).float()
        else:
            import whisper

            from stresstest.cache import user_cache_home

            m = whisper.load_model(path, device=device, download_root=str(user_cache_home() / "whisper"))
        _PLAIN[key] = m
    return _PLAIN[key]


_plain_openai.cache_clear = _PLAIN.clear  # type: ignore[attr-defined]


def _forced_baseline(model: Any, ws: list[np.ndarray], bs: int, fp16: bool, over: dict) -> list[WindowResult]:
    import torch
    import whisper

    dec = whisper.DecodingOptions(task="transcribe", language="en", temperature=0.0, without_timestamps=True,
                                  fp16=fp16, **over)
    out = []
    for i in range(0, len(ws), bs):
        mels = torch.stack([whisper.log_mel_spectrogram(whisper.pad_or_trim(torch.from_numpy(w)),
                                                        n_mels=model.dims.n_mels) for w in ws[i : i + bs]])
        with torch.inference_mode():
            for r in whisper.decode(model, mels.to(next(model.parameters()).device), dec):
                out.append(WindowResult(text=r.text, n_tokens=len(r.tokens), token_limit_hits=1))
    return out


def _hf_row(args: argparse.Namespace, device: str, dims: dict, windows: list[np.ndarray], budget: float,
            forced: int | None, label: str, fp16: bool) -> Row:
    name = "transformers sdpa (b16)" + label
    try:
        import torch
        import transformers
    except ImportError:
        return Row(name, skipped="not importable (pip install transformers)")
    if not forced and not args.hf_model:
        return Row(name, skipped="no HF-format weights (--hf-model DIR); random mode measures it")
    dtype = torch.float16 if fp16 else torch.float32
    if args.hf_model:
        model = transformers.WhisperForConditionalGeneration.from_pretrained(
            args.hf_model, torch_dtype=dtype, attn_implementation="sdpa", local_files_only=True)
    else:
        cfg = transformers.WhisperConfig(
            vocab_size=dims["n_vocab"], num_mel_bins=dims["n_mels"], d_model=dims["n_text_state"],
            encoder_layers=dims["n_audio_layer"], decoder_layers=dims["n_text_layer"],
            encoder_attention_heads=dims["n_audio_head"], decoder_attention_heads=dims["n_text_head"],
            encoder_ffn_dim=4 * dims["n_audio_state"], decoder_ffn_dim=4 * dims["n_text_state"],
            max_source_positions=dims["n_audio_ctx"], max_target_positions=dims["n_text_ctx"],
            decoder_start_token_id=50257, eos_token_id=50256, pad_token_id=50256, bos_token_id=50256,
            suppress_tokens=[], begin_suppress_tokens=[])
        torch.manual_seed(0)
        model = transformers.WhisperForConditionalGeneration._from_config(
            cfg, attn_implementation="sdpa", torch_dtype=dtype)
    hf = model.to(device).eval()
    row = run_impl(name, lambda ws: hf_transformers(hf, ws, 16, forced, dims["n_mels"]), windows, device,
                   budget, 32, note=f"transformers {transformers.__version__}")
    del model
    return row


def _vllm_row(args: argparse.Namespace, device: str, windows: list[np.ndarray], budget: float, forced: int | None,
              label: str, tmp: Path, cache: Path) -> Row:
    """``asr.backend: vllm`` (one offline ``vllm.LLM``, no timestamps, 64 windows per ``generate``) when vLLM
    imports: the bundled tiny.en (``--tiny``), ``--hf-model`` or large-v3 from the HF cache, or, with forced
    lengths, the random openai checkpoint of this run written as a Hugging Face folder (float16)."""
    name = "vLLM offline no-ts (seqs 64)" + label
    try:
        import vllm  # noqa: F401
    except ImportError:
        return Row(name, skipped="not importable (pip install vllm)")
    from stresstest.asr.vllm_backend import VLLMASROptions, VLLMWhisperBackend, release_vllm_asr, vllm_version
    from stresstest.errors import ASRError

    model = BUNDLED_TINY_EN if args.tiny else (args.hf_model or "large-v3")
    if forced:  # the random weights the other rows of this run use, as a Hugging Face folder
        import torch

        from stresstest.asr.hf_convert import write_hf_checkpoint

        folder = tmp / "random-hf"
        if not (folder / "config.json").is_file():
            ck = torch.load(tmp / "random-openai.pt", map_location="cpu", weights_only=True)
            ck["model_state_dict"] = {k: v.numpy() for k, v in ck["model_state_dict"].items()}
            write_hf_checkpoint(ck, bundled_tiny_en_path(), folder)
            del ck
        model = str(folder)
    be = VLLMWhisperBackend(model, device=device, cache_dir=cache,
                            options=VLLMASROptions(max_num_seqs=64, gpu_memory_utilization=0.5))
    try:
        be.runtime(1)  # resolves the model: a missing large-v3 is a skip, not a failure
    except ASRError as exc:
        return Row(name, skipped=f"no HF-format weights for vLLM: {str(exc)[:160]}")
    opts = DecodingOptions(without_timestamps=True)

    def fn(ws: list[np.ndarray]) -> list[WindowResult]:
        if not forced:
            return be.decode_windows(ws, opts)
        from vllm import SamplingParams

        llm = be._llm()
        sp = SamplingParams(temperature=0.0, max_tokens=forced, min_tokens=forced, ignore_eos=True)
        prompt = be.prompt(str(model))
        reqs = [{"encoder_prompt": {"prompt": "", "multi_modal_data": {"audio": (w.astype(np.float32),
                                                                                  SAMPLE_RATE_HZ)}},
                 "decoder_prompt": prompt} for w in ws]
        return [WindowResult(text="", n_tokens=len(o.outputs[0].token_ids), token_limit_hits=1)
                for o in llm.generate(reqs, sp, use_tqdm=False)]

    try:
        return run_impl(name, fn, windows, device, budget, 64, note=f"vLLM {vllm_version()}, {be.dtype()}")
    finally:
        release_vllm_asr()
        _free(device)


def _free(device: str) -> None:
    import gc

    gc.collect()
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()


def _row_json(r: Row, dims: dict, peaks: tuple[float, float] | None) -> dict:
    toks = np.mean([x.n_tokens for x in r.results]) if r.results else 0.0
    return {"name": r.name, "windows": r.windows, "audio_s": r.audio_s, "wall_s": r.wall_s, "mem_gib": r.mem,
            "tokens_per_window": float(toks), "skipped": r.skipped,
            "floor_s_per_window": floor_seconds(dims, float(toks), peaks)}


def render(rows: list[Row], dims: dict, peaks: tuple[float, float] | None, gpu: str, random_mode: bool,
           args: argparse.Namespace, n_windows: int, total_s: float) -> str:
    def label(r: Row) -> str:
        return r.name[r.name.find(" ["):] if " [" in r.name else ""

    def first(prefix: str, lab: str) -> Row | None:
        return next((r for r in rows if r.name.startswith(prefix) and label(r) == lab and not r.skipped), None)

    peak_s = f"{peaks[0] / 1e12:.0f} TFLOP/s, {peaks[1] / 1e12:.2f} TB/s" if peaks else "n/a"
    kind = ("random-init " if random_mode else "") + ("tiny.en" if args.tiny else "large-v3")
    lines = [
        f"Device: {gpu}; model: {kind}-sized (d={dims['n_audio_state']}, {dims['n_audio_layer']}+"
        f"{dims['n_text_layer']} layers, {dims['n_mels']} mels); {n_windows} fixed 30-s windows (a file's last one "
        f"shorter; clean, babble 5 dB, ambient 5 dB); floor peaks: {peak_s}; total {total_s:.0f} s."
        + (" THROUGHPUT ONLY (random weights, forced decode lengths)." if random_mode else ""),
        "",
        "| implementation | × real time | windows/s | tokens/window | at token limit | peak GPU GiB | agreement "
        "with reference | floor ms/window | efficiency vs floor | vs as-written |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.skipped or not r.windows:
            lines.append(f"| {r.name} | {r.skipped or 'no windows'} | | | | | | | | |")
            continue
        rtf = r.audio_s / r.wall_s
        toks = float(np.mean([x.n_tokens for x in r.results]))
        known = [x.token_limit_hits for x in r.results if x.token_limit_hits >= 0]
        limit = f"{np.mean([k > 0 for k in known]):.1%}" if len(known) == len(r.results) else "n/a"
        tok_s = f"{toks:.0f}" if not r.name.startswith("faster-whisper") or random_mode else f"≥{toks:.0f}"
        ref, base = first("openai-whisper reference", label(r)), first("openai-whisper as written", label(r))
        agree = "n/a"
        if ref is not None and not random_mode:
            n = min(len(ref.results), len(r.results))
            agree = f"{agreement([x.text for x in ref.results[:n]], [x.text for x in r.results[:n]]):.3f}"
        fl = floor_seconds(dims, toks, peaks)
        per = r.wall_s / r.windows
        vs = f"{(base.wall_s / base.windows) / per:.2f}×" if base is not None else "–"
        lines.append(
            f"| {r.name} | {rtf:,.1f} | {r.windows / r.wall_s:.2f} | {tok_s} | {limit} | {r.mem} | {agree} | "
            f"{'%.1f' % (fl * 1e3) if fl else 'n/a'} | {'%.1f%%' % (100 * fl / per) if fl else 'n/a'} | {vs} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
