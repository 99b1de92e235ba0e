"""Beyond one machine (issue 39): a Ray cluster of two nodes started with ``ray start``, as on two workstations.

Both nodes run on this machine's loopback (a head and a second node with its own CPUs, object store and temp
dir), every server listening on 127.0.0.1 only. The demo's small grid runs through ``run.executor.address``
with the stage cache on one path both nodes use; the second node is killed (its whole process group, as a
machine that dies) while the run is in its stages. The run then finishes — Ray reschedules the lost tasks on
the head, or the run stops and the same command run again resumes from its stage records — and gives the
bytes of the in-process run of the same config. Whatever happens, both nodes and every process they started
(each node runs in a session of its own) are killed at the end.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="ray not installed (make install-ray; make test installs it)")

from test_demo_ray import REPO, _small_demo  # noqa: E402 - the small grid of the single-node Ray test

pytestmark = [pytest.mark.integration, pytest.mark.slow]
NODE = Path(__file__).with_name("ray_loopback_node.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _in_sessions(sessions: set[int]) -> list[int]:
    """Live processes in these sessions: a node started in a session of its own, and everything it started."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with suppress(OSError, IndexError, ValueError):
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()  # state ppid pgrp session ...
                if int(fields[3]) in sessions and fields[0] != "Z":
                    pids.append(int(d.name))
    return pids


def _kill_group(proc: subprocess.Popen) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the node's own process group (start_new_session)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def _start_node(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("wb") as f:
        proc = subprocess.Popen(
            [sys.executable, str(NODE), "start", "--block", "--disable-usage-stats", *args],
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    while b"block forever" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            _kill_group(proc)
            raise AssertionError(f"ray start {args[:2]} did not come up:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    return proc


@contextmanager
def _loopback_cluster(env: dict[str, str]) -> Iterator[tuple[str, list[subprocess.Popen], Path]]:
    """(address, the two nodes' ``ray start`` processes, second node's temp dir); everything stopped after."""
    root = Path(tempfile.mkdtemp(prefix="st-2n-"))  # short: Ray's socket paths must stay under 108 bytes
    nodes: list[subprocess.Popen] = []
    store = str(96 * 1024 * 1024)
    try:
        port = _free_port()
        common = ["--node-ip-address", "127.0.0.1", "--num-gpus", "0", "--object-store-memory", store]
        nodes.append(
            _start_node(
                [
                    "--head",
                    "--port",
                    str(port),
                    "--num-cpus",
                    "1",
                    "--include-dashboard",
                    "false",
                    "--temp-dir",
                    str(root / "head"),
                    *common,
                ],
                root / "head.log",
                env,
            )
        )
        nodes.append(
            _start_node(
                [
                    "--address",
                    f"127.0.0.1:{port}",
                    "--num-cpus",
                    "1",
                    "--resources",
                    '{"second_node": 1}',
                    "--temp-dir",
                    str(root / "node2"),
                    *common,
                ],
                root / "node2.log",
                env,
            )
        )
        yield f"127.0.0.1:{port}", nodes, root / "node2"
    finally:
        for proc in reversed(nodes):
            _kill_group(proc)
        for _ in range(3):  # anything of the nodes' sessions in a process group of its own: by process id
            left = _in_sessions({p.pid for p in nodes})
            for pid in left:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if not left:
                break
            time.sleep(1)
        shutil.rmtree(root, ignore_errors=True)


def _listening(sessions: set[int]) -> list[str]:
    psutil = pytest.importorskip("psutil", reason="psutil (installed with ray) lists listening sockets")
    ours = set(_in_sessions(sessions))
    return sorted({f"{c.laddr.ip}" for c in psutil.net_connections("inet") if c.status == "LISTEN" and c.pid in ours})


def _cli(config: Path, out: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "stresstest.cli", "run", str(config), "--out", str(out)],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )


def test_two_node_cluster_gives_the_in_process_bytes_and_survives_losing_a_node(tmp_path: Path) -> None:
    import yaml

    demo, _ = _small_demo(tmp_path)
    cache = tmp_path / "cache"  # one path every node sees (here: the same machine)
    token = secrets.token_hex(32)
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "RAY_USAGE_STATS_ENABLED": "0",
        "STRESSTEST_CACHE": str(cache),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    with _loopback_cluster(env) as (address, nodes, node2_dir):
        node2 = nodes[1]
        listening = _listening({p.pid for p in nodes})  # GCS, raylets, agents, workers of both nodes
        assert listening and set(listening) <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening
        cfg = tmp_path / "demo-2nodes.yaml"
        cfg.write_text(
            yaml.safe_dump({"extends": "demo.yaml", "run": {"executor": {"kind": "ray", "address": address}}})
        )
        log: list[str] = []
        speech_done = threading.Event()
        proc = _cli(cfg, tmp_path / "two-nodes", env)

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                log.append(line)
                if "stresstest: speech done" in line:
                    speech_done.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            assert speech_done.wait(300), "".join(log)[-3000:]
            assert proc.poll() is None  # the run is in its stages
            os.killpg(node2.pid, signal.SIGKILL)  # the second machine dies
            rc = proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
            reader.join(timeout=30)
        first = "".join(log)
        assert "executor ray" in first.splitlines()[0], first[-3000:]
        assert any((node2_dir / "session_latest" / "logs").glob("worker-*")), "the second node ran no worker"
        if rc != 0:  # the run stopped with the node: the same command resumes from its stage records
            again = _cli(cfg, tmp_path / "two-nodes", env)
            _, err = again.communicate(timeout=600)
            assert again.returncode == 0, f"first attempt:\n{first[-2000:]}\nresumed:\n{err[-3000:]}"
        print(f"second node killed after the speech stage; the run {'finished' if rc == 0 else 'was resumed'}")
        man = json.loads((tmp_path / "two-nodes" / "manifest.json").read_text())
        assert man["executor"]["kind"] == "ray" and man["executor"]["address"] == address
    # the same config in process, on the same cache: every byte of summary.csv and items.jsonl
    inproc = subprocess.run(
        [sys.executable, "-m", "stresstest.cli", "run", str(demo), "--out", str(tmp_path / "inproc")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert inproc.returncode == 0, inproc.stderr[-3000:]
    for name in ("summary.csv", "items.jsonl"):
        assert (tmp_path / "two-nodes" / name).read_bytes() == (tmp_path / "inproc" / name).read_bytes(), name
