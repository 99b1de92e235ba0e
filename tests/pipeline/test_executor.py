"""Executors: the same results in item order in process and on a real local Ray cluster."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from stresstest.pipeline.executor import ExecutorConfig, InProcessExecutor, RayExecutor, make_executor


def _square_plus(ctx: int, x: int) -> int:
    return x * x + ctx


class _CountingWorker:
    """Stands for a model-holding worker: 'loads' once, remembers how many items it ran."""

    def __init__(self, init: str) -> None:
        self.tag = init
        self.pid = os.getpid()
        self.seen = 0

    def run(
        self, shard: list[int], emit: Callable[[int, tuple[str, int, int]], None] | None = None
    ) -> list[tuple[str, int, int]]:
        out = []
        for i, x in enumerate(shard):
            self.seen += 1
            out.append((self.tag, x * 10, self.pid))
            if emit is not None:
                emit(i, out[-1])
        return out


def test_in_process_order_and_callbacks() -> None:
    ex = make_executor(ExecutorConfig(), cache_dir=Path("unused"))
    assert isinstance(ex, InProcessExecutor) and ex.describe() == {"kind": "inprocess"}
    seen: list[int] = []
    assert ex.map_tasks("t", _square_plus, 1, [3, 1, 2], on_result=lambda i, r: seen.append(i)) == [10, 2, 5]
    assert seen == [0, 1, 2]
    res = ex.map_pool("p", _CountingWorker, "m", [1, 2, 3], on_result=lambda i, r: seen.append(i))
    assert [r[:2] for r in res] == [("m", 10), ("m", 20), ("m", 30)] and seen[3:] == [0, 1, 2]
    assert ex.map_tasks("t", _square_plus, 0, []) == [] and ex.map_pool("p", _CountingWorker, "m", []) == []


def test_ray_config_is_strict() -> None:
    with pytest.raises(ValueError):
        ExecutorConfig(kind="dask")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ExecutorConfig(kind="ray", colour="blue")  # type: ignore[call-arg]


@pytest.mark.slow
@pytest.mark.integration
def test_ray_local_cluster_tasks_and_actor_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ray = pytest.importorskip("ray", reason="ray not installed (make install-ray; make test installs it)")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # Ray must not write ~/.ray (auth token) or anything else there
    cache = tmp_path / "a-rather-long-cache-directory-name-to-force-the-short-link" / "cache"
    cfg = ExecutorConfig(kind="ray", num_cpus=2, num_gpus=0, object_store_mb=96, shard_size=2)
    with make_executor(cfg, cache_dir=cache) as ex:
        assert isinstance(ex, RayExecutor)
        info = ex.describe()
        assert info["kind"] == "ray" and info["address"] == "local" and info["cluster_cpus"] == 2
        node = ray._private.worker.global_worker.node
        assert node.node_ip_address == "127.0.0.1" and node.gcs_address.startswith("127.0.0.1:")
        psutil = pytest.importorskip("psutil", reason="psutil (installed with ray) is needed to list listening sockets")
        me = psutil.Process()
        ours = {p.pid for p in me.children(recursive=True)} | {me.pid}
        listening = [c.laddr.ip for c in psutil.net_connections("inet") if c.status == "LISTEN" and c.pid in ours]
        assert listening and all(ip in ("127.0.0.1", "::ffff:127.0.0.1") for ip in listening), listening
        got: list[int] = []
        items = list(range(7))
        assert ex.map_tasks("sq", _square_plus, 5, items, on_result=lambda i, r: got.append(i)) == [
            x * x + 5 for x in items
        ]
        assert sorted(got) == items
        res = ex.map_pool("pool", _CountingWorker, "model", items, workers=2)
        assert [r[:2] for r in res] == [("model", x * 10) for x in items]  # item order, whatever finished first
        assert len({r[2] for r in res}) <= 2 and all(r[2] != os.getpid() for r in res)  # ≤ 2 actors, not here
        assert ex.gpu_count() == 0
    assert not ray.is_initialized()
    assert list(home.iterdir()) == []
    assert any((cache / "ray").iterdir())  # sockets, logs and spilled objects live under the cache
    assert not any(
        p.name.startswith("st-ray-") and p.is_symlink() and p.resolve() == (cache / "ray").resolve()
        for p in Path(os.environ.get("TMPDIR", "/tmp")).iterdir()
    )  # the short link is gone


def test_a_loopback_cluster_address_is_recognised() -> None:
    """An address on this machine's loopback keeps the driver on 127.0.0.1 (Ray would look for the cluster on the
    outward address otherwise; the two-node test runs such a cluster)."""
    from stresstest.pipeline.executor import _loopback_address

    for a in ("127.0.0.1:6379", "localhost:6379", "ray://127.0.0.1:10001", "[::1]:6379"):
        assert _loopback_address(a), a
    for a in ("auto", "10.0.0.2:6379", "ray://head:10001", "192.0.2.2:6379"):
        assert not _loopback_address(a), a
