"""Clinical-term WER and WER split by speaker, on hand-computed examples."""

from __future__ import annotations

import pytest

from stresstest.grid import Condition
from stresstest.metrics.align import align
from stresstest.metrics.split_wer import clinical_token_mask, split_errors, turn_spans
from stresstest.metrics.summary import ERROR_RATE_COLUMNS, aggregate_error_rates, summary_rows
from stresstest.metrics.wer import asr_errors
from stresstest.records import Encounter, Turn
from stresstest.results import ItemScore

DOCTOR = Turn(speaker="doctor", text="Do you have chest pain?")
PATIENT = Turn(speaker="patient", text="No, I take  aspirin daily.")


def _row(**fields: object) -> ItemScore:
    """An item row with only the given counts (the rest left at their defaults)."""
    return ItemScore.model_validate({"encounter_id": "A", "condition": "ambient_5db", **fields})


def _enc(*turns: Turn) -> Encounter:
    return Encounter(encounter_id="X", corpus="manifest", source_path="x", turns=turns)


def test_turn_spans_rebuild_the_reference() -> None:
    enc = _enc(DOCTOR, Turn(speaker="other", text="   "), PATIENT)
    ref = enc.reference_text()
    spans = turn_spans(enc.turns, ref)
    assert spans == [(0, 23, "doctor"), (24, 49, "patient")]
    assert [ref[a:b] for a, b, _ in spans] == ["Do you have chest pain?", "No, I take aspirin daily."]
    assert turn_spans(enc.turns, ref + " extra") is None


def test_clinical_tokens_are_lexicon_and_drug_terms() -> None:
    pair = align(_enc(DOCTOR, PATIENT).reference_text(), "")
    # do you have [chest pain] no i take [aspirin] daily
    assert pair.ref.words == ["do", "you", "have", "chest", "pain", "no", "i", "take", "aspirin", "daily"]
    assert clinical_token_mask(pair.ref) == [False, False, False, True, True, False, False, False, True, False]


def test_substitution_and_deletion_by_speaker_and_term() -> None:
    enc = _enc(DOCTOR, PATIENT)
    hyp = "do you have chess pain no i take daily"  # chest -> chess (doctor, clinical); aspirin deleted (patient)
    pair = align(enc.reference_text(), hyp)
    s = split_errors(pair, enc.turns)
    assert (s.clin_words, s.clin_errors) == (3, 2)
    # clinician: 5 words, 1 error (chess), clinical 2 words / 1 error; patient: 5 words, 1 error, clinical 1/1
    assert dict(s.by_speaker) == {"clinician": (5, 1, 2, 1), "patient": (5, 1, 1, 1)}
    rates = aggregate_error_rates([_row(**s.item_fields())])
    assert rates == pytest.approx(
        {
            "clinical_wer": 200 / 3,
            "wer_clinician": 20.0,
            "wer_patient": 20.0,
            "clinical_wer_clinician": 50.0,
            "clinical_wer_patient": 100.0,
        }
    )


def test_insertions_go_to_the_word_they_follow() -> None:
    enc = _enc(DOCTOR, PATIENT)
    # "um hello" before the first word -> the first word's speaker (doctor);
    # "okay then" after "pain" (doctor's last word, in the pause) -> doctor; "fine" after "daily" -> patient.
    hyp = "hello there do you have chest pain okay then no i take aspirin daily fine"
    pair = align(enc.reference_text(), hyp)
    e = asr_errors(enc.reference_text(), hyp)
    assert (e.sub, e.dele, e.ins) == (0, 0, 5)
    s = split_errors(pair, enc.turns)
    assert dict(s.by_speaker) == {"clinician": (5, 4, 2, 0), "patient": (5, 1, 1, 0)}
    assert (s.clin_words, s.clin_errors) == (3, 0)  # insertions never count against clinical terms
    # every error is attributed once: the splits add up to WER's numerator and denominator
    assert sum(v[1] for v in s.by_speaker.values()) == e.errors
    assert sum(v[0] for v in s.by_speaker.values()) == e.ref_words


def test_other_speakers_are_in_neither_split() -> None:
    enc = _enc(DOCTOR, Turn(speaker="other", text="He had a fever."), PATIENT)
    hyp = "do you have chest pain he had a fever no i take aspirin daily"
    s = split_errors(align(enc.reference_text(), hyp), enc.turns)
    assert dict(s.by_speaker) == {"clinician": (5, 0, 2, 0), "patient": (5, 0, 1, 0)}
    assert s.clin_words == 4  # fever (other) is still a clinical term of the reference
    # a deletion in the 'other' turn is an error of the item but of neither speaker
    s2 = split_errors(align(enc.reference_text(), "do you have chest pain he had a no i take aspirin daily"), enc.turns)
    assert dict(s2.by_speaker) == {"clinician": (5, 0, 2, 0), "patient": (5, 0, 1, 0)}
    assert (s2.clin_words, s2.clin_errors) == (4, 1)


def test_no_turns_means_no_speaker_split() -> None:
    enc = _enc(DOCTOR, PATIENT)
    s = split_errors(align(enc.reference_text(), "do you have chest pain"), None)
    assert s.by_speaker == {}
    assert set(s.item_fields()) == {"clin_words", "clin_errors"}
    rates = aggregate_error_rates([_row(**s.item_fields())])
    assert rates["clinical_wer"] == pytest.approx(100 / 3)  # aspirin deleted, chest pain kept
    assert rates["wer_clinician"] is None and rates["wer_patient"] is None


def test_rates_are_micro_averaged_and_empty_without_words() -> None:
    items = [
        _row(clin_words=1, clin_errors=1, ref_words_patient=0, errors_patient=0),
        _row(clin_words=3, clin_errors=0, ref_words_patient=0, errors_patient=2),
        _row(clin_words=None),  # not computed: left out, not counted as zero
    ]
    rates = aggregate_error_rates(items)
    assert rates["clinical_wer"] == pytest.approx(25.0)  # (1 + 0) / (1 + 3), not the mean of 100 and 0
    assert rates["wer_patient"] is None  # no patient words at all: an empty cell


def test_summary_rows_carry_the_columns() -> None:
    conds = [Condition.clean(), Condition.noisy("ambient", 5.0)]
    items = [
        {
            "encounter_id": "A",
            "condition": "clean",
            "clin_words": 4,
            "clin_errors": 1,
            "ref_words_clinician": 10,
            "errors_clinician": 1,
            "ref_words_patient": 5,
            "errors_patient": 0,
            "clin_words_clinician": 2,
            "clin_errors_clinician": 1,
            "clin_words_patient": 2,
            "clin_errors_patient": 0,
        },
        {
            "encounter_id": "A",
            "condition": "ambient_5db",
            "clin_words": 4,
            "clin_errors": 3,
            "ref_words_clinician": 10,
            "errors_clinician": 4,
            "ref_words_patient": 5,
            "errors_patient": 5,
            "clin_words_clinician": 2,
            "clin_errors_clinician": 1,
            "clin_words_patient": 2,
            "clin_errors_patient": 2,
        },
        {"encounter_id": "A", "condition": "ambient_5db", "failed": True, "clin_words": 100, "clin_errors": 100},
    ]
    rows = {r.condition: r.cells() for r in summary_rows(items, conds)}
    assert all(c in rows["clean"] for c in ERROR_RATE_COLUMNS)
    assert rows["clean"]["clinical_wer"] == pytest.approx(25.0)
    assert rows["ambient_5db"]["clinical_wer"] == pytest.approx(75.0)  # the failed row is left out
    assert rows["ambient_5db"]["wer_clinician"] == pytest.approx(40.0)
    assert rows["ambient_5db"]["wer_patient"] == pytest.approx(100.0)
    assert rows["ambient_5db"]["clinical_wer_patient"] == pytest.approx(100.0)


def test_score_encounter_writes_the_counts_on_each_row() -> None:
    from stresstest.grid import ConditionGrid
    from stresstest.pipeline.score import ConditionOutputs, EncounterOutputs, score_encounter
    from stresstest.records import Transcript

    enc = _enc(DOCTOR, PATIENT)

    def tr(cond: str, text: str) -> Transcript:
        return Transcript(
            encounter_id="X", condition=cond, text=text, backend="test", model="m", decoding={}, audio_sha256="0"
        )

    grid = ConditionGrid.build(["ambient"], [5.0])
    x = EncounterOutputs(
        encounter=enc,
        conditions={
            "clean": ConditionOutputs(transcript=tr("clean", "Do you have chest pain? No, I take aspirin daily.")),
            "ambient_5db": ConditionOutputs(transcript=tr("ambient_5db", "do you have chess pain no i take daily")),
        },
    )
    rows = {it.row.condition: it.row.model_dump() for it in score_encounter(x, grid, "none")}
    assert (rows["clean"]["clin_words"], rows["clean"]["clin_errors"]) == (3, 0)
    noisy = rows["ambient_5db"]
    assert (noisy["clin_words"], noisy["clin_errors"]) == (3, 2)
    assert (noisy["ref_words_clinician"], noisy["errors_clinician"]) == (5, 1)
    assert (noisy["clin_words_patient"], noisy["clin_errors_patient"]) == (1, 1)
    assert noisy["errors_clinician"] + noisy["errors_patient"] == noisy["asr_sub"] + noisy["asr_del"] + noisy["asr_ins"]
