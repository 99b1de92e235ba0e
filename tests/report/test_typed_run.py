"""load_run returns the typed run; older manifests are migrated and say so, newer ones are refused by version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stresstest.errors import ReportError
from stresstest.grid import ConditionGrid
from stresstest.pipeline.pairing import apply_pairing
from stresstest.report.build import _failures, run_facts
from stresstest.report.content import FailureRow
from stresstest.report.rundir import load_run
from stresstest.results import MANIFEST_SCHEMA_VERSION, CorpusInfo, ItemScore, PairingInfo, RunManifest

GRID = ConditionGrid.build(["ambient"], [5.0], [])


def _write(d: Path, manifest: dict[str, object], rows: list[dict[str, object]]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    (d / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return d


ROWS: list[dict[str, object]] = [
    {
        "encounter_id": "E1",
        "condition": "clean",
        "failed": False,
        "ref_words": 4,
        "asr_sub": 0,
        "asr_del": 0,
        "asr_ins": 0,
    },
    {"encounter_id": "E1", "condition": "ambient_5db", "failed": True, "error": "asr: decoder crashed"},
]
V2 = {
    "schema_version": 2,
    "run_id": "old",
    "conditions": [c.to_json() for c in GRID],
    "corpus": {"kind": "osce", "path": "x", "n_encounters": 1, "encounter_ids": ["E1"], "note": "kept"},
    "pairing": {
        "rule": "r",
        "n_encounters": 1,
        "n_paired": 0,
        "n_dropped": 1,
        "dropped": {"E1": ["ambient_5db: asr: decoder crashed"]},
    },
}


def test_load_run_returns_typed_items_and_manifest(tmp_path: Path) -> None:
    run = load_run(_write(tmp_path / "r", {**V2, "schema_version": MANIFEST_SCHEMA_VERSION}, ROWS))
    assert all(isinstance(it, ItemScore) for it in run.items)
    assert isinstance(run.manifest, RunManifest) and isinstance(run.manifest.corpus, CorpusInfo)
    assert isinstance(run.manifest.pairing, PairingInfo) and run.manifest.pairing.n_paired == 0
    assert run.notes == [] and run.run_id == "old"
    # a section keeps keys the model does not declare, and writes back what it read
    assert run.manifest.to_json()["corpus"] == V2["corpus"]


def test_previous_manifest_schema_is_migrated_and_says_so(tmp_path: Path) -> None:
    run = load_run(_write(tmp_path / "r", V2, ROWS))
    assert run.manifest.schema_version == MANIFEST_SCHEMA_VERSION
    assert run.notes == [
        f"manifest.json: manifest schema 2 migrated to {MANIFEST_SCHEMA_VERSION} (same sections, now typed)"
    ]
    assert ("Read", run.notes[0]) in run_facts(run, 10, 0)


def test_newer_manifest_schema_is_refused_naming_the_version(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=f"manifest schema 99\\); this one reads schema {MANIFEST_SCHEMA_VERSION}"):
        load_run(_write(tmp_path / "r", {**V2, "schema_version": 99}, ROWS))
    with pytest.raises(ReportError, match="items schema 7"):
        load_run(_write(tmp_path / "s", {**V2, "items_schema_version": 7}, ROWS))


def test_failures_from_items_name_their_stage(tmp_path: Path) -> None:
    # No failures in the manifest: the report lists the failed rows, with the stage their error names.
    run = load_run(_write(tmp_path / "r", V2, ROWS))
    assert _failures(run) == [FailureRow("E1", "ambient_5db", "asr", "asr: decoder crashed")]
    assert ItemScore(encounter_id="e", condition="c", failed=False, error="x: y").failed_stage is None


def test_pairing_copies_rows_and_unsets_a_stale_reason() -> None:
    rows = [ItemScore.model_validate(r) for r in ROWS] + [
        ItemScore(encounter_id="E2", condition=c.id, failed=False, unpaired_reason="stale") for c in GRID
    ]
    out, pairing = apply_pairing(rows, GRID)
    assert pairing.paired == ["E2"] and list(pairing.dropped) == ["E1"]
    assert rows[0].paired is None and rows[2].unpaired_reason == "stale"  # the input rows are not changed
    assert out[0].paired is False and "decoder crashed" in str(out[0].unpaired_reason)
    assert out[1].paired is False and "unpaired_reason" not in out[1].to_row()  # the failed row itself
    assert out[2].paired is True and "unpaired_reason" not in out[2].to_row()
