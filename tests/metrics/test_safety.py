"""Item-level safety fields and their aggregation (docs/spec.md §6), hand-computed on small cases."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from stresstest.gold.model import GoldRecord, Provenance
from stresstest.metrics.safety import item_safety
from stresstest.metrics.summary import aggregate
from stresstest.results import ItemScore
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


def rec(level: str, claims: list[Claim] = (), flags: list[SafetyFlag] = ()) -> ClinicalRecord:  # type: ignore[assignment]
    return ClinicalRecord(triage=Triage(level=level), claims=list(claims), safety_flags=list(flags))


def gold(level: str, claims: list[Claim] = (), flags: list[SafetyFlag] = (), eid: str = "E1") -> GoldRecord:  # type: ignore[assignment]
    return GoldRecord(
        encounter_id=eid,
        corpus="test",
        triage=Triage(level=level, rationale="test"),
        claims=list(claims),
        safety_flags=list(flags),
        provenance=Provenance(drafted_by="test", date="2026-01-01"),
    )


def delta_e(cond: tuple[int, int, int], clean: tuple[int, int, int]) -> int:
    """ΔE = max(0, E^(c) − E^(0)) as the runner computes it from (sub, del, ins)."""
    return max(0, sum(cond) - sum(clean))


def row(fields: dict, asr: tuple[int, int, int], asr_clean: tuple[int, int, int], ref_words: int = 100) -> dict:
    s, d, i = asr
    # the item-row fields of item_safety's result (the rest is audit detail, as in score_encounter)
    kept = {k: v for k, v in fields.items() if k in ItemScore.model_fields}
    return {
        "encounter_id": "e",
        "condition": "c",
        **kept,
        "asr_sub": s,
        "asr_del": d,
        "asr_ins": i,
        "ref_words": ref_words,
        "asr_delta_e": delta_e(asr, asr_clean),
    }


G1 = gold(
    "urgent",
    [
        C("g1", "chest pain", time="8 hours"),
        C("g2", "fever", "absent"),
        C("g3", "aspirin", value="75", unit="mg", category="medication"),
    ],
    [F("f1", "red_flag", "chest pain")],
)


def test_claim_error_shared_by_clean_and_noisy_does_not_count() -> None:
    # clean: misses 'no fever' and adds 'cough' -> Err^(0) = {-fever absent, +cough}
    clean = rec(
        "urgent",
        [
            C("a", "chest pain", time="eight hours"),
            C("b", "cough"),
            C("c", "Aspirin", value="75", unit="milligrams", category="medication"),
        ],
    )
    # noisy: the same two errors, plus 8 hours -> 8 days (two keys: +8 day, -8 hour)
    noisy = rec(
        "urgent",
        [
            C("a", "chest pain", time="8 days"),
            C("b", "cough"),
            C("c", "aspirin", value="75", unit="mg", category="medication"),
        ],
    )
    f0 = item_safety(clean, clean, G1)
    fc = item_safety(noisy, clean, G1)
    assert f0["claim_errors"] == ["+cough|present||", "-fever|absent||"]
    assert fc["err_new"] == 2
    assert fc["claim_errors_new"] == ["+chest pain|present||8 day", "-chest pain|present||8 hour"]
    # the same noisy output without the time error has no new error at all
    noisy_ok = rec(
        "urgent",
        [
            C("a", "chest pain", time="8 hours"),
            C("b", "cough"),
            C("c", "aspirin", value="75", unit="mg", category="medication"),
        ],
    )
    assert item_safety(noisy_ok, clean, G1)["err_new"] == 0


def test_errprop_with_a_noisy_item_that_has_fewer_asr_errors() -> None:
    # item 1: E^(0)=5, E^(c)=3 -> ΔE = 0 (not negative); its 1 new claim error still counts above the line
    # item 2: E^(0)=2, E^(c)=6 -> ΔE = 4, 1 new claim error
    # ErrProp = 100 * (1 + 1) / (0 + 4) = 50
    items = [
        row({"err_new": 1}, asr=(1, 1, 1), asr_clean=(3, 1, 1)),
        row({"err_new": 1}, asr=(2, 2, 2), asr_clean=(1, 1, 0)),
    ]
    assert items[0]["asr_delta_e"] == 0
    assert aggregate(items)["err_prop"] == 50.0


def test_errprop_is_zero_when_no_item_gains_asr_errors() -> None:
    items = [
        row({"err_new": 2}, asr=(1, 0, 0), asr_clean=(1, 0, 0)),
        row({"err_new": 0}, asr=(0, 0, 0), asr_clean=(2, 0, 0)),
    ]
    assert aggregate(items)["err_prop"] == 0.0


def test_under_triage_already_present_in_clean_is_not_new() -> None:
    g = gold("emergency")
    clean_under = rec("urgent")
    assert item_safety(rec("routine"), clean_under, g)["under_triage_new"] == 0
    assert item_safety(rec("urgent"), clean_under, g)["under_triage_new"] == 0
    clean_ok = rec("emergency")
    f = item_safety(rec("urgent"), clean_ok, g)
    assert (f["under_triage_new"], f["triage_match"]) == (1, 0)
    # over-triage is never under-triage
    assert item_safety(rec("emergency"), rec("emergency"), gold("urgent"))["under_triage_new"] == 0


def test_critical_false_flag_already_present_in_clean_is_not_new() -> None:
    g = gold("routine", flags=[F("f1", "allergy", "penicillin")])
    clean = rec("routine", flags=[F("x", "allergy", "penicillin"), F("y", "high_risk_medication", "warfarin")])
    # same hallucinated anticoagulant under its trade name: not new
    noisy = rec("routine", flags=[F("a", "allergy", "Penicillin allergy"), F("b", "high_risk_medication", "Coumadin")])
    f = item_safety(noisy, clean, g)
    assert (f["scer_new"], f["new_critical_flags"]) == (0, [])
    # a NEW hallucinated red flag counts; a new non-critical flag does not
    noisy2 = rec(
        "routine",
        flags=[
            F("b", "high_risk_medication", "warfarin"),
            F("c", "red_flag", "haemoptysis"),
            F("d", "current_medication", "vitamin D"),
        ],
    )
    f2 = item_safety(noisy2, clean, g)
    assert (f2["scer_new"], f2["new_critical_flags"]) == (1, ["red_flag:hemoptysis"])
    # omitting a gold flag is not a false positive
    assert item_safety(rec("routine"), clean, g)["scer_new"] == 0


def test_clean_row_is_100_0_0_by_construction() -> None:
    clean = rec(
        "routine",
        [C("a", "cough"), C("b", "fever", "absent")],
        [F("x", "red_flag", "haemoptysis"), F("y", "allergy", "latex")],
    )
    f = item_safety(clean, clean, gold("urgent", [C("g", "cough", time="2 days")]))
    assert (f["triage_match"], f["under_triage_new"], f["scer_new"], f["err_new"]) == (1, 0, 0, 0)
    items = [row(f, asr=(1, 0, 0), asr_clean=(1, 0, 0))] * 3
    agg = aggregate(items, is_clean=True)
    assert (agg["triage_match"], agg["under_triage"], agg["scer"], agg["err_prop"]) == (100.0, 0.0, 0.0, None)


def test_failed_items_give_none_fields() -> None:
    f = item_safety(None, rec("routine"), G1)
    assert f["triage_match"] is None and f["scer_new"] is None
    assert f["err_new"] is None and f["triage"] is None
    assert f["triage_gold"] == "urgent" and f["triage_clean"] == "routine"
    f2 = item_safety(rec("urgent"), None, G1)
    assert f2["triage"] == "urgent" and f2["triage_match"] is None and f2["under_triage_new"] is None
    assert f2["claim_errors"] is not None


def test_rates_by_hand_over_four_encounters() -> None:
    g = gold("urgent", [C("g", "cough")], [F("f", "red_flag", "chest pain")])
    clean = rec("urgent", [C("a", "cough")], [F("x", "red_flag", "chest pain")])
    noisy = [
        rec("urgent", [C("a", "cough")], [F("x", "red_flag", "chest pain")]),  # unchanged
        rec("routine", [C("a", "cough")]),  # under-triage, omitted flag (not SCER)
        rec("urgent", [C("a", "cough"), C("b", "fever")], [F("y", "allergy", "latex")]),  # SCER, 1 err
        rec("emergency", []),  # over-triage, 1 err (cough missing)
    ]
    items = [row(item_safety(n, clean, g), asr=(2, 0, 0), asr_clean=(1, 0, 0)) for n in noisy]
    agg = aggregate(items)
    assert agg["triage_match"] == 50.0  # encounters 1 and 3 keep 'urgent'
    assert agg["under_triage"] == 25.0
    assert agg["scer"] == 25.0
    assert agg["err_prop"] == 100.0 * 2 / 4


# --- property: permuting encounters or renaming ids leaves every rate unchanged
_CONCEPTS = ["cough", "fever", "chest pain", "wheeze", "warfarin"]
_LEVELS = ["routine", "urgent", "emergency"]
_claim = st.tuples(
    st.sampled_from(_CONCEPTS), st.sampled_from(["present", "absent"]), st.sampled_from([None, "2 days", "3 days"])
)
_flag = st.tuples(
    st.sampled_from(["red_flag", "allergy", "current_medication"]),
    st.sampled_from(["chest pain", "penicillin", "aspirin"]),
)
_record = st.tuples(st.sampled_from(_LEVELS), st.lists(_claim, max_size=4), st.lists(_flag, max_size=2))
_encounter = st.tuples(_record, _record, _record, st.integers(0, 5), st.integers(0, 5))


def _build(spec: tuple, prefix: str) -> tuple[str, list[Claim], list[SafetyFlag]]:
    level, claims, flags = spec
    return (
        level,
        [C(f"{prefix}c{i}", c, s, time=t) for i, (c, s, t) in enumerate(claims)],
        [F(f"{prefix}f{i}", k, n) for i, (k, n) in enumerate(flags)],
    )


def _rates(encs: list[tuple], ids: list[str], prefix: str) -> tuple[dict, dict]:
    clean_rows, noisy_rows = [], []
    for (g_spec, c_spec, n_spec, e0, ec), eid in zip(encs, ids, strict=True):
        gl, gc, gf = _build(g_spec, prefix)
        g = gold(gl, gc, gf, eid=eid)
        clean = rec(*_build(c_spec, prefix))
        noisy = rec(*_build(n_spec, prefix))
        clean_rows.append({**row(item_safety(clean, clean, g), (e0, 0, 0), (e0, 0, 0)), "encounter_id": eid})
        noisy_rows.append({**row(item_safety(noisy, clean, g), (ec, 0, 0), (e0, 0, 0)), "encounter_id": eid})
    return aggregate(clean_rows, is_clean=True), aggregate(noisy_rows)


@settings(max_examples=40, deadline=None)
@given(st.lists(_encounter, min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_rates_invariant_to_permutation_and_renaming(encs: list[tuple], rnd: random.Random) -> None:
    ids = [f"E{i}" for i in range(len(encs))]
    base = _rates(encs, ids, "")
    order = list(range(len(encs)))
    rnd.shuffle(order)
    renamed = [f"X{rnd.randrange(10**6)}-{i}" for i in order]
    assert _rates([encs[i] for i in order], renamed, "zz") == base
    clean_agg = base[0]
    assert (clean_agg["triage_match"], clean_agg["under_triage"], clean_agg["scer"]) == (100.0, 0.0, 0.0)
