"""The deterministic evidence filter and the dual view's cleaning rule."""

from __future__ import annotations

import pytest

from stresstest.mitigation.evidence import (
    HighStakes,
    evidence_filter,
    normalise_ws,
    number_words,
    numbers_quoted,
    quote_supported,
)
from stresstest.mitigation.views import clean_text, dual_view
from stresstest.schema import Claim, ClinicalRecord, SafetyFlag, Triage


def _rec(evidence: dict[str, list[str]], **kw: object) -> ClinicalRecord:
    base: dict[str, object] = {
        "triage": Triage(level="urgent"),
        "claims": [Claim(id="c1", category="allergy", concept="penicillin", status="present")],
        "safety_flags": [SafetyFlag(id="f1", kind="allergy", name="penicillin", detail="rash")],
        "field_evidence": evidence,
    }
    base.update(kw)
    return ClinicalRecord.model_validate(base)


RAW = "Doctor: Any allergies?\nPatient: I'm  allergic to penicillin,   I get a rash. I take warfarin 5 mg daily."


def test_fabricated_quote_is_discarded_and_its_high_stakes_fields_removed() -> None:
    rec = _rec({"c1": ["allergic to amoxicillin"], "f1": ["severe anaphylaxis last year"]})
    out, rep = evidence_filter(rec, RAW)
    assert rep.quotes_total == 2 and rep.quotes_discarded == 2
    assert {d.reason for d in rep.discarded} == {"not a substring of the raw transcript"}
    assert out.claims == [] and out.safety_flags == [] and out.field_evidence == {}
    assert rep.removed_claims == ["c1"] and rep.removed_flags == ["f1"] and rep.fields_nulled == 2


def test_paraphrased_quote_is_discarded() -> None:
    # Same meaning, different words / case / punctuation: all fail the exact-substring test.
    for para in [
        "the patient is allergic to penicillin",
        "Allergic to penicillin",
        "allergic to penicillin;",
    ]:
        out, rep = evidence_filter(_rec({"f1": [para], "c1": ["allergic to penicillin"]}), RAW)
        assert rep.quotes_discarded == 1, para
        assert [f.id for f in out.safety_flags] == [] and [c.id for c in out.claims] == ["c1"]


def test_exact_quote_with_different_whitespace_passes_by_the_whitespace_rule() -> None:
    # transcript has two spaces after "I'm" and three after the comma; quote has a newline and padding
    quote = "  I'm allergic\nto penicillin, I get a rash. "
    assert quote_supported(quote, RAW)
    out, rep = evidence_filter(_rec({"c1": [quote], "f1": [quote]}), RAW)
    assert rep.quotes_discarded == 0 and len(out.safety_flags) == 1
    assert out.field_evidence["f1"] == ["I'm allergic to penicillin, I get a rash."]  # stored normalised
    assert normalise_ws(" a \t b\n") == "a b"


def test_whitespace_rule_does_not_join_words() -> None:
    assert not quote_supported("allergictopenicillin", RAW)


def test_quote_without_letters_proves_nothing() -> None:
    out, rep = evidence_filter(_rec({"c1": ["  "], "f1": ["..."]}), RAW + " ...")
    assert rep.quotes_discarded == 2 and out.claims == [] and out.safety_flags == []


def test_high_stakes_field_without_any_quote_is_removed_but_others_stay() -> None:
    rec = _rec(
        {"c1": ["allergic to penicillin"]},
        claims=[
            Claim(id="c1", category="allergy", concept="penicillin", status="present"),
            Claim(id="c2", category="symptom", concept="cough", status="present"),
            Claim(id="c3", category="symptom", concept="Chest pain", status="present"),
        ],
        safety_flags=[
            SafetyFlag(id="f1", kind="allergy", name="penicillin"),
            SafetyFlag(id="f2", kind="red_flag", name="chest pain"),
            SafetyFlag(id="f3", kind="social_risk", name="lives alone"),
        ],
    )
    out, rep = evidence_filter(rec, RAW)
    # c3 is high-stakes because a red flag of the record names it;
    # c2 (plain symptom) and f3 (non-critical flag) stay
    assert [c.id for c in out.claims] == ["c1", "c2"]
    assert [f.id for f in out.safety_flags] == ["f3"]
    assert rep.removed_claims == ["c3"] and rep.removed_flags == ["f1", "f2"] and rep.high_stakes_total == 4


def test_unquoted_dose_is_nulled_but_quoted_dose_kept() -> None:
    raw = "I take warfarin 5 mg daily and metformin five hundred"
    rec = ClinicalRecord(
        triage=Triage(level="routine"),
        claims=[
            Claim(id="c1", category="medication", concept="warfarin", status="present", value="5", unit="mg"),
            Claim(id="c2", category="medication", concept="warfarin", status="present", value="15", unit="mg"),
        ],
        safety_flags=[SafetyFlag(id="f1", kind="high_risk_medication", name="warfarin", detail="50 mg")],
        field_evidence={"c1": ["warfarin 5 mg"], "c2": ["warfarin 5 mg"], "f1": ["I take warfarin"]},
    )
    out, rep = evidence_filter(rec, raw)
    assert out.claims[0].value == "5" and out.claims[0].unit == "mg"
    assert out.claims[1].value is None and out.claims[1].unit is None
    assert out.safety_flags[0].detail is None
    assert rep.values_nulled == ["c2.value", "f1.detail"]


def test_number_words_count_as_quoted_numbers() -> None:
    assert numbers_quoted("2", ["for two days"]) and numbers_quoted("25 mg", ["twenty-five milligrams"])
    assert not numbers_quoted("3", ["for two days"]) and not numbers_quoted("15", ["5 mg"])
    assert number_words(40) == ["forty"] and number_words(7) == ["seven"]


def test_dangling_keys_dropped_and_triage_never_removed() -> None:
    rec = _rec({"c1": ["allergic to penicillin"], "f1": ["I get a rash"], "c99": ["warfarin"], "triage": ["made up"]})
    out, rep = evidence_filter(rec, RAW)
    assert rep.dangling_keys == ["c99"] and "c99" not in out.field_evidence
    assert out.triage == rec.triage and "triage" not in out.field_evidence


def test_filter_is_pure() -> None:
    rec = _rec({"c1": ["nope"], "f1": ["nope"]})
    before = rec.model_dump()
    out1, rep1 = evidence_filter(rec, RAW)
    out2, rep2 = evidence_filter(rec, RAW)
    assert rec.model_dump() == before and out1 == out2 and rep1 == rep2


def test_custom_high_stakes_list() -> None:
    rec = _rec({})
    out, _ = evidence_filter(rec, RAW, HighStakes(flag_kinds=frozenset(), claim_categories=frozenset()))
    assert out.claims == rec.claims and out.safety_flags == rec.safety_flags


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("I, I was, I was going to um, the the shop.", "I was going to the shop."),
        ("Um. I have th- the pain uh.", "I have the pain."),
        ("BP is 120 120", "BP is 120 120"),
        ("I had had enough", "I had had enough"),
        ("mhm, uh-huh no no chest pain", "mhm, uh-huh no chest pain"),
        ("it -- it hurts", "it hurts"),
        ("  spaced\n\tout  ", "spaced out"),
    ],
)
def test_clean_rule(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean


def test_dual_view_keeps_raw_exactly() -> None:
    raw = "Um,  I I have\nchest pain"
    v = dual_view(raw)
    assert v.raw == raw and v.clean == "I have chest pain"
