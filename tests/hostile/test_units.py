"""Unit-level proofs of the hostile-input rules (docs/reliability.md lists which test proves what)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from stresstest.cache import (
    KeyValueCache,
    atomic_write_bytes,
    read_verified_json,
    write_verified_json,
)
from stresstest.errors import ConfigError
from stresstest.ids import IdError, check_id, id_path, id_problem
from stresstest.results import ItemScore


@pytest.mark.parametrize(
    "bad", ["", ".", "..", "a/b", "../x", "/abs", "a\\b", "a\x00b", "a\nb", "a\x1bb", " lead", "trail ", "x" * 201]
)
def test_id_rule_rejects_non_file_names(bad: str) -> None:
    assert id_problem(bad) is not None
    with pytest.raises(IdError, match=r"^m\.jsonl:3: encounter id "):
        check_id(bad, where="m.jsonl:3")


@pytest.mark.parametrize(
    "good", ["CAR0001", "day1_consultation01", "test1_virtscribe_asr-VS017", "a.b-c_d", "visite-é"]
)
def test_id_rule_accepts_plain_names(good: str) -> None:
    assert id_problem(good) is None and check_id(good, where="x") == good


def test_id_path_stays_inside_its_root(tmp_path: Path) -> None:
    assert id_path(tmp_path, "clean", "E1", suffix=".json") == tmp_path / "clean" / "E1.json"
    with pytest.raises(IdError):
        id_path(tmp_path, "clean", "../../etc/passwd")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(IdError, match="resolves outside"):
        id_path(tmp_path / "root", "link", "E1", suffix=".json")


# ---------------------------------------------------------------------------------------------- verified cache


def test_verified_cache_detects_damage_and_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wav = tmp_path / "x.wav"
    wav.write_bytes(b"RIFF" + bytes(100))
    meta = tmp_path / "x.c2.json"
    write_verified_json(meta, {"n": 1}, files={"wav": wav})
    assert read_verified_json(meta, files={"wav": wav}) == {"n": 1}
    wav.write_bytes(b"RIFF" + bytes(50))  # truncated
    assert read_verified_json(meta, files={"wav": wav}) is None
    assert f"cache entry {meta}: {wav} has 54 bytes, 104 were written" in capsys.readouterr().err
    wav.write_bytes(b"RIFX" + bytes(100))  # same size, other content
    assert read_verified_json(meta, files={"wav": wav}) is None
    assert "different content hash" in capsys.readouterr().err
    env = json.loads(meta.read_text())
    env["value"] = {"n": 2}  # edited by hand
    meta.write_text(json.dumps(env))
    assert read_verified_json(meta) is None
    assert "does not match its recorded content hash" in capsys.readouterr().err
    meta.write_text("{torn")
    assert read_verified_json(meta) is None
    assert f"cache entry {meta} is damaged" in capsys.readouterr().err


def test_wrong_shape_is_a_warned_miss(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kv = KeyValueCache(tmp_path, "ns")
    kv.put("ab12", {"text": "hi"})

    def need_int(v: object) -> int:
        return int(v["n"])  # type: ignore[index]

    assert kv.get("ab12", validate=need_int) is None
    err = capsys.readouterr().err
    assert str(kv.path("ab12")) in err and "wrong shape" in err and err.count("\n") == 1


def test_a_pre_envelope_cache_entry_is_recomputed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38: a plain ``<key>.json`` entry of the format before envelopes is never read. The stage recomputes
    the value (no error, no warning, nothing refused) and writes its envelope beside the old file, which it
    leaves alone (an older checkout sharing the cache may still read it)."""
    from stresstest.cache import rejected_entries
    from stresstest.llm.config import LLMConfig
    from stresstest.structure.stage import StructureItem, structure_many

    item = StructureItem(
        encounter_id="E1",
        condition="clean",
        transcript_text="Doctor: Any chest pain? Patient: No. I take warfarin 5 mg daily.",
    )
    cfg = LLMConfig(backend="rules")
    fresh = structure_many([item], cfg, cache_dir=tmp_path / "a", log_dir=tmp_path / "logs")[0].record
    assert fresh is not None
    [envelope] = (tmp_path / "a").rglob("*.c2.json")
    # The same key in the old layout, holding another answer: were it read, the stage would return it.
    cache = tmp_path / "b"
    old = cache / envelope.relative_to(tmp_path / "a").parent / envelope.name.replace(".c2.json", ".json")
    old.parent.mkdir(parents=True)
    stale = fresh.model_copy(update={"chief_complaint": "stale entry of the old format"})
    old.write_text(json.dumps({"record": stale.model_dump(mode="json")}))
    before = rejected_entries()
    capsys.readouterr()
    again = structure_many([item], cfg, cache_dir=cache, log_dir=tmp_path / "logs")[0]
    assert not again.failed and again.record == fresh and again.record != stale
    assert rejected_entries() == before and capsys.readouterr().err == ""
    assert (old.parent / envelope.name).is_file()  # recomputed and written in the current format
    assert json.loads(old.read_text())["record"]["chief_complaint"] == "stale entry of the old format"


def test_written_files_follow_the_umask(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    os.umask(mask)
    atomic_write_bytes(tmp_path / "f", b"x")
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o666 & ~mask


# ---------------------------------------------------------------------------------------------- YAML


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    from stresstest.config import load_config

    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 12)]
    p = tmp_path / "bomb.yaml"
    p.write_text("\n".join(lines) + "\n")
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="alias bomb"):
        load_config(p)
    assert time.monotonic() - t0 < 2.0


def test_strict_yaml_rules(tmp_path: Path) -> None:
    from stresstest.config import load_config

    p = tmp_path / "c.yaml"
    for body, msg in [
        ("corpus: {kind: osce, path: x}\nrun: {seed: true}\n", "c.yaml:2: run.seed"),
        ("corpus: {kind: osce, path: x}\ncorpus: {kind: osce, path: y}\n", "c.yaml:2: duplicate key 'corpus'"),
        ("corpus: {kind: osce, path: x}\nsnr_db: [10, 10.0]\n", "appears twice"),
        ("corpus: {kind: osce, path: x}\nsnr_db: []\n", "at least one SNR"),
    ]:
        p.write_text(body)
        with pytest.raises(ConfigError, match=msg):
            load_config(p)
    # Anchors and aliases of a sane size still work.
    p.write_text("corpus: {kind: osce, path: x}\nspeech:\n  doctor: &v {length_scale: 1.0}\n  patient: *v\n")
    assert load_config(p).speech.patient.length_scale == 1.0


# ---------------------------------------------------------------------------------------------- pairing


def _rows(failed: set[tuple[str, str]]) -> list[ItemScore]:
    rows = []
    for e in ("E1", "E2", "E3"):
        for c in ("clean", "ambient_5db", "ambient_5db_guard"):
            rows.append(
                {
                    "encounter_id": e,
                    "condition": c,
                    "failed": (e, c) in failed,
                    "error": "asr: boom" if (e, c) in failed else None,
                    "ref_words": 10,
                    "asr_sub": 1 if e == "E2" else 0,
                    "asr_del": 0,
                    "asr_ins": 0,
                    "neg_err": 0,
                }
            )
    return [ItemScore.model_validate(r) for r in rows]


def _grid():  # type: ignore[no-untyped-def]
    from stresstest.grid import ConditionGrid

    return ConditionGrid.from_json(
        [
            {"condition": "clean", "family": "clean", "snr_db": None, "mitigated": False},
            {"condition": "ambient_5db", "family": "ambient", "snr_db": 5.0, "mitigated": False},
            {"condition": "ambient_5db_guard", "family": "ambient", "snr_db": 5.0, "mitigated": True},
        ]
    )


def test_pairing_drops_the_encounter_from_every_row_clean_included() -> None:
    from stresstest.metrics.summary import summary_rows
    from stresstest.pipeline.pairing import apply_pairing

    conds = _grid()
    items, pairing = apply_pairing(_rows({("E2", "ambient_5db")}), conds)
    assert pairing.paired == ["E1", "E3"] and list(pairing.dropped) == ["E2"]
    assert pairing.dropped["E2"] == ["ambient_5db: asr: boom"]
    clean_e2 = next(it for it in items if it.key == ("E2", "clean"))
    assert clean_e2.paired is False and "ambient_5db" in str(clean_e2.unpaired_reason)
    rows = summary_rows(items, conds)
    assert [r.n for r in rows] == [2, 2, 2]  # every row covers the same encounters
    assert rows[0].wer == 0.0  # E2's clean errors are not in the clean row either
    assert "2 of 3 encounters" in pairing.sentence() and "E2" in pairing.sentence()


def test_report_and_compare_use_the_same_pairing(tmp_path: Path) -> None:
    from stresstest.report.rundir import load_run

    d = tmp_path / "run"
    d.mkdir()
    from stresstest.pipeline.pairing import apply_pairing

    items, _ = apply_pairing(_rows({("E2", "ambient_5db")}), _grid())
    (d / "manifest.json").write_text(json.dumps({"conditions": [c.to_json() for c in _grid()]}))
    (d / "items.jsonl").write_text("".join(json.dumps(it.to_row()) + "\n" for it in items))
    assert {it.encounter_id for it in load_run(d).ok_items("clean")} == {"E1", "E3"}


def test_compare_of_different_grids_says_so(tmp_path: Path) -> None:
    from stresstest.report.compare import compare_runs

    def run(name: str, conds: list[str]) -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / "manifest.json").write_text(
            json.dumps(
                {
                    "run_id": name,
                    "conditions": [
                        {"condition": c, "family": "clean" if c == "clean" else "ambient", "snr_db": None}
                        for c in conds
                    ],
                }
            )
        )
        (d / "items.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "encounter_id": e,
                        "condition": c,
                        "failed": False,
                        "ref_words": 10,
                        "asr_sub": 1,
                        "asr_del": 0,
                        "asr_ins": 0,
                    }
                )
                + "\n"
                for e in ("E1", "E2")
                for c in conds
            )
        )
        return d

    res = compare_runs(
        run("a", ["clean", "ambient_5db", "ambient_10db"]),
        run("b", ["clean", "ambient_5db"]),
        tmp_path / "cmp",
        n_resamples=100,
    )
    assert res.warnings and "different condition grids" in res.warnings[0]
    assert "only in A: ambient_10db" in res.text and "only in B: none" in res.text
    assert "different condition grids" in res.html.read_text()
    assert "different condition grids" in res.markdown.read_text()


# ---------------------------------------------------------------------------------------------- run directory


def test_stale_artefacts_are_pruned_and_nothing_else(tmp_path: Path) -> None:
    from stresstest.pipeline.housekeeping import prune_stale

    for sub in ("records", "transcripts", "scores"):
        for cond in ("clean", "babble_5db"):
            for e in ("E1", "OLD"):
                p = tmp_path / sub / cond / f"{e}.json"
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text("{}")
    (tmp_path / "records" / "babble_5db" / "notes.txt").write_text("mine")
    (tmp_path / "records" / "clean" / "MINE.json").write_text("{}")  # not listed by the earlier run
    removed = prune_stale(tmp_path, ["clean", "babble_5db"], ["E1", "OLD"], ["clean"], ["E1"])
    assert len(removed) == 3 * 3
    assert (tmp_path / "records" / "clean" / "E1.json").is_file()
    assert (tmp_path / "records" / "clean" / "MINE.json").is_file()
    assert not (tmp_path / "records" / "clean" / "OLD.json").exists()
    assert not (tmp_path / "scores" / "babble_5db").exists()
    assert (tmp_path / "records" / "babble_5db" / "notes.txt").read_text() == "mine"


def test_prune_never_follows_a_symlinked_per_item_folder(tmp_path: Path) -> None:
    from stresstest.pipeline.housekeeping import prune_stale

    outside = tmp_path / "elsewhere"
    (outside / "clean").mkdir(parents=True)
    (outside / "clean" / "OLD.json").write_text("{}")
    run = tmp_path / "run"
    run.mkdir()
    (run / "records").symlink_to(outside, target_is_directory=True)
    (run / "transcripts" / "clean").mkdir(parents=True)
    (run / "transcripts" / "clean" / "OLD.json").symlink_to(outside / "clean" / "OLD.json")
    assert prune_stale(run, ["clean"], ["OLD"], ["clean"], ["E1"]) == []
    assert (outside / "clean" / "OLD.json").is_file()


def test_an_id_the_loader_accepts_is_accepted_by_every_writer(tmp_path: Path) -> None:
    from stresstest.ids import MAX_ID_LENGTH, check_id, id_path, id_problem

    longest = "x" * MAX_ID_LENGTH
    check_id(longest, where="m.jsonl:1")
    p = id_path(tmp_path, "records", "clean", longest, suffix=".json")  # the suffix has its own room
    p.parent.mkdir(parents=True)
    p.write_text("{}")  # and the file system takes the name
    assert "201 characters long" in str(id_problem("x" * 201))
    wide = "é" * 150  # 150 characters, 300 bytes: refused at load, in bytes, saying so
    assert "300 bytes in UTF-8" in str(id_problem(wide))


def test_wall_time_is_carried_over_from_an_unfinished_invocation(tmp_path: Path) -> None:
    from stresstest.pipeline.housekeeping import WallClock

    started = time.time() - 100
    (tmp_path / "transcripts").mkdir()
    (tmp_path / "transcripts" / "x.json").write_text("{}")  # written "now": the killed run got this far
    from datetime import datetime, timezone

    (tmp_path / "manifest.json").write_text(
        json.dumps(
            {
                "invocations": [
                    {
                        "started": datetime.fromtimestamp(started, timezone.utc).isoformat(),
                        "seconds": 10.0,
                        "completed": False,
                    }
                ],
                "stage_seconds": {"speech": 10.0, "total": 10.0},
            }
        )
    )
    clock = WallClock(tmp_path)
    assert clock.carried_stages == {"speech": 10.0}
    assert 99 <= (clock.previous[0].seconds or 0) <= 102
    assert clock.total() >= 99 and len(clock.invocations(True)) == 2
    (tmp_path / "manifest.json").write_text(json.dumps({"invocations": [{"completed": True, "seconds": 5}]}))
    assert WallClock(tmp_path).previous == []  # after a completed run, a new account starts


def test_out_that_is_a_file_is_a_user_error(tmp_path: Path) -> None:
    from stresstest.errors import RunError
    from stresstest.pipeline.housekeeping import check_out_dir

    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(RunError, match="exists and is not a directory"):
        check_out_dir(f)
    with pytest.raises(RunError, match="is a file"):
        check_out_dir(f / "sub")


def test_truncated_wav_is_detected(tmp_path: Path) -> None:
    import numpy as np
    import soundfile as sf

    from stresstest.audio import load_audio, wav_truncation
    from stresstest.errors import AudioError

    p = tmp_path / "a.wav"
    sf.write(str(p), np.zeros(1600, dtype=np.float32) + 0.1, 16000, subtype="PCM_16")
    assert wav_truncation(p) is None
    p.write_bytes(p.read_bytes()[:-1000])
    with pytest.raises(AudioError, match="truncated: its header declares 3200 bytes"):
        load_audio(p)


def test_console_lines_are_single_and_plain() -> None:
    from stresstest.console import one_line

    assert one_line("\x1b[31mpiper failed\x1b[0m\nline two\r\n\x07end") == "piper failed | line two | end"


def test_gold_files_use_the_bounded_loader(tmp_path: Path) -> None:
    from stresstest.errors import GoldError
    from stresstest.gold.model import read_gold_file

    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 12)]
    p = tmp_path / "E1.yaml"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(GoldError, match="alias bomb"):
        read_gold_file(p)
    p.write_text("encounter_id: E1\nencounter_id: E2\n")
    with pytest.raises(GoldError, match="E1.yaml:2: duplicate key 'encounter_id'"):
        read_gold_file(p)


def test_records_are_not_written_through_a_symlinked_records_folder(tmp_path: Path) -> None:
    """The runner's writers root their per-item paths at the run directory, so ``out/records -> elsewhere``
    is refused instead of followed (rules structuring on one transcript: no model involved)."""
    from stresstest.config import RunConfig
    from stresstest.ids import IdError
    from stresstest.pipeline.executor import ExecutorConfig, make_executor
    from stresstest.pipeline.runner import RunState, _structure_stage
    from stresstest.records import Transcript

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    (run / "records").symlink_to(outside, target_is_directory=True)
    cfg = RunConfig.model_validate({"corpus": {"kind": "osce", "path": str(tmp_path)}, "snr_db": [5]})
    with make_executor(ExecutorConfig(), cache_dir=tmp_path / "cache") as ex:
        state = RunState(out=run, cfg=cfg, grid=cfg.grid(), executor=ex)
        state.transcripts[("E1", "clean")] = Transcript(
            encounter_id="E1",
            condition="clean",
            text="I have chest pain.",
            backend="x",
            model="x",
            decoding={},
            audio_sha256="0",
        )
        with pytest.raises(IdError, match="resolves outside"):
            _structure_stage(state, tmp_path / "cache")
    assert list(outside.rglob("*")) == []


def test_a_full_cache_points_at_the_cache_not_at_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from stresstest import cache as cache_mod
    from stresstest.cli import _os_error_message

    monkeypatch.setattr(cache_mod, "_ACTIVE_CACHE", None)
    for var in ("MPLCONFIGDIR", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var))  # confine_tool_dirs leaves values that are set alone
    cache_mod.confine_tool_dirs(tmp_path / "cache")
    msg = _os_error_message(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "cache" / "asr" / "x")))
    assert "cache directory" in msg and "--out" not in msg
    msg = _os_error_message(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "run" / "items.jsonl")))
    assert "--out" in msg


def test_snr_grid_values_are_canonical() -> None:
    from stresstest.config import RunConfig

    cfg = RunConfig.model_validate(
        {"corpus": {"kind": "osce", "path": "x"}, "snr_db": [-0.0, 5], "noise": {"ambient": {"family": "ambient"}}}
    )
    assert [c.id for c in cfg.grid()] == ["clean", "ambient_0db", "ambient_5db"]


def test_loading_the_piper_voice_writes_nothing_to_tmpdir(tmp_path: Path) -> None:
    """onnxruntime writes ``$TMPDIR/.ses`` when it is imported; the voice loader keeps it in the cache."""
    import os
    import subprocess
    import sys

    pytest.importorskip("piper", reason="piper-tts is not installed: make install")
    repo = Path(__file__).resolve().parents[2]
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    # A clean environment: earlier tests of this process leave confine_tool_dirs' variables behind.
    env = {
        "PATH": os.environ.get("PATH", ""),
        "TMPDIR": str(tmpdir),
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    code = (
        "from stresstest.cache import confine_tool_dirs; confine_tool_dirs({!r}); "
        "from stresstest.speech.tts import load_voice; load_voice()"
    ).format(str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)  # noqa: S603
    assert list(tmpdir.iterdir()) == []
    assert (tmp_path / "cache" / "tools" / "tmp" / ".ses").is_file()


def test_a_turn_limit_cuts_the_recording_with_the_reference(tmp_path: Path) -> None:
    """corpus.max_turns on a timed recording: the audio ends with the last kept turn, and the speech recipe
    says so (before: the reference was cut, the audio not, and clean WER went past 100%)."""
    import numpy as np
    import soundfile as sf

    from stresstest.records import Encounter, Turn
    from stresstest.speech.recording import load_recording

    wav = tmp_path / "rec.wav"
    sf.write(str(wav), (0.3 * np.sin(np.arange(32000) / 10)).astype(np.float32), 16000)
    enc = Encounter(
        encounter_id="E1",
        corpus="manifest",
        source_path=str(tmp_path / "m.jsonl"),
        audio_path=str(wav),
        turns=(
            Turn(speaker="doctor", text="chest pain", start_s=0.1, end_s=0.8),
            Turn(speaker="patient", text="since last night", start_s=1.0, end_s=1.9),
        ),
    )
    whole = load_recording(enc, tmp_path / "cache")
    cut = load_recording(enc.truncated(1), tmp_path / "cache")
    assert whole.duration_s == pytest.approx(2.0) and cut.duration_s == pytest.approx(0.8)
    assert cut.segments_s == ((0.1, 0.8),)
    assert any("cut at 0.8 s" in w for w in cut.recipe["warnings"])  # type: ignore[union-attr]
    assert "warnings" not in whole.recipe


def test_yaml12_exponents_are_numbers_and_non_finite_values_are_refused(tmp_path: Path) -> None:
    """Issue 37: PyYAML (YAML 1.1) read ``1.0e7`` as the string '1.0e7' and accepted ``.nan``/``.inf`` anywhere."""
    from stresstest.config import load_config
    from stresstest.errors import ConfigError

    corpus = tmp_path / "osce"
    corpus.mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"corpus: {{kind: osce, path: {corpus}}}\nsnr_db: [1e1, 5.0e0]\nspeech: {{tail_s: 2e-1}}\n")
    c = load_config(cfg)
    assert c.snr_db == [10.0, 5.0] and c.speech.tail_s == 0.2
    cfg.write_text(f"corpus: {{kind: osce, path: {corpus}}}\nrun:\n  max_failures: .inf\n")
    with pytest.raises(ConfigError, match=r"c.yaml:3: run.max_failures: expected a finite number, got inf"):
        load_config(cfg)
