"""The ASR stage: audio files → cached :class:`Transcript` records."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import soundfile as sf
from pydantic import BaseModel, ConfigDict, Field, model_validator

from stresstest.asr.backends import (
    FasterWhisperBackend,
    OpenAICompatibleASR,
    OpenAIWhisperBackend,
    WindowResult,
    release_asr_models,
)
from stresstest.asr.base import ASRBackend, DecodingOptions, join_windows, split_windows
from stresstest.asr.vllm_backend import VLLMASROptions, VLLMWhisperBackend, check_config
from stresstest.audio import SAMPLE_RATE_HZ, read_wav_exact
from stresstest.cache import KeyValueCache, hash_obj, sha256_file
from stresstest.errors import ASRError
from stresstest.records import Transcript, revise

ASR_CODE_VERSION = "asr-2"


class ASRConfig(BaseModel):
    """ASR front-end settings (``asr:`` in the run config)."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["faster-whisper", "openai-whisper", "openai-api", "vllm"] = Field(
        default="faster-whisper", description="Which implementation decodes."
    )
    model: str | None = Field(
        default=None,
        description="faster-whisper: CT2 model dir or name (None = bundled tiny.en); openai-whisper: "
        "'large-v3' or a checkpoint path; openai-api: the served model name; vllm: as faster-whisper (converted "
        "to a Hugging Face checkpoint), a Hugging Face folder, or a hub id / 'large-v3' already in the HF cache.",
    )
    device: Literal["auto", "cpu", "cuda"] = "auto"
    compute_type: str = Field(
        default="auto", description="faster-whisper compute type; 'auto' = float16 on CUDA, int8 on CPU."
    )
    batch_size: int = Field(
        default=1,
        ge=1,
        description="1 = sequential; >1 = windows of several encounters decoded together "
        "(faster-whisper: batched pass + remainder pass; openai-whisper: batched transcribe seek loop).",
    )
    cpu_threads: int = Field(default=0, ge=0, description="faster-whisper CPU threads (0 = min(4, cores)).")
    base_url: str | None = Field(default=None, description="openai-api: e.g. http://127.0.0.1:8000/v1")
    api_key_env: str | None = Field(default=None, description="openai-api: env var holding the key (never stored).")
    concurrency: int = Field(
        default=16,
        ge=1,
        description="openai-api: requests in flight (a vLLM Whisper server batches them; raise it for a GPU server).",
    )
    decoding: DecodingOptions = Field(default_factory=DecodingOptions)
    vllm: VLLMASROptions = Field(default_factory=VLLMASROptions, description="asr.backend 'vllm': engine options.")

    @model_validator(mode="after")
    def _backend_can_honour(self) -> ASRConfig:
        check_config(self.backend, self.compute_type, self.decoding)
        return self


def make_backend(cfg: ASRConfig, cache_dir: Path | None = None) -> ASRBackend:
    """Instantiate the configured backend (models load lazily on first use)."""
    if cfg.backend == "faster-whisper":
        return FasterWhisperBackend(
            cfg.model, device=cfg.device, compute_type=cfg.compute_type, cpu_threads=cfg.cpu_threads
        )
    if cfg.backend == "vllm":
        return VLLMWhisperBackend(
            cfg.model, device=cfg.device, compute_type=cfg.compute_type, options=cfg.vllm, cache_dir=cache_dir
        )
    if cfg.backend == "openai-whisper":
        return OpenAIWhisperBackend(
            cfg.model or "large-v3", device=cfg.device, batch_size=cfg.batch_size, cache_dir=cache_dir
        )
    if not cfg.base_url or not cfg.model:
        raise ASRError("asr.backend 'openai-api' needs asr.base_url and asr.model")
    return OpenAICompatibleASR(cfg.base_url, cfg.model, api_key_env=cfg.api_key_env, concurrency=cfg.concurrency)


@dataclass(frozen=True)
class ASRItem:
    """One audio file to transcribe."""

    encounter_id: str
    condition: str
    audio_path: Path


def backend_runtime(backend: ASRBackend, batch_size: int) -> dict[str, object]:
    """What besides audio, model and decoding can change a backend's text (device, precision, batch
    shape, package versions); ``{}`` for a backend that cannot say (an HTTP server)."""
    fn = getattr(backend, "runtime", None)
    return dict(fn(batch_size)) if callable(fn) else {}


def transcript_key(
    audio_sha256: str, model_id: str, decoding: DecodingOptions, runtime: dict[str, object] | None = None
) -> str:
    """Cache key: (audio content, model, decoding, runtime: device/precision/batch/package versions, code)."""
    return hash_obj("transcript", ASR_CODE_VERSION, audio_sha256, model_id, decoding.model_dump(), runtime or {})


def decode_windows(
    backend: ASRBackend, windows: list[np.ndarray], opts: DecodingOptions, batch_size: int
) -> list[WindowResult]:
    """Route to the backend's best path: its own seek-loop decoder, the batched pass, or sequential."""
    decode = getattr(backend, "decode_windows", None)
    if callable(decode):
        return list(decode(windows, opts))
    if batch_size > 1 and callable(getattr(backend, "decode_windows_batched", None)):
        return list(backend.decode_windows_batched(windows, opts, batch_size))  # type: ignore[attr-defined]
    batched = getattr(backend, "transcribe_windows_batched", None)
    if batch_size > 1 and callable(batched):
        texts = batched(windows, opts, batch_size)
    else:
        texts = backend.transcribe_windows(windows, opts)
    return [WindowResult(text=t, n_tokens=-1, token_limit_hits=-1) for t in texts]


_Pending = tuple[ASRItem, str, str]  # an item to decode, its audio's sha256, its cache key


def _group_full(n_windows: int, batch_size: int) -> bool:
    """Whether a group of ``n_windows`` windows is one backend call's worth (see :func:`_groups`)."""
    return batch_size <= 1 or n_windows >= 4 * batch_size


def _groups(sizes: list[int], batch_size: int) -> list[list[int]]:
    """Consecutive item groups for one backend call: one item at a time when sequential; when batched,
    enough items that a call holds at least ``4 × batch_size`` windows (windows of many encounters per batch)."""
    groups: list[list[int]] = [[]]
    n = 0
    for i, k in enumerate(sizes):
        groups[-1].append(i)
        n += k
        if _group_full(n, batch_size):
            groups.append([])
            n = 0
    return [g for g in groups if g]


def transcribe_items(
    items: Sequence[ASRItem],
    cfg: ASRConfig,
    *,
    cache_dir: Path,
    on_done: Callable[[ASRItem, Transcript | None, str | None], None],
    backend: ASRBackend | None = None,
    release: bool = True,
) -> None:
    """Transcribe every item, reading the cache first; report each outcome via ``on_done``.

    ``on_done(item, transcript, error)`` is called once per item, as soon as it
    is finished (so the runner can persist it immediately); a failing item gets
    ``transcript=None`` and the error message, and the others go on. With
    ``release`` (the default) every cached ASR model is freed when the stage
    ends, however it ends, so the LLM stage that follows starts on a free GPU.
    """
    try:
        _transcribe_items(items, cfg, cache_dir=cache_dir, on_done=on_done, backend=backend)
    finally:
        if release:
            release_asr_models()


def _transcribe_items(
    items: Sequence[ASRItem],
    cfg: ASRConfig,
    *,
    cache_dir: Path,
    on_done: Callable[[ASRItem, Transcript | None, str | None], None],
    backend: ASRBackend | None,
) -> None:
    backend = backend or make_backend(cfg, cache_dir)
    cache = KeyValueCache(cache_dir, "transcripts")
    opts = cfg.decoding
    runtime = backend_runtime(backend, cfg.batch_size)
    step = int(round(opts.window_s * SAMPLE_RATE_HZ))
    source = iter(items)

    def next_group() -> tuple[
        list[tuple[ASRItem, Transcript | None, str | None]], list[tuple[_Pending, list[np.ndarray]]]
    ]:
        """The next group to decode, hashing and looking up items only as far as it reaches.

        Items are taken in order: each is hashed and looked up (a cache hit, or a file that cannot be hashed
        or whose header cannot be read, is returned as already done), the others join the group until it is
        full by :func:`_groups`' rule over the items still to decode; then the group's windows are read. So the
        groups (and the cache keys) are the ones a stage that hashed every file first would form, while the
        first decode waits only for its own group's files (the paper grid is ~84 GB of float32).
        """
        done: list[tuple[ASRItem, Transcript | None, str | None]] = []
        group: list[tuple[_Pending, int]] = []
        n = 0
        for it in source:
            try:
                digest = sha256_file(it.audio_path)
            except OSError as exc:
                done.append((it, None, f"{it.audio_path}: cannot read audio ({exc})"))
                continue
            key = transcript_key(digest, backend.model_id, opts, runtime)
            # Damaged, wrong shape, or the answer to another question (other audio, model or decoding): warned,
            # counted and recomputed.
            t = cache.get(
                key,
                validate=Transcript.model_validate,
                expect={"audio_sha256": digest, "model": backend.model_id, "decoding": opts.model_dump()},
            )
            if t is not None:
                done.append((it, revise(t, encounter_id=it.encounter_id, condition=it.condition), None))
                continue
            try:
                k = max(1, -(-sf.info(str(it.audio_path)).frames // step))  # windows, from the header
            except Exception as exc:
                done.append((it, None, f"{it.audio_path}: {exc}"))
                continue
            group.append(((it, digest, key), k))
            n += k
            if _group_full(n, cfg.batch_size):
                break
        loaded: list[tuple[_Pending, list[np.ndarray]]] = []
        for p, _ in group:
            try:
                loaded.append((p, split_windows(read_wav_exact(p[0].audio_path), opts.window_s)))
            except Exception as exc:
                done.append((p[0], None, f"{p[0].audio_path}: {exc}"))
        return done, loaded

    def finish(it: ASRItem, digest: str, key: str, results: list[WindowResult], elapsed: float) -> None:
        texts = [r.text for r in results]
        hits = None if any(r.token_limit_hits < 0 for r in results) else sum(r.token_limit_hits for r in results)
        t = Transcript(
            encounter_id=it.encounter_id,
            condition=it.condition,
            text=join_windows(texts),
            backend=backend.name,
            model=backend.model_id,
            decoding=opts,
            audio_sha256=digest,
            segments=tuple((i * opts.window_s, i * opts.window_s + opts.window_s, s) for i, s in enumerate(texts)),
            elapsed_s=round(elapsed, 3),
            runtime=runtime,
            token_limit_hits=hits,
        )
        cache.put(key, t.model_dump(mode="json"))
        on_done(it, t, None)

    # Groups are hashed, looked up and read as they are decoded, never the whole grid at once: the next group is
    # prepared on a thread while the current one decodes, so peak memory is about two groups whatever the number
    # of items, and the first decode starts after its own group's files are hashed.
    with ThreadPoolExecutor(1, thread_name_prefix="asr-read") as reader:
        nxt = reader.submit(next_group)
        while True:
            done, loaded = nxt.result()
            if not done and not loaded:
                break  # every item has been seen
            nxt = reader.submit(next_group)
            for it, t, err in done:
                on_done(it, t, err)
            if not loaded:
                continue
            ok = [p for p, _ in loaded]
            wins = [ws for _, ws in loaded]
            del loaded
            t0 = time.perf_counter()
            try:
                results = decode_windows(backend, [w for ws in wins for w in ws], opts, cfg.batch_size)
            except ASRError:
                raise  # configuration/install problems stop the run with a clear message
            except Exception as exc:
                for it, _, _ in ok:
                    on_done(it, None, f"ASR failed: {type(exc).__name__}: {exc}")
                continue
            elapsed = (time.perf_counter() - t0) / len(ok)
            pos = 0
            for (it, digest, key), ws in zip(ok, wins, strict=True):
                finish(it, digest, key, results[pos : pos + len(ws)], elapsed)
                pos += len(ws)
            del wins, results
