"""check_gold and draft_from_record on constructed records."""

from __future__ import annotations

from stresstest.gold.model import GoldRecord, Provenance
from stresstest.gold.workflow import check_gold, draft_from_record, gold_transcript_text, quote_in_transcript
from stresstest.records import Encounter, Turn
from stresstest.schema import Claim, ClinicalRecord, SafetyFlag, Triage

TRANSCRIPT = "D: Any allergies?  P: I'm allergic to penicillin,\n it gives me a rash. D: Chest pain? P: No."


def _gold(**update: object) -> GoldRecord:
    base = GoldRecord(
        encounter_id="E1",
        corpus="osce",
        triage=Triage(level="routine", rationale="well"),
        claims=[
            Claim(id="c1", category="allergy", concept="penicillin", status="present", value="rash"),
            Claim(id="c2", category="symptom", concept="chest pain", status="absent"),
        ],
        safety_flags=[SafetyFlag(id="f1", kind="allergy", name="penicillin")],
        field_evidence={"c1": ["I'm allergic to penicillin, it gives me a rash."], "f1": ["allergic to penicillin"]},
        provenance=Provenance(drafted_by="test", date="2026-01-01"),
    )
    return base.model_copy(update=update)


def test_clean_record_has_no_issues() -> None:
    assert check_gold(_gold(), TRANSCRIPT) == []


def test_quotes_match_after_whitespace_and_typographic_normalisation_only() -> None:
    assert quote_in_transcript("I\u2019m allergic   to penicillin,  it", TRANSCRIPT)
    assert not quote_in_transcript("i'm allergic to penicillin", TRANSCRIPT)  # case is kept
    assert not quote_in_transcript("allergic to penicilin", TRANSCRIPT)
    assert not quote_in_transcript("   ", TRANSCRIPT)


def test_every_kind_of_issue_is_reported_with_its_key_path() -> None:
    rec = _gold(
        claims=[
            *_gold().claims,
            Claim(id="c3", category="symptom", concept="chest pain", status="absent"),  # duplicate key
            Claim(id="f1", category="symptom", concept="cough", status="present"),
        ],  # id clash
        safety_flags=[*_gold().safety_flags, SafetyFlag(id="f2", kind="red_flag", name="syncope")],
        field_evidence={**_gold().field_evidence, "c1": ["allergic to amoxicillin"], "zz": ["x"], "c2": [""]},
        triage=Triage(level="routine", rationale=""),
    )
    issues = check_gold(rec, TRANSCRIPT)
    got = {(i.code, i.where, i.severity) for i in issues}
    assert got == {
        ("duplicate_id", "safety_flags[0].id", "error"),
        ("duplicate_claim", "claims[2]", "error"),
        ("evidence_unknown_field", "field_evidence.zz", "error"),
        ("flag_without_evidence", "safety_flags[1]", "error"),
        ("triage_without_rationale", "triage.rationale", "warning"),
        ("evidence_not_in_transcript", "field_evidence.c1[0]", "error"),
        ("evidence_not_in_transcript", "field_evidence.zz[0]", "error"),
        ("evidence_empty", "field_evidence.c2[0]", "error"),
    }
    dup = next(i for i in issues if i.code == "duplicate_claim")
    assert "c3" in dup.message and "claims[1]" in dup.message
    assert "amoxicillin" in str(next(i for i in issues if i.where == "field_evidence.c1[0]"))


def test_schema_problems_of_a_raw_mapping_become_issues() -> None:
    raw = _gold().model_dump(mode="json")
    raw["triage"]["level"] = "asap"
    raw["claims"][1]["status"] = "maybe"
    issues = check_gold(raw, TRANSCRIPT)
    assert {(i.code, i.where) for i in issues} == {("schema", "triage.level"), ("schema", "claims[1].status")}


def test_no_transcript_skips_only_the_evidence_check() -> None:
    rec = _gold(field_evidence={"c1": ["not said"], "f1": ["not said either"]})
    assert check_gold(rec, None) == []
    assert len(check_gold(rec, TRANSCRIPT)) == 2


def _encounter() -> Encounter:
    turns = (
        Turn(speaker="doctor", text="Any allergies?"),
        Turn(speaker="patient", text="I'm allergic to penicillin, it gives me a rash."),
        Turn(speaker="doctor", text="Chest pain?"),
        Turn(speaker="patient", text="No."),
    )
    return Encounter(encounter_id="E1", corpus="osce", source_path="E1.txt", turns=turns)


def test_scoped_gold_is_checked_against_its_first_turns() -> None:
    enc = _encounter()
    rec = _gold(scope_turns=2, field_evidence={"c1": ["it gives me a rash"], "f1": ["Chest pain?"]})
    text = gold_transcript_text(enc, rec)
    assert text == "Any allergies? I'm allergic to penicillin, it gives me a rash."
    assert [i.where for i in check_gold(rec, text)] == ["field_evidence.f1[0]"]
    assert "within the first 2 turns" in check_gold(rec, text)[0].message


def test_draft_from_record_is_an_unaudited_copy() -> None:
    rec = ClinicalRecord(
        chief_complaint="allergy check",
        triage=Triage(level="routine", rationale="well"),
        claims=_gold().claims,
        safety_flags=_gold().safety_flags,
        field_evidence={"f1": ["allergic to penicillin"], "triage": ["No."]},
    )
    draft = draft_from_record(_encounter(), rec, "rules-v1 on the human transcript", date="2026-03-04")
    assert draft.encounter_id == "E1" and draft.corpus == "osce" and draft.scope_turns is None
    assert draft.claims == rec.claims and draft.safety_flags == rec.safety_flags
    assert draft.provenance.audited is False and draft.provenance.audited_by is None
    assert draft.provenance.drafted_by == "rules-v1 on the human transcript"
    assert draft.provenance.date == "2026-03-04"
    assert check_gold(draft, _encounter().reference_text()) == []
