"""Typed contracts between the stages (issue 38): what crosses a stage is a model, validated when it is made.

* ``MixInfo.chain`` holds one typed facts entry per step (:mod:`stresstest.steps`), written back byte for byte;
* ``Transcript.decoding`` is the :class:`DecodingOptions` that made the text;
* the guard's and the filter's reports and the Draft are typed inside :class:`RecordExtra`;
* :class:`ItemScore` is composed of parts made by the metrics, and changed only through a validating method
  (:func:`stresstest.records.revise`, :meth:`ItemScore.revise`); its ``items.jsonl`` row is the flat view of the
  parts, the same as the row a dict-built item gave.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from stresstest.config import NoiseSpec
from stresstest.noise import make_noise_source
from stresstest.noise.chain import Step, render_chain
from stresstest.records import DecodingOptions, MixInfo, Transcript, revise
from stresstest.results import (
    SCORE_PARTS,
    AsrScores,
    GuardScores,
    ItemScore,
    JudgeScores,
    ProbeScores,
    RecordExtra,
    SafetyScores,
    TriggerEvent,
    TriggerScores,
)
from stresstest.schema import ClinicalRecord, FilterReport, GuardReport
from stresstest.steps import ChainStepFacts, LevelFacts, NoiseFacts, RoomFacts, SilenceFacts, TelephoneFacts

SR = 16000
FACTS = TypeAdapter(list[ChainStepFacts])


def _speech(seconds: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(int(seconds * SR)) / SR
    on = (t % 1.5) < 1.0
    return (0.3 * np.sin(2 * np.pi * 440 * t) * on).astype(np.float32), on


# ------------------------------------------------------------------ MixInfo.chain


def test_every_step_s_facts_are_typed_and_written_back_byte_for_byte() -> None:
    x, mask = _speech()
    src = {"ambient": make_noise_source(NoiseSpec(family="ambient", kind="builtin"), encounters=[], cache_dir=None)}
    raw_steps = [
        {"silence": {"pause_s": 1.0}},
        {"room": {"rt60_s": 0.2, "room_dim_m": [3.0, 3.0, 2.5]}},
        {"noise": {"family": "ambient", "snr_db": 10}},
        {"telephone": {}},
        {"mulaw": {}},
        {"packet_loss": {"rate": 0.1}},
        {"level": {"gain_db": 3}},
    ]
    _, facts = render_chain(x, mask, [Step.model_validate(r) for r in raw_steps], seed=1, encounter_id="E", sources=src)
    written = json.dumps(facts["chain"])  # what the chain recorded, as JSON
    typed = FACTS.validate_json(written)
    assert [type(f).__name__ for f in typed] == [
        "SilenceFacts",
        "RoomFacts",
        "NoiseFacts",
        "TelephoneFacts",
        "MulawFacts",
        "PacketLossFacts",
        "LevelFacts",
    ]
    assert json.dumps(FACTS.dump_python(typed, mode="json")) == written
    info = MixInfo(
        family="chain",
        noise_source="",
        noise_offset_s=0.0,
        target_snr_db=None,
        measured_snr_db=None,
        speech_rms=0.1,
        noise_gain=0.0,
        clip_scale=1.0,
        chain=facts["chain"],
    )
    assert json.dumps(info.model_dump(mode="json")["chain"]) == written
    silence = info.chain[0] if info.chain else None
    assert isinstance(silence, SilenceFacts) and silence.stretches and silence.stretches[0].seconds == 1.0
    assert isinstance(info.chain[1], RoomFacts) and info.chain[1].measured_rt60_s is not None  # type: ignore[index]
    assert isinstance(info.chain[2], NoiseFacts) and info.chain[2].params.snr_db == 10  # type: ignore[index]
    assert isinstance(info.chain[3], TelephoneFacts) and info.chain[3].sample_rate_hz == 8000  # type: ignore[index]


@pytest.mark.parametrize(
    "entry, why",
    [
        ({"kind": "level", "params": {"gain_db": 0.0, "clip": 1.0}, "clipped": 0.1}, "extra"),  # a key no step writes
        ({"kind": "echo", "params": {}}, "union_tag_invalid"),  # not a step kind
        ({"kind": "level", "params": {"gain_db": 99.0, "clip": 1.0}}, "less_than_equal"),  # parameters out of range
        ({"kind": "silence", "params": {"pause_s": 1.0}, "stretches": [{"after_run": "x"}]}, "int_parsing"),
    ],
)
def test_a_chain_entry_the_steps_do_not_write_is_refused(entry: dict[str, Any], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        MixInfo(
            family="chain",
            noise_source="",
            noise_offset_s=0.0,
            target_snr_db=None,
            measured_snr_db=None,
            speech_rms=0.1,
            noise_gain=0.0,
            clip_scale=1.0,
            chain=[entry],
        )


def test_the_silence_probes_read_the_typed_stretches() -> None:
    from stresstest.metrics.silence import probe_stretches

    stretch = {"after_run": 0, "after_turn": 2, "at_s": 1.0, "start_s": 1.0, "end_s": 3.5}
    info = MixInfo(
        family="chain",
        noise_source="",
        noise_offset_s=0.0,
        target_snr_db=None,
        measured_snr_db=None,
        speech_rms=0.1,
        noise_gain=0.0,
        clip_scale=1.0,
        chain=[
            {"kind": "silence", "params": {"pause_s": 2.5}, "stretches": [stretch], "runs": 4},
            {"kind": "level", "params": {}, "clipped_fraction": 0.0},
        ],
    )
    probes = probe_stretches(info)
    assert probes is not None and probes.runs == 4 and probes.stretches[0].after_turn == 2
    assert probes.stretches[0].seconds == 2.5
    assert isinstance(info.chain[1], LevelFacts)  # type: ignore[index]


# ------------------------------------------------------------------ Transcript.decoding, RecordExtra


def test_a_transcript_carries_its_decoding_options() -> None:
    t = Transcript(
        encounter_id="E",
        condition="clean",
        text="hi",
        backend="b",
        model="m",
        audio_sha256="0",
        decoding=DecodingOptions(beam_size=1).model_dump(),
    )
    assert isinstance(t.decoding, DecodingOptions) and t.decoding.window_s == 30.0
    assert Transcript.model_validate_json(t.model_dump_json()) == t
    with pytest.raises(ValidationError, match="beams"):
        Transcript(
            encounter_id="E",
            condition="clean",
            text="hi",
            backend="b",
            model="m",
            audio_sha256="0",
            decoding={"beams": 5},
        )


def test_the_guard_and_filter_reports_are_typed_in_the_record_extra() -> None:
    draft = ClinicalRecord.model_validate({"triage": {"level": "routine", "rationale": "r"}})
    guard = GuardReport(removed_claims=["c1"])
    filt = FilterReport(quotes_total=2, quotes_discarded=1)
    raw = {
        "mitigation": True,
        "guard": "llm",
        "guard_report": guard.model_dump(),
        "filter_report": filt.model_dump(),
        "draft_record": draft.model_dump(mode="json"),
        "draft_prompt_hash": "abc",
    }
    extra = RecordExtra.model_validate(raw)
    assert extra.guard_report == guard and extra.filter_report == filt and extra.draft_record == draft
    assert extra.model_dump(mode="json") == {**raw, "draft_record": draft.model_dump(mode="json")}
    with pytest.raises(ValidationError, match="removed_everything"):
        RecordExtra.model_validate({**raw, "guard_report": {"removed_everything": True}})


# ------------------------------------------------------------------ revise: the one validating change


def test_revise_validates_and_keeps_what_was_set() -> None:
    t = Transcript(
        encounter_id="E", condition="clean", text="hi", backend="b", model="m", audio_sha256="0", decoding={}
    )
    u = revise(t, condition="babble_5db")
    assert u.condition == "babble_5db" and t.condition == "clean"
    assert u.model_fields_set == t.model_fields_set | {"condition"}
    with pytest.raises(ValueError, match="no field 'conditon'"):
        revise(t, conditon="x")
    with pytest.raises(ValidationError):
        revise(t, elapsed_s="slow")
    with pytest.raises(ValidationError):  # model_copy(update=...) took this without a word
        revise(t, decoding={"beam_size": 0})


# ------------------------------------------------------------------ ItemScore: parts, compose, revise


def _event(**kw: Any) -> TriggerEvent:
    base: dict[str, Any] = {
        "type": "negation_flip",
        "ref_span": "no pain",
        "hyp_span": "pain",
        "explanation": "negation lost",
        "ref_start": 0,
        "ref_end": 7,
        "hyp_start": 0,
        "hyp_end": 4,
    }
    return TriggerEvent(**{**base, **kw})


def _old_row() -> dict[str, Any]:
    """A row as the dict-built score stage made it (every kind of field set, some to None)."""
    counts = dict.fromkeys(
        (
            "negation_flip",
            "number_unit_conflict",
            "temporal_distortion",
            "nonspeech_pollution",
            "entity_substitution",
            "clinical_omission",
        ),
        0,
    )
    return {
        "encounter_id": "E1",
        "condition": "babble_5db_guard",
        "family": "babble",
        "snr_db": 5.0,
        "mitigated": True,
        "target_snr_db": 5.0,
        "measured_snr_db": 5.0123,
        "reference_text": "no pain",
        "hypothesis_text": "pain",
        "audio_path": None,
        "transcript_path": "transcripts/babble_5db/E1.json",
        "mix": {
            "family": "babble",
            "noise_source": "builtin:babble",
            "noise_offset_s": 0.0,
            "target_snr_db": 5.0,
            "measured_snr_db": 5.0123,
            "speech_rms": 0.05,
            "noise_gain": 0.3,
            "clip_scale": 1.0,
        },
        "record_path": "records/babble_5db_guard/E1.json",
        "scores_path": "scores/babble_5db_guard/E1.json",
        "failed": False,
        "error": None,
        "asr_sub": 0,
        "asr_del": 1,
        "asr_ins": 0,
        "ref_words": 2,
        "item_wer": 50.0,
        "clin_words": 1,
        "clin_errors": 0,
        "asr_delta_e": 1,
        "neg_err": 1,
        "trigger_counts": {**counts, "negation_flip": 1},
        "triggers_vs_clean": [_event().model_dump(mode="json")],
        "extra": {
            "mitigation": True,
            "guard": "rules",
            "fields_total": 3,
            "fields_nulled": 1,
            "abstention_rate": 1 / 3,
            "guard_report": None,
        },
        "abstention_rate": 1 / 3,
        "fields_nulled": 1,
        "fields_total": 3,
        "triage": "routine",
        "triage_clean": "urgent",
        "triage_match": 0,
        "triage_gold": "urgent",
        "under_triage_new": 1,
        "scer_new": 0,
        "new_critical_flags": [],
        "err_new": 2,
        "judge_score": 2,
        "judge": "rules-v1",
    }


def _composed() -> ItemScore:
    row = _old_row()
    own = {
        k: row[k]
        for k in (
            "encounter_id",
            "condition",
            "family",
            "snr_db",
            "mitigated",
            "target_snr_db",
            "measured_snr_db",
            "reference_text",
            "hypothesis_text",
            "audio_path",
            "transcript_path",
            "record_path",
            "scores_path",
            "failed",
            "error",
        )
    }
    # the mixture's facts travel typed; the recipe stays in the manifest
    own["mix"] = revise(MixInfo(**row["mix"], noise_recipe={"sentences": ["a"]}), unset=("noise_recipe",))
    asr = AsrScores(
        asr_sub=0, asr_del=1, asr_ins=0, ref_words=2, item_wer=50.0, clin_words=1, clin_errors=0, asr_delta_e=1
    )
    trig = TriggerScores(neg_err=1, trigger_counts=row["trigger_counts"], triggers_vs_clean=[_event()])
    guard = GuardScores.of_envelope(RecordExtra.model_validate(row["extra"]))
    safety = SafetyScores.model_validate({k: row[k] for k in SafetyScores.model_fields})
    return ItemScore.compose(asr, trig, guard, safety, JudgeScores(judge_score=2, judge="rules-v1"), None, **own)


def test_the_row_is_the_flat_view_of_the_parts_and_equals_the_dict_built_row() -> None:
    old = ItemScore.model_validate(_old_row())
    new = _composed()
    assert json.dumps(new.to_row(), sort_keys=True) == json.dumps(old.to_row(), sort_keys=True)
    assert new == old
    # each part reads back as it was made
    assert new.asr == AsrScores(
        asr_sub=0, asr_del=1, asr_ins=0, ref_words=2, item_wer=50.0, clin_words=1, clin_errors=0, asr_delta_e=1
    )
    assert new.judged == JudgeScores(judge_score=2, judge="rules-v1") and new.probe is None
    assert new.note_quality is None and new.safety is not None and new.safety.err_new == 2
    # every flat field belongs to the item or to exactly one part
    owned = [f for part in SCORE_PARTS for f in part.model_fields]
    assert len(owned) == len(set(owned)) and set(owned) < set(ItemScore.model_fields)


def test_an_event_is_written_whole_however_it_was_made() -> None:
    ev = _event()  # concept and weight left to their defaults
    item = ItemScore.compose(TriggerScores(triggers_vs_clean=[ev]), encounter_id="E", condition="c")
    assert item.to_row()["triggers_vs_clean"] == [{**ev.model_dump(mode="json"), "concept": None, "weight": 1.0}]


@pytest.mark.parametrize(
    "make",
    [
        lambda: AsrScores(asr_sub="many"),
        lambda: TriggerScores(trigger_counts={"negation_flip": 1, "hallucination": 2}),
        lambda: SafetyScores(new_critical_flags="suicidal_ideation"),
        lambda: JudgeScores(judge_score=[3]),
        lambda: ProbeScores(probe_fields=[{"field_id": "c1", "kind": "vital", "name": "x", "quote": "q"}]),
        lambda: AsrScores(wer=12.0),  # a field of no part
    ],
)
def test_an_invalid_part_is_refused_when_it_is_made(make: Any) -> None:
    with pytest.raises(ValidationError):
        make()


def test_a_metric_cannot_be_passed_as_an_item_s_own_field() -> None:
    with pytest.raises(ValueError, match="item_wer belong to a part"):
        ItemScore.compose(encounter_id="E", condition="c", item_wer=10.0)


def test_an_item_is_changed_only_through_the_validating_method() -> None:
    item = _composed()
    paired = item.revise(paired=True, unpaired_reason="old")
    assert paired.paired is True and "unpaired_reason" in paired.to_row()
    again = paired.revise(unset=("unpaired_reason",), paired=False)
    assert "unpaired_reason" not in again.to_row() and again.to_row()["paired"] is False
    judged = item.revise(JudgeScores(judge_score=4, judge="llm:m@v1"))
    assert judged.judge_score == 4 and judged.judged == JudgeScores(judge_score=4, judge="llm:m@v1")
    with pytest.raises(ValueError, match="no field 'judge_scor'"):
        item.revise(judge_scor=4)
    with pytest.raises(ValidationError):
        item.revise(paired="perhaps")  # model_copy(update=...) took this without a word
    with pytest.raises(ValueError, match="no field 'without'"):
        item.revise(unset=("without",))
    assert not hasattr(ItemScore, "without")
