"""CLI: one-line errors with non-zero exit, `mix` and `triggers` as docs/spec.md §10 says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stresstest.audio import SAMPLE_RATE_HZ as SR
from stresstest.audio import write_wav
from stresstest.cli import main


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stresstest.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_bad_config_key_is_one_line_on_stderr(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("corpus:\n  kind: osce\n  path: x\nasr:\n  beam: 5\n")
    r = _cli("run", str(cfg), "--out", str(tmp_path / "out"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "bad.yaml:5: asr.beam: unknown key" in lines[0]


def test_missing_corpus_folder_names_the_path(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("corpus:\n  kind: osce\n  path: nowhere\n")
    r = _cli("run", str(cfg), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "nowhere" in r.stderr


def test_unreadable_audio_in_mix_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "speech.wav"
    bad.write_bytes(b"RIFF....garbage")
    noise = tmp_path / "noise.wav"
    write_wav(noise, np.ones(SR, np.float32) * 0.1)
    args = ["mix", "--speech", str(bad), "--noise", str(noise), "--snr", "5", "--out", str(tmp_path / "o.wav")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "speech.wav" in err[0] and "cannot read audio" in err[0]


def test_mix_command_hits_the_snr_and_is_deterministic(tmp_path, capsys):
    t = np.arange(SR * 6) / SR
    speech = np.zeros(t.size, np.float32)
    speech[SR : 3 * SR] = 0.4 * np.sin(2 * np.pi * 180 * t[SR : 3 * SR])
    speech[4 * SR : 5 * SR] = 0.3 * np.sin(2 * np.pi * 240 * t[4 * SR : 5 * SR])
    write_wav(tmp_path / "s.wav", speech)
    write_wav(tmp_path / "n.wav", np.random.default_rng(0).standard_normal(SR * 20).astype(np.float32) * 0.2)
    outs = []
    for name in ("a.wav", "b.wav"):
        args = [
            "mix",
            "--speech",
            str(tmp_path / "s.wav"),
            "--noise",
            str(tmp_path / "n.wav"),
            "--snr",
            "7.5",
            "--seed",
            "3",
            "--out",
            str(tmp_path / name),
        ]
        assert main(args) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert abs(outs[0]["measured_snr_db"] - 7.5) <= 0.1
    assert outs[0]["noise_offset_s"] == outs[1]["noise_offset_s"]
    assert (tmp_path / "a.wav").read_bytes() == (tmp_path / "b.wav").read_bytes()


def test_triggers_command_prints_typed_events(tmp_path, capsys):
    (tmp_path / "r.txt").write_text("I can walk about 3 or 4 flights of stairs. The pain started two hours ago.")
    (tmp_path / "h.txt").write_text("I can walk about three or four steps. The pain started two days ago.")
    assert main(["triggers", "--ref", str(tmp_path / "r.txt"), "--hyp", str(tmp_path / "h.txt")]) == 0
    events = json.loads(capsys.readouterr().out)
    types = {e["type"] for e in events}
    assert {"number_unit_conflict", "temporal_distortion"} <= types
    for e in events:
        assert {"type", "ref_span", "hyp_span"} <= set(e)


def test_triggers_with_gold_concepts_are_the_run_s_events(tmp_path, capsys):
    # A run passes the encounter's gold concepts to the detector; --gold does the same, so the two agree.
    from stresstest.gold.model import default_gold_dir, load_gold
    from stresstest.metrics.triggers import detect_triggers

    ref = "Do you get paroxysmal nocturnal dyspnea? No. And orthopnea? Yes, I am gasping when I lay down."
    hyp = "Do you get paroxysmal nocturnal dyspnea? And orthopnea? Yes, I am gasping when I lay down."
    (tmp_path / "r.txt").write_text(ref)
    (tmp_path / "h.txt").write_text(hyp)
    assert (
        main(["triggers", "--ref", str(tmp_path / "r.txt"), "--hyp", str(tmp_path / "h.txt"), "--gold", "CAR0003"]) == 0
    )
    concepts = [c.concept for c in load_gold(default_gold_dir())["CAR0003"].claims]
    assert json.loads(capsys.readouterr().out) == [
        e.model_dump(mode="json") for e in detect_triggers(ref, hyp, concepts)
    ]
    assert (
        main(["triggers", "--ref", str(tmp_path / "r.txt"), "--hyp", str(tmp_path / "h.txt"), "--gold", "NOPE0001"])
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "no gold reference for 1 encounter(s): NOPE0001" in err and "\n" not in err


def test_triggers_missing_file(tmp_path, capsys):
    assert main(["triggers", "--ref", str(tmp_path / "nope.txt"), "--hyp", str(tmp_path / "nope.txt")]) == 2
    assert "nope.txt: file not found" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--version"], ["run", "--help"], ["gold", "check", "--help"]])
def test_help_and_version(argv, capsys):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    assert ei.value.code == 0
