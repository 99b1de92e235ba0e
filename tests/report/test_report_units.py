"""Unit tests of the report's building blocks: record diff, span context, AUROC/Spearman, sentences."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from stresstest.report.examples import context, diff_records
from stresstest.report.predictive import EndpointResult, auroc, sentence, spearman, summary_sentence
from stresstest.report.tables import noise_source, write_table
from stresstest.results import RunManifest
from stresstest.schema import Claim, ClinicalRecord, SafetyFlag, Triage


def _rec(claims: list[tuple[str, str, str, str | None]], flags: list[tuple[str, str]], level: str) -> ClinicalRecord:
    return ClinicalRecord(
        triage=Triage(level=level),  # type: ignore[arg-type]
        claims=[
            Claim(id=f"c{i}", category=c[0], concept=c[1], status=c[2], value=c[3])  # type: ignore[arg-type]
            for i, c in enumerate(claims)
        ],
        safety_flags=[SafetyFlag(id=f"f{i}", kind=k, name=n) for i, (k, n) in enumerate(flags)],  # type: ignore[arg-type]
    )


def test_diff_records_categories() -> None:
    clean = _rec(
        [
            ("symptom", "Chest pain", "absent", None),
            ("finding", "exercise tolerance", "present", "3-4"),
            ("medication", "metoprolol", "present", None),
        ],
        [("allergy", "penicillin")],
        "urgent",
    )
    noisy = _rec(
        [
            ("symptom", "chest  pain", "present", None),
            ("finding", "exercise tolerance", "present", "1"),
            ("medication", "metformin", "present", None),
        ],
        [("allergy", "penicillin"), ("red_flag", "chest pain")],
        "routine",
    )
    d = diff_records(clean, noisy)
    assert d.flipped == ["symptom 'chest pain' absent → present"]
    assert d.changed == ["finding 'exercise tolerance': 3-4 → 1"]
    assert d.added == ["medication 'metformin' (present)"]
    assert d.removed == ["medication 'metoprolol' (present)"]
    assert d.flags_added == ["red_flag:chest pain"] and d.critical_added == ["red_flag:chest pain"]
    assert d.triage == ("urgent", "routine")
    lines = d.describe("urgent")
    assert lines[0] == "triage urgent → routine (under-triage, gold urgent)"
    assert lines[1] == "critical flag added: red_flag:chest pain"
    assert diff_records(clean, clean).describe() == ["no change in the structured record"]
    assert not diff_records(None, noisy).available


def test_context_window() -> None:
    text = "one two three four five six seven eight nine ten eleven twelve I DON'T see it now and more words"
    pre, mid, post = context(text, "don't  see", width=3)  # type: ignore[misc]
    assert (pre, mid, post) == ("… eleven twelve I ", "DON'T see", " it now and …")
    assert context(text, "absent") is None
    assert context(text, "") is None


def test_auroc_and_spearman() -> None:
    y = np.array([0, 0, 1, 1])
    assert auroc(np.array([1.0, 2.0, 3.0, 4.0]), y) == 1.0
    assert auroc(np.array([4.0, 3.0, 2.0, 1.0]), y) == 0.0
    assert auroc(np.array([1.0, 1.0, 1.0, 1.0]), y) == 0.5  # ties count one half
    assert math.isnan(auroc(np.array([1.0, 2.0]), np.array([1, 1])))
    assert spearman(np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 20.0, 30.0, 45.0])) == pytest.approx(1.0)
    assert math.isnan(spearman(np.array([1.0, 1.0, 1.0]), np.array([0.0, 1.0, 0.0])))


def _res(
    n: int,
    pos: int,
    aw: float,
    at: float,
    ciw: tuple[float, float],
    cit: tuple[float, float],
    cid: tuple[float, float],
) -> EndpointResult:
    return EndpointResult(
        "scer_new",
        "new critical false-positive flag (SCER)",
        n,
        pos,
        {"auroc_dwer": aw, "auroc_triggers": at, "auroc_diff": at - aw},
        {"auroc_dwer": ciw, "auroc_triggers": cit, "auroc_diff": cid},
    )


def test_sentences_follow_the_numbers() -> None:
    s = sentence(_res(100, 20, 0.55, 0.81, (0.45, 0.65), (0.72, 0.90), (0.12, 0.40)))
    assert "trigger risk has the higher AUROC, 0.81" in s and "than ΔWER, 0.55" in s
    assert "do not overlap" in s and "excludes 0" in s and "20 of 100" in s
    s2 = sentence(_res(100, 20, 0.70, 0.66, (0.60, 0.80), (0.55, 0.75), (-0.15, 0.07)))
    assert "ΔWER has the higher AUROC" in s2 and "intervals overlap" in s2 and "includes 0" in s2
    assert s.startswith("New critical false-positive flag (SCER) (20 of 100 items positive)")
    assert "not estimable — no positive items" in sentence(_res(50, 0, math.nan, math.nan, (0, 0), (0, 0), (0, 0)))
    assert "not estimable — no negative items" in sentence(_res(50, 50, math.nan, math.nan, (0, 0), (0, 0), (0, 0)))
    both = [
        _res(100, 20, 0.55, 0.81, (0.45, 0.65), (0.72, 0.90), (0.12, 0.40)),
        _res(100, 20, 0.70, 0.66, (0.60, 0.80), (0.55, 0.75), (-0.15, 0.07)),
    ]
    both[1].endpoint = "unsafe"
    assert summary_sentence(both) == (
        "Of 2 estimable safety endpoints, judged by whether the 95% CI of the paired AUROC difference excludes 0 "
        "and the better predictor's AUROC is above 0.5: "
        "trigger risk predicts better than ΔWER for SCER; not resolved for unsafe (≤ 2)."
    )
    assert summary_sentence(both[1:]) == (
        "Of 1 estimable safety endpoint, neither predictor is better for any: every paired AUROC difference "
        "(trigger risk − ΔWER) has a 95% CI that includes 0."
    )


def test_under_five_positives_is_not_estimable() -> None:
    # issue 26: SCER with 2 positives of 32, AUROC 0.15 (ΔWER) vs 0.37 (trigger risk), paired CI above 0 — the
    # report called trigger risk the better predictor.
    small = _res(32, 2, 0.15, 0.37, (0.0, 0.4), (0.1, 0.6), (0.05, 0.40))
    s = sentence(small)
    assert s == (
        "New critical false-positive flag (SCER): not estimable — only 2 positive items among 32 "
        "(at least 5 positive and 5 negative needed)."
    )
    assert "predicts better" not in summary_sentence([small])
    assert summary_sentence([small]).startswith("No safety endpoint is estimable in this run: each has fewer than 5")
    four = sentence(_res(40, 4, 0.55, 0.90, (0.4, 0.7), (0.8, 1.0), (0.2, 0.5)))
    assert "not estimable — only 4 positive items" in four
    assert "not estimable — only 3 negative items" in sentence(_res(40, 37, 0.55, 0.90, (0, 1), (0, 1), (0.2, 0.5)))
    # exactly 5 positives (and 5 negatives) is estimable
    assert "has the higher AUROC" in sentence(_res(10, 5, 0.55, 0.90, (0.4, 0.7), (0.8, 1.0), (0.2, 0.5)))


def test_a_predictor_at_or_below_chance_is_never_called_better() -> None:
    # Enough positives, and the paired difference's CI excludes 0 — but both AUROCs are at or below 0.5.
    below = _res(100, 20, 0.15, 0.37, (0.05, 0.25), (0.25, 0.50), (0.10, 0.35))
    s = sentence(below)
    assert "neither predictor does better than chance" in s and "higher" not in s and "better than ΔWER" not in s
    summary = summary_sentence([below])
    assert "predicts better" not in summary
    assert "neither does better than chance (both AUROCs ≤ 0.5) for SCER" in summary
    # the boundary: 0.5 is chance, so it is not "better" either (ΔWER's CI side)
    at = _res(100, 20, 0.50, 0.30, (0.4, 0.6), (0.2, 0.4), (-0.3, -0.1))
    assert "predicts better" not in summary_sentence([at]) and "neither predictor does" in sentence(at)
    # one above chance with the CI excluding 0 in its favour: that one is better
    above = _res(100, 20, 0.45, 0.70, (0.35, 0.55), (0.60, 0.80), (0.10, 0.40))
    assert "trigger risk predicts better than ΔWER for SCER" in summary_sentence([above])
    # the CI excludes 0 for the side at chance: not "better", and not hidden either
    wrong_side = _res(100, 20, 0.50, 0.62, (0.4, 0.6), (0.5, 0.7), (-0.3, -0.05))
    assert "ΔWER predicts better" not in summary_sentence([wrong_side])


def test_noise_source_description() -> None:
    def man(noise: dict[str, Any]) -> RunManifest:
        return RunManifest(noise=noise)

    assert (
        noise_source(man({"ambient": {"corpus": "DEMAND", "subsets": ["OOFFICE", "PCAFETER"]}}), "ambient")
        == "DEMAND · OOFFICE, PCAFETER"
    )
    assert noise_source(RunManifest(), "babble") == ""
    builtin = {
        "kind": "builtin",
        "subsets": ["OOFFICE"],
        "ambient_recipes": ["hvac", "drone"],
        "n_talkers_min": 3,
        "n_talkers_max": 7,
    }
    both = man({"ambient": builtin, "babble": builtin})
    assert noise_source(both, "ambient") == "built-in generators: hvac, drone"
    assert noise_source(both, "babble") == "built-in synthetic talkers (3–7 voices)"


def test_write_table_types(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    paths = write_table(tmp_path / "t", [{"a": 1, "b": "x", "c": True}, {"a": 2.5, "b": None, "c": None}])
    t = pq.read_table(paths[1])
    assert str(t.schema.field("a").type) == "double" and str(t.schema.field("c").type) == "bool"
    assert t.to_pylist() == [{"a": 1.0, "b": "x", "c": True}, {"a": 2.5, "b": None, "c": None}]
    assert paths[0].read_text("utf-8") == "a,b,c\n1,x,True\n2.5,,\n"


def test_rankdata_matches_scipy() -> None:
    from scipy.stats import rankdata as scipy_rankdata

    from stresstest.report.predictive import rankdata

    rng = np.random.default_rng(0)
    for _ in range(100):
        x = rng.integers(0, 5, size=int(rng.integers(1, 40))).astype(float)
        assert np.array_equal(rankdata(x), scipy_rankdata(x)), x


def test_context_keeps_punctuation_attached() -> None:
    pre, mid, post = context("I'm allergic to penicillin, it gives me hives.", "penicillin")  # type: ignore[misc]
    assert pre + mid + post == "I'm allergic to penicillin, it gives me hives."


def test_context_uses_event_offsets() -> None:
    text = "no pain today. no pain yesterday."
    pre, mid, post = context(text, "no pain", width=2, start=15, end=22)  # type: ignore[misc]
    assert (pre, mid, post) == ("… pain today. ", "no pain", " yesterday.")
    # offsets that do not point at the span fall back to the first match
    assert context(text, "no pain", width=2, start=3, end=9) == ("", "no pain", " today. no …")
    # an empty span with offsets is an insertion point
    assert context("ache in my ankle. Thanks.", "", width=3, start=18, end=18) == (
        "… in my ankle. ",
        "",
        "Thanks.",
    )


def test_long_spans_are_clipped() -> None:
    from stresstest.report.examples import clip_chars, clip_words

    long = " ".join(f"w{i}" for i in range(60))
    clipped = clip_words(long, 24)
    assert clipped.startswith("w0 w1") and clipped.endswith("w58 w59") and " … " in clipped
    assert len(clipped.split()) <= 24
    assert clip_words("a b c") == "a b c"
    assert len(clip_chars("x" * 500, 200)) == 200
    pre, mid, post = context("start " + long + " end", long)  # type: ignore[misc]
    assert mid == clipped and post == " end"
