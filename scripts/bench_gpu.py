"""GPU ASR benchmark: Whisper implementations side by side on the same 30-s windows, in one table.

Two modes.

``--random`` (the device benchmark; no weights, no TTS, no network): synthetic 30-s windows (harmonic
"voiced" bursts at a syllable rate over a noise floor, numpy, seeded) and randomly initialised models of
large-v3's shape (d_model 1280, 32 encoder + 32 decoder layers, 20 heads, 128 mel bins, vocabulary 51866;
``--device cpu`` uses a tiny shape of the same vocabulary). Random weights make greedy decoding emit arbitrary
tokens, so every implementation is forced to the real fast path's decode shape (:class:`DecodeShape`, measured on
the demo's own audio by ``--measure-shape`` into ``scripts/bench_gpu_shape.json``): per window a first decode of
its measured length, then the seek loop's remainder decodes (each re-encodes its 30 s) at theirs; end-of-text
and the timestamp tokens are suppressed and the sample length is capped. ``--tokens N`` forces one decode of N
steps instead. The work per window is then the same everywhere; the table is THROUGHPUT ONLY.
Each row runs as its own process, killed after ``--row-timeout-s`` (and dying with the benchmark); its line is
appended to ``OUT.md`` and its JSON to ``OUT.jsonl`` the moment it ends, so a time limit loses only the row it
stops. It needs only torch and numpy; each implementation runs when its package imports and says why not
otherwise:

- ``openai-whisper as written (b16)``: the reference backend as it was before issue 11 (float32 weights cast
  to float16 inside every ``Linear`` call, log-Mel on the CPU, one ``whisper.decode`` per batch of 16);
  the baseline of the "vs as-written" column.
- ``openai-whisper reference fp16 (bN)``: float16 weights (layer norms float32, as
  :class:`stresstest.asr.backends.OpenAIWhisperBackend` loads them), log-Mel on the device, ``whisper.decode``.
- ``transformers sdpa (bN)``: Hugging Face ``WhisperForConditionalGeneration`` (SDPA attention),
  ``generate`` on features from :mod:`stresstest.asr.mel` (the GPU log-Mel).
- ``transformers sdpa static cache + torch.compile (bN)``: the same with a static KV cache and transformers' own
  compilation of the decode step (``CompileConfig``: ``torch.compile``, ``mode="reduce-overhead"``, CUDA graphs);
  ``--compile auto`` compiles on CUDA only.
- ``ctranslate2 (bN)``: CTranslate2's Whisper on the same weight shapes, when it imports and, on CUDA, its
  CUDA 12 cuBLAS loads (:mod:`stresstest.asr.cudalibs`). On a machine with CUDA 13's cuBLAS only, the row's process
  gets pip's ``nvidia/cu13/lib`` libraries linked under the CUDA 12 names on its ``LD_LIBRARY_PATH``
  (:func:`cublas13_as_12`; ``--cublas13-as-12 off`` disables it) and the row's name says so.

Adding an implementation (e.g. vLLM) is one function ``def impl(b: RandomBench) -> Row`` (build the model,
then ``return b.run(name, decode_one_batch, ...)``) and one ``rows.append(b.timed(name, impl))`` in
:func:`run_random`.

Default (no ``--random``): the pipeline's own mixtures (TTS speech of the config's corpus, clean / babble 5 dB /
ambient 5 dB, cut into the pipeline's 30-s windows) through the project's backends with real large-v3 weights
(HF cache / ``~/.cache/whisper``; without them the script runs ``--random``): the as-written baseline, the
reference backend (batched ``whisper.transcribe`` seek loop), faster-whisper batched at 16 and 32, and
transformers with ``--hf-model``, and vLLM's offline Whisper (``asr.backend: vllm``, no timestamps) when ``vllm``
imports. The agreement column (1 − WER against the reference's text) is real only here.
``--device cpu --tiny`` is that mode's smoke test on the bundled tiny.en.

Columns: × real time (audio seconds / wall seconds), windows/s, tokens per window, share of windows at the
token limit, peak GPU memory, agreement, the roofline floor per window, efficiency = floor / measured time, and
the speed-up against the as-written baseline measured in the same run.

Roofline floor of one window decoded to T tokens (:func:`floor_seconds`; dims d_a, d_t, layers L_a, L_t,
audio context C = 1500, mel bins M, vocabulary V; 2 FLOPs per multiply-add; weights' reads amortised over an
unbounded batch, so it is a lower bound)::

    F_enc  = 2·(2C·3·M·d_a + C·3·d_a²)                       conv front end (3000 → 1500 frames)
           + L_a·C·(24·d_a² + 4·C·d_a)                        QKVO + MLP, attention scores and values
           + L_t·4·C·d_a·d_t                                  cross-attention K, V of every decoder layer
    F_tok  = L_t·(28·d_t² + 4·C·d_t + 4·t·d_t) + 2·d_t·V     self QKVO + cross Q,O + MLP, attention, logits
    B_tok  = L_t·2·(C + t)·d_t·2 bytes                        every step reads every layer's cross K, V and
                                                              its self-attention cache (t = T/2 on average)
    floor  = F_enc / P + T · max(F_tok / P, B_tok / BW)

with P the dense bf16/fp16 tensor rate and BW the memory bandwidth. H200: P = 790 TFLOP/s (an 8192³ bf16
product measured on the lent machine), BW = 4.8 TB/s. large-v3, T = 100: F_enc ≈ 2.59 TFLOP (3.3 ms), B_tok ≈
254 MB (53 µs, memory-bound) → ≈ 8.6 ms per window ≈ 3,500× real time (T = 224: 15.6 ms, 1,900×).

Usage::

    python scripts/bench_gpu.py --random --out bench_gpu      # any CUDA machine, < 9 min, nothing downloaded
    python scripts/bench_gpu.py --measure-shape 30            # re-measure the decode shape (CPU, demo audio)
    python scripts/bench_gpu.py --random --device cpu         # CPU smoke (tiny shape, a few windows)
    python scripts/bench_gpu.py                               # real large-v3 weights on the pipeline's audio
    python scripts/bench_gpu.py --device cpu --tiny           # smoke of that mode (bundled tiny.en)
"""

from __future__ import annotations

import argparse
import json
import math
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

SR = 16_000
N_SAMPLES = 30 * SR
N_FRAMES = 3000
LARGE_V3 = dict(
    n_mels=128,
    n_audio_ctx=1500,
    n_audio_state=1280,
    n_audio_head=20,
    n_audio_layer=32,
    n_vocab=51866,
    n_text_ctx=448,
    n_text_state=1280,
    n_text_head=20,
    n_text_layer=32,
)
#: The CPU smoke's random shape: large-v3's vocabulary, mel bins and contexts, a tiny body.
TINY_RANDOM = dict(
    LARGE_V3, n_audio_state=64, n_audio_head=2, n_audio_layer=2, n_text_state=64, n_text_head=2, n_text_layer=2
)
# Dense fp16/bf16 tensor rate (FLOP/s) and HBM bandwidth (B/s) by device-name substring. H200/H100: the bf16
# product rate measured on the lent H200 (spec sheet: 989), spec bandwidth; the others: spec sheets.
PEAKS = {
    "H200": (790e12, 4.8e12),
    "H100": (790e12, 3.35e12),
    "A100": (312e12, 2.0e12),
    "L40S": (362e12, 0.864e12),
    "A10": (125e12, 0.6e12),
    "L4": (121e12, 0.3e12),
    "4090": (165e12, 1.0e12),
}
# Multilingual Whisper special tokens (vocabulary 51866, 100 languages): the forced prompt and what is suppressed.
EOT, SOT, EN, TRANSCRIBE, NO_TIMESTAMPS, TIMESTAMP_BEGIN = 50257, 50258, 50259, 50360, 50364, 50365
PROMPT = [SOT, EN, TRANSCRIBE, NO_TIMESTAMPS]


@dataclass
class WindowResult:
    """One window's decode as the table needs it (the backends' ``WindowResult`` has the same fields)."""

    text: str = ""
    n_tokens: int = 0
    token_limit_hits: int = 0
    n_decodes: int = 1


@dataclass
class Row:
    name: str
    note: str = ""
    windows: int = 0
    audio_s: float = 0.0
    wall_s: float = 0.0
    results: list[Any] = field(default_factory=list)
    mem: str = "–"
    skipped: str = ""


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


def floor_parts(dims: dict, tokens: float) -> tuple[float, float, float]:
    """(encoder FLOPs, FLOPs per decoder step, bytes per decoder step) of one window (module docstring)."""
    da, dt, la, lt = dims["n_audio_state"], dims["n_text_state"], dims["n_audio_layer"], dims["n_text_layer"]
    c, m, v = dims["n_audio_ctx"], dims["n_mels"], dims["n_vocab"]
    t = tokens / 2  # the self-attention cache grows from 0 to T: T/2 entries on average
    f_enc = 2 * (2 * c * 3 * m * da + c * 3 * da * da) + la * c * (24 * da * da + 4 * c * da) + lt * 4 * c * da * dt
    f_tok = lt * (28 * dt * dt + 4 * c * dt + 4 * t * dt) + 2 * dt * v
    b_tok = lt * 2 * (c + t) * dt * 2
    return f_enc, f_tok, b_tok


def floor_seconds(dims: dict, tokens: float, peaks: tuple[float, float] | None, decodes: float = 1.0) -> float | None:
    """Roofline lower bound (seconds) for one 30-s window decoded to ``tokens`` tokens in ``decodes`` decodes (each
    decode encodes its 30 s again; module docstring)."""
    if peaks is None or tokens <= 0:
        return None
    f_enc, f_tok, b_tok = floor_parts(dims, tokens / decodes)
    return decodes * f_enc / peaks[0] + tokens * max(f_tok / peaks[0], b_tok / peaks[1])


def agreement(ref: list[str], hyp: list[str]) -> float:
    from stresstest.metrics.wer import asr_errors

    err = words = 0
    for r, h in zip(ref, hyp, strict=True):
        e = asr_errors(r, h)
        err += e.sub + e.dele + e.ins
        words += e.ref_words
    return 1.0 - err / words if words else float("nan")


def run_impl(
    name: str,
    fn: Callable[[list[np.ndarray]], list[Any]],
    windows: list[np.ndarray],
    device: str,
    budget_s: float,
    chunk: int,
    note: str = "",
    warmup: int | None = None,
    warmup_calls: int = 1,
) -> Row:
    """Warm up (``warmup_calls`` calls on ``warmup`` windows, default one chunk: loading, compilation, graph
    capture are not timed), then time chunks until all windows are done or ``budget_s`` is spent."""
    row = Row(name, note)
    try:
        for _ in range(warmup_calls):
            fn(windows[: min(len(windows), warmup or chunk)])
        _sync(device)
        with GpuMemPeak(device) as mem:
            t0 = time.perf_counter()
            for i in range(0, len(windows), chunk):
                part = windows[i : i + chunk]
                row.results += fn(part)
                _sync(device)
                row.windows += len(part)
                row.audio_s += sum(w.size for w in part) / SR
                if time.perf_counter() - t0 > budget_s:
                    break
            row.wall_s = time.perf_counter() - t0
        row.mem = mem.gib()
    except Exception as exc:  # one implementation failing must not hide the others
        row.skipped = f"failed: {type(exc).__name__}: {str(exc)[:160]}"
    return row


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _free(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------- random mode: the windows


def synthetic_windows(n: int, seed: int = 0, distinct: int = 16) -> list[np.ndarray]:
    """``n`` 30-s 16 kHz windows of speech-like sound (``distinct`` different ones, repeated).

    Voiced bursts (a gliding 90–250 Hz fundamental with 8 harmonics) gated at a 3–5 Hz syllable rate with pauses,
    over a noise floor ~30 dB down. Random weights make the content irrelevant to the work done; the signal only
    has to look like audio to the log-Mel front end (no silent or clipped windows).
    """
    rng = np.random.default_rng(seed)
    t = np.arange(N_SAMPLES) / SR
    base: list[np.ndarray] = []
    for _ in range(min(n, distinct)):
        f0 = rng.uniform(90, 250) * (1 + 0.15 * np.sin(2 * np.pi * rng.uniform(0.1, 0.5) * t + rng.uniform(0, 6)))
        phase = 2 * np.pi * np.cumsum(f0) / SR
        voiced = sum(np.sin(k * phase) / k for k in range(1, 9))
        syllables = np.clip(np.sin(2 * np.pi * rng.uniform(3, 5) * t + rng.uniform(0, 6)), 0, None) ** 2
        pauses = np.repeat(rng.random(30 * 4) > 0.25, SR // 4)  # quarter-second chunks, a quarter of them silent
        x = voiced * syllables * pauses + 0.03 * rng.standard_normal(N_SAMPLES)
        base.append((0.5 * x / np.max(np.abs(x))).astype(np.float32))
    return [base[i % len(base)] for i in range(n)]


# ------------------------------------------------------------------------- random mode: the decode shape

SHAPE_FILE = ROOT / "scripts" / "bench_gpu_shape.json"


@dataclass(frozen=True)
class DecodeShape:
    """How many decoder steps a window costs on the real fast path: a first decode of ``first_tokens``, then on
    average ``remainders_per_window`` further decodes (the seek loop's remainders after the last timestamp pair)
    of ``remainder_tokens`` each. Measured on the demo's audio (``--measure-shape``), or forced (``--tokens``)."""

    first_tokens: int
    remainders_per_window: float
    remainder_tokens: int
    source: str

    @classmethod
    def load(cls, path: Path = SHAPE_FILE) -> DecodeShape:
        d = json.loads(path.read_text())
        return cls(
            int(d["first_tokens"]), float(d["remainders_per_window"]), int(d["remainder_tokens"]), str(d["source"])
        )

    @classmethod
    def forced(cls, tokens: int) -> DecodeShape:
        return cls(tokens, 0.0, 0, f"forced: {tokens} decoder steps per window, one decode")

    def describe(self) -> str:
        if not self.remainders_per_window:
            return self.source
        return (
            f"{self.first_tokens} decoder steps per window, then {self.remainders_per_window:.2f} remainder "
            f"decodes per window of {self.remainder_tokens} steps ({self.source})"
        )


def measure_shape(config: Path, n_windows: int, batch: int, out: Path) -> DecodeShape:
    """The fast path (faster-whisper's seek loop, batched, bundled tiny.en int8 on the CPU) on the pipeline's own
    clean / babble 5 dB / ambient 5 dB windows of ``config``: tokens of each window's first decode and of its
    remainders, written to ``out``. Token counts follow the text, so tiny.en stands in for large-v3 here."""
    from stresstest.asr.backends import FasterWhisperBackend, release_asr_models
    from stresstest.asr.base import DecodingOptions

    windows = config_windows(config, n_windows)
    res = FasterWhisperBackend(device="cpu", compute_type="int8").decode_windows_batched(
        windows, DecodingOptions(), batch
    )
    release_asr_models()
    firsts = [r.decode_tokens[0] for r in res if r.decode_tokens]
    rests = [t for r in res for t in r.decode_tokens[1:]]
    shape = DecodeShape(
        round(float(np.mean(firsts))),
        len(rests) / max(len(res), 1),
        round(float(np.mean(rests))) if rests else 0,
        f"measured on {len(res)} windows of {config.name}'s own audio (its clean speech and "
        f"mixtures), faster-whisper's batched seek loop, tiny.en",
    )
    out.write_text(json.dumps({**shape.__dict__, "decode_tokens": [list(r.decode_tokens) for r in res]}) + "\n")
    return shape


def config_windows(config: Path, n_windows: int) -> list[np.ndarray]:
    """The first ``n_windows`` 30-s windows of a config's own audio, encounter by encounter: its clean speech and
    every family × SNR mixture, made exactly as the run makes them (so a run of the config has them cached)."""
    from stresstest.asr.base import split_windows
    from stresstest.audio import read_wav_exact
    from stresstest.cache import default_cache_dir
    from stresstest.config import load_config
    from stresstest.corpus import load_corpus
    from stresstest.noise import make_noise_source
    from stresstest.noise.stage import MixJob, build_mixtures
    from stresstest.speech import speech_for

    cfg, cache = load_config(config), default_cache_dir()
    c = cfg.corpus
    all_encs = load_corpus(c.kind, c.path)
    sources = {f: make_noise_source(spec, encounters=all_encs, cache_dir=cache) for f, spec in cfg.noise.items()}
    snrs = tuple(float(x) for x in cfg.snr_db)
    out: list[np.ndarray] = []
    for enc in load_corpus(c.kind, c.path, ids=c.ids, limit=c.limit):
        speech = speech_for(enc.truncated(c.max_turns), cache, cfg.speech)
        paths = [Path(speech.path)]
        for fam, spec in cfg.noise.items():
            got: list[Path] = []
            build_mixtures(
                MixJob(enc.encounter_id, fam, snrs, tuple(f"{fam}_{x:g}db" for x in snrs)),
                speech,
                sources[fam],
                spec.model_dump(mode="json"),
                seed=cfg.run.seed,
                cache_dir=cache,
                on_done=lambda cond, p, info, err, got=got: got.append(Path(p)) if err is None else None,
            )
            paths += got
        for p in paths:
            out += split_windows(read_wav_exact(p))
        if len(out) >= n_windows:
            break
    return out[:n_windows]


# ----------------------------------------------------------------------- random mode: the implementations


@dataclass
class RandomBench:
    """What every implementation of the random mode shares: windows, shape, forced length, batch, limits."""

    device: str
    dims: dict
    windows: list[np.ndarray]
    shape: DecodeShape
    batch: int
    budget_s: float
    deadline_s: float
    compile: bool
    tmp: Path
    threads: int = 0
    t_start: float = field(default_factory=time.perf_counter)

    @property
    def fp16(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def suppress(self) -> list[int]:
        """End-of-text and every timestamp token: decoding runs to exactly ``tokens`` steps."""
        return [EOT, *range(TIMESTAMP_BEGIN, self.dims["n_vocab"])]

    @property
    def tokens(self) -> int:
        """The longest forced decode (sizes caches and sample lengths)."""
        return max(self.shape.first_tokens, self.shape.remainder_tokens)

    def run(
        self,
        name: str,
        fn: Callable[[list[np.ndarray], int], list[Any]],
        *,
        chunk: int | None = None,
        note: str = "",
        warmup_calls: int = 1,
    ) -> Row:
        """Time ``fn(windows, steps)`` on the shared windows in the decode shape: per chunk (default ``batch``
        windows) one call at the first decode's length, then the chunk's share of remainder decodes at theirs
        (in calls of at most a chunk; a fraction left over is owed to the next chunk)."""
        shape = self.shape
        owed = [0.0]  # remainder decodes carried between chunks, so every chunk size gives the measured rate

        def shaped(ws: list[np.ndarray]) -> list[WindowResult]:
            out = [
                WindowResult(n_tokens=r.n_tokens, token_limit_hits=r.token_limit_hits)
                for r in fn(ws, shape.first_tokens)
            ]
            owed[0] += shape.remainders_per_window * len(ws)
            n_rem = int(owed[0] + 1e-9)
            owed[0] -= n_rem
            for i in range(n_rem):  # window i % len(ws) gets one more decode (content is irrelevant: random weights)
                out[i % len(ws)].n_decodes += 1
            for i in range(0, n_rem, len(ws)):
                rem = fn([ws[j % len(ws)] for j in range(i, min(n_rem, i + len(ws)))], shape.remainder_tokens)
                for j, r in zip(range(i, min(n_rem, i + len(ws))), rem, strict=True):
                    out[j % len(ws)].n_tokens += r.n_tokens
                    out[j % len(ws)].token_limit_hits += r.token_limit_hits
            return out

        return run_impl(
            name, shaped, self.windows, self.device, self.budget_s, chunk or self.batch, note, warmup_calls=warmup_calls
        )

    def timed(self, name: str, impl: Callable[[RandomBench], Row]) -> Row:
        """Run one implementation unless the overall deadline has passed; free the device afterwards."""
        if time.perf_counter() - self.t_start > self.deadline_s:
            return Row(name, skipped=f"skipped: past the {self.deadline_s:.0f}-s deadline")
        print(f"bench_gpu: {name} ...", file=sys.stderr, flush=True)
        try:
            return impl(self)
        except Exception as exc:  # building a model failed: the row says so, the others still run
            return Row(name, skipped=f"failed: {type(exc).__name__}: {str(exc)[:160]}")
        finally:
            _free(self.device)


_IMPORT_ERRORS: dict[str, str] = {}


def _import(name: str) -> Any:
    """The module, or None (the caller's row then says so with :func:`_missing`)."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        _IMPORT_ERRORS[name] = str(exc)
        return None


def _missing(name: str, hint: str) -> str:
    """``not installed (hint)``, plus the import error when it is about something else (a missing dependency)."""
    err = _IMPORT_ERRORS.get(name, "")
    other = err and err != f"No module named '{name}'"
    return f"not installed ({hint})" + (f": {err[:100]}" if other else "")


def _numba_stand_in() -> None:
    """openai-whisper imports numba at import time for its word-timestamp DTW only, which this benchmark never
    runs; on a machine without numba (the device image; the bundle leaves its ~45 MiB out) a module whose ``jit``
    returns the function unchanged stands in."""
    import types

    try:
        import numba  # noqa: F401

        return
    except ImportError:
        pass
    stub = types.ModuleType("numba")

    def jit(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return lambda f: f

    stub.jit = jit  # type: ignore[attr-defined]
    sys.modules["numba"] = stub


def _random_openai_whisper(b: RandomBench, fp16_weights: bool) -> Any:
    """openai-whisper's model class with random weights, built on the device (a large-v3 init takes seconds)."""
    import torch
    import whisper

    torch.manual_seed(0)
    with torch.device(b.device):
        model = whisper.model.Whisper(whisper.model.ModelDimensions(**b.dims)).eval()
    if fp16_weights:  # as OpenAIWhisperBackend loads a model on CUDA: float16 once, layer norms float32
        model.half()
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.float()
    return model


def _whisper_forced_options(b: RandomBench, tokens: int) -> Any:
    import whisper

    return whisper.DecodingOptions(
        task="transcribe",
        language="en",
        temperature=0.0,
        without_timestamps=True,
        sample_len=tokens,
        suppress_tokens=b.suppress,
        fp16=b.fp16,
    )


def ow_as_written(b: RandomBench) -> Row:
    """openai-whisper as the backend was written before issue 11: float32 weights, CPU log-Mel, batch 16."""
    name = "openai-whisper as written (b16)"
    _numba_stand_in()
    whisper = _import("whisper")
    if whisper is None:
        return Row(name, skipped=_missing("whisper", "pip install openai-whisper; on the device: the bundle"))
    import torch

    model = _random_openai_whisper(b, fp16_weights=False)

    def fn(ws: list[np.ndarray], tokens: int) -> list[WindowResult]:
        mels = torch.stack(
            [whisper.log_mel_spectrogram(whisper.pad_or_trim(torch.from_numpy(w)), n_mels=b.dims["n_mels"]) for w in ws]
        ).to(b.device)
        with torch.inference_mode():
            res = whisper.decode(model, mels, _whisper_forced_options(b, tokens))
        return [WindowResult(n_tokens=len(r.tokens), token_limit_hits=int(len(r.tokens) >= tokens)) for r in res]

    return b.run(name, fn, chunk=16, note="fp32 weights, CPU log-Mel")


def ow_reference(b: RandomBench) -> Row:
    """openai-whisper with float16 weights and log-Mel on the device (the reference backend's loading)."""
    name = f"openai-whisper reference fp16 (b{b.batch})" if b.fp16 else f"openai-whisper reference (b{b.batch})"
    _numba_stand_in()
    whisper = _import("whisper")
    if whisper is None:
        return Row(name, skipped=_missing("whisper", "pip install openai-whisper; on the device: the bundle"))
    import torch

    model = _random_openai_whisper(b, fp16_weights=b.fp16)

    def fn(ws: list[np.ndarray], tokens: int) -> list[WindowResult]:
        with torch.inference_mode():
            mels = torch.stack(
                [
                    whisper.pad_or_trim(
                        whisper.log_mel_spectrogram(torch.from_numpy(w).to(b.device), b.dims["n_mels"]), N_FRAMES
                    )
                    for w in ws
                ]
            )
            res = whisper.decode(model, mels.half() if b.fp16 else mels, _whisper_forced_options(b, tokens))
        return [WindowResult(n_tokens=len(r.tokens), token_limit_hits=int(len(r.tokens) >= tokens)) for r in res]

    return b.run(name, fn)


def _random_hf_whisper(b: RandomBench) -> Any:
    """``WhisperForConditionalGeneration`` (SDPA) with random weights, built on the device, plus the generation
    config a real multilingual checkpoint ships (language/task ids), so ``generate(language="en")`` works."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()  # per-call notices about min/max length would flood the log
    d = b.dims
    cfg = transformers.WhisperConfig(
        vocab_size=d["n_vocab"],
        num_mel_bins=d["n_mels"],
        d_model=d["n_text_state"],
        encoder_layers=d["n_audio_layer"],
        decoder_layers=d["n_text_layer"],
        encoder_attention_heads=d["n_audio_head"],
        decoder_attention_heads=d["n_text_head"],
        encoder_ffn_dim=4 * d["n_audio_state"],
        decoder_ffn_dim=4 * d["n_text_state"],
        max_source_positions=d["n_audio_ctx"],
        max_target_positions=d["n_text_ctx"],
        decoder_start_token_id=SOT,
        eos_token_id=EOT,
        pad_token_id=EOT,
        bos_token_id=EOT,
        suppress_tokens=[],
        begin_suppress_tokens=[],
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    with torch.device(b.device):
        model = transformers.WhisperForConditionalGeneration(cfg)
    model = model.to(torch.float16 if b.fp16 else torch.float32).eval()
    gc = model.generation_config
    gc.lang_to_id = {"<|en|>": EN}
    gc.task_to_id = {"translate": TRANSCRIBE - 1, "transcribe": TRANSCRIBE}
    gc.no_timestamps_token_id = NO_TIMESTAMPS
    gc.is_multilingual = True
    gc.decoder_start_token_id = SOT
    return model


def _hf_decode_fn(b: RandomBench, model: Any) -> Callable[[list[np.ndarray], int], list[WindowResult]]:
    import torch

    from stresstest.asr.mel import log_mel_torch

    dtype = next(model.parameters()).dtype

    def fn(ws: list[np.ndarray], tokens: int) -> list[WindowResult]:
        with torch.inference_mode():
            feats = torch.stack([f[:, :N_FRAMES] for f in log_mel_torch(ws, b.dims["n_mels"], b.device)]).to(dtype)
            seqs = model.generate(
                input_features=feats,
                language="en",
                task="transcribe",
                do_sample=False,
                num_beams=1,
                min_new_tokens=tokens,
                max_new_tokens=tokens,
            )
        seqs = seqs.sequences if hasattr(seqs, "sequences") else seqs
        out = []
        for s in seqs.tolist():
            n = len(s) - len(PROMPT) if s[: len(PROMPT)] == PROMPT else len(s)  # some versions return the prompt
            out.append(WindowResult(n_tokens=n, token_limit_hits=int(n >= tokens)))
        return out

    return fn


def hf_sdpa(b: RandomBench) -> Row:
    """Hugging Face transformers, SDPA attention, dynamic KV cache, eager."""
    name = f"transformers sdpa (b{b.batch})"
    transformers = _import("transformers")
    if transformers is None:
        return Row(name, skipped=_missing("transformers", "pip install transformers"))
    model = _random_hf_whisper(b)
    return b.run(
        name,
        _hf_decode_fn(b, model),
        note=f"transformers {transformers.__version__}, attention {model.config._attn_implementation}",
    )


def hf_static_compiled(b: RandomBench) -> Row:
    """The same model with a static KV cache and transformers' own compilation of the decode step
    (``generation_config.compile_config``: ``torch.compile``, ``mode="reduce-overhead"``, i.e. CUDA graphs)."""
    name = f"transformers sdpa static cache{' + torch.compile' if b.compile else ''} (b{b.batch})"
    transformers = _import("transformers")
    if transformers is None:
        return Row(name, skipped=_missing("transformers", "pip install transformers"))
    import torch

    model = _random_hf_whisper(b)
    gc = model.generation_config
    gc.cache_implementation = "static"
    note = f"transformers {transformers.__version__}"
    if not b.compile:
        gc.disable_compile = True  # transformers would compile a static-cache decode on CUDA by itself
        return b.run(name, _hf_decode_fn(b, model), note=note + "; not compiled (--compile on compiles on CPU)")

    def compiled(fullgraph: bool) -> Any:
        cc = transformers.CompileConfig(fullgraph=fullgraph, mode="reduce-overhead")
        cc._compile_all_devices = b.device != "cuda" or None  # transformers compiles on CUDA only by default
        return cc

    gc.compile_config = compiled(True)
    # Two untimed calls: the first compiles the decode step, the second has the CUDA graphs recorded.
    row = b.run(name, _hf_decode_fn(b, model), note=note + "; decode step compiled, fullgraph", warmup_calls=2)
    # A graph break: compile the pieces instead, and say so (only while there is time for a second compilation).
    if row.skipped.startswith("failed") and time.perf_counter() - b.t_start < b.deadline_s:
        torch._dynamo.reset()
        gc.compile_config = compiled(False)
        row = b.run(
            name,
            _hf_decode_fn(b, model),
            warmup_calls=2,
            note=note + f"; fullgraph failed ({row.skipped[8:90]}), compiled with graph breaks",
        )
    torch._dynamo.reset()
    return row


def _random_openai_state_dict(dims: dict, seed: int = 0) -> dict[str, Any]:
    """An openai-whisper state dict of random weights (names and shapes of ``whisper.model.Whisper``), built
    without openai-whisper so CTranslate2 can run on a machine that has only torch."""
    import torch

    g = torch.Generator().manual_seed(seed)
    sd: dict[str, Any] = {}

    def lin(name: str, out: int, inp: int, bias: bool = True) -> None:
        sd[f"{name}.weight"] = torch.randn(out, inp, generator=g) * inp**-0.5
        if bias:
            sd[f"{name}.bias"] = torch.zeros(out)

    def ln(name: str, d: int) -> None:
        sd[f"{name}.weight"], sd[f"{name}.bias"] = torch.ones(d), torch.zeros(d)

    def block(p: str, d: int, cross: bool) -> None:
        for att in ("attn", "cross_attn") if cross else ("attn",):
            for proj in ("query", "value", "out"):
                lin(f"{p}.{att}.{proj}", d, d)
            lin(f"{p}.{att}.key", d, d, bias=False)
            ln(f"{p}.{att}_ln", d)
        lin(f"{p}.mlp.0", 4 * d, d)
        lin(f"{p}.mlp.2", d, 4 * d)
        ln(f"{p}.mlp_ln", d)

    da, dt = dims["n_audio_state"], dims["n_text_state"]
    sd["encoder.conv1.weight"] = torch.randn(da, dims["n_mels"], 3, generator=g) * (3 * dims["n_mels"]) ** -0.5
    sd["encoder.conv1.bias"] = torch.zeros(da)
    sd["encoder.conv2.weight"] = torch.randn(da, da, 3, generator=g) * (3 * da) ** -0.5
    sd["encoder.conv2.bias"] = torch.zeros(da)
    sd["encoder.positional_embedding"] = torch.randn(dims["n_audio_ctx"], da, generator=g) * 0.02
    for i in range(dims["n_audio_layer"]):
        block(f"encoder.blocks.{i}", da, cross=False)
    ln("encoder.ln_post", da)
    sd["decoder.token_embedding.weight"] = torch.randn(dims["n_vocab"], dt, generator=g) * 0.02
    sd["decoder.positional_embedding"] = torch.randn(dims["n_text_ctx"], dt, generator=g) * 0.02
    for i in range(dims["n_text_layer"]):
        block(f"decoder.blocks.{i}", dt, cross=True)
    ln("decoder.ln", dt)
    return sd


def _ct2_template(tmp: Path, n_vocab: int) -> Path:
    """A vocabulary + config folder for :func:`stresstest.asr.convert.openai_to_ct2`: the multilingual special
    tokens at their ids (CTranslate2 finds them by name), placeholders for the text tokens (prompts are ids)."""
    if n_vocab != 51866:
        raise ValueError(f"the random CTranslate2 vocabulary is the multilingual 51866, not {n_vocab}")
    specials = [
        "<|endoftext|>",
        "<|startoftranscript|>",
        "<|en|>",
        *(f"<|lang{i}|>" for i in range(1, 100)),
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
        *(f"<|{i * 0.02:.2f}|>" for i in range(1501)),
    ]
    tokens = [f"t{i}" for i in range(EOT)] + specials
    assert len(tokens) == n_vocab and tokens[TIMESTAMP_BEGIN] == "<|0.00|>" and tokens[TRANSCRIBE] == "<|transcribe|>"
    d = tmp / "ct2-template"
    d.mkdir(parents=True, exist_ok=True)
    (d / "vocabulary.json").write_text(json.dumps(tokens))
    (d / "config.json").write_text(
        json.dumps({"suppress_ids": [], "suppress_ids_begin": [], "lang_ids": list(range(EN, EN + 100))})
    )
    return d


def ct2_whisper(b: RandomBench) -> Row:
    """CTranslate2's Whisper (what faster-whisper runs) on random weights of the same shape."""
    compute = "float16" if b.fp16 else "int8"
    name = f"ctranslate2 {compute} (b{b.batch})"
    ctranslate2 = _import("ctranslate2")
    if ctranslate2 is None:
        return Row(name, skipped=_missing("ctranslate2", "pip install ctranslate2; CUDA: its wheel is a CUDA 12 build"))
    if b.device == "cuda":
        if not ctranslate2.get_cuda_device_count():
            return Row(name, skipped="not run: this CTranslate2 build sees no CUDA device")
        from stresstest.asr.cudalibs import preload_cuda_libraries

        try:
            preload_cuda_libraries()
        except Exception as exc:  # the CUDA-13-only device without the fallback: cuBLAS 12 is not there
            return Row(name, skipped=f"not run: {str(exc)[:150]}")
        if os.environ.get("BENCH_GPU_CUBLAS13_AS_12"):
            name += ", cuBLAS 13 as 12"
    from stresstest.asr.convert import openai_to_ct2
    from stresstest.asr.mel import log_mel_numpy_batch, torch_cuda_available

    ck = {"dims": b.dims, "model_state_dict": _random_openai_state_dict(b.dims)}
    path = openai_to_ct2(
        ck, b.tmp / "ct2-random", template_dir=_ct2_template(b.tmp, b.dims["n_vocab"]), quantization="float16"
    )
    del ck
    model = ctranslate2.models.Whisper(str(path), device=b.device, compute_type=compute, intra_threads=b.threads or 0)
    mel_device = "cuda" if b.device == "cuda" and torch_cuda_available() else "cpu"
    # CTranslate2's Whisper samples at most min(max_length / 2, max_length - prompt + 1) tokens
    # (src/models/whisper.cc; stresstest.asr.fw_batched.ct2_token_cap): 2 T caps a decode at T.

    def fn(ws: list[np.ndarray], tokens: int) -> list[WindowResult]:
        feats = np.stack([f[:, :N_FRAMES] for f in log_mel_numpy_batch(ws, b.dims["n_mels"], mel_device)])
        enc = model.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(feats)), to_cpu=False)
        res = model.generate(
            enc,
            [list(PROMPT) for _ in ws],
            max_length=2 * tokens,
            beam_size=1,
            suppress_tokens=b.suppress,
            suppress_blank=True,
            return_scores=False,
        )
        return [
            WindowResult(n_tokens=len(r.sequences_ids[0]), token_limit_hits=int(len(r.sequences_ids[0]) >= tokens))
            for r in res
        ]

    return b.run(name, fn, note=f"ctranslate2 {ctranslate2.__version__}; log-Mel torch on {mel_device}")


#: The random mode's rows, in order; the compiled one last (its compilation is the least predictable cost).
RANDOM_IMPLS: tuple[tuple[str, Callable[[RandomBench], Row]], ...] = (
    ("openai-whisper as written", ow_as_written),
    ("openai-whisper reference", ow_reference),
    ("transformers sdpa", hf_sdpa),
    ("ctranslate2", ct2_whisper),
    ("transformers static", hf_static_compiled),
)


@dataclass(frozen=True)
class RandomSetup:
    """What the parent and every row process agree on (derived from the same arguments)."""

    device: str
    dims: dict
    batch: int
    n: int
    shape: DecodeShape
    compile: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RandomSetup:
        device = args.device
        dims = dict(
            LARGE_V3 if (args.shape or ("large-v3" if device == "cuda" else "tiny")) == "large-v3" else TINY_RANDOM
        )
        batch = args.batch or (32 if device == "cuda" else 2)
        n = args.windows or (256 if device == "cuda" else 2 * batch)
        n = math.ceil(n / batch) * batch  # whole batches only: a static cache / CUDA graph has one batch size
        shape = DecodeShape.forced(args.tokens) if args.tokens else DecodeShape.load(args.decode_shape)
        longest = max(shape.first_tokens, shape.remainder_tokens)
        if not 1 <= longest <= dims["n_text_ctx"] // 2:
            raise SystemExit(
                f"bench_gpu: a decode of {longest} steps is over Whisper's sample length {dims['n_text_ctx'] // 2}"
            )
        compile_ = args.compile == "on" or (args.compile == "auto" and device == "cuda")
        return cls(device, dims, batch, n, shape, compile_)

    def header(self) -> str:
        import torch

        d = self.dims
        kind = "large-v3" if d == LARGE_V3 else "tiny"
        return (
            f"model: random-init {kind}-shaped (d={d['n_audio_state']}, {d['n_audio_layer']}+{d['n_text_layer']}"
            f" layers, {d['n_audio_head']} heads, {d['n_mels']} mels, vocabulary {d['n_vocab']}); {self.n} "
            f"synthetic 30-s windows; decode shape: {self.shape.describe()} (end-of-text and timestamps "
            f"suppressed); batch {self.batch} (as-written: 16); torch {torch.__version__}. THROUGHPUT ONLY "
            f"(random weights, forced decode lengths)"
        )


def run_random_row(args: argparse.Namespace, label: str, t_start: float) -> Row:
    """One row of the random mode, in this process (a row process: ``--row LABEL``)."""
    import shutil

    import torch

    setup = RandomSetup.from_args(args)
    cache = Path(os.environ.get("STRESSTEST_CACHE") or tempfile.gettempdir())
    tmp = Path(tempfile.mkdtemp(prefix="bench-gpu-", dir=cache if cache.is_dir() else None))
    b = RandomBench(
        device=setup.device,
        dims=setup.dims,
        windows=synthetic_windows(setup.n, seed=0),
        shape=setup.shape,
        batch=setup.batch,
        budget_s=args.budget_s or 30.0,
        deadline_s=float("inf"),
        compile=setup.compile,
        tmp=tmp,
        threads=torch.get_num_threads() if setup.device == "cpu" else 0,
        t_start=t_start,
    )
    try:
        return b.timed(label, dict(RANDOM_IMPLS)[label])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _row_to_json(r: Row) -> dict:
    return {
        "name": r.name,
        "note": r.note,
        "windows": r.windows,
        "audio_s": r.audio_s,
        "wall_s": r.wall_s,
        "mem": r.mem,
        "skipped": r.skipped,
        "results": [[x.n_tokens, x.token_limit_hits, getattr(x, "n_decodes", 1)] for x in r.results],
    }


def _row_from_json(d: dict) -> Row:
    return Row(
        d["name"],
        d["note"],
        d["windows"],
        d["audio_s"],
        d["wall_s"],
        [WindowResult(n_tokens=t, token_limit_hits=h, n_decodes=k) for t, h, k in d["results"]],
        d["mem"],
        d["skipped"],
    )


def cublas13_as_12(tmp: Path) -> Path | None:
    """The fallback for a machine with CUDA 13's cuBLAS only (the CTranslate2 wheel is a CUDA 12 build that opens
    ``libcublas.so.12`` / ``libcublasLt.so.12`` by name): a folder of links under those names to pip's CUDA 13
    libraries (``nvidia/cu13/lib``), for the CTranslate2 row's ``LD_LIBRARY_PATH``. None when cuBLAS 12 loads (no
    fallback needed) or no CUDA 13 cuBLAS is there. Untested on a GPU: if the libraries' symbol versions or ABI
    differ, the row fails with the loader's own message and the other rows are unaffected."""
    from stresstest.asr.cudalibs import CUBLAS12, preload_cuda_libraries

    try:
        preload_cuda_libraries(CUBLAS12)
        return None
    except Exception:
        pass
    for p in sys.path:
        lib = Path(p) / "nvidia" / "cu13" / "lib"
        if (lib / "libcublas.so.13").is_file() and (lib / "libcublasLt.so.13").is_file():
            d = tmp / "cublas13-as-12"
            d.mkdir(parents=True, exist_ok=True)
            for name in ("libcublas", "libcublasLt"):
                link = d / f"{name}.so.12"
                if not link.exists():
                    link.symlink_to(lib / f"{name}.so.13")
            return d
    return None


def _row_process(argv: list[str], label: str, timeout_s: float, tmp: Path, env: dict[str, str]) -> Row | None:
    """Run one row as its own process, bounded by ``timeout_s``: None when it did not finish in time (killed)."""
    import signal
    import subprocess

    out = tmp / f"row-{abs(hash(label))}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--row", label, "--row-json", str(out)]
    env = {**env, PARENT_PID_ENV: str(os.getpid())}  # the row process checks it is still ours (_die_with_parent)
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)  # noqa: S603 - fixed argument list
    try:
        proc.wait(timeout=max(1.0, timeout_s))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None
    if not out.is_file():
        return Row(label, skipped=f"failed: the row process exited {proc.returncode} without a result")
    return _row_from_json(json.loads(out.read_text()))


def run_random(
    args: argparse.Namespace, t_start: float, argv: list[str], sink: Callable[[Row], None]
) -> tuple[list[Row], dict, str]:
    """The device benchmark (module docstring): each row a separate process bounded in time, its result handed to
    ``sink`` as soon as it is measured (a row that times out or crashes loses only itself)."""
    import shutil

    setup = RandomSetup.from_args(args)
    only = [s.strip().lower() for s in (args.only or "").split(",") if s.strip()]
    deadline = args.deadline_s or (330.0 if setup.device == "cuda" else float("inf"))
    total = args.total_s or (510.0 if setup.device == "cuda" else float("inf"))
    row_limit = args.row_timeout_s or (240.0 if setup.device == "cuda" else 900.0)
    tmp = Path(tempfile.mkdtemp(prefix="bench-gpu-rows-"))
    rows: list[Row] = []
    try:
        for label, _ in RANDOM_IMPLS:
            if only and not any(o in label.lower() for o in only):
                continue
            elapsed = time.perf_counter() - t_start
            env = dict(os.environ)
            if elapsed > deadline:
                row: Row | None = Row(label, skipped=f"skipped: past the {deadline:.0f}-s deadline")
            else:
                limit = min(row_limit, total - elapsed)
                if label == "ctranslate2" and setup.device == "cuda" and args.cublas13_as_12 == "auto":
                    links = cublas13_as_12(tmp)
                    if links is not None:
                        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(links), env.get("LD_LIBRARY_PATH")]))
                        env["BENCH_GPU_CUBLAS13_AS_12"] = str(links)
                row = _row_process(argv, label, limit, tmp, env)
                if row is None:
                    row = Row(
                        label,
                        skipped=f"timed out: killed after {limit:.0f} s (its own process; the other "
                        f"rows are unaffected)",
                    )
            rows.append(row)
            sink(row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows, setup.dims, setup.header()


# ----------------------------------------------------------------------------- pipeline mode (real weights)


def pipeline_windows(config: Path, n_min: int, cache: Path, max_turns: int | None, n_enc: int | None) -> list[dict]:
    """≥ ``n_min`` 30-s windows of the pipeline's own clean / babble 5 dB / ambient 5 dB mixtures."""
    from stresstest.asr.base import split_windows
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
    babble = (
        NoiseSpec(family="babble", kind="builtin", bank_max_sentences=12, n_talkers_min=3, n_talkers_max=4)
        if small
        else NoiseSpec(family="babble", kind="builtin", bank_max_sentences=120)
    )
    specs = {"babble": babble, "ambient": NoiseSpec(family="ambient", kind="builtin")}
    sources = {f: make_noise_source(s, encounters=all_encs, cache_dir=cache) for f, s in specs.items()}
    out: list[dict] = []
    for enc in encs:
        enc = enc.truncated(max_turns) if max_turns else enc
        speech = speech_for(enc, cache)
        paths = {"clean": Path(speech.path)}
        for fam, spec in specs.items():
            got: dict[str, Any] = {}
            build_mixtures(
                MixJob(enc.encounter_id, fam, (5.0,), (f"{fam}_5db",)),
                speech,
                sources[fam],
                spec.model_dump(mode="json"),
                seed=cfg.run.seed,
                cache_dir=cache,
                on_done=lambda c, p, i, e, got=got: got.__setitem__(c, (p, e)),
            )
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


def baseline_openai_whisper(model: Any, windows: list[np.ndarray], batch_size: int, fp16: bool) -> list[WindowResult]:
    """openai-whisper exactly as the backend was written before issue 11 (kept here as the baseline)."""
    import torch
    import whisper

    dec = whisper.DecodingOptions(
        task="transcribe", language="en", temperature=0.0, without_timestamps=False, suppress_blank=True, fp16=fp16
    )
    device = next(model.parameters()).device
    out: list[WindowResult] = []
    for i in range(0, len(windows), batch_size):
        chunk = windows[i : i + batch_size]
        mels = torch.stack(
            [
                whisper.log_mel_spectrogram(
                    whisper.pad_or_trim(torch.from_numpy(w.astype(np.float32))), n_mels=model.dims.n_mels
                )
                for w in chunk
            ]
        ).to(device)
        with torch.inference_mode():
            results = whisper.decode(model, mels, dec)
        for r in results:
            skip = r.no_speech_prob > 0.6 and r.avg_logprob < -1.0
            out.append(
                WindowResult(
                    text="" if skip else r.text.strip(),
                    n_tokens=len(r.tokens),
                    token_limit_hits=int(len(r.tokens) >= model.dims.n_text_ctx // 2),
                )
            )
    return out


def hf_transformers(model: Any, windows: list[np.ndarray], batch_size: int, n_mels: int) -> list[WindowResult]:
    """HF transformers Whisper (SDPA): one ``generate`` per batch, 30-s windows, greedy, no remainder pass."""
    import torch
    import whisper

    device, dtype = next(model.parameters()).device, next(model.parameters()).dtype
    out: list[WindowResult] = []
    for i in range(0, len(windows), batch_size):
        chunk = windows[i : i + batch_size]
        feats = torch.stack(
            [
                whisper.log_mel_spectrogram(
                    whisper.pad_or_trim(torch.from_numpy(w.astype(np.float32)).to(device)), n_mels=n_mels
                )
                for w in chunk
            ]
        ).to(dtype)
        with torch.inference_mode():
            seqs = model.generate(
                input_features=feats,
                do_sample=False,
                num_beams=1,
                max_new_tokens=220,
                return_timestamps=True,
                language="en",
                task="transcribe",
            )
        seqs = seqs.sequences if hasattr(seqs, "sequences") else seqs
        for s in seqs.tolist():
            out.append(WindowResult(text=_hf_decode(model, s), n_tokens=len(s), token_limit_hits=int(len(s) >= 220)))
    return out


def _hf_decode(model: Any, ids: list[int]) -> str:
    import whisper

    tok = whisper.tokenizer.get_tokenizer(model.config.vocab_size >= 51865, num_languages=100)
    return str(tok.decode([t for t in ids if t < tok.eot])).strip()


def run_pipeline(args: argparse.Namespace, t_start: float) -> tuple[list[Row], dict, str]:
    """Real weights on the pipeline's mixtures (module docstring)."""
    import torch

    from stresstest.asr.backends import (
        BUNDLED_TINY_EN,
        FasterWhisperBackend,
        OpenAIWhisperBackend,
        release_asr_models,
    )
    from stresstest.asr.base import DecodingOptions
    from stresstest.cache import default_cache_dir

    device = args.device
    threads = args.cpu_threads if args.cpu_threads is not None else (1 if args.tiny else 0)
    cache = default_cache_dir()
    n_min = args.windows or (3 if args.tiny else 128)
    max_turns = args.max_turns or (4 if args.tiny else None)
    n_enc = args.encounters or (1 if args.tiny else None)
    items = pipeline_windows(args.config, n_min, cache, max_turns, n_enc)
    if args.tiny:
        items = items[:n_min]  # smoke: exactly the asked number (the full run keeps every window it made)
    windows = [it["audio"] for it in items]
    opts = DecodingOptions()
    fw_src, ow_src = (BUNDLED_TINY_EN, BUNDLED_TINY_EN) if args.tiny else (args.fw_model, args.ow_model)
    if args.tiny:
        ck = torch.load(
            OpenAIWhisperBackend(ow_src, device="cpu", cache_dir=cache)._checkpoint(),
            map_location="cpu",
            weights_only=True,
        )
        dims = dict(ck["dims"])
        del ck
    else:
        dims = dict(LARGE_V3)
    fp16 = device == "cuda"
    budget = args.budget_s or (30.0 if args.tiny else 40.0)
    deadline = args.deadline_s or (float("inf") if args.tiny else 450.0)

    def timed(name: str, make: Callable[[], Row]) -> Row:
        """Run one implementation unless the overall deadline has passed (then say so in its row)."""
        if time.perf_counter() - t_start > deadline:
            return Row(name, skipped=f"skipped: past the {deadline:.0f}-s deadline")
        return make()

    rows: list[Row] = []
    # 1. baseline: openai-whisper as written (fp32 weights, per-call cast, CPU mel, one decode per window)
    rows.append(
        timed(
            "openai-whisper as written (b16)",
            lambda: run_impl(
                "openai-whisper as written (b16)",
                lambda ws: baseline_openai_whisper(_plain_openai(ow_src, device, cache), ws, 16, fp16),
                windows,
                device,
                budget,
                32,
                warmup=8,
            ),
        )
    )
    _PLAIN.clear()
    release_asr_models()
    ref_be = OpenAIWhisperBackend(ow_src, device=device, batch_size=16, cache_dir=cache)
    rows.append(
        timed(
            "openai-whisper reference (b16)",
            lambda: run_impl(
                "openai-whisper reference (b16)",
                lambda ws: ref_be.decode_windows(ws, opts),
                windows,
                device,
                budget,
                32,
                warmup=8,
            ),
        )
    )
    release_asr_models()
    for bs in (16, 32):
        fw_be = FasterWhisperBackend(fw_src, device=device, compute_type="auto", cpu_threads=threads)
        name = f"faster-whisper {fw_be.compute_type} (b{bs})"
        rows.append(
            timed(
                name,
                lambda name=name, be=fw_be, bs=bs: run_impl(
                    name,
                    lambda ws: be.decode_windows_batched(ws, opts, bs),
                    windows,
                    device,
                    budget,
                    2 * bs,
                    warmup=bs // 2,
                ),
            )
        )
        release_asr_models()
    rows.append(timed("transformers sdpa (b16)", lambda: _hf_row(args, device, dims, windows, budget, fp16)))
    _free(device)
    rows.append(timed("vLLM offline no-ts (seqs 64)", lambda: _vllm_row(args, device, windows, budget, cache)))
    header = (
        f"model: {'tiny.en' if args.tiny else 'large-v3'} (d={dims['n_audio_state']}, {dims['n_audio_layer']}+"
        f"{dims['n_text_layer']} layers, {dims['n_mels']} mels); {len(windows)} fixed 30-s windows (a file's "
        f"last one shorter; clean, babble 5 dB, ambient 5 dB)"
    )
    return rows, dims, header


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


_PLAIN: dict[tuple[str, str], Any] = {}


def _plain_openai(src: str, device: str, cache: Path) -> Any:
    """The model as the old backend loaded it: fp32 weights (cast to fp16 inside every Linear call)."""
    key = (src, device)
    if key not in _PLAIN:
        from stresstest.asr.backends import OpenAIWhisperBackend
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


def _hf_row(
    args: argparse.Namespace, device: str, dims: dict, windows: list[np.ndarray], budget: float, fp16: bool
) -> Row:
    name = "transformers sdpa (b16)"
    try:
        import torch
        import transformers
    except ImportError:
        return Row(name, skipped=_missing("transformers", "pip install transformers"))
    if not args.hf_model:
        return Row(name, skipped="no HF-format weights (--hf-model DIR); --random measures it")
    model = transformers.WhisperForConditionalGeneration.from_pretrained(
        args.hf_model,
        torch_dtype=torch.float16 if fp16 else torch.float32,
        attn_implementation="sdpa",
        local_files_only=True,
    )
    hf = model.to(device).eval()
    row = run_impl(
        name,
        lambda ws: hf_transformers(hf, ws, 16, dims["n_mels"]),
        windows,
        device,
        budget,
        32,
        note=f"transformers {transformers.__version__}",
        warmup=8,
    )
    del model
    return row


# -------------------------------------------------------------------------------------------------- table


def _vllm_row(args: argparse.Namespace, device: str, windows: list[np.ndarray], budget: float, cache: Path) -> Row:
    """``asr.backend: vllm`` (:mod:`stresstest.asr.vllm_backend`: one offline ``vllm.LLM``, no timestamps, 64
    windows per ``generate``) when vLLM imports, on real weights: the bundled tiny.en converted to a Hugging Face
    folder (``--tiny``), ``--hf-model``, or large-v3 from the HF cache. Its agreement with the timestamped
    reference includes the no-timestamps difference (BENCHMARKS.md). Not in ``--random``: the device image has
    no vLLM."""
    name = "vLLM offline no-ts (seqs 64)"
    if _import("vllm") is None:
        return Row(name, skipped=_missing("vllm", "pip install vllm"))
    from stresstest.asr.backends import BUNDLED_TINY_EN
    from stresstest.asr.base import DecodingOptions
    from stresstest.asr.vllm_backend import VLLMASROptions, VLLMWhisperBackend, release_vllm_asr, vllm_version
    from stresstest.errors import ASRError

    model = BUNDLED_TINY_EN if args.tiny else (args.hf_model or "large-v3")
    be = VLLMWhisperBackend(
        model, device=device, cache_dir=cache, options=VLLMASROptions(max_num_seqs=64, gpu_memory_utilization=0.5)
    )
    try:
        be.runtime(1)  # resolves the model: missing large-v3 weights are a skipped row, not a failure
    except ASRError as exc:
        return Row(name, skipped=f"no HF-format weights for vLLM: {str(exc)[:160]}")
    opts = DecodingOptions(without_timestamps=True)
    try:
        return run_impl(
            name,
            lambda ws: be.decode_windows(ws, opts),
            windows,
            device,
            budget,
            64,
            note=f"vLLM {vllm_version()}, {be.dtype()}",
        )
    finally:
        release_vllm_asr()
        _free(device)


def _row_json(r: Row, dims: dict, peaks: tuple[float, float] | None) -> dict:
    toks = np.mean([x.n_tokens for x in r.results]) if r.results else 0.0
    decodes = float(np.mean([getattr(x, "n_decodes", 1) for x in r.results])) if r.results else 1.0
    return {
        "name": r.name,
        "note": r.note,
        "windows": r.windows,
        "audio_s": r.audio_s,
        "wall_s": r.wall_s,
        "mem_gib": r.mem,
        "tokens_per_window": float(toks),
        "decodes_per_window": decodes,
        "skipped": r.skipped,
        "floor_s_per_window": floor_seconds(dims, float(toks), peaks, decodes),
    }


def _peaks_text(peaks: tuple[float, float] | None) -> str:
    return f"{peaks[0] / 1e12:.0f} TFLOP/s, {peaks[1] / 1e12:.2f} TB/s" if peaks else "n/a"


def render(
    rows: list[Row],
    dims: dict,
    peaks: tuple[float, float] | None,
    gpu: str,
    header: str,
    random_mode: bool,
    total_s: float,
) -> str:
    """The one table: a header line, then one row per implementation (measured, or why not)."""
    base, ref = _baseline(rows)
    lines = [f"Device: {gpu}; {header}; floor peaks: {_peaks_text(peaks)}; total {total_s:.0f} s.", "", TABLE_HEAD]
    lines += [row_line(r, base, ref, dims, peaks, random_mode) for r in rows]
    notes = [f"- {r.name}: {r.note}" for r in rows if r.note and not r.skipped]
    return "\n".join(lines + ([""] + notes if notes else []))


TABLE_HEAD = (
    "| implementation | × real time | windows/s | tokens/window | at token limit | peak GPU GiB | agreement "
    "with reference | floor ms/window | efficiency vs floor | vs as-written |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def _baseline(rows: list[Row]) -> tuple[Row | None, Row | None]:
    base = next(
        (r for r in rows if r.name.startswith("openai-whisper as written") and not r.skipped and r.windows), None
    )
    ref = next((r for r in rows if r.name.startswith("openai-whisper reference") and not r.skipped), None)
    return base, ref


def row_line(
    r: Row, base: Row | None, ref: Row | None, dims: dict, peaks: tuple[float, float] | None, random_mode: bool
) -> str:
    """One table row: measured, or why not."""
    if r.skipped or not r.windows:
        return f"| {r.name} | {r.skipped or 'no windows'} | | | | | | | | |"
    rtf = r.audio_s / r.wall_s
    toks = float(np.mean([x.n_tokens for x in r.results]))
    known = [x.token_limit_hits for x in r.results if x.token_limit_hits >= 0]
    limit = f"{np.mean([k > 0 for k in known]):.1%}" if len(known) == len(r.results) else "n/a"
    tok_s = f"{toks:.0f}" if not r.name.startswith("faster-whisper") else f"≥{toks:.0f}"
    agree = "n/a"
    if ref is not None and not random_mode:
        n = min(len(ref.results), len(r.results))
        agree = f"{agreement([x.text for x in ref.results[:n]], [x.text for x in r.results[:n]]):.3f}"
    decodes = float(np.mean([getattr(x, "n_decodes", 1) for x in r.results]))
    fl = floor_seconds(dims, toks, peaks, decodes)
    per = r.wall_s / r.windows
    vs = f"{(base.wall_s / base.windows) / per:.2f}×" if base is not None else "–"
    return (
        f"| {r.name} | {rtf:,.1f} | {r.windows / r.wall_s:.2f} | {tok_s} | {limit} | {r.mem} | {agree} | "
        f"{'%.1f' % (fl * 1e3) if fl else 'n/a'} | {'%.1f%%' % (100 * fl / per) if fl else 'n/a'} | {vs} |"
    )


PARENT_PID_ENV = "BENCH_GPU_PARENT_PID"


def _die_with_parent() -> None:
    """A row process dies with the benchmark that started it (Linux: PR_SET_PDEATHSIG), so killing the benchmark
    leaves no row running on the device. Called first thing in a row process; a benchmark killed before that
    (the row still starting) is caught by the parent-pid check after the prctl: the row was already handed to
    init, so it ends at once instead of running on (seen: a killed benchmark's row left running for good)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and os.getppid() != int(parent):
        os._exit(1)


class _AppendOnlyTable:
    """The random mode's results as they come: each row's line appended to ``OUT.md`` and its JSON to
    ``OUT.jsonl`` (flushed, fsynced) the moment its process ends, and echoed on stderr; a run killed half-way
    leaves every finished row on disk."""

    def __init__(self, out: Path | None, head: str, dims: dict, peaks: tuple[float, float] | None) -> None:
        self.out, self.dims, self.peaks = out, dims, peaks
        self.rows: list[Row] = []
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.with_suffix(".jsonl").write_text("")
            self._append(".md", f"{head}\n\n{TABLE_HEAD}\n", new=True)

    def _append(self, suffix: str, text: str, new: bool = False) -> None:
        assert self.out is not None
        with open(self.out.with_suffix(suffix), "w" if new else "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    def __call__(self, row: Row) -> None:
        self.rows.append(row)
        line = row_line(row, *_baseline(self.rows), self.dims, self.peaks, True)
        print(f"bench_gpu: row done: {line}", file=sys.stderr, flush=True)
        if self.out is not None:
            self._append(".jsonl", json.dumps({**_row_json(row, self.dims, self.peaks), "line": line}) + "\n")
            self._append(".md", line + "\n")

    def finish(self, rows: list[Row], total_s: float) -> None:
        if self.out is not None:
            notes = [f"- {r.name}: {r.note}" for r in rows if r.note and not r.skipped]
            self._append(".md", "\n".join(["", f"Total {total_s:.0f} s.", *notes]) + "\n")


# -------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument(
        "--random",
        action="store_true",
        help="synthetic windows, random-init models, forced decode lengths (the device benchmark)",
    )
    ap.add_argument("--tiny", action="store_true", help="pipeline mode on the bundled tiny.en (smoke)")
    ap.add_argument(
        "--windows",
        type=int,
        default=None,
        help="number of windows (random: default 256 on CUDA, 2 batches on CPU; pipeline: minimum, "
        "default 128, tiny 3)",
    )
    ap.add_argument("--batch", type=int, default=None, help="random mode: windows per call (default 32; CPU 2)")
    ap.add_argument(
        "--tokens",
        type=int,
        default=None,
        help="random mode: force this many decoder steps per window in one decode (default: the "
        "decode shape measured on the demo's audio, --decode-shape)",
    )
    ap.add_argument(
        "--decode-shape",
        type=Path,
        default=SHAPE_FILE,
        help="random mode: the measured decode shape (first decode's steps, remainder decodes per "
        "window and their steps); written by --measure-shape",
    )
    ap.add_argument(
        "--measure-shape",
        type=int,
        default=None,
        metavar="N",
        help="measure the decode shape on N windows of --config's audio (the fast path, tiny.en, CPU) "
        "and write --decode-shape",
    )
    ap.add_argument(
        "--row-timeout-s",
        type=float,
        default=None,
        help="random mode: each row runs as its own process, killed after this many seconds (default "
        "240 on CUDA, 900 on CPU); a killed row loses only itself",
    )
    ap.add_argument(
        "--total-s",
        type=float,
        default=None,
        help="random mode: no row runs past this many seconds in all (default 510 on CUDA)",
    )
    ap.add_argument(
        "--cublas13-as-12",
        choices=["auto", "off"],
        default="auto",
        help="random mode, CUDA, no cuBLAS 12: run the CTranslate2 row with pip's CUDA 13 cuBLAS "
        "linked under the CUDA 12 names (BENCHMARKS.md; may fail with the loader's message)",
    )
    ap.add_argument("--row", default=None, help=argparse.SUPPRESS)  # a row process (run_random)
    ap.add_argument("--row-json", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument(
        "--shape",
        choices=["large-v3", "tiny"],
        default=None,
        help="random mode: model shape (default large-v3 on CUDA, tiny on CPU)",
    )
    ap.add_argument(
        "--compile",
        choices=["auto", "on", "off"],
        default="auto",
        help="random mode: torch.compile the static-cache transformers row (auto: on CUDA only)",
    )
    ap.add_argument(
        "--only",
        default=None,
        help="random mode: comma-separated name parts of the implementations to run (default: all)",
    )
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml", help="corpus + seed source")
    ap.add_argument("--encounters", type=int, default=None, help="at most this many encounters")
    ap.add_argument("--max-turns", type=int, default=None, help="truncate encounters (default: config's)")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="timed seconds per implementation at most (default 30; pipeline 40)",
    )
    ap.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help="start no implementation after this many seconds in all (default 330 random, 450 "
        "pipeline, so a GPU run fits 8 min; none with --tiny)",
    )
    ap.add_argument("--fw-model", default="large-v3", help="faster-whisper model name/dir (real weights)")
    ap.add_argument("--ow-model", default="large-v3", help="openai-whisper model name/checkpoint (real weights)")
    ap.add_argument("--hf-model", default=None, help="HF transformers Whisper dir (real weights)")
    ap.add_argument("--peak-tflops", type=float, default=None, help="floor: tensor rate (default: by GPU name)")
    ap.add_argument("--peak-tbps", type=float, default=None, help="floor: memory bandwidth (default: by GPU name)")
    ap.add_argument(
        "--cpu-threads",
        type=int,
        default=None,
        help="torch / CTranslate2 CPU threads (default: 1 on CPU smoke runs, else the libraries')",
    )
    ap.add_argument("--out", type=Path, default=None, help="also write the table (.md) and rows (.json) here")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    if args.row:
        _die_with_parent()  # before the imports below, which take seconds
    t_start = time.perf_counter()
    for name in filter(None, os.environ.get("BENCH_GPU_HIDE_MODULES", "").split(",")):
        sys.modules[name] = None  # type: ignore[assignment]  # tests: a machine without these packages
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if args.measure_shape:  # the fast path on the CPU: no torch needed
        shape = measure_shape(args.config, args.measure_shape, args.batch or 8, args.decode_shape)
        print(f"bench_gpu: {shape.describe()} -> {args.decode_shape}")
        return 0
    try:
        import torch
    except ImportError:
        print("bench_gpu: needs torch (pip install torch)", file=sys.stderr)
        return 2
    device = args.device
    smoke = device == "cpu" and (args.tiny or args.random)
    threads = args.cpu_threads if args.cpu_threads is not None else (1 if smoke else 0)
    if threads:
        torch.set_num_threads(threads)
    if device == "cuda" and not torch.cuda.is_available():
        print("bench_gpu: --device cuda but torch sees no CUDA device; use --device cpu (smoke)", file=sys.stderr)
        return 2
    if args.row:  # one row of the random mode, in its own process: the result goes to --row-json
        if os.environ.get("BENCH_GPU_TEST_HANG_ROW") == args.row:  # tests of the time bound: a row that hangs
            time.sleep(3600)
        row = run_random_row(args, args.row, t_start)
        args.row_json.write_text(json.dumps(_row_to_json(row)))
        return 0
    random_mode = args.random
    if not random_mode and not args.tiny and not _large_v3_available(args.ow_model, args.fw_model):
        print("bench_gpu: no large-v3 weights found; running --random", file=sys.stderr)
        random_mode = True
        argv.append("--random")
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    peaks = None
    if args.peak_tflops and args.peak_tbps:
        peaks = (args.peak_tflops * 1e12, args.peak_tbps * 1e12)
    elif device == "cuda":
        peaks = next((p for k, p in PEAKS.items() if k in gpu), None)
    if random_mode:
        setup = RandomSetup.from_args(args)
        sink = _AppendOnlyTable(
            args.out, f"Device: {gpu}; {setup.header()}; floor peaks: {_peaks_text(peaks)}.", setup.dims, peaks
        )
        rows, dims, header = run_random(args, t_start, argv, sink)
        sink.finish(rows, time.perf_counter() - t_start)
    else:
        rows, dims, header = run_pipeline(args, t_start)
    table = render(rows, dims, peaks, gpu, header, random_mode, time.perf_counter() - t_start)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        if not random_mode:  # the random mode's .md was written row by row
            args.out.with_suffix(".md").write_text(table + "\n")
        args.out.with_suffix(".json").write_text(json.dumps([_row_json(r, dims, peaks) for r in rows], indent=1))
    # Rows that could not run here (not installed, no CUDA libraries, past the deadline) are not failures.
    return 0 if all(not r.skipped or r.skipped.startswith(("not ", "no HF", "skipped")) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
