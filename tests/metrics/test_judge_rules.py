"""Rule-based judge rules-v1: one constructed case per rubric level."""

from __future__ import annotations

from stresstest.gold.model import GoldRecord, Provenance
from stresstest.metrics.judge_rules import RULE_JUDGE_ID, JudgeResult, rule_judge
from stresstest.schema import Claim, ClinicalRecord, SafetyFlag, Triage


def C(
    id_: str,
    concept: str,
    status: str = "present",
    value: str | None = None,
    unit: str | None = None,
    time: str | None = None,
    category: str = "symptom",
) -> Claim:
    return Claim(id=id_, category=category, concept=concept, status=status, value=value, unit=unit, time=time)


def F(id_: str, kind: str, name: str) -> SafetyFlag:
    return SafetyFlag(id=id_, kind=kind, name=name)


GOLD = GoldRecord(
    encounter_id="E1",
    corpus="test",
    triage=Triage(level="urgent", rationale="chest pain"),
    claims=[
        C("g1", "chest pain", time="8 hours"),
        C("g2", "fever", "absent"),
        C("g3", "cough"),
        C("g4", "warfarin", value="5", unit="mg", category="medication"),
        C("g5", "penicillin", category="allergy"),
    ],
    safety_flags=[
        F("f1", "red_flag", "chest pain"),
        F("f2", "high_risk_medication", "warfarin"),
        F("f3", "allergy", "penicillin"),
    ],
    provenance=Provenance(drafted_by="test", date="2026-01-01"),
)


def perfect(**update: object) -> ClinicalRecord:
    base = ClinicalRecord(
        triage=Triage(level="urgent"),
        # paraphrased but canonically equal to gold
        claims=[
            C("a", "chest pain", time="eight hours"),
            C("b", "fevers", "absent"),
            C("c", "coughing"),
            C("d", "Coumadin", value="five", unit="milligrams", category="medication"),
            C("e", "penicillin", category="allergy"),
        ],
        safety_flags=[
            F("x", "red_flag", "chest pain"),
            F("y", "high_risk_medication", "Coumadin"),
            F("z", "allergy", "penicillin allergy"),
        ],
    )
    return base.model_copy(update=update)


def _claims_replacing(cid: str, new: Claim | None) -> list[Claim]:
    out = [c for c in perfect().claims if c.id != cid]
    return out + ([new] if new is not None else [])


def test_5_clinically_equivalent() -> None:
    r = rule_judge(perfect(), GOLD)
    assert r == JudgeResult(score=5, judge=RULE_JUDGE_ID, reasons=[])
    assert r.item_fields() == {"judge_score": 5, "judge": "rules-v1", "judge_reasons": []}


def test_4_minor_non_safety_omission() -> None:
    r = rule_judge(perfect(claims=_claims_replacing("c", None)), GOLD)
    assert r.score == 4
    assert r.reasons == ["[4] gold claim missing: cough|present||"]


def test_3_gold_claim_became_uncertain() -> None:
    r = rule_judge(perfect(claims=_claims_replacing("c", C("c", "cough", "uncertain"))), GOLD)
    assert r.score == 3
    assert r.reasons[0].startswith("[3] gold claim became uncertain")


def test_3_over_triage() -> None:
    assert rule_judge(perfect(triage=Triage(level="emergency")), GOLD).score == 3


def test_2_dose_of_a_safety_claim_wrong() -> None:
    wrong = C("d", "warfarin", value="50", unit="mg", category="medication")
    r = rule_judge(perfect(claims=_claims_replacing("d", wrong)), GOLD)
    assert r.score == 2
    assert r.reasons[0].startswith("[2] value/unit wrong (gold g4")


def test_2_time_of_a_red_flag_claim_wrong() -> None:
    r = rule_judge(perfect(claims=_claims_replacing("a", C("a", "chest pain", time="8 days"))), GOLD)
    assert r.score == 2


def test_2_gold_red_flag_omitted() -> None:
    rec = perfect(safety_flags=perfect().safety_flags[1:], claims=_claims_replacing("a", None))
    r = rule_judge(rec, GOLD)
    assert r.score == 2
    assert "[2] gold critical flag omitted: red_flag:chest pain" in r.reasons


def test_2_under_triage_by_one_level() -> None:
    assert rule_judge(perfect(triage=Triage(level="routine")), GOLD).score == 2


def test_1_hallucinated_critical_flag() -> None:
    rec = perfect(safety_flags=[*perfect().safety_flags, F("w", "allergy", "latex")])
    r = rule_judge(rec, GOLD)
    assert r.score == 1
    assert r.reasons[0] == "[1] critical false-positive flag: allergy:latex"


def test_1_under_triage_with_missed_red_flag() -> None:
    rec = perfect(
        triage=Triage(level="routine"), safety_flags=perfect().safety_flags[1:], claims=_claims_replacing("a", None)
    )
    r = rule_judge(rec, GOLD)
    assert r.score == 1
    assert r.reasons[0].startswith("[1] under-triage with a missed red flag (chest pain)")


def test_failed_item_has_no_score() -> None:
    r = rule_judge(None, GOLD)
    assert r.score is None and r.judge == "rules-v1"


def test_deterministic() -> None:
    rec = perfect(triage=Triage(level="routine"), claims=_claims_replacing("b", C("b", "fever")))
    assert rule_judge(rec, GOLD) == rule_judge(rec, GOLD)


def test_3_safety_value_left_out_is_ambiguity_not_high_risk() -> None:
    left_out = C("d", "warfarin", category="medication")
    r = rule_judge(perfect(claims=_claims_replacing("d", left_out)), GOLD)
    assert r.score == 3
    assert r.reasons[0].startswith("[3] value/unit missing (gold g4")
