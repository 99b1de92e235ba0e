"""On Ray, a run gives the same bytes as in process (docs/spec.md §12), and resumes from the shared cache.

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
    env = {
        **os.environ,
        "STRESSTEST_CACHE": str(cache),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "stresstest.cli", "run", str(config), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
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
        "object_store_mb: 96}}\n"
    )
    c1, c2 = tmp_path / "cache-inproc", tmp_path / "cache-ray"
    _run(tmp_path / "small.yaml", tmp_path / "inproc", c1)
    log = _run(tmp_path / "small-ray.yaml", tmp_path / "ray", c2)  # cold: speech, mixing, ASR, scoring on Ray
    # The workers' items are counted on the driver: its log (stderr, not a terminal) has each stage's end line.
    for end in (
        "speech done: 2/2 encounters",
        "mix done: 2/2 items",
        "asr done: 3/3 items",
        "structure done: 4/4 items",
    ):
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


# Two encounters whose shipped gold is scoped to their first 16 turns (RES0007, RES0008): every stage of the demo
# (piper speech, ambient mixing, Whisper, rules structuring, the guard, gold-based scoring, the report) on a grid of
# 2 x (clean, ambient_5db, ambient_5db_guard) = 6 items instead of the demo's 8 x 7 = 56 (issue 35).
SMALL_IDS = ["RES0007", "RES0008"]


def _small_demo(tmp_path: Path) -> tuple[Path, Path]:
    """configs/demo.yaml and configs/demo-ray.yaml on the small grid, written into ``tmp_path``."""
    import yaml

    demo = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    demo["corpus"].update(path=str((REPO / "configs" / demo["corpus"]["path"]).resolve()), ids=SMALL_IDS)
    demo["noise"] = {"ambient": demo["noise"]["ambient"]}
    demo["snr_db"] = [5]
    demo["mitigation"]["conditions"] = ["ambient_5db"]
    ray = yaml.safe_load((REPO / "configs" / "demo-ray.yaml").read_text())
    assert ray["extends"] == "demo.yaml" and set(ray) == {"extends", "run"}, "demo-ray.yaml changed shape"
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump(demo, sort_keys=False))
    (tmp_path / "demo-ray.yaml").write_text(yaml.safe_dump(ray, sort_keys=False))
    return tmp_path / "demo.yaml", tmp_path / "demo-ray.yaml"


def _ray_then_in_process(demo: Path, demo_ray: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # Ray first, on a cold cache: the heavy stages run on the cluster's workers; the in-process demo then
    # reads their cached outputs and must reproduce every byte of summary.csv and items.jsonl.
    _run(demo_ray, tmp_path / "demo-ray", cache)
    _run(demo, tmp_path / "demo", cache)
    assert (tmp_path / "demo-ray" / "summary.csv").read_bytes() == (tmp_path / "demo" / "summary.csv").read_bytes()
    assert (tmp_path / "demo-ray" / "items.jsonl").read_bytes() == (tmp_path / "demo" / "items.jsonl").read_bytes()
    assert json.loads((tmp_path / "demo-ray" / "manifest.json").read_text())["executor"]["kind"] == "ray"


def test_demo_ray_summary_is_byte_identical_to_demo_on_a_small_grid(tmp_path: Path) -> None:
    """The demo's settings on 2 encounters x 16 turns, clean + ambient 5 dB + the guard: Ray changes no byte."""
    demo, demo_ray = _small_demo(tmp_path)
    _ray_then_in_process(demo, demo_ray, tmp_path)
    items = [json.loads(x) for x in (tmp_path / "demo-ray" / "items.jsonl").read_text().splitlines()]
    assert sorted({(i["encounter_id"], i["condition"]) for i in items}) == [
        (e, c) for e in SMALL_IDS for c in ("ambient_5db", "ambient_5db_guard", "clean")
    ]
    assert len(items) == 6


@pytest.mark.demo_scale
def test_demo_ray_summary_is_byte_identical_to_demo(tmp_path: Path) -> None:
    """The whole shipped demo (8 encounters x 40 turns, two noise families at two SNRs, the guard on both: 56
    items) through Ray. Outside the default run (docs/testing.md); what only it checks: the demo's own config
    files as shipped, and Ray at demo scale: minutes of audio per encounter through the 128 MiB object store and
    many more stage tasks than the cluster's 2 CPUs, so tasks queue."""
    import yaml

    demo = REPO / "configs" / "demo.yaml"
    corpus = (demo.parent / yaml.safe_load(demo.read_text())["corpus"]["path"]).resolve()
    assert corpus.is_dir(), f"the demo corpus ships with the project; missing: {corpus}"
    _ray_then_in_process(demo, REPO / "configs" / "demo-ray.yaml", tmp_path)
