"""clinical_omission, event weights / trigger risk, precision rules, the labelled dev set, long inputs."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from stresstest.clinical.vocab import category_weight, clinical_terms, match_terms
from stresstest.metrics.align import align
from stresstest.metrics.triggers import content_word_errors, detect_in_pair, detect_triggers, trigger_risk
from stresstest.metrics.wer import asr_errors, wer_percent
from stresstest.report.predictive import auroc

DEVSET = Path(__file__).resolve().parents[2] / "data" / "trigger_devset" / "pairs.jsonl"


def _types(ref: str, hyp: str) -> list[str]:
    return [e.type for e in detect_triggers(ref, hyp)]


# --- clinical_omission, real-style (patient utterances of primary-care consultations) ----------------


@pytest.mark.parametrize(
    ("ref", "hyp", "concept"),
    [
        ("I get chest pain when I climb the stairs.", "I get chess pain when I climb the stairs.", "chest pain"),
        ("I've been wheezing a lot.", "I've been weaving a lot.", "wheeze"),
        ("I smoke about ten a day.", "I spoke about ten a day.", "smoking"),
        ("I'm on the pill.", "I'm on the hill.", "oral contraceptive"),
        ("I had the coil put in last year.", "I had the cold put in last year.", "coil"),
        ("My mum had breast cancer.", "My mum had breast answer.", "breast cancer"),
        ("I take amlodipine for my blood pressure.", "I take a lot of pain for my blood pressure.", "amlodipine"),
        ("The itching is worse at night.", "The itch is worse at night.", None),
    ],
)
def test_clinical_term_lost_or_heard_as_ordinary_words(ref: str, hyp: str, concept: str | None) -> None:
    events = [e for e in detect_triggers(ref, hyp) if e.type == "clinical_omission"]
    if concept is None:  # "itching" / "itch": one word family, kept
        assert events == []
        return
    assert [e.concept for e in events] == [concept]
    (e,) = events
    assert ref[e.ref_start : e.ref_end] == e.ref_span and hyp[e.hyp_start : e.hyp_end] == e.hyp_span
    assert e.weight > 0


def test_negation_lost_with_its_target_is_one_omission_with_the_negated_weight() -> None:
    (e,) = detect_triggers("No chest pain at all.", "At all.")
    assert e.type == "clinical_omission" and "(negated)" in e.explanation
    assert e.weight == pytest.approx(category_weight("red_flag") + category_weight("negated"))


def test_negation_cue_lost_without_a_known_entity_is_a_flip() -> None:
    (e,) = detect_triggers("I take it the injection didn't help.", "I take it the injection, did it help.")
    assert e.type == "negation_flip" and e.weight == category_weight("negation_flip")  # next to "injection"
    # A bare answer particle next to no content word is nothing.
    assert detect_triggers("No, that I can do.", "That I can do.") == []


def test_garbled_but_readable_term_weighs_less_than_a_lost_one() -> None:
    (garbled,) = detect_triggers("You mean the tacrolimus.", "You mean the tacromilius.")
    (lost,) = detect_triggers("You mean the tacrolimus.", "You mean the taco bell.")
    assert garbled.type == lost.type == "clinical_omission"
    assert garbled.weight == pytest.approx(lost.weight * category_weight("garbled"))
    # A close spelling that is itself an ordinary word is no recovery ("persa-gel" -> "person gel").
    (e,) = detect_triggers("Then the persa-gel.", "Then the person gel.")
    assert "does not survive" in e.explanation


def test_compounds_splits_and_fragments_are_not_omissions() -> None:
    assert detect_triggers("I stopped breastfeeding.", "I stopped breast feeding.") == []
    assert detect_triggers("I take atenolol.", "I take a tenolol.") == []
    assert detect_triggers("Then bloo- blood tinged fluid.", "Then blood. Blood tinged fluid.") == []
    assert detect_triggers("3 milliliters of fluid.", "3 ml of fluid.") == []
    assert detect_triggers("Testing for trichomoniasis.", "Testing for trichomonas.") == []


# --- weights -------------------------------------------------------------------------------------------


def test_weights_follow_the_category_table() -> None:
    (drug,) = detect_triggers("I take ramipril.", "I take rampart.")
    (anticoag,) = detect_triggers("I take warfarin.", "I take war for in.")
    (site,) = detect_triggers("It hurts in my elbow.", "It hurts in my elbows and.") or [None]  # kept: same word
    assert drug.weight == category_weight("medication")
    assert anticoag.weight == category_weight("high_risk_medication") > drug.weight
    assert site is None or site.type != "clinical_omission"
    (dose,) = detect_triggers("Meloxicam 15 milligrams a day.", "Meloxicam fifty milligrams a day.")
    (count,) = detect_triggers("I walk about 3 flights.", "I walk about 30 flights.")
    assert dose.weight == category_weight("dose_conflict") > count.weight == category_weight("number_unit_conflict")


def test_trigger_risk_is_the_sum_of_weights() -> None:
    events = detect_triggers("No fever since Monday, left knee pain.", "Fever since Sunday, right knee pain.")
    assert len(events) >= 3
    assert trigger_risk(events) == pytest.approx(sum(e.weight for e in events))
    assert trigger_risk([]) == 0


def test_every_category_of_the_terms_table_has_a_weight() -> None:
    cats = set(clinical_terms().values())
    assert {"symptom", "habit", "contraception", "family", "device", "medication", "body_site"} <= cats
    for c in cats:
        assert category_weight(c) > 0
    assert [m.concept for m in match_terms("I had an IUD and I vape")] == ["iud", "vape"]


# --- precision rules -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "hyp"),
    [
        ("I take 2 1/2 tablets.", "I take two and a half tablets."),
        ("About one and a half hours.", "About 1.5 hours."),
        ("It happens 2-3 times a week.", "It happens two to three times a week."),
        ("So what brought you in today?", "So what brings you in?"),
        ("What brought you in today?", "What brought me into date?"),
        ("Good morning, doctor.", "Morning, doctor."),
        ("It was the first time.", "It was the 1st time."),
        ("For the first week it was fine.", "For the week it was fine."),
    ],
)
def test_same_value_or_set_phrase_is_no_event(ref: str, hyp: str) -> None:
    assert detect_triggers(ref, hyp) == []


def test_real_value_changes_still_count() -> None:
    assert _types("I take 2 1/2 tablets.", "I take 3 1/2 tablets.") == ["number_unit_conflict"]
    assert _types("The pain started today.", "The pain started yesterday.") == ["temporal_distortion"]


# --- the labelled development set ------------------------------------------------------------------------


def test_devset_ordering_on_the_dev_split() -> None:
    rows = [json.loads(line) for line in DEVSET.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 200 and {r["split"] for r in rows} == {"dev", "test"}
    assert not {r["encounter_id"] for r in rows if r["split"] == "dev"} & {
        r["encounter_id"] for r in rows if r["split"] == "test"
    }
    dev = [r for r in rows if r["split"] == "dev"]
    risk, content, wer, y = [], [], [], []
    for r in dev:
        pair = align(r["reference"], r["hypothesis"])
        risk.append(trigger_risk(detect_in_pair(pair)))
        content.append(content_word_errors(pair))
        wer.append(wer_percent([asr_errors(r["reference"], r["hypothesis"])]))
        y.append(float(r["label"] == 2))
    a = {k: auroc(np.array(v, float), np.array(y)) for k, v in (("risk", risk), ("content", content), ("wer", wer))}
    assert a["risk"] > a["content"] > a["wer"]
    assert a["risk"] >= 0.8


# --- long inputs ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_200k_word_pair_is_fast() -> None:
    rows = [json.loads(line) for line in DEVSET.read_text(encoding="utf-8").splitlines()]
    ref_words = " ".join(r["reference"] for r in rows).split()
    hyp_words = " ".join(r["hypothesis"] for r in rows).split()
    reps = 200_000 // len(ref_words) + 1
    ref, hyp = " ".join((ref_words * reps)[:200_000]), " ".join((hyp_words * reps)[:200_000])
    detect_triggers("warm up the dictionaries", "warm up the dictionary")

    def cpu_s(fn: Callable[[], object]) -> tuple[float, object]:
        # CPU seconds (the shared machine's wall clock also measures the neighbours), with a coverage tracer
        # (make test's --cov) off for the call: the bound is on the detector, not on the tracer, which slows the
        # pure-Python detector several times more than the alignment's native code.
        tracer = sys.gettrace()
        sys.settrace(None)
        try:
            t0 = time.process_time()
            out = fn()
            return time.process_time() - t0, out
        finally:
            sys.settrace(tracer)

    wer_s, _ = cpu_s(lambda: asr_errors(ref, hyp))
    trig_s, events = cpu_s(lambda: detect_triggers(ref, hyp))
    # every sentence of this text differs (the worst case): measured 1.55x WER's time on a quiet machine
    # (BENCHMARKS.md); a ratio, so a loaded or slower machine slows both sides alike.
    assert trig_s < 4 * wer_s, (trig_s, wer_s)
    assert isinstance(events, list) and events
    assert all(ref[e.ref_start : e.ref_end] == e.ref_span for e in events)
