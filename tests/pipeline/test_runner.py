"""Runner: a real small sweep on user recordings; failures recorded and counted; resume recomputes nothing."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from stresstest.audio import write_wav
from stresstest.errors import RunError
from stresstest.metrics.summary import SUMMARY_COLUMNS

TURNS = [
    ("doctor", "What brings you in today?"),
    ("patient", "I have had chest pain for two hours and I feel short of breath."),
    ("doctor", "Do you have any allergies?"),
    ("patient", "No, I don't have any allergies. I take warfarin five milligrams every day."),
]


def _write_corpus(root: Path, n_bad: int = 1) -> Path:
    import numpy as np

    from stresstest.audio import SAMPLE_RATE_HZ as SR
    from stresstest.speech import SpeakerVoice, synthesize

    lines, pieces, t, turns = [], [], 0.3, []
    for spk, text in TURNS:
        x = synthesize(text, SpeakerVoice(pitch_factor=0.92 if spk == "doctor" else 1.1))
        turns.append({"speaker": spk, "text": text, "start_s": round(t, 3), "end_s": round(t + x.size / SR, 3)})
        pieces += [np.zeros(int(0.3 * SR) if not pieces else int(0.4 * SR), np.float32), x]
        t += x.size / SR + 0.4
    audio = np.concatenate(pieces + [np.zeros(SR // 4, np.float32)])
    write_wav(root / "enc1.wav", audio)
    lines.append({"encounter_id": "ENC1", "audio": "enc1.wav", "turns": turns})
    for i in range(n_bad):
        (root / f"bad{i}.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
        lines.append({"encounter_id": f"BAD{i}", "audio": f"bad{i}.wav", "turns": turns[:2]})
    (root / "manifest.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root / "manifest.jsonl"


def _config(root: Path, max_failures: float) -> Path:
    cfg = root / "run.yaml"
    cfg.write_text(f"""
run: {{seed: 5, max_failures: {max_failures}, cache_dir: cache, progress: false}}
corpus: {{kind: manifest, path: manifest.jsonl}}
noise:
  ambient: {{family: ambient, kind: builtin}}
snr_db: [10, 0]
structure: {{backend: rules}}
judge: {{backend: rules}}
mitigation: {{conditions: [ambient_0db]}}
report: {{enabled: false}}
""")
    return cfg


@pytest.mark.integration
def test_run_records_failures_and_resumes_without_recomputing(tmp_path, monkeypatch, capfd):
    from stresstest.pipeline.runner import run

    _write_corpus(tmp_path)
    cfg = _config(tmp_path, max_failures=10)
    result = run(cfg, tmp_path / "out")
    out, rows = result.out, result.rows
    # run() returns what it wrote: the items' bytes, the last manifest (the CLI prints from these, reads nothing)
    from stresstest.results import items_jsonl

    assert items_jsonl(result.items) == (out / "items.jsonl").read_text("utf-8")
    assert result.manifest.completed and result.manifest.to_json() == json.loads((out / "manifest.json").read_text())
    # run.progress false: no start line, no progress or end line (stderr here is not a terminal)
    err = capfd.readouterr().err
    starts = ("stresstest: run:", "stresstest: speech", "stresstest: asr", "stresstest: score")
    assert not [ln for ln in err.splitlines() if ln.startswith(starts)], err

    with open(out / "summary.csv") as fh:
        summary = list(csv.DictReader(fh))
    assert list(summary[0])[: len(SUMMARY_COLUMNS)] == list(SUMMARY_COLUMNS)
    assert [r["condition"] for r in summary] == ["clean", "ambient_10db", "ambient_0db", "ambient_0db_guard"]
    assert all(r["n"] == "1" for r in summary)  # the bad encounter is failed, not silently averaged in
    assert summary[0]["triage_match"] == "100" and summary[0]["err_prop"] == ""

    items = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert len(items) == 2 * 4
    bad = [it for it in items if it["encounter_id"] == "BAD0"]
    assert len(bad) == 4 and all(it["failed"] and "speech" in it["error"] for it in bad)
    good = {it["condition"]: it for it in items if it["encounter_id"] == "ENC1"}
    for cond in ("ambient_10db", "ambient_0db"):
        assert abs(good[cond]["measured_snr_db"] - good[cond]["target_snr_db"]) <= 0.1
        for key in (
            "encounter_id",
            "condition",
            "family",
            "snr_db",
            "reference_text",
            "hypothesis_text",
            "audio_path",
            "record_path",
        ):
            assert key in good[cond]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["n_failures"] == 4 and {f["stage"] for f in manifest["failures"]} == {"speech"}
    assert manifest["structure"]["schema_hash"]

    # Resume: every expensive stage must come from the cache; a call into ASR would fail the test.
    from stresstest.asr.backends import FasterWhisperBackend

    def no_asr(*a, **k):
        raise AssertionError("ASR recomputed on a finished run")

    monkeypatch.setattr(FasterWhisperBackend, "transcribe_windows", no_asr)
    monkeypatch.setattr(FasterWhisperBackend, "transcribe_windows_batched", no_asr)
    (out / "items.jsonl").unlink()
    again = run(cfg, tmp_path / "out")
    out2, rows2 = again.out, again.rows
    assert rows2 == rows
    items2 = [json.loads(x) for x in (out2 / "items.jsonl").read_text().splitlines()]
    assert [(i["hypothesis_text"], i.get("judge_score")) for i in items2] == [
        (i["hypothesis_text"], i.get("judge_score")) for i in items
    ]


@pytest.mark.integration
def test_too_many_failures_stop_the_run_with_a_clear_error(tmp_path):
    from stresstest.pipeline.runner import run

    _write_corpus(tmp_path, n_bad=2)
    cfg = _config(tmp_path, max_failures=0.1)
    with pytest.raises(RunError, match="exceed run.max_failures"):
        run(cfg, tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["n_failures"] >= 1


@pytest.mark.integration
def test_a_finished_run_is_replaced_only_when_asked(tmp_path):
    """A real finished run; another grid into it is refused (nothing changes), then replaced with
    --replace-run: the dropped condition's per-item files go, the user's own file stays."""
    from stresstest.pipeline.runner import run

    _write_corpus(tmp_path, n_bad=0)
    out = run(_config(tmp_path, max_failures=0), tmp_path / "out").out
    summary = (out / "summary.csv").read_bytes()
    (out / "records" / "ambient_0db" / "my_notes.txt").write_text("mine")
    cfg2 = tmp_path / "run2.yaml"
    cfg2.write_text(
        _config(tmp_path, max_failures=0)
        .read_text()
        .replace("snr_db: [10, 0]", "snr_db: [10]")
        .replace("mitigation: {conditions: [ambient_0db]}", "")
    )
    with pytest.raises(
        RunError, match="holds a finished run of another config .the config differs in mitigation, snr_db"
    ):
        run(cfg2, out)
    assert (out / "summary.csv").read_bytes() == summary
    assert (out / "records" / "ambient_0db" / "ENC1.json").is_file()
    rows = run(cfg2, out, replace=True).rows
    assert [r.condition for r in rows] == ["clean", "ambient_10db"]
    assert not (out / "records" / "ambient_0db" / "ENC1.json").exists()
    assert not (out / "transcripts" / "ambient_0db").exists()
    assert (out / "records" / "ambient_10db" / "ENC1.json").is_file()
    assert (out / "records" / "ambient_0db" / "my_notes.txt").read_text() == "mine"


@pytest.mark.integration
def test_chain_conditions_run_record_their_steps_and_resume_from_the_cache(tmp_path, monkeypatch):
    from stresstest.pipeline.runner import run

    _write_corpus(tmp_path, n_bad=0)
    cfg = tmp_path / "chains.yaml"
    cfg.write_text("""
run: {seed: 5, max_failures: 0, cache_dir: cache, progress: false}
corpus: {kind: manifest, path: manifest.jsonl}
noise:
  ambient: {family: ambient, kind: builtin}
snr_db: [10]
structure: {backend: rules}
judge: {backend: rules}
chains:
  axes:
    room: {rt0.4: [{room: {rt60_s: 0.4}}]}
    channel: {g711: [{telephone: {}}, {mulaw: {}}]}
  conditions:
    room_noise_opus: [{room: {rt60_s: 0.4}}, {noise: {family: ambient, snr_db: 10}}, {opus: {bitrate_kbps: 16}},
                      {packet_loss: {rate: 0.05}}]
report: {enabled: false}
""")
    result = run(cfg, tmp_path / "out")
    out, rows = result.out, result.rows
    assert [r.condition for r in rows] == ["clean", "ambient_10db", "rt0.4_g711", "room_noise_opus"]
    assert all(r.n == 1 and r.wer is not None and r.clinical_wer is not None for r in rows)
    items = {it["condition"]: it for it in map(json.loads, (out / "items.jsonl").read_text().splitlines())}
    assert [s["kind"] for s in items["rt0.4_g711"]["mix"]["chain"]] == ["room", "telephone", "mulaw"]
    rn = items["room_noise_opus"]
    assert [s["kind"] for s in rn["mix"]["chain"]] == ["room", "noise", "opus", "packet_loss"]
    assert rn["target_snr_db"] == 10.0 and abs(rn["measured_snr_db"] - 10.0) <= 0.1
    assert "chain" not in items["ambient_10db"]["mix"]  # the plain mixture's record is as before
    # the noise step draws the family's own segment: the same source and offset as ambient_10db
    assert (rn["mix"]["noise_source"], rn["mix"]["noise_offset_s"]) == (
        items["ambient_10db"]["mix"]["noise_source"],
        items["ambient_10db"]["mix"]["noise_offset_s"],
    )

    # Resume: the chain audio and every transcript come from the cache.
    import stresstest.noise.chain as chain_mod
    from stresstest.asr.backends import FasterWhisperBackend

    def no(*a, **k):
        raise AssertionError("recomputed on a finished run")

    monkeypatch.setattr(chain_mod, "render_chain", no)
    monkeypatch.setattr(FasterWhisperBackend, "transcribe_windows", no)
    monkeypatch.setattr(FasterWhisperBackend, "transcribe_windows_batched", no)
    (out / "items.jsonl").unlink()
    rows2 = run(cfg, tmp_path / "out").rows
    assert rows2 == rows


def test_summary_csv_is_written_from_typed_rows_in_the_fixed_column_order() -> None:
    from stresstest.metrics.summary import CSV_COLUMNS, SummaryRow, TriggerRates
    from stresstest.pipeline.runner import _summary_csv

    # The header of the demo's summary.csv before the rows were typed (issue 27): every column keeps its place.
    before = (
        "condition,family,snr_db,n,wer,ins_rate,neg_err,err_prop,triage_match,scer,under_triage,mean_score,"
        "unsafe,completeness,conciseness,groundedness,halluc_lexical,halluc_inference,trig_negation_flip,"
        "trig_number_unit_conflict,trig_temporal_distortion,trig_nonspeech_pollution,trig_entity_substitution,"
        "trig_clinical_omission,abstention_rate,quotes_discarded,n_dropped,dropped,clinical_wer,wer_clinician,"
        "wer_patient,clinical_wer_clinician,clinical_wer_patient"
    ).split(",")
    assert list(CSV_COLUMNS) == [*before, "halluc_per_min"]  # columns added later go last
    before = list(CSV_COLUMNS)
    rows = [
        SummaryRow(
            condition="clean",
            family="clean",
            n=8,
            wer=9.24801,
            neg_err=50.0,
            triggers=TriggerRates(negation_flip=62.5),
            n_dropped=1,
            dropped="E2",
            clinical_wer=0.0,
        ),
        SummaryRow(
            condition="ambient_5db_guard",
            family="ambient",
            snr_db=5.0,
            n=8,
            abstention_rate=1 / 3,
            quotes_discarded=3,
            n_dropped=1,
            dropped="E2",
        ),
    ]
    header, *lines = _summary_csv(rows).splitlines()
    assert header.split(",") == before
    got = [dict(zip(before, line.split(","), strict=True)) for line in lines]
    assert (got[0]["snr_db"], got[0]["n"], got[0]["wer"], got[0]["neg_err"], got[0]["err_prop"]) == (
        "",
        "8",
        "9.248",
        "50",
        "",
    )
    assert (got[0]["trig_negation_flip"], got[0]["trig_clinical_omission"], got[0]["clinical_wer"]) == ("62.5", "", "0")
    assert (got[1]["snr_db"], got[1]["abstention_rate"], got[1]["quotes_discarded"]) == ("5", "0.3333", "3")
    assert (got[1]["n_dropped"], got[1]["dropped"]) == ("1", "E2")
    assert list(rows[0].cells()) == before


def test_the_start_line_names_what_will_run(tmp_path, capsys):
    from stresstest.config import load_config
    from stresstest.pipeline.executor import InProcessExecutor
    from stresstest.pipeline.runner import RunState, _announce, _load_encounters

    for name, structure in (("demo.yaml", "structure rules"), ("demo-llm.yaml", "structure openai (bundled model)")):
        cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / name)
        state = RunState(out=tmp_path, cfg=cfg, grid=cfg.grid(), executor=InProcessExecutor())
        _load_encounters(state)
        _announce(state, tmp_path / "empty-cache")  # nothing cached: no hours known yet
        line = capsys.readouterr().err.strip()
        n, k = len(state.encounters), len(state.grid)
        assert line.startswith(f"stresstest: run: {n} encounters × {k} conditions = {n * k} items ("), line
        assert (
            f"; hours of speech known once rendered; 0 of {n} TTS renderings in the cache; ASR faster-whisper "
            f"(bundled model); {structure}; judge "
        ) in line, line
