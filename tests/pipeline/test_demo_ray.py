"""On Ray, a run gives the same bytes as in process (SPEC §12), and resumes from the shared cache.

Each run goes through the real CLI in a subprocess, so the local Ray cluster the
run starts (127.0.0.1, its temp dir under the stage cache) lives and dies with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="ray not installed (make install-ray; make test installs it)")

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _run(config: Path, out: Path, cache: Path, timeout: int = 1500) -> str:
    env = {**os.environ, "STRESSTEST_CACHE": str(cache),
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-m", "stresstest.cli", "run", str(config), "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def _items(out: Path, cache: Path) -> list[str]:
    # Audio paths name the cache they live in; everything else must match byte for byte.
    return [line.replace(str(cache), "<cache>") for line in (out / "items.jsonl").read_text("utf-8").splitlines()]


def _cache_files(cache: Path) -> set[str]:
    rel = (p.relative_to(cache) for p in cache.rglob("*") if p.is_file())
    return {str(r) for r in rel if "ray" not in r.parts}


def test_ray_equals_in_process_computed_cold_and_resumes(tmp_path: Path) -> None:
    from test_runner import _write_corpus  # the runner test's real recordings (+ one unreadable file)

    _write_corpus(tmp_path)
    base = """
run: {seed: 5, max_failures: 10, progress: false}
corpus: {kind: manifest, path: manifest.jsonl}
noise:
  ambient: {family: ambient, kind: builtin}
snr_db: [10, 0]
structure: {backend: rules}
judge: {backend: rules}
mitigation: {conditions: [ambient_0db]}
report: {enabled: false}
"""
    (tmp_path / "small.yaml").write_text(base)
    (tmp_path / "small-ray.yaml").write_text(
        "extends: small.yaml\nrun: {progress: true, executor: {kind: ray, num_cpus: 2, num_gpus: 0, "
        "object_store_mb: 96}}\n")
    c1, c2 = tmp_path / "cache-inproc", tmp_path / "cache-ray"
    _run(tmp_path / "small.yaml", tmp_path / "inproc", c1)
    log = _run(tmp_path / "small-ray.yaml", tmp_path / "ray", c2)  # cold: speech, mixing, ASR, scoring on Ray
    # The workers' items are counted on the driver: its log (stderr, not a terminal) has each stage's end line.
    for end in ("speech done: 2/2 encounters", "mix done: 2/2 items", "asr done: 3/3 items",
                "structure done: 4/4 items"):
        assert f"stresstest: {end} in " in log, log[-3000:]
    assert "executor ray" in log.splitlines()[0]
    assert (tmp_path / "ray" / "summary.csv").read_bytes() == (tmp_path / "inproc" / "summary.csv").read_bytes()
    assert _items(tmp_path / "ray", c2) == _items(tmp_path / "inproc", c1)
    man = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert man["executor"]["kind"] == "ray" and man["n_failures"] == 4  # the unreadable encounter, recorded
    assert {f["stage"] for f in man["failures"]} == {"speech"}
    # resume: a second Ray run finds everything in the shared cache and computes nothing new
    before = _cache_files(c2)
    _run(tmp_path / "small-ray.yaml", tmp_path / "ray2", c2)
    assert _cache_files(c2) == before
    assert (tmp_path / "ray2" / "items.jsonl").read_bytes() == (tmp_path / "ray" / "items.jsonl").read_bytes()


def test_demo_ray_summary_is_byte_identical_to_demo(tmp_path: Path) -> None:
    import yaml

    demo = REPO / "configs" / "demo.yaml"
    corpus = (demo.parent / yaml.safe_load(demo.read_text())["corpus"]["path"]).resolve()
    assert corpus.is_dir(), f"the demo corpus ships with the project; missing: {corpus}"
    cache = tmp_path / "cache"
    # Ray first, on a cold cache: the heavy stages run on the cluster's workers; the in-process demo then
    # reads their cached outputs and must reproduce every byte of summary.csv and items.jsonl.
    _run(REPO / "configs" / "demo-ray.yaml", tmp_path / "demo-ray", cache)
    _run(demo, tmp_path / "demo", cache)
    assert (tmp_path / "demo-ray" / "summary.csv").read_bytes() == (tmp_path / "demo" / "summary.csv").read_bytes()
    assert (tmp_path / "demo-ray" / "items.jsonl").read_bytes() == (tmp_path / "demo" / "items.jsonl").read_bytes()
    assert json.loads((tmp_path / "demo-ray" / "manifest.json").read_text())["executor"]["kind"] == "ray"
