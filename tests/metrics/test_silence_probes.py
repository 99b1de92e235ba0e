"""halluc_per_min: words written inside inserted stretches, the fields traced to them, the summary column."""

from __future__ import annotations

import pytest

from stresstest.grid import Condition, ConditionGrid
from stresstest.metrics.align import align
from stresstest.metrics.silence import Probes, ProbeStretch, probe_stretches, probe_words, traced_fields
from stresstest.metrics.summary import aggregate_probes, summary_rows
from stresstest.records import Encounter, MixInfo, Transcript, Turn
from stresstest.schema import Claim, ClinicalRecord, RecordEnvelope, Triage

TURNS = (
    Turn(speaker="doctor", text="How are you today?"),
    Turn(speaker="other", text="  "),
    Turn(speaker="patient", text="I have chest pain."),
    Turn(speaker="doctor", text="Since when?"),
)
REF = "How are you today? I have chest pain. Since when?"
HYP = "How are you today? Thank you for watching. I have chest pain. Since when? Bye."


def _stretch(after_turn: int | None, start_s: float, seconds: float = 6.0, after_run: int = 0) -> ProbeStretch:
    return ProbeStretch(
        after_run=after_run, after_turn=after_turn, at_s=start_s, start_s=start_s, end_s=start_s + seconds
    )


def test_words_inserted_at_a_probed_boundary_are_counted() -> None:
    pair = align(REF, HYP)
    pw = probe_words(pair, TURNS, Probes((_stretch(0, 2.0), _stretch(2, 12.0)), runs=3))
    assert pw.mapped and pw.seconds == pytest.approx(12.0)
    assert pw.words == 4  # "thank you for watching": after turn 0 (the empty turn 1 is skipped)
    # a span covers token characters: the trailing full stop is not part of a token
    assert [HYP[a:b] for a, b in pw.spans] == ["Thank you for watching"]
    assert [(t, n) for t, _, _, n, _ in pw.per_stretch] == [(0, 4), (2, 0)]
    # the same words at a boundary without a stretch are not counted, nor is "bye" after the last turn
    pw2 = probe_words(pair, TURNS, Probes((_stretch(2, 12.0),), runs=3))
    assert pw2.words == 0 and pw2.spans == ()


def test_runs_map_to_turns_only_when_they_are_one_per_turn() -> None:
    pair = align(REF, HYP)
    by_run = probe_words(pair, TURNS, Probes((_stretch(None, 2.0, after_run=0),), runs=3))
    assert by_run.mapped and by_run.words == 4
    merged = probe_words(pair, TURNS, Probes((_stretch(None, 2.0, after_run=0),), runs=2))  # overlapping turns
    assert not merged.mapped and merged.words == 0


def test_fields_are_traced_when_every_occurrence_of_their_quote_lies_in_a_stretch() -> None:
    pair = align(REF, HYP)
    pw = probe_words(pair, TURNS, Probes((_stretch(0, 2.0),), runs=3))
    rec = ClinicalRecord(
        triage=Triage(level="routine"),
        claims=[
            Claim(id="c1", category="symptom", concept="chest pain", status="present"),
            Claim(id="c2", category="plan", concept="watching", status="present"),
        ],
        field_evidence={"c1": ["watching. I have chest pain."], "c2": ["for watching."], "triage": ["you"]},
    )
    traced = traced_fields(rec, HYP, pw.spans)
    # c2's quote lies inside the stretch's words (its full stop aside); "you" also occurs in speech ("How are
    # you"), and c1's quote only touches them (it runs on into the patient's real words): neither is traced
    assert [(f.field_id, f.kind, f.name, f.quote) for f in traced] == [("c2", "claim", "watching", "for watching.")]
    assert traced_fields(rec, HYP, []) == []


def test_halluc_per_min_is_words_per_minute_of_inserted_non_speech() -> None:
    rows = [
        {"encounter_id": "A", "condition": "p", "probe_s": 30.0, "probe_words": 3},
        {"encounter_id": "B", "condition": "p", "probe_s": 90.0, "probe_words": 1},
        {"encounter_id": "C", "condition": "p"},
    ]  # no probe in its audio: left out
    assert aggregate_probes(rows)["halluc_per_min"] == pytest.approx(60.0 * 4 / 120.0)
    assert aggregate_probes([{"encounter_id": "A", "condition": "clean"}])["halluc_per_min"] is None


def _mix(stretches: list[dict[str, object]]) -> MixInfo:
    return MixInfo(
        family="chain",
        noise_source="",
        noise_offset_s=0.0,
        target_snr_db=None,
        measured_snr_db=None,
        speech_rms=0.1,
        noise_gain=0.0,
        clip_scale=1.0,
        chain=[
            {
                "kind": "silence",
                "params": {"pause_s": 6.0, "every": 1, "fill": "floor"},
                "stretches": stretches,
                "runs": 3,
                "inserted_s": 6.0 * len(stretches),
            },
            {"kind": "room", "params": {"rt60_s": 0.3}},
        ],
    )


def test_score_encounter_writes_probe_fields_and_the_summary_column() -> None:
    from stresstest.pipeline.runner import _summary_csv
    from stresstest.pipeline.score import ConditionOutputs, EncounterOutputs, score_encounter

    enc = Encounter(encounter_id="X", corpus="manifest", source_path="x", turns=TURNS)
    room = {"room": {"rt60_s": 0.3}}
    probe = Condition.chained("probe", [{"silence": {"pause_s": 6}}, room])
    grid = ConditionGrid([Condition.clean(), probe, Condition.chained("dry", [room])])
    assert grid.probe_twin("probe") == grid.get("dry") and grid.probe_twin("dry") is None
    assert probe_stretches(None) is None

    def tr(cond: str, text: str) -> Transcript:
        return Transcript(
            encounter_id="X", condition=cond, text=text, backend="test", model="m", decoding={}, audio_sha256="0"
        )

    def env(cond: str, quote: str) -> RecordEnvelope:
        rec = ClinicalRecord(
            triage=Triage(level="routine"),
            claims=[Claim(id="c1", category="symptom", concept="watching", status="present")],
            field_evidence={"c1": [quote]},
        )
        return RecordEnvelope(
            encounter_id="X",
            condition=cond,
            backend="rules",
            model="m",
            prompt_hash="p",
            schema_hash="s",
            decoding={},
            transcript_sha256="t",
            record=rec,
        )

    x = EncounterOutputs(
        encounter=enc,
        conditions={
            "clean": ConditionOutputs(transcript=tr("clean", REF), record=env("clean", "chest pain")),
            "probe": ConditionOutputs(
                transcript=tr("probe", HYP),
                record=env("probe", "Thank you for watching"),
                mix=_mix([{"after_run": 0, "after_turn": 0, "at_s": 2.0, "start_s": 2.0, "end_s": 8.0}]),
            ),
            "dry": ConditionOutputs(transcript=tr("dry", "How are you today? Oh. I have chest pain. Since when?")),
        },
    )
    rows = {it.row.condition: it for it in score_encounter(x, grid, "none")}
    clean, noisy = rows["clean"].row, rows["probe"].row
    assert clean.probe_s is None and clean.probe_words is None and clean.probe_fields is None
    assert (noisy.probe_s, noisy.probe_words) == (6.0, 4)
    # the twin (the chain without its silence step) wrote "Oh" at the same pause: the stated baseline
    assert (noisy.probe_twin, noisy.probe_words_twin) == ("dry", 1)
    assert rows["probe"].detail["silence_probes"]["twin"]["stretches"][0]["text"] == "Oh"
    assert rows["dry"].row.probe_twin is None and rows["dry"].row.probe_s is None
    assert [f.field_id for f in noisy.probe_fields or []] == ["c1"]
    assert rows["probe"].detail["silence_probes"]["stretches"][0]["text"] == "Thank you for watching"
    summary = summary_rows([clean, noisy], grid)
    assert summary[0].halluc_per_min is None and summary[1].halluc_per_min == pytest.approx(40.0)
    header, first, second = _summary_csv(summary[:2]).splitlines()
    assert header.split(",")[-1] == "halluc_per_min" and header.split(",")[-2] == "clinical_wer_patient"
    assert first.endswith(",") and second.endswith(",40")
