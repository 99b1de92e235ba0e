"""kill -9 at three stage boundaries, then resume: byte-identical outputs (docs/spec.md §10; docs/reliability.md).

A small real run (two text encounters → piper TTS → built-in ambient noise at
5 dB → bundled Whisper tiny → rules structurer → report) is run once without
interruption. Then, from a fresh cache at the same path, the same run is
started and SIGKILLed right after the speech stage, resumed and killed after
ASR, resumed and killed after scoring (inside the report stage), and resumed to
the end. ``summary.csv`` and ``items.jsonl`` must be byte-identical to the
uninterrupted run's, and the manifest must account for every invocation's time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

DIALOGUES = {
    "CAR0001": "D: What brings you in today?\nP: I have had chest pain since last night.\n"
    "D: Do you take any medicines?\nP: I take aspirin every morning.\n",
    "RES0002": "D: How long have you had the cough?\nP: About two weeks, and I am short of breath.\n"
    "D: Do you smoke?\nP: No, I have never smoked.\n",
}


def _setup(root: Path) -> Path:
    corpus = root / "osce"
    corpus.mkdir(parents=True)
    for eid, text in DIALOGUES.items():
        (corpus / f"{eid}.txt").write_text(text)
    cfg = root / "small.yaml"
    cfg.write_text(f"""run: {{seed: 3, progress: false}}
corpus: {{kind: osce, path: {corpus}}}
noise: {{ambient: {{family: ambient, kind: builtin}}}}
snr_db: [5]
asr: {{backend: faster-whisper, compute_type: int8, batch_size: 1}}
structure: {{backend: rules}}
judge: {{backend: rules}}
report: {{n_resamples: 100}}
""")
    (root / "home").mkdir()
    return cfg


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MPLCONFIGDIR", "STRESSTEST_"))}
    env.update(
        HOME=str(root / "home"),
        STRESSTEST_CACHE=str(root / "cache"),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    return env


def _start(root: Path, cfg: Path, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 - fixed argument list
        [sys.executable, "-m", "stresstest.cli", "run", str(cfg), "--out", str(out)],
        cwd=root,
        env=_env(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _stage_done(out: Path, stage: str) -> bool:
    try:
        m = json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return stage in (m.get("stage_seconds") or {}) and not m.get("completed")


def test_kill9_at_three_boundaries_then_resume_is_byte_identical(tmp_path: Path) -> None:
    cfg = _setup(tmp_path)
    ref = _start(tmp_path, cfg, tmp_path / "ref")
    _, err = ref.communicate(timeout=900)
    assert ref.returncode == 0, err.decode()[-3000:]
    shutil.move(tmp_path / "cache", tmp_path / "cache_ref")  # the killed runs start cold, at the same path

    out = tmp_path / "run"
    for boundary in ("speech", "asr", "score"):
        proc = _start(tmp_path, cfg, out)
        deadline = time.monotonic() + 900
        while not _stage_done(out, boundary):
            assert proc.poll() is None, f"run ended before the {boundary} boundary: {proc.stderr.read().decode()}"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGKILL
    final = _start(tmp_path, cfg, out)
    _, err = final.communicate(timeout=900)
    assert final.returncode == 0, err.decode()[-3000:]

    for name in ("summary.csv", "items.jsonl"):
        assert (out / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
    m = json.loads((out / "manifest.json").read_text())
    invs = m["invocations"]
    assert len(invs) == 4 and [i["completed"] for i in invs] == [False, False, False, True]
    assert all(i["seconds"] > 0 for i in invs)
    assert m["stage_seconds"]["total"] == pytest.approx(sum(i["seconds"] for i in invs), abs=0.01)
    assert list((tmp_path / "home").rglob("*")) == []  # nothing in $HOME, killed or not


def test_damaged_cache_entries_are_recomputed_to_the_same_numbers(tmp_path: Path) -> None:
    cfg = _setup(tmp_path)
    first = _start(tmp_path, cfg, tmp_path / "a")
    _, err = first.communicate(timeout=900)
    assert first.returncode == 0, err.decode()[-3000:]
    cache = tmp_path / "cache"
    # A truncated mixture, a TTS WAV with flipped bytes (same size), a transcript entry of the wrong shape.
    mix = sorted((cache / "mixtures").rglob("*.wav"))[0]
    mix.write_bytes(mix.read_bytes()[: mix.stat().st_size // 2])
    tts = sorted((cache / "tts").glob("[0-9a-f][0-9a-f]/*.wav"))[0]
    data = bytearray(tts.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 1000] = bytes(b ^ 0xFF for b in data[mid : mid + 1000])
    tts.write_bytes(bytes(data))
    entry = sorted((cache / "transcripts").rglob("*.c2.json"))[0]
    from stresstest.cache import write_verified_json

    write_verified_json(entry, {"not": "a transcript"})

    second = _start(tmp_path, cfg, tmp_path / "b")
    _, err = second.communicate(timeout=900)
    assert second.returncode == 0, err.decode()[-3000:]
    warnings = [ln for ln in err.decode().splitlines() if ln.startswith("stresstest: warning: cache entry")]
    assert any(mix.stem in w and "bytes" in w for w in warnings), warnings
    assert any(tts.stem in w and "content hash" in w for w in warnings), warnings
    assert any(entry.name in w and "wrong shape" in w for w in warnings), warnings
    for name in ("summary.csv", "items.jsonl"):
        a = (tmp_path / "a" / name).read_text().replace(str(tmp_path / "a"), "RUN")
        b = (tmp_path / "b" / name).read_text().replace(str(tmp_path / "b"), "RUN")
        assert a == b, name


def test_partial_failures_exit_0_say_so_and_leave_every_row(tmp_path: Path) -> None:
    """One good recording, one truncated: exit 0, one warning line, every row covers the same encounter."""
    import csv

    import numpy as np

    from stresstest.audio import write_wav
    from stresstest.speech import SpeakerVoice, synthesize

    x = synthesize("I have had chest pain since last night and I feel short of breath.", SpeakerVoice())
    write_wav(tmp_path / "good.wav", np.concatenate([np.zeros(4000, np.float32), x, np.zeros(4000, np.float32)]))
    write_wav(tmp_path / "full.wav", x)
    (tmp_path / "bad.wav").write_bytes((tmp_path / "full.wav").read_bytes()[:-2000])
    text = "I have had chest pain since last night and I feel short of breath."
    (tmp_path / "m.jsonl").write_text(
        "".join(
            json.dumps({"encounter_id": e, "audio": a, "reference_text": text}) + "\n"
            for e, a in (("GOOD", "good.wav"), ("BAD", "bad.wav"))
        )
    )
    cfg = tmp_path / "p.yaml"
    cfg.write_text(f"""run: {{seed: 3, progress: false, max_failures: 10}}
corpus: {{kind: manifest, path: {tmp_path / "m.jsonl"}}}
noise: {{ambient: {{family: ambient, kind: builtin}}}}
snr_db: [5]
structure: {{backend: rules}}
report: {{enabled: false}}
""")
    (tmp_path / "home").mkdir()
    proc = _start(tmp_path, cfg, tmp_path / "out")
    _, err_b = proc.communicate(timeout=900)
    err = [ln for ln in err_b.decode().splitlines() if ln.strip()]
    assert proc.returncode == 0, err
    assert len(err) == 1 and err[0].startswith("stresstest: warning: 2 of 4 items failed"), err
    assert "speech: 2" in err[0] and "BAD" in err[0] and "manifest.json" in err[0]
    with open(tmp_path / "out" / "summary.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["condition"], r["n"], r["n_dropped"], r["dropped"]) for r in rows] == [
        ("clean", "1", "1", "BAD"),
        ("ambient_5db", "1", "1", "BAD"),
    ]
    items = [json.loads(ln) for ln in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    assert len(items) == 4 and all(
        it["failed"] and "truncated" in it["error"] for it in items if it["encounter_id"] == "BAD"
    )
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert list(m["pairing"]["dropped"]) == ["BAD"] and m["n_failures"] == 2


def _children_serving_llm(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` and whose command line runs a llama.cpp server."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (proc / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"llama_cpp.server" in cmd:
            found.append(int(proc.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigterm_during_structuring_stops_the_managed_llm_server(tmp_path: Path) -> None:
    """`kill PID` of a run unwinds like Ctrl-C: the run's llama.cpp server (own session) is stopped too."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python[server] not installed (make install-llm)")
    cfg = _setup(tmp_path)
    cfg.write_text(
        cfg.read_text().replace(
            "structure: {backend: rules}",
            "structure: {backend: openai, server: {mode: managed, engine: llama.cpp, port: 0},"
            " decoding: {temperature: 0.0, seed: 1, max_tokens: 256, repetition_penalty: 1.1}}",
        )
    )
    out = tmp_path / "run"
    proc = _start(tmp_path, cfg, out)
    server: list[int] = []
    deadline = time.monotonic() + 600
    while not server and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
        server = _children_serving_llm(proc.pid)
    assert server, f"the run never started its LLM server: {proc.stderr.read().decode() if proc.stderr else ''}"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()
    assert "interrupted" in err.decode()
    deadline = time.monotonic() + 60
    while any(_alive(p) for p in server) and time.monotonic() < deadline:
        time.sleep(0.5)
    leaked = [p for p in server if _alive(p)]
    for p in leaked:
        os.kill(p, signal.SIGKILL)
    assert not leaked, f"SIGTERM left the managed LLM server running (pids {leaked})"
