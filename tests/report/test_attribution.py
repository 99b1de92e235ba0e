"""Cause→effect attribution: a trigger explains a record change only by span/evidence or concept overlap."""

from __future__ import annotations

from stresstest.metrics.triggers import detect_triggers, trigger_risk
from stresstest.report.examples import Change, diff_records, explains
from stresstest.results import TriggerEvent
from stresstest.schema import Claim, ClinicalRecord, Triage

CLEAN = "I get chest pain when I walk. What brought you in today? I also take aspirin."
NOISY = "I get chess pain when I walk. What brought me into date? I also take aspirin."


def _rec(claims: list[Claim], triage: str, evidence: dict[str, list[str]]) -> ClinicalRecord:
    return ClinicalRecord(triage=Triage(level=triage), claims=claims, field_evidence=evidence)  # type: ignore[arg-type]


def _events() -> list[TriggerEvent]:
    # as the report reads them back from items.jsonl
    return [TriggerEvent.model_validate(e.model_dump(mode="json")) for e in detect_triggers(CLEAN, NOISY)]


def test_under_triage_is_pinned_on_the_lost_symptom_not_on_a_set_phrase() -> None:
    clean = _rec(
        [Claim(id="c1", category="symptom", concept="chest pain", status="present")],
        "urgent",
        {"c1": ["chest pain when I walk"], "triage": ["I get chest pain"]},
    )
    noisy = _rec([], "routine", {})
    diff = diff_records(clean, noisy)
    events = _events()
    # "you in today" -> "me into date" is a set phrase: no event at all there.
    assert [e.type for e in events] == ["clinical_omission"]
    (ev,) = events
    triage = next(c for c in diff.changes if c.line.startswith("triage"))
    removed = next(c for c in diff.changes if c.line.startswith("claim removed"))
    assert explains(ev, triage, CLEAN, NOISY)  # the span overlaps the triage evidence quote
    assert explains(ev, removed, CLEAN, NOISY)  # and the removed claim's concept/evidence


def test_change_without_overlap_is_not_attributed() -> None:
    ev = TriggerEvent(
        type="temporal_distortion",
        ref_span="today",
        hyp_span="date",
        concept="today",
        explanation="",
        ref_start=CLEAN.index("today"),
        ref_end=CLEAN.index("today") + 5,
        hyp_start=NOISY.index("date"),
        hyp_end=NOISY.index("date") + 4,
    )
    triage = Change("triage urgent → routine", (), ("I get chest pain",), ())
    removed = Change("claim removed: symptom 'chest pain' (present)", ("chest pain",), ("chest pain",), ())
    # Same item, no overlap of span, evidence or concept: never linked by co-occurrence.
    assert not explains(ev, triage, CLEAN, NOISY)
    assert not explains(ev, removed, CLEAN, NOISY)


def test_concept_equality_links_without_evidence() -> None:
    # offsets that point at no text: only the concept can link it
    ev = TriggerEvent(
        type="entity_substitution",
        ref_span="aspirin",
        hyp_span="asprin",
        concept="aspirin",
        explanation="",
        ref_start=0,
        ref_end=0,
        hyp_start=0,
        hyp_end=0,
    )
    assert explains(ev, Change("claim removed: medication 'aspirin' (present)", ("aspirin",)), CLEAN, NOISY)
    assert not explains(ev, Change("claim removed: medication 'warfarin' (present)", ("warfarin",)), CLEAN, NOISY)


def test_added_claim_is_tied_through_the_noisy_span() -> None:
    clean = _rec([], "routine", {})
    noisy = _rec(
        [Claim(id="c9", category="symptom", concept="pain", status="present")], "routine", {"c9": ["chess pain"]}
    )
    (added,) = diff_records(clean, noisy).changes
    (ev,) = _events()
    assert added.noisy_quotes == ("chess pain",)
    assert explains(ev, added, CLEAN, NOISY)


def test_event_risk_sums_weights_and_counts_old_events_as_one() -> None:
    base = {
        "type": "negation_flip",
        "ref_span": "",
        "hyp_span": "",
        "explanation": "",
        "ref_start": 0,
        "ref_end": 0,
        "hyp_start": 0,
        "hyp_end": 0,
    }
    events = [TriggerEvent.model_validate({**base, "weight": w}) for w in (2.5, 0.5)]
    assert trigger_risk(events) == 3.0
    assert trigger_risk([TriggerEvent.model_validate(base)] * 2) == 2.0  # an old event without a weight counts 1
    assert trigger_risk([]) == 0.0
