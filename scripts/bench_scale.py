"""How time and peak memory grow with the length of a recording and of a reference text.

Two measurements, each in a fresh process of the real CLI (peak RSS from ``wait4``, wall seconds):

* ``stresstest mix`` on synthetic recordings of ``--minutes`` (default 10, 30, 60, 120): speech-like tone
  bursts with pauses, and a noise file as long, both 16 kHz PCM-16 written in blocks (the bench itself
  stays small). This is the mixing stage's arithmetic on one item (load, VAD mask, RMS, scale, write,
  measure back).
* the speech and conditions stages of a run with the demo grid (``--stage-minutes``): one fresh process
  canonicalises a synthetic recording (``load_recording``: VAD mask, cached 16 kHz copy) and writes its
  four noisy mixtures with the demo's own noise sources (built-in ambient and babble, 10 and 5 dB;
  ``build_mixtures``), as ``stresstest run configs/demo.yaml`` would for a corpus holding that recording.
  The babble bank comes from ``$STRESSTEST_CACHE`` (rendered by piper the first time); recordings and
  mixtures go to the scratch folder. ``--code DIR`` measures the ``stresstest`` package found in DIR instead
  of this checkout's (an older checkout, for a before/after table from one run).
* ``stresstest triggers`` on references of ``--ref-kb`` (default 100, 1000, 10000 KB, the CLI's limit being
  10 MB): clinical sentences repeated, and a hypothesis with every 17th word dropped (omission events).

For each series it prints every point and how time and memory grow between the first and the last point
against the size ratio (1.0 = linear; memory "flat" when its ratio stays near 1). Nothing is asserted:
benchmarks are scripts (DESIGN.md); ``docs/reliability.md`` quotes the numbers.

Usage::

    python scripts/bench_scale.py                      # everything (the 120-minute mix needs ~1 GB of disk)
    python scripts/bench_scale.py --minutes 10 30 --ref-kb 100 400
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
SR = 16000
SENTENCE = (
    "I have had chest pain and wheezing since Monday, no allergies, I take amlodipine 5 mg twice a day, "
    "and my father had a heart attack at fifty. "
)


def _measure(argv: list[str], cwd: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit status) of one CLI process (this checkout's package)."""
    return _measure_py(
        ["-m", "stresstest.cli", *argv],
        cwd,
        {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
    )


def _measure_py(argv: list[str], cwd: Path, env_extra: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit status) of ``python argv`` with ``env_extra`` set."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=cwd,
        env={**os.environ, **env_extra},  # noqa: S603
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if proc.stderr is not None:
        err = proc.stderr.read().decode("utf-8", "replace").strip()
        if err:
            print(f"    stderr: {err[-300:]}", file=sys.stderr)
    return wall, usage.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status)


def _write_long_wav(path: Path, minutes: float, kind: str, seed: int) -> None:
    """A long 16 kHz PCM-16 file written one minute at a time."""
    rng = np.random.default_rng(seed)
    t = np.arange(60 * SR) / SR
    with sf.SoundFile(str(path), "w", samplerate=SR, channels=1, subtype="PCM_16") as fh:
        for _ in range(int(round(minutes))):
            if kind == "speech":
                # 1.5 s bursts of a 220 Hz tone with 0.5 s pauses: a VAD finds speech and pauses in it
                block = 0.3 * np.sin(2 * np.pi * 220 * t) * ((t % 2.0) < 1.5)
            else:
                block = 0.1 * rng.standard_normal(t.size)
            fh.write(block.astype(np.float32))


def _growth(points: list[tuple[float, float, float]], unit: str) -> str:
    (s0, t0, m0), (s1, t1, m1) = points[0], points[-1]
    size = s1 / s0
    return (
        f"  {unit} x{size:g}: time x{t1 / max(t0, 1e-9):.1f} (linear would be x{size:g}), "
        f"peak RSS x{m1 / max(m0, 1e-9):.2f} ({m0:.0f} → {m1:.0f} MB)"
    )


def bench_mix(minutes: list[float], work: Path) -> None:
    print("stresstest mix (one item): minutes, wall s, peak RSS MB")
    points = []
    for m in minutes:
        speech, noise, out = work / f"speech_{m:g}.wav", work / f"noise_{m:g}.wav", work / f"mix_{m:g}.wav"
        _write_long_wav(speech, m, "speech", 0)
        _write_long_wav(noise, m, "noise", 1)
        wall, rss, rc = _measure(
            ["mix", "--speech", str(speech), "--noise", str(noise), "--snr", "5", "--seed", "1", "--out", str(out)],
            work,
        )
        print(f"  {m:6g} min  {wall:8.1f} s  {rss:8.0f} MB" + ("" if rc == 0 else f"  (exit {rc})"), flush=True)
        points.append((m, wall, rss))
        for p in (speech, noise, out):
            p.unlink(missing_ok=True)
    if len(points) > 1:
        print(_growth(points, "length"))


def _stages_child(minutes: float, work: Path) -> None:
    """In the measured process: speech + conditions stages of the demo grid on ``work/rec.wav``."""
    from stresstest.cache import default_cache_dir
    from stresstest.config import load_config
    from stresstest.corpus import load_corpus
    from stresstest.grid import ConditionGrid
    from stresstest.noise import make_noise_source
    from stresstest.noise.stage import build_mixtures, mix_jobs
    from stresstest.records import Encounter, Turn
    from stresstest.speech.recording import load_recording

    cfg = load_config(REPO / "configs" / "demo.yaml")
    t0 = time.perf_counter()
    sources = {
        f: make_noise_source(s, encounters=load_corpus(cfg.corpus.kind, cfg.corpus.path), cache_dir=default_cache_dir())
        for f, s in cfg.noise.items()
    }
    t1 = time.perf_counter()
    rec = work / "rec.wav"
    enc = Encounter(
        encounter_id="LONG",
        corpus="manifest",
        source_path=str(rec),
        audio_path=str(rec),
        turns=(Turn(speaker="doctor", text="a long recording"),),
    )
    speech = load_recording(enc, work / "cache")
    t2 = time.perf_counter()
    grid = ConditionGrid.build(list(cfg.noise), cfg.snr_db)
    errors = []
    for job in mix_jobs(["LONG"], grid):
        build_mixtures(
            job,
            speech,
            sources[job.family],
            cfg.noise[job.family].model_dump(mode="json"),
            seed=cfg.run.seed,
            cache_dir=work / "cache",
            on_done=lambda c, p, i, e: errors.append(f"{c}: {e}") if e else None,
        )
    t3 = time.perf_counter()
    if errors:
        raise SystemExit("; ".join(errors))
    print(f"noise sources {t1 - t0:.1f} s, speech {t2 - t1:.1f} s, 4 mixtures {t3 - t2:.1f} s", file=sys.stderr)


def bench_stages(minutes: list[float], work: Path, code: Path) -> None:
    print(f"speech + conditions stages, demo grid ({code}): minutes, wall s, peak RSS MB")
    points = []
    for m in minutes:
        rec = work / "rec.wav"
        _write_long_wav(rec, m, "speech", 0)
        env_code = {"PYTHONPATH": os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")])}
        wall, rss, rc = _measure_py([str(Path(__file__).resolve()), "--stage-child", str(m), str(work)], work, env_code)
        print(f"  {m:6g} min  {wall:8.1f} s  {rss:8.0f} MB" + ("" if rc == 0 else f"  (exit {rc})"), flush=True)
        points.append((m, wall, rss))
        rec.unlink(missing_ok=True)
        shutil.rmtree(work / "cache", ignore_errors=True)
    if len(points) > 1:
        print(_growth(points, "length"))


def _long_encounter(speech_run: Path, minutes: float, work: Path) -> Path:
    """A manifest corpus with one recording ``minutes`` long: the clean speech of a finished run's encounters
    (real TTS speech with its reference text), one after another, cycled until long enough; and one short
    encounter (the first of them) for the babble bank."""
    import json

    clean = [json.loads(line) for line in (speech_run / "items.jsonl").read_text("utf-8").splitlines()]
    clean = [it for it in clean if it["condition"] == "clean" and it.get("audio_path")]
    if not clean:
        raise SystemExit(f"{speech_run}/items.jsonl: no clean item with audio (give a finished run's folder)")
    rec, texts, n, k = work / "long.wav", [], 0, 0
    with sf.SoundFile(str(rec), "w", samplerate=SR, channels=1, subtype="PCM_16") as out:
        while n < minutes * 60 * SR:
            it = clean[k % len(clean)]
            audio, sr = sf.read(it["audio_path"], dtype="float32")
            if sr != SR:
                raise SystemExit(f"{it['audio_path']}: expected {SR} Hz, got {sr}")
            out.write(audio)
            n += audio.shape[0]
            texts.append(it["reference_text"])
            k += 1
    # Built-in babble says sentences of *other* encounters: a second, short encounter (the first clean item
    # again) gives the long one its talkers' sentences, and the long one gives the short one its own.
    lines = [
        {"encounter_id": "LONG", "audio": str(rec), "reference_text": " ".join(texts)},
        {"encounter_id": "SHORT", "audio": clean[0]["audio_path"], "reference_text": clean[0]["reference_text"]},
    ]
    manifest = work / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    return manifest


def bench_run(minutes: list[float], speech_run: Path, work: Path) -> None:
    """``stresstest run`` with the demo grid (clean, ambient and babble at 10 and 5 dB, two guard rows, rules
    structurer and judge) on one long recording (and a short one, see :func:`_long_encounter`): every stage,
    ASR included, in one fresh process."""
    import yaml

    print("stresstest run, demo grid, one long recording (+ one short): minutes, wall s, peak RSS MB")
    points = []
    demo = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text("utf-8"))
    for m in minutes:
        cfg = dict(demo)
        cfg["corpus"] = {"kind": "manifest", "path": str(_long_encounter(speech_run, m, work))}
        cfg["noise"] = {
            f: {k: v for k, v in spec.items() if k != "bank_encounters"}  # babble: the one encounter
            for f, spec in demo["noise"].items()
        }
        cfg["run"] = {**demo["run"], "max_failures": 0.0}
        (work / "long.yaml").write_text(yaml.safe_dump(cfg), "utf-8")
        out = work / f"run_{m:g}"
        wall, rss, rc = _measure(["run", str(work / "long.yaml"), "--out", str(out)], work)
        print(f"  {m:6g} min  {wall:8.1f} s  {rss:8.0f} MB" + ("" if rc == 0 else f"  (exit {rc})"), flush=True)
        points.append((m, wall, rss))
        shutil.rmtree(out, ignore_errors=True)
    if len(points) > 1:
        print(_growth(points, "length"))


def bench_triggers(sizes_kb: list[float], work: Path) -> None:
    print("stresstest triggers (one pair): reference KB, wall s, peak RSS MB")
    points = []
    for kb in sizes_kb:
        n = max(1, int(kb * 1000 // len(SENTENCE)))
        ref = SENTENCE * n
        words = ref.split()
        hyp = " ".join(w for k, w in enumerate(words) if k % 17 != 5)
        (work / "ref.txt").write_text(ref, "utf-8")
        (work / "hyp.txt").write_text(hyp, "utf-8")
        wall, rss, rc = _measure(["triggers", "--ref", "ref.txt", "--hyp", "hyp.txt"], work)
        print(
            f"  {len(ref) / 1000:8.0f} KB  {wall:8.1f} s  {rss:8.0f} MB" + ("" if rc == 0 else f"  (exit {rc})"),
            flush=True,
        )
        points.append((len(ref) / 1000, wall, rss))
    if len(points) > 1:
        print(_growth(points, "text"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, nargs="*", default=[10, 30, 60, 120])
    ap.add_argument("--ref-kb", type=float, nargs="*", default=[100, 1000, 10000])
    ap.add_argument(
        "--stage-minutes",
        type=float,
        nargs="*",
        default=[],
        help="speech + conditions stages of the demo grid on recordings this long (not in the default run)",
    )
    ap.add_argument(
        "--run-minutes",
        type=float,
        nargs="*",
        default=[],
        help="a whole `stresstest run` of the demo grid on one recording this long (not in the default)",
    )
    ap.add_argument(
        "--speech-run",
        type=Path,
        default=REPO / "runs" / "demo",
        help="a finished run whose clean speech and references --run-minutes cycles (default runs/demo)",
    )
    ap.add_argument(
        "--code", type=Path, default=REPO, help="checkout whose stresstest package --stage-minutes measures"
    )
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--stage-child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.stage_child:
        _stages_child(float(a.stage_child[0]), Path(a.stage_child[1]))
        return 0
    with tempfile.TemporaryDirectory(dir=a.work) as tmp:
        work = Path(tmp)
        if a.minutes:
            bench_mix(a.minutes, work)
        if a.stage_minutes:
            bench_stages(a.stage_minutes, work, a.code.resolve())
        if a.run_minutes:
            bench_run(a.run_minutes, a.speech_run.resolve(), work)
        if a.ref_kb:
            bench_triggers(a.ref_kb, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
