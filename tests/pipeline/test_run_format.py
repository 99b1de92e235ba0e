"""The run directory as a public format (issue 38): a run the real CLI wrote reads back through
``stresstest.results.read_run`` into the models, writes back the same bytes, and every file and folder in it is
described in docs/run-format.md."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stresstest.errors import RunDirError
from stresstest.results import ItemScore, RunManifest, items_jsonl, read_run
from stresstest.schema import RecordEnvelope

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "run-format.md"


@pytest.mark.integration
def test_read_run_reads_what_the_cli_wrote(tmp_path: Path) -> None:
    from test_runner import _config, _write_corpus  # the runner test's real recordings (+ one unreadable file)

    _write_corpus(tmp_path)
    cfg = _config(tmp_path, max_failures=10)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run(
        [sys.executable, "-m", "stresstest.cli", "run", str(cfg), "--out", str(out)],  # noqa: S603
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]

    run = read_run(out)
    assert isinstance(run.manifest, RunManifest) and all(isinstance(it, ItemScore) for it in run.items)
    # Through the models and back: the same bytes (items) and the same JSON (manifest).
    assert items_jsonl(run.items) == (out / "items.jsonl").read_text("utf-8")
    assert run.manifest.to_json() == json.loads((out / "manifest.json").read_text("utf-8"))
    assert run.manifest.completed and run.notes == [] and run.run_id == "out"
    assert [c.id for c in run.conditions] == ["clean", "ambient_10db", "ambient_0db", "ambient_0db_guard"]
    assert len(run.items) == 2 * len(run.conditions)
    with open(out / "summary.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert run.summary is not None and [s.cells for s in run.summary] == rows
    assert run.summary_columns == list(rows[0])
    clean = run.summary_line("clean")
    assert clean is not None and clean.number("triage_match") == 100.0 and clean.number("err_prop") is None
    # The stage records of each item: the good encounter has all of them, the unreadable one none.
    for it in run.items:
        env, tr, detail = run.envelope(it), run.transcript(it), run.score_detail(it)
        if it.encounter_id == "BAD0":
            assert it.failed and env is None and tr is None
            continue
        assert isinstance(env, RecordEnvelope) and not env.failed and (env.encounter_id, env.condition) == it.key
        base = it.condition.removesuffix("_guard")  # a guard row is scored on its base condition's transcript
        assert tr is not None and (tr.encounter_id, tr.condition) == (it.encounter_id, base) and tr.text
        assert it.transcript_path == f"transcripts/{base}/{it.encounter_id}.json"
        assert detail is not None and detail["encounter_id"] == it.encounter_id
    # docs/run-format.md names every file and folder the run wrote.
    doc = DOC.read_text("utf-8")
    missing = [p.name for p in out.iterdir() if f"`{p.name}" not in doc]
    assert missing == []


def test_read_run_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="does not exist"):
        read_run(tmp_path / "nope")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "manifest.json").write_text("{}", "utf-8")
    with pytest.raises(RunDirError, match="items.jsonl is missing"):
        read_run(tmp_path / "r")
    (tmp_path / "r" / "items.jsonl").write_text('{"encounter_id": "E1", "condition": "clean"}\n{"x": 1}\n', "utf-8")
    with pytest.raises(RunDirError, match=r"items.jsonl:2: item row has no 'encounter_id' field"):
        read_run(tmp_path / "r")
