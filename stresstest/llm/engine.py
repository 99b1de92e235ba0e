"""One LLM engine per run, shared by every LLM role.

:class:`LLMEngine` is owned by the run (``pipeline``/``runner``): it is created
once, started at most once — lazily, at the first call that misses the cache,
so a fully cached re-run starts nothing — and stopped when the run ends. Every
role that asks the model (structuring, the guard agent's Draft and Guard, the
LLM judge, the note-quality judges, gold drafting) is handed the engine and opens
a role-specific :class:`~stresstest.llm.session.LLMSession` on it; none starts
an engine of its own::

    with LLMEngine(cfg.structure, cache_dir=cache, log_dir=run_dir / "logs") as engine:
        records = structure_many(items, cfg.structure, cache_dir=cache, log_dir=logs, engine=engine)
        with LLMSession(engine, role="judge-entailment") as s:
            verdicts = s.run(calls, Verdict, namespace="judge-entailment", schema_name="Verdict")
        manifest["llm_engines"] = [engine.info()]

What one engine is, per backend:

* ``openai`` + ``managed``: one ``llama_cpp.server`` or ``vllm serve`` process on 127.0.0.1
  (:class:`~stresstest.llm.served.ServerProcess`), its log in the run's ``logs/``; progress lines on
  stderr while it loads; a start-up timeout sized for a first load (vLLM 1200 s by default).
* ``openai`` + ``external``: the server at ``server.base_url``; nothing is started, ``ready_s`` is None.
* ``vllm-offline``: one in-process ``vllm.LLM``.

GPU memory (vLLM): the engine starts after the ASR stage released its model (the runner calls
``release_asr_models`` of the ASR package when it exists, before the structure stage); unless
``server.gpu_memory_utilization`` is set, the fraction is derived from the free memory measured at start
(:func:`default_gpu_memory_utilization`) and recorded in :meth:`LLMEngine.info`.

:meth:`LLMEngine.info` is the manifest's ``llm_engines`` entry: ``engine``, ``model``, ``revision``,
``started_at`` (UTC ISO time, None when never started), ``ready_s`` (seconds from start to ready),
``roles`` (in first-use order), ``concurrency`` (requests in flight) and ``concurrency_source`` ('config' or the
engine default that chose it), ``phi_sent`` (exactly the sampling fields of every request, or the
``SamplingParams`` keywords offline), ``server_args`` / ``engine_kwargs``, ``log`` and the GPU memory figures.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stresstest.errors import LLMError
from stresstest.llm.client import ChatClient, phi_payload
from stresstest.llm.config import LLMConfig
from stresstest.llm.gpu import cuda_visible, resolve_concurrency, resolve_gpu_memory
from stresstest.llm.offline import build_llm, engine_kwargs, offline_model_id, sampling_kwargs
from stresstest.llm.served import ServerProcess, external_endpoint, model_identity
from stresstest.records import revise

if TYPE_CHECKING:
    from vllm import LLM as VllmLLM  # the optional GPU extra; only its type is named here

log = logging.getLogger(__name__)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class LLMEngine:
    """The run's single LLM engine (see module docstring). Thread-safe start; use as a context manager.

    Args:
        config: the run's ``structure`` config (backend 'openai' or 'vllm-offline').
        cache_dir: stage cache root (sessions cache calls under it).
        log_dir: the run's log directory (a managed server's log goes here, never to /tmp).
        progress: print loading progress on stderr while a managed server starts.
    """

    def __init__(
        self,
        config: LLMConfig,
        *,
        cache_dir: str | Path,
        log_dir: str | Path,
        progress: bool = True,
    ) -> None:
        if config.backend == "rules":
            raise LLMError("LLMEngine: backend 'rules' makes no LLM calls; expected 'openai' or 'vllm-offline'")
        self.config = config
        self.cache_dir = Path(cache_dir)
        self.log_dir = Path(log_dir)
        self.progress = progress
        self.roles: list[str] = []
        self.starts = 0
        self.started_at: str | None = None
        self.ready_s: float | None = None
        self.gpu_memory: dict[str, float | str] | None = None
        self._lock = threading.Lock()
        self._model_id: str | None = None
        self._server: ServerProcess | None = None
        self._client: ChatClient | None = None
        self._llm: VllmLLM | None = None
        self._effective: LLMConfig = config
        self._concurrency: tuple[int, str] | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (a closed engine never starts again)."""
        return self._closed

    # -- identity -------------------------------------------------------------------------------------
    @property
    def engine_name(self) -> str:
        """'llama.cpp', 'vllm' (served), 'vllm-offline' or 'external'."""
        if self.config.backend == "vllm-offline":
            return "vllm-offline"
        if self.config.server.mode == "external":
            return "external"
        return self.config.server.engine

    @property
    def model_id(self) -> str:
        """Model identity recorded in envelopes and cache keys (known without starting anything)."""
        if self._model_id is None:
            if self.config.backend == "vllm-offline":
                self._model_id = offline_model_id(self.config)
            else:
                self._model_id = model_identity(self.config)
        return self._model_id

    @property
    def revision(self) -> str | None:
        """Pinned model revision (vLLM), the GGUF fingerprint (managed llama.cpp), else None."""
        srv = self.config.server
        if self.engine_name in ("vllm", "vllm-offline"):
            return srv.revision
        if self.engine_name == "llama.cpp":
            return self.model_id.rpartition("#")[2] or None
        return None

    @property
    def log_path(self) -> Path | None:
        """The managed server's log file (None before start and for external / offline engines)."""
        return self._server.log_path if self._server is not None else None

    @property
    def concurrency(self) -> int:
        """Requests in flight (``structure.concurrency``, or the engine's default: see :class:`LLMConfig`)."""
        if self._concurrency is None:
            self._concurrency = resolve_concurrency(self.config)
        return self._concurrency[0]

    # -- roles --------------------------------------------------------------------------------------
    def note_role(self, role: str) -> None:
        """Record that ``role`` used this engine (first-use order, no duplicates)."""
        with self._lock:
            if role not in self.roles:
                self.roles.append(role)

    # -- start / use ----------------------------------------------------------------------------------
    def _resolved_config(self) -> LLMConfig:
        """The config with ``gpu_memory_utilization`` filled from the free memory measured now (vLLM) and
        ``concurrency`` from the engine when unset (the client's connection pool is sized by it)."""
        cfg, self.gpu_memory = resolve_gpu_memory(self.config)
        return revise(cfg, concurrency=self.concurrency)

    def start(self) -> LLMEngine:
        """Start the engine if it is not running (idempotent; at most one start per engine).

        Raises:
            LLMError: the engine cannot start; for a managed server the message names its log file.
        """
        with self._lock:
            if self._closed:
                raise LLMError("LLMEngine: already closed")
            if self.started_at is not None:
                return self
            t0 = time.monotonic()
            self.started_at = _now()
            self.starts += 1
            cfg = self._resolved_config()
            if self.config.backend == "vllm-offline":
                if self.progress:
                    print(f"loading vLLM offline engine {cfg.server.model} ...", file=sys.stderr, flush=True)
                self._llm = build_llm(cfg)
                self.ready_s = round(time.monotonic() - t0, 3)
            elif self.config.server.mode == "external":
                self._client = ChatClient(external_endpoint(cfg), cfg)
            else:
                proc = ServerProcess(cfg, self.log_dir)
                self._server = proc
                proc.start(progress=sys.stderr if self.progress else None)
                self._client = ChatClient(proc.endpoint(), cfg)
                self.ready_s = round(time.monotonic() - t0, 3)
            self._effective = cfg
            return self

    def client(self) -> ChatClient:
        """The chat client of a served engine (starts the engine on first use)."""
        if self.config.backend == "vllm-offline":
            raise LLMError("LLMEngine.client: backend 'vllm-offline' has no HTTP client")
        self.start()
        assert self._client is not None
        return self._client

    def llm(self) -> VllmLLM:
        """The in-process ``vllm.LLM`` of backend 'vllm-offline' (built on first use)."""
        if self.config.backend != "vllm-offline":
            raise LLMError("LLMEngine.llm: only backend 'vllm-offline' has an in-process engine")
        self.start()
        if self._llm is None:
            raise LLMError("LLMEngine.llm: the engine was closed")
        return self._llm

    def phi_sent(self) -> dict[str, Any]:
        """Exactly the sampling fields every request carries (offline: the ``SamplingParams`` keywords)."""
        if self.config.backend == "vllm-offline":
            return sampling_kwargs(self.config)
        return phi_payload(self.config)

    def info(self) -> dict[str, Any]:
        """The manifest's ``llm_engines`` entry for this engine (see module docstring); never raises for an
        engine that cannot describe its model yet (the reason is recorded instead)."""
        model: str | None = None
        revision: str | None = None
        model_error: str | None = None
        try:
            model, revision = self.model_id, self.revision
        except Exception as exc:  # noqa: BLE001 - the manifest is written even when the model is unknown
            model_error = str(exc)
        in_flight = self.concurrency
        source = self._concurrency[1] if self._concurrency is not None else None
        entry: dict[str, Any] = {
            "engine": self.engine_name,
            "model": model,
            "revision": revision,
            "started_at": self.started_at,
            "ready_s": self.ready_s,
            "roles": list(self.roles),
            "starts": self.starts,
            "concurrency": in_flight,
            "concurrency_source": source,
            "phi_sent": self.phi_sent(),
            "response_format": (
                "vllm_structured_outputs"
                if self.config.backend == "vllm-offline"
                else self.config.resolved_response_format()
            ),
        }
        if model_error is not None:
            entry["model_error"] = model_error
        cfg = self._effective
        if self._server is not None:
            entry["server_args"] = list(self._server.cmd[1:]) if self._server.cmd else []
            entry["log"] = str(self._server.log_path)
        elif self.config.backend == "vllm-offline" and model is not None:
            entry["engine_kwargs"] = engine_kwargs(cfg)
        if self.gpu_memory is not None:
            entry["gpu_memory"] = dict(self.gpu_memory)
        if self.engine_name in ("vllm", "vllm-offline"):
            opts = cfg.server.engine_options(gpu=cuda_visible())
            entry["preset"] = cfg.server.preset
            entry["engine_options"] = opts.model_dump()
            if opts.batch_invariant:
                entry["batch_invariant"] = True
        return entry

    def close(self) -> None:
        """Close the client and stop a managed server; idempotent. A closed engine cannot start again."""
        with self._lock:
            self._closed = True
            if self._client is not None:
                self._client.close()
                self._client = None
            if self._server is not None:
                self._server.stop()
            self._llm = None

    def __enter__(self) -> LLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
