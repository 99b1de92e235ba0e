"""Executors: where a stage's (stage, item) tasks run.

Two shapes of work, the same for every executor:

* :meth:`Executor.map_tasks` — stateless CPU tasks ``fn(context, item)`` (speech
  rendering, mixing, scoring). ``context`` is shared by all tasks of the call
  (sent once to a cluster's object store, not once per task).
* :meth:`Executor.map_pool` — tasks that need a loaded model (ASR, the LLM
  structurer): a pool of workers, each built once with ``worker_cls(init)`` and
  then fed shards of items through ``worker.run(shard)``. On Ray each worker is
  an actor holding its model (one per GPU for ASR, one per engine for the LLM).

Rules every executor keeps, so that a run gives the same numbers however it ran:

* results come back in item order, whatever order the tasks finished in;
* a task never writes into the run directory; it writes only the stage cache
  (content-hash keys, atomic writes), which every worker must see at the same
  path. The driver writes the run directory from the returned results;
* tasks report per-item failures in their results; an exception that escapes a
  task is a bug or a configuration error and stops the run, as in-process.

Resuming is the cache's job: a re-run submits the same tasks and each finds its
output cached.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from stresstest.config import ExecutorConfig
from stresstest.errors import RunError

C = TypeVar("C")
T = TypeVar("T")
R = TypeVar("R")

RAY_INSTALL_HINT = "the ray executor needs Ray: pip install 'stresstest[ray]'"


class StageWorker(Protocol[T, R]):
    """A model-holding worker: built once, then runs shards of items.

    ``run`` returns one result per item, in order; it may also call
    ``emit(i, result)`` as each item finishes (in process this drives progress).
    """

    def run(self, shard: list[T], emit: Callable[[int, R], None] | None = None) -> list[R]:  # pragma: no cover
        ...


class Executor(ABC):
    """Runs (stage, item) tasks; see the module docstring for the rules."""

    kind: str = "abstract"

    @abstractmethod
    def map_tasks(
        self,
        stage: str,
        fn: Callable[[C, T], R],
        context: C,
        items: Sequence[T],
        *,
        on_result: Callable[[int, R], None] | None = None,
    ) -> list[R]:
        """``[fn(context, item) for item in items]``, possibly in parallel; ``on_result(i, r)`` as each finishes."""

    @abstractmethod
    def map_pool(
        self,
        stage: str,
        worker_cls: Callable[[Any], StageWorker[T, R]],
        init: Any,
        items: Sequence[T],
        *,
        workers: int = 1,
        gpus_per_worker: float = 0.0,
        shard_size: int | None = None,
        on_result: Callable[[int, R], None] | None = None,
    ) -> list[R]:
        """Results of ``worker.run`` over shards of ``items``, flattened in item order.

        ``shard_size`` (default ``run.executor.shard_size``) is how many consecutive items one
        ``run`` call gets; a stage whose worker has a per-call cost (an LLM session) asks for
        one shard per worker.
        """

    def describe(self) -> dict[str, Any]:
        """What the manifest records about the executor."""
        return {"kind": self.kind}

    def gpu_count(self) -> int:
        """GPUs the executor can hand out (0 in process: stages pick their device themselves)."""
        return 0

    def close(self) -> None:  # noqa: B027 - optional hook: most executors hold nothing
        """Release the executor's resources (stop a cluster it started)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _shards(n: int, size: int) -> list[range]:
    return [range(i, min(n, i + size)) for i in range(0, n, size)]


class InProcessExecutor(Executor):
    """Every task in this process, in item order (the default; what tests and the demo use)."""

    kind = "inprocess"

    def map_tasks(
        self,
        stage: str,
        fn: Callable[[C, T], R],
        context: C,
        items: Sequence[T],
        *,
        on_result: Callable[[int, R], None] | None = None,
    ) -> list[R]:
        out: list[R] = []
        for i, it in enumerate(items):
            r = fn(context, it)
            out.append(r)
            if on_result is not None:
                on_result(i, r)
        return out

    def map_pool(
        self,
        stage: str,
        worker_cls: Callable[[Any], StageWorker[T, R]],
        init: Any,
        items: Sequence[T],
        *,
        workers: int = 1,
        gpus_per_worker: float = 0.0,
        shard_size: int | None = None,
        on_result: Callable[[int, R], None] | None = None,
    ) -> list[R]:
        # One worker holds the model; the whole list is one shard, so a stage that
        # batches across items (batched ASR) sees the same batches as before.
        if not items:
            return []
        worker = worker_cls(init)
        try:
            out = list(worker.run(list(items), on_result))
        finally:
            _close_worker(worker)
        if len(out) != len(items):
            raise RunError(f"{stage}: worker returned {len(out)} results for {len(items)} items")
        return out


# --------------------------------------------------------------------------- Ray

_RAY_LOCK = threading.Lock()
_MAX_RAY_TEMP_DIR = 44  # 107-byte AF_UNIX limit minus what Ray appends


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RunError(RAY_INSTALL_HINT) from exc
    return ray


def _reload_ray_auth() -> None:
    # Ray reads RAY_AUTH_MODE / RAY_AUTH_TOKEN once per process and caches them; `import ray`
    # has already happened here, so make it read the values just set (a no-op on Ray builds without it).
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined, unused-ignore]  # Ray installed or not
    except ImportError:  # pragma: no cover - older Ray without token auth
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _loopback_address(address: str) -> bool:
    """Whether a cluster address (``host:port``, ``ray://host:port``) names this machine's loopback."""
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def _call(fn: Callable[[Any, Any], Any], context: Any, item: Any) -> Any:
    return fn(context, item)


class _PoolActor:
    """Ray actor body: builds the stage worker once (model loaded in the actor), then runs shards."""

    def __init__(self, worker_cls: Callable[[Any], Any], init: Any) -> None:
        self._worker = worker_cls(init)

    def run(self, shard: list[Any]) -> list[Any]:
        return list(self._worker.run(shard, None))

    def close(self) -> None:
        _close_worker(self._worker)


def _close_worker(worker: Any) -> None:
    """Call a stage worker's optional ``close()`` (a structuring worker stops the LLM server it started)."""
    close = getattr(worker, "close", None)
    if callable(close):
        close()


class RayExecutor(Executor):
    """Tasks on a Ray cluster: CPU tasks for stateless stages, actors for model-holding ones.

    Args:
        cfg: ``run.executor``.
        temp_dir: where a local cluster keeps its sockets, logs and spilled
            objects (inside the stage cache, so nothing is written elsewhere).
        env: environment variables every worker gets (e.g. ``STRESSTEST_CACHE``).
    """

    kind = "ray"

    def __init__(self, cfg: ExecutorConfig, *, temp_dir: Path, env: dict[str, str] | None = None) -> None:
        self.cfg = cfg
        self._started = False
        self._link: Path | None = None
        self._saved_env: dict[str, str | None] = {}
        self._saved_cluster_flag: bool | None = None
        if cfg.address is None:
            # Loopback only: with this unset Ray advertises (and binds) the machine's outward IP.
            self._set_env({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
        ray = _ray()
        if cfg.address is None or _loopback_address(cfg.address):
            # A cluster on this machine's loopback: Ray would otherwise replace 127.0.0.1 by the outward address
            # (and then look for the cluster there).
            self._loopback_only(ray)
        runtime_env: dict[str, Any] = {"env_vars": dict(env or {})}
        # Workers import this package the way the driver does (a source tree on PYTHONPATH included).
        if os.environ.get("PYTHONPATH"):
            runtime_env["env_vars"].setdefault("PYTHONPATH", os.environ["PYTHONPATH"])
        # Ray sets OMP_NUM_THREADS=1 in every worker the driver did not give a value; CTranslate2's int8 kernels
        # then sum in another order than in process and transcripts differ (clean WER 2.6% vs 10.5% on the
        # executor test). Workers get the driver's OpenMP thread count, so both executors compute the same bytes.
        omp = os.environ.get("OMP_NUM_THREADS") or str(os.cpu_count() or 1)
        runtime_env["env_vars"].setdefault("OMP_NUM_THREADS", omp)
        with _RAY_LOCK:
            if ray.is_initialized():
                raise RunError("ray is already initialised in this process; one run per process on the ray executor")
            if cfg.address is None:
                # A fresh token per run, in the environment only: Ray would otherwise write ~/.ray/auth_token.
                self._set_env(
                    {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_USAGE_STATS_ENABLED": "0"}
                )
                _reload_ray_auth()
                try:
                    ray.init(
                        num_cpus=cfg.num_cpus,
                        num_gpus=cfg.num_gpus,
                        object_store_memory=cfg.object_store_mb * 1024 * 1024,
                        _node_ip_address="127.0.0.1",
                        _temp_dir=str(self._short_temp_dir(temp_dir)),
                        include_dashboard=False,
                        log_to_driver=False,
                        configure_logging=False,
                        runtime_env=runtime_env,
                    )
                except Exception:
                    self._restore()
                    raise
            else:
                try:
                    ray.init(address=cfg.address, runtime_env=runtime_env, log_to_driver=False, configure_logging=False)
                except (ConnectionError, TimeoutError) as exc:
                    self._restore()
                    raise RunError(
                        f"run.executor.address: cannot join the Ray cluster at {cfg.address} "
                        f"({type(exc).__name__}: {exc}); is `ray start` running there?"
                    ) from exc
                except Exception:
                    self._restore()
                    raise
            self._started = True
        self._ray = ray

    def _loopback_only(self, ray: Any) -> None:
        # The env var above is read when Ray is first imported; if it already was, set the flag it feeds.
        consts = getattr(getattr(ray, "_private", None), "ray_constants", None)
        if consts is not None and hasattr(consts, "ENABLE_RAY_CLUSTER"):
            self._saved_cluster_flag = bool(consts.ENABLE_RAY_CLUSTER)
            consts.ENABLE_RAY_CLUSTER = False

    def _set_env(self, values: dict[str, str]) -> None:
        for k, v in values.items():
            self._saved_env[k] = os.environ.get(k)
            os.environ[k] = v

    def _short_temp_dir(self, temp_dir: Path) -> Path:
        """``temp_dir``, or a short link to it: Ray's AF_UNIX socket paths must stay under 108 bytes.

        Ray appends ~62 characters (``/session_<time>_<pid>/sockets/plasma_store``). When
        ``temp_dir`` is too long for that, a link ``/tmp/st-ray-XXXXXXXX`` pointing to it is
        used (removed when the executor closes); everything Ray writes still lands in ``temp_dir``.
        """
        temp_dir = temp_dir.resolve()
        temp_dir.mkdir(parents=True, exist_ok=True)
        if len(str(temp_dir)) <= _MAX_RAY_TEMP_DIR:
            return temp_dir
        for _ in range(100):
            link = Path(tempfile.gettempdir()) / f"st-ray-{secrets.token_hex(4)}"
            try:
                link.symlink_to(temp_dir, target_is_directory=True)
            except FileExistsError:
                continue
            self._link = link
            return link
        raise RunError(f"cannot make a short link to the Ray temp dir {temp_dir}")

    def _restore(self) -> None:
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if self._saved_env:
            _reload_ray_auth()
        self._saved_env.clear()
        if self._saved_cluster_flag is not None:
            import ray

            ray._private.ray_constants.ENABLE_RAY_CLUSTER = self._saved_cluster_flag
            self._saved_cluster_flag = None
        if self._link is not None:
            self._link.unlink(missing_ok=True)
            self._link = None

    def gpu_count(self) -> int:
        return int(self._ray.cluster_resources().get("GPU", 0))

    def describe(self) -> dict[str, Any]:
        res = self._ray.cluster_resources()
        return {
            "kind": self.kind,
            "address": self.cfg.address or "local",
            "ray_version": self._ray.__version__,
            "cluster_cpus": res.get("CPU", 0),
            "cluster_gpus": res.get("GPU", 0),
        }

    def _collect(self, refs: list[Any], on_result: Callable[[int, Any], None] | None) -> list[Any]:
        ray = self._ray
        index = {r: i for i, r in enumerate(refs)}
        out: list[Any] = [None] * len(refs)
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                i = index[ref]
                out[i] = ray.get(ref)
                if on_result is not None:
                    on_result(i, out[i])
        return out

    def map_tasks(
        self,
        stage: str,
        fn: Callable[[C, T], R],
        context: C,
        items: Sequence[T],
        *,
        on_result: Callable[[int, R], None] | None = None,
    ) -> list[R]:
        if not items:
            return []
        ray = self._ray
        remote = ray.remote(num_cpus=1)(_call).options(name=f"stresstest-{stage}")
        ctx = ray.put(context)
        refs = [remote.remote(fn, ctx, it) for it in items]
        return self._collect(refs, on_result)

    def map_pool(
        self,
        stage: str,
        worker_cls: Callable[[Any], StageWorker[T, R]],
        init: Any,
        items: Sequence[T],
        *,
        workers: int = 1,
        gpus_per_worker: float = 0.0,
        shard_size: int | None = None,
        on_result: Callable[[int, R], None] | None = None,
    ) -> list[R]:
        if not items:
            return []
        ray = self._ray
        shards = _shards(len(items), shard_size or self.cfg.shard_size)
        n = max(1, min(workers, len(shards)))
        actor_cls = ray.remote(num_cpus=1, num_gpus=gpus_per_worker)(_PoolActor)
        actors = [actor_cls.options(name=None).remote(worker_cls, init) for _ in range(n)]
        try:
            # Dynamic dispatch: each actor takes the next shard when it is free.
            flat: list[Any] = [None] * len(items)
            queue = list(range(len(shards)))
            running: dict[Any, tuple[int, Any]] = {}
            for a in actors:
                if queue:
                    k = queue.pop(0)
                    running[a.run.remote([items[i] for i in shards[k]])] = (k, a)
            while running:
                done, _ = ray.wait(list(running), num_returns=1)
                ref = done[0]
                k, actor = running.pop(ref)
                res = ray.get(ref)
                if len(res) != len(shards[k]):
                    raise RunError(f"{stage}: worker returned {len(res)} results for {len(shards[k])} items")
                for i, r in zip(shards[k], res, strict=True):
                    flat[i] = r
                    if on_result is not None:
                        on_result(i, r)
                if queue:
                    k2 = queue.pop(0)
                    running[actor.run.remote([items[i] for i in shards[k2]])] = (k2, actor)
            return flat
        finally:
            try:  # let workers stop what they started (an LLM server is a child process of the actor)
                ray.get([a.close.remote() for a in actors], timeout=60)
            except Exception:  # noqa: BLE001 - a dead actor must not hide the stage's own error
                pass
            for a in actors:
                ray.kill(a)

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False
        self._restore()


def make_executor(cfg: ExecutorConfig, *, cache_dir: Path) -> Executor:
    """The configured executor. A local Ray cluster keeps its temp dir under ``cache_dir/ray``."""
    if cfg.kind == "inprocess":
        return InProcessExecutor()
    return RayExecutor(cfg, temp_dir=cache_dir / "ray", env={"STRESSTEST_CACHE": str(cache_dir)})
