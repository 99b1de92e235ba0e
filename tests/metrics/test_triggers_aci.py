"""Trigger detector on real ASR-vs-human transcripts (ACI-BENCH); skipped when the corpus is absent."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from stresstest.metrics.triggers import TRIGGER_TYPES, detect_triggers, trigger_counts

ACI = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora" / "aci-bench" / "src_experiment_data"


def _dialogues(name: str) -> dict[str, str]:
    path = ACI / name
    if not path.is_file():
        pytest.skip(f"ACI-BENCH ASR pairs not found at {path}")
    csv.field_size_limit(1 << 30)
    with path.open(newline="", encoding="utf-8") as fh:
        return {row["id"]: row["dialogue"] for row in csv.DictReader(fh)}


def _pair(split: str, kind: str, eid: str) -> tuple[str, str]:
    ref_name = "virtscribe_humantrans" if kind == "virtscribe" else "aci_asrcorr"
    hyp = _dialogues(f"{split}_{kind}_asr.csv")[eid]
    ref = _dialogues(f"{split}_{ref_name}.csv")[eid]
    return ref, hyp


@pytest.mark.parametrize(
    ("split", "kind", "eid", "expected"),
    [
        # Read by hand: "your hyperthyroidism" heard as "your hypothyroidism".
        ("test1", "virtscribe", "VS002", ("entity_substitution", "hyperthyroidism")),
        # "transient hypoglycemia" heard as "transient hyperglycemia".
        ("test2", "virtscribe", "VS036", ("entity_substitution", "hypoglycemia")),
        # HbA1c "close to sixteen" heard as "close to sixty".
        ("test2", "aci", "ACI034", ("number_unit_conflict", None)),
        # "the right shoulder pain" heard as "the left shoulder pain".
        ("test1", "aci", "ACI088", ("entity_substitution", "laterality")),
    ],
)
def test_finds_known_real_errors(split: str, kind: str, eid: str, expected: tuple[str, str | None]) -> None:
    ref, hyp = _pair(split, kind, eid)
    events = detect_triggers(ref, hyp)
    assert expected in {(e.type, e.concept) for e in events}, [(e.type, e.concept) for e in events]
    for e in events:
        assert ref[e.ref_start : e.ref_end] == e.ref_span
        assert hyp[e.hyp_start : e.hyp_end] == e.hyp_span


def test_identical_corrected_transcript_has_no_events() -> None:
    ref, hyp = _pair("test1", "aci", "ACI009")  # ASR and its correction agree after normalisation
    assert detect_triggers(ref, hyp) == []


@pytest.mark.slow
def test_every_encounter_runs_and_quotes_match() -> None:
    total = dict.fromkeys(TRIGGER_TYPES, 0)
    n = 0
    for split in ("test1", "test2"):
        for kind in ("virtscribe", "aci"):
            for eid in sorted(_dialogues(f"{split}_{kind}_asr.csv")):
                ref, hyp = _pair(split, kind, eid)
                events = detect_triggers(ref, hyp)
                for e in events:
                    assert ref[e.ref_start : e.ref_end] == e.ref_span
                    assert hyp[e.hyp_start : e.hyp_end] == e.hyp_span
                for k, v in trigger_counts(events).items():
                    total[k] += v
                n += 1
    assert n == 60
    # Real ASR at ~6 % WER yields a handful of events, not one per word error.
    assert 5 <= sum(total.values()) <= 100, total
