"""``scripts/bench_gpu.py``: the pipeline mode's smoke (``--device cpu --tiny``) and the device benchmark's
(``--random --device cpu``: synthetic windows, random tiny-shaped models, forced decode lengths), the roofline
formula against the models' own weight shapes, and the device bundle's size check."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "llm"))
import bench_gpu  # noqa: E402
import build_device_bundle  # noqa: E402
from vllm_cpu import require_vllm_python  # noqa: E402

# What the lent GPU machine lacks of this project's dependencies (it has torch, transformers, numpy, yaml, httpx);
# the random mode must run without them, so its smoke test runs with them made unimportable.
NOT_ON_DEVICE = ("pydantic", "soundfile", "jiwer", "faster_whisper", "vllm", "numba")
# The random mode's rows run in their own processes; the variable hides these modules in each of them.
DEVICE_LIKE_ENV = {"BENCH_GPU_HIDE_MODULES": ",".join(NOT_ON_DEVICE)}


def _cmd(*extra: str, python: str | Path = sys.executable, tiny: bool = True) -> list[str]:
    return [
        str(python),
        str(ROOT / "scripts" / "bench_gpu.py"),
        "--device",
        "cpu",
        *(["--tiny"] if tiny else []),
        *extra,
    ]


def _env(tiny: bool, **more: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **({} if tiny else DEVICE_LIKE_ENV), **more}


def _run(*extra: str, python: str | Path = sys.executable, tiny: bool = True, rc: int = 0, **env: str) -> str:
    p = subprocess.run(
        _cmd(*extra, python=python, tiny=tiny),
        capture_output=True,
        text=True,
        env=_env(tiny, **env),
        timeout=1200,
        cwd=ROOT,
    )
    assert p.returncode == rc, p.stdout[-2000:] + p.stderr[-3000:]
    return p.stdout


def _rows(out: str) -> dict[str, list[str]]:
    rows = {}
    for line in out.splitlines():
        if line.startswith("| ") and not line.startswith("| implementation"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.integration
def test_bench_gpu_cpu_tiny_smoke_prints_rtf_for_each_implementation():
    pytest.importorskip("whisper", reason="openai-whisper not installed (make install-whisper)")
    out = _run()
    rows = _rows(out)
    names = [
        "openai-whisper as written (b16)",
        "openai-whisper reference (b16)",
        "faster-whisper int8 (b16)",
        "faster-whisper int8 (b32)",
    ]
    for n in names:
        assert n in rows, out
        assert re.fullmatch(r"[\d,]+\.\d", rows[n][0]), (n, rows[n])  # × real time
        assert float(rows[n][0].replace(",", "")) > 0
    assert "transformers sdpa (b16)" in rows  # measured, or says why not
    assert "vLLM offline no-ts (seqs 64)" in rows  # measured where vllm imports, else "not importable"
    assert rows["openai-whisper reference (b16)"][5] == "1.000"  # agreement with itself
    assert "3 fixed 30-s windows" in out


# ------------------------------------------------------------------------------------ random (device) mode

RANDOM_ROWS = {  # row name -> the package it needs
    "openai-whisper as written (b16)": "whisper",
    "openai-whisper reference (b2)": "whisper",
    "transformers sdpa (b2)": "transformers",
    "ctranslate2 int8 (b2)": "ctranslate2",
    "transformers sdpa static cache (b2)": "transformers",
}
RANDOM_ARGS = ("--random", "--tokens", "12", "--peak-tflops", "1", "--peak-tbps", "0.05")


def _table(out: str) -> list[list[str]]:
    lines = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert lines[0].startswith("| implementation |"), out
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines[1:]]


def _assert_measured(name: str, cells: list[str]) -> None:
    rtf, wps, toks, at_limit, _mem, agree, floor_ms, eff, _vs = cells
    assert float(rtf.replace(",", "")) > 0 and float(wps) > 0, (name, cells)
    assert toks == "12" and at_limit == "100.0%", (name, cells)  # every window decoded exactly the forced length
    assert agree == "n/a"  # random weights: no agreement
    assert float(floor_ms) > 0 and eff.endswith("%"), (name, cells)


@pytest.mark.slow
def test_random_cpu_smoke_runs_every_installed_implementation():
    """The device benchmark's CPU smoke, without the project's dependencies that the device lacks: one table, one
    row per implementation, each installed one measured at the forced length; the others say they are not
    installed."""
    from importlib.util import find_spec

    out = _run(*RANDOM_ARGS, tiny=False)
    table = _table(out)
    assert [r[0] for r in table] == list(RANDOM_ROWS), out
    assert all(len(r) == 10 for r in table)
    assert "THROUGHPUT ONLY" in out and "4 synthetic 30-s windows" in out and "forced: 12 decoder steps" in out
    rows = {r[0]: r[1:] for r in table}
    for name, module in RANDOM_ROWS.items():
        if find_spec(module) is not None:
            _assert_measured(name, rows[name])
        else:
            assert rows[name][0].startswith("not installed"), (name, rows[name])
    if find_spec("whisper") is not None:
        assert rows["openai-whisper as written (b16)"][8] == "1.00×"
        assert rows["openai-whisper reference (b2)"][8].endswith("×")


@pytest.mark.slow
def test_random_cpu_smoke_transformers_rows():
    """The transformers rows (eager, and static cache + torch.compile when asked): in this interpreter when it has
    transformers, else in the vLLM CPU venv (make install-vllm), which does."""
    from importlib.util import find_spec

    python = sys.executable if find_spec("transformers") is not None else require_vllm_python()
    out = _run(*RANDOM_ARGS, "--only", "transformers", python=python, tiny=False)
    rows = {r[0]: r[1:] for r in _table(out)}
    assert list(rows) == ["transformers sdpa (b2)", "transformers sdpa static cache (b2)"], out
    for name, cells in rows.items():
        _assert_measured(name, cells)
    assert "attention sdpa" in out and "not compiled" in out


def test_roofline_formula_matches_the_models_weight_shapes():
    """F_enc and F_tok of the docstring's formula equal 2 FLOPs per multiply-add counted from the random model's
    own weight tensors (plus the attention products, which have no weights)."""
    dims = dict(bench_gpu.TINY_RANDOM, n_audio_layer=3, n_text_layer=2, n_audio_state=48, n_text_state=48)
    sd = bench_gpu._random_openai_state_dict(dims)
    c, t = dims["n_audio_ctx"], 50
    enc_lin = sum(
        v.numel() for k, v in sd.items() if k.startswith("encoder.blocks") and k.endswith("weight") and v.dim() == 2
    )
    conv = 2 * c * sd["encoder.conv1.weight"].numel() + c * sd["encoder.conv2.weight"].numel()
    d = dims["n_audio_state"]
    attn_enc = dims["n_audio_layer"] * 2 * c * c * d
    cross_kv = (
        sum(
            sd[f"decoder.blocks.{i}.cross_attn.{p}.weight"].numel()
            for i in range(dims["n_text_layer"])
            for p in ("key", "value")
        )
        * c
    )
    f_enc, f_tok, b_tok = bench_gpu.floor_parts(dims, 2 * t)
    assert f_enc == pytest.approx(2 * (enc_lin * c + conv + attn_enc + cross_kv))
    dec_lin = sum(
        v.numel()
        for k, v in sd.items()
        if k.startswith("decoder.blocks")
        and k.endswith("weight")
        and v.dim() == 2
        and ".cross_attn.key" not in k
        and ".cross_attn.value" not in k
    )
    logits = sd["decoder.token_embedding.weight"].numel()
    attn_dec = dims["n_text_layer"] * 2 * (c + t) * dims["n_text_state"]
    assert f_tok == pytest.approx(2 * (dec_lin + logits + attn_dec))
    assert b_tok == dims["n_text_layer"] * 2 * (c + t) * dims["n_text_state"] * 2
    # large-v3 on an H200, 100 tokens: ~8.6 ms per window, memory-bound decoding (the docstring's numbers)
    fl = bench_gpu.floor_seconds(bench_gpu.LARGE_V3, 100, bench_gpu.PEAKS["H200"])
    assert fl == pytest.approx(8.57e-3, rel=0.01)


def test_synthetic_windows_are_30_s_of_deterministic_unclipped_sound():
    ws = bench_gpu.synthetic_windows(5, seed=0, distinct=3)
    assert len(ws) == 5 and all(w.shape == (480_000,) and w.dtype == np.float32 for w in ws)
    assert ws[3] is ws[0] and not np.array_equal(ws[0], ws[1])
    assert all(0.4 < np.abs(w).max() <= 0.5 and np.sqrt(np.mean(w**2)) > 0.02 for w in ws)
    np.testing.assert_array_equal(bench_gpu.synthetic_windows(1, seed=0)[0], ws[0])


def test_device_bundle_size_check(tmp_path):
    def wheel(name: str, size: int) -> None:
        import zipfile

        with zipfile.ZipFile(tmp_path / name, "w", compression=zipfile.ZIP_STORED) as z:
            z.writestr("pad.bin", os.urandom(size))

    wheel("openai_whisper-20250625-py3-none-any.whl", 800_000)
    wheel("more_itertools-11.2.1-py3-none-any.whl", 70_000)
    text, ok = build_device_bundle.summarise(tmp_path, tree=4 * 2**20)
    assert ok and "fits" in text and "openai_whisper-20250625-py3-none-any.whl" in text
    _, ok = build_device_bundle.summarise(tmp_path, tree=64 * 2**20)  # the tree travels too
    assert not ok
    wheel("ctranslate2-4.8.5-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", 40_800_000)
    text, ok = build_device_bundle.summarise(tmp_path, tree=4 * 2**20)
    assert ok, text  # the default bundle, CTranslate2 included, fits 64 MiB with the tree
    wheel("ctranslate2-4.8.5-cp311-cp311-manylinux_2_28_x86_64.whl", 1000)  # wrong Python for the device
    text, ok = build_device_bundle.summarise(tmp_path, tree=0)
    assert not ok and "ctranslate2-4.8.5-cp311" in text


# ------------------------------------------------------------------ rows as bounded processes, results on disk


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.is_file() else []


def test_random_rows_are_on_disk_when_the_benchmark_is_killed_half_way(tmp_path: Path) -> None:
    """The CTranslate2 row finishes and is on disk (its line in the .md, its JSON in the .jsonl) before the next
    row (made to hang) ends; killing the benchmark then leaves it there, and the hanging row process dies too."""
    out = tmp_path / "b"
    cmd = _cmd("--random", "--tokens", "4", "--only", "ctranslate2,transformers static", "--out", str(out), tiny=False)
    proc = subprocess.Popen(
        cmd,
        env=_env(False, BENCH_GPU_TEST_HANG_ROW="transformers static"),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 600
        while not _jsonl(out.with_suffix(".jsonl")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        time.sleep(2)  # the next row's process is running (hanging) now
        assert proc.poll() is None, "the benchmark ended before it was killed"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    (row,) = _jsonl(out.with_suffix(".jsonl"))
    assert row["name"].startswith("ctranslate2") and row["windows"] == 4 and row["tokens_per_window"] == 4
    md = out.with_suffix(".md").read_text()
    assert md.startswith("Device: cpu;") and row["line"] in md.splitlines() and "Total" not in md
    time.sleep(1)  # the row process was in its own session: it dies with its parent (PR_SET_PDEATHSIG)
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    assert str(out) not in ps, ps


def test_a_row_whose_benchmark_was_killed_while_it_started_ends_at_once(tmp_path: Path) -> None:
    """A benchmark killed before its row process set PR_SET_PDEATHSIG (the row still importing torch) left that
    row running for good, handed to init (seen in CI: the hanging test row, an hour later). The row checks its
    parent is still the benchmark that started it (BENCH_GPU_PARENT_PID) and ends at once when it is not."""
    out = tmp_path / "row.json"
    cmd = _cmd("--random", "--tokens", "4", "--row", "transformers static", "--row-json", str(out), tiny=False)
    t0 = time.monotonic()
    done = subprocess.run(  # noqa: S603 - fixed argument list
        cmd,
        env=_env(False, BENCH_GPU_TEST_HANG_ROW="transformers static", BENCH_GPU_PARENT_PID="1"),
        cwd=ROOT,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1 and not out.exists(), done.stderr[-2000:]
    assert time.monotonic() - t0 < 60  # it did not hang (the row was made to sleep an hour)


def test_a_row_past_its_time_limit_is_killed_and_the_others_still_run(tmp_path: Path) -> None:
    out = tmp_path / "b"
    stdout = _run(
        "--random",
        "--tokens",
        "4",
        "--only",
        "ctranslate2,as written",
        "--row-timeout-s",
        # the limit applies to every row: the real CTranslate2 row took over 15 s on CI's loaded 2 cores
        "45",
        "--out",
        str(out),
        tiny=False,
        rc=1,
        BENCH_GPU_TEST_HANG_ROW="openai-whisper as written",
    )
    rows = {r[0]: r[1:] for r in _table(stdout)}
    assert rows["openai-whisper as written"][0].startswith("timed out: killed after 45 s"), rows
    assert float(next(v for k, v in rows.items() if k.startswith("ctranslate2"))[0].replace(",", "")) > 0
    assert [r["name"] for r in _jsonl(out.with_suffix(".jsonl"))][0] == "openai-whisper as written"
    assert "Total" in out.with_suffix(".md").read_text()


def test_the_decode_shape_is_the_measured_one_by_default(tmp_path: Path) -> None:
    """Without --tokens every row decodes in the shape measured on the demo's audio (first decode, then the
    remainders): tokens and decodes per window follow scripts/bench_gpu_shape.json."""
    shape = bench_gpu.DecodeShape.load()
    assert 50 <= shape.first_tokens <= 224 and 0 < shape.remainders_per_window <= 2 and shape.remainder_tokens > 0
    small = tmp_path / "shape.json"
    small.write_text(
        json.dumps({"first_tokens": 6, "remainders_per_window": 0.5, "remainder_tokens": 3, "source": "test"})
    )
    out = _run("--random", "--decode-shape", str(small), "--only", "ctranslate2", "--windows", "4", tiny=False)
    (row,) = _table(out)
    assert row[3] == "8" and row[4] == "100.0%", row  # 6 + 0.5 × 3 ... per window: 4 windows, 2 remainders of 3
    assert "6 decoder steps per window, then 0.50 remainder decodes per window of 3 steps (test)" in out
