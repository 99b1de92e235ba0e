"""Statement rendering of records / gold, transcript sentences, ontology grounding."""

from __future__ import annotations

from stresstest.metrics.ontology import grounding, ontology_hash, ontology_rows
from stresstest.metrics.statements import (
    note_statements,
    note_text,
    numbered,
    transcript_sentences,
)
from stresstest.schema import Claim, ClinicalRecord, SafetyFlag, Triage


def _rec() -> ClinicalRecord:
    return ClinicalRecord(
        chief_complaint="chest pain",
        triage=Triage(level="urgent", rationale="free text is not a statement"),
        claims=[
            Claim(
                id="c1",
                category="symptom",
                concept="chest pain",
                status="present",
                value="sharp",
                time="8 hours",
                laterality="left",
            ),
            Claim(id="c2", category="symptom", concept="fever", status="absent"),
            Claim(id="c3", category="medication", concept="Coumadin", status="present", value="5", unit="mg"),
            Claim(id="c4", category="history", concept="angina", status="uncertain"),
        ],
        safety_flags=[SafetyFlag(id="f1", kind="red_flag", name="chest pain", detail="acute")],
        field_evidence={"c1": ["it's pretty sharp"], "f1": ["a lot of chest pain"]},
    )


def test_every_field_becomes_one_statement_in_field_order() -> None:
    st = note_statements(_rec())
    assert [s.text for s in st] == [
        "Chief complaint: chest pain.",
        "Triage: urgent.",
        "Symptom: chest pain (sharp; 8 hours; left).",
        "Symptom: no fever.",
        "Medication: Coumadin (5 mg).",
        "History: possible angina.",
        "Red flag: chest pain (acute).",
    ]
    assert [s.id for s in st] == [f"h{i}" for i in range(1, 8)]
    assert [s.field for s in st][2:] == ["c1", "c2", "c3", "c4", "f1"]
    text = note_text(_rec())
    assert '- Symptom: chest pain (sharp; 8 hours; left). [evidence: "it\'s pretty sharp"]' in text
    assert "free text" not in text


def test_transcript_sentences_and_numbering() -> None:
    assert transcript_sentences("I have a cough. Since when?  Two days!  ") == [
        "I have a cough.",
        "Since when?",
        "Two days!",
    ]
    assert transcript_sentences("no punctuation here") == ["no punctuation here"]
    assert transcript_sentences("   ") == []
    assert numbered(["a", "b"]) == "[1] a\n[2] b"


def test_grounding_retrieves_trade_generic_synonyms_abstraction_and_is_deterministic() -> None:
    rec = ClinicalRecord(
        triage=Triage(level="urgent"),
        claims=[
            Claim(id="c1", category="medication", concept="warfarin", status="present"),
            Claim(id="c2", category="symptom", concept="dyspnoea", status="present"),
            Claim(id="c3", category="finding", concept="afebrile", status="present"),
        ],
    )
    transcript = "I take Coumadin every night. I get breathless on the stairs. No fever at all. Chest pain too."
    lines = grounding(note_statements(rec), transcript)
    joined = "\n".join(lines)
    assert "'warfarin' (note) and 'coumadin' (transcript) are the same drug" in joined
    assert "name the same concept: shortness of breath" in joined
    assert "'afebrile' is a standard clinical term for what was said: 'no fever'" in joined
    assert "warning sign (chest pain)" in joined  # the triage statement gets the red flags
    assert grounding(note_statements(rec), transcript) == lines
    assert grounding(note_statements(rec), "Nothing relevant was said.") == []


def test_ontology_file_parses_and_hash_is_stable() -> None:
    rows = ontology_rows("v1")
    assert {r.relation for r in rows} == {"abstraction", "inference"} and all(r.cues for r in rows)
    assert ontology_hash("v1") == ontology_hash("v1") and len(ontology_hash("v1")) == 64
