"""The ASR stage: audio files → cached :class:`Transcript` records."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from stresstest.asr.backends import (
    FasterWhisperBackend,
    OpenAICompatibleASR,
    OpenAIWhisperBackend,
)
from stresstest.asr.base import ASRBackend, DecodingOptions, join_windows, split_windows
from stresstest.audio import read_wav_exact
from stresstest.cache import KeyValueCache, hash_obj, sha256_file
from stresstest.errors import ASRError
from stresstest.records import Transcript

ASR_CODE_VERSION = "asr-1"


class ASRConfig(BaseModel):
    """ASR front-end settings (``asr:`` in the run config)."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["faster-whisper", "openai-whisper", "openai-api"] = Field(
        default="faster-whisper", description="Which implementation decodes."
    )
    model: str | None = Field(
        default=None,
        description="faster-whisper: CT2 model dir or name (None = bundled tiny.en); openai-whisper: "
        "'large-v3' or a checkpoint path; openai-api: the served model name.",
    )
    device: Literal["auto", "cpu", "cuda"] = "auto"
    compute_type: str = Field(default="int8", description="faster-whisper compute type (int8 on CPU, float16 on GPU).")
    batch_size: int = Field(default=1, ge=1, description="1 = sequential; >1 = batched windows across encounters.")
    cpu_threads: int = Field(default=0, ge=0, description="faster-whisper CPU threads (0 = min(4, cores)).")
    base_url: str | None = Field(default=None, description="openai-api: e.g. http://127.0.0.1:8000/v1")
    api_key_env: str | None = Field(default=None, description="openai-api: env var holding the key (never stored).")
    decoding: DecodingOptions = Field(default_factory=DecodingOptions)


def make_backend(cfg: ASRConfig) -> ASRBackend:
    """Instantiate the configured backend (models load lazily on first use)."""
    if cfg.backend == "faster-whisper":
        return FasterWhisperBackend(cfg.model, device=cfg.device, compute_type=cfg.compute_type,
                                    cpu_threads=cfg.cpu_threads)
    if cfg.backend == "openai-whisper":
        return OpenAIWhisperBackend(cfg.model or "large-v3", device=cfg.device, batch_size=cfg.batch_size)
    if not cfg.base_url or not cfg.model:
        raise ASRError("asr.backend 'openai-api' needs asr.base_url and asr.model")
    return OpenAICompatibleASR(cfg.base_url, cfg.model, api_key_env=cfg.api_key_env)


@dataclass(frozen=True)
class ASRItem:
    """One audio file to transcribe."""

    encounter_id: str
    condition: str
    audio_path: Path


def transcript_key(audio_sha256: str, model_id: str, decoding: DecodingOptions) -> str:
    """Cache key: (audio content, model, decoding, code version)."""
    return hash_obj("transcript", ASR_CODE_VERSION, audio_sha256, model_id, decoding.model_dump())


def transcribe_items(
    items: Sequence[ASRItem],
    cfg: ASRConfig,
    *,
    cache_dir: Path,
    on_done: Callable[[ASRItem, Transcript | None, str | None], None],
    backend: ASRBackend | None = None,
) -> None:
    """Transcribe every item, reading the cache first; report each outcome via ``on_done``.

    ``on_done(item, transcript, error)`` is called once per item, as soon as it
    is finished (so the runner can persist it immediately); a failing item gets
    ``transcript=None`` and the error message, and the others go on.
    """
    backend = backend or make_backend(cfg)
    cache = KeyValueCache(cache_dir, "transcripts")
    opts = cfg.decoding
    pending: list[tuple[ASRItem, str, str]] = []
    for it in items:
        try:
            digest = sha256_file(it.audio_path)
        except OSError as exc:
            on_done(it, None, f"{it.audio_path}: cannot read audio ({exc})")
            continue
        key = transcript_key(digest, backend.model_id, opts)
        t = cache.get(key, validate=Transcript.model_validate)  # damaged/wrong shape: warned, recomputed
        if t is not None:
            on_done(it, t.model_copy(update={"encounter_id": it.encounter_id, "condition": it.condition}), None)
        else:
            pending.append((it, digest, key))
    if not pending:
        return

    def finish(it: ASRItem, digest: str, key: str, texts: list[str], elapsed: float) -> None:
        t = Transcript(
            encounter_id=it.encounter_id, condition=it.condition, text=join_windows(texts),
            backend=backend.name, model=backend.model_id, decoding=opts.model_dump(), audio_sha256=digest,
            segments=tuple((i * opts.window_s, i * opts.window_s + opts.window_s, s) for i, s in enumerate(texts)),
            elapsed_s=round(elapsed, 3),
        )
        cache.put(key, t.model_dump(mode="json"))
        on_done(it, t, None)

    batched = cfg.batch_size > 1 and hasattr(backend, "transcribe_windows_batched")
    # Group consecutive items so one batch holds windows of several encounters.
    group_size = max(1, cfg.batch_size // 2) if batched else 1
    for g in range(0, len(pending), group_size):
        group = pending[g : g + group_size]
        windows_per_item: list[list] = []
        ok: list[tuple[ASRItem, str, str]] = []
        for it, digest, key in group:
            try:
                windows_per_item.append(split_windows(read_wav_exact(it.audio_path), opts.window_s))
                ok.append((it, digest, key))
            except Exception as exc:
                on_done(it, None, f"{it.audio_path}: {exc}")
        if not ok:
            continue
        t0 = time.perf_counter()
        try:
            flat = [w for ws in windows_per_item for w in ws]
            if batched:
                texts = backend.transcribe_windows_batched(flat, opts, cfg.batch_size)  # type: ignore[attr-defined]
            else:
                texts = backend.transcribe_windows(flat, opts)
        except ASRError:
            raise  # configuration/install problems stop the run with a clear message
        except Exception as exc:
            for it, _, _ in ok:
                on_done(it, None, f"ASR failed: {type(exc).__name__}: {exc}")
            continue
        elapsed = (time.perf_counter() - t0) / len(ok)
        pos = 0
        for (it, digest, key), ws in zip(ok, windows_per_item, strict=True):
            finish(it, digest, key, texts[pos : pos + len(ws)], elapsed)
            pos += len(ws)
