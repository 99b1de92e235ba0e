"""Tests of the paired cluster bootstrap (stresstest.metrics.bootstrap)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from stresstest.errors import MetricError
from stresstest.metrics.bootstrap import (
    bootstrap_cis,
    bootstrap_statistic,
    paired_differences,
    percentile_interval,
    resample_indices,
)
from stresstest.metrics.summary import METRIC_COLUMNS, aggregate


def _items(cond: str, n: int, seed: int, *, constant: bool = False) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        rows.append(
            {
                "encounter_id": f"enc{i:03d}",
                "condition": cond,
                "asr_sub": 5 if constant else int(rng.integers(0, 30)),
                "asr_del": 2 if constant else int(rng.integers(0, 10)),
                "asr_ins": 1 if constant else int(rng.integers(0, 10)),
                "ref_words": 200 if constant else int(rng.integers(150, 400)),
                "neg_err": 1 if constant else int(rng.integers(0, 2)),
                "triage_match": 1 if constant else int(rng.integers(0, 2)),
                "under_triage_new": 0 if constant else int(rng.integers(0, 2)),
                "scer_new": 0 if constant else int(rng.integers(0, 2)),
                "err_new": 2 if constant else int(rng.integers(0, 5)),
                "asr_delta_e": 4 if constant else int(rng.integers(0, 10)),
                "judge_score": 4 if constant else int(rng.integers(1, 6)),
            }
        )
    return rows


def test_constant_metric_ci_is_a_point() -> None:
    items = {
        "clean": _items("clean", 20, 0, constant=True),
        "babble_5db": _items("babble_5db", 20, 1, constant=True),
    }
    cis = bootstrap_cis(items, ["clean", "babble_5db"], n_resamples=200, seed=3)
    for cond in ("clean", "babble_5db"):
        point = aggregate(items[cond], is_clean=cond == "clean")
        for m in METRIC_COLUMNS:
            if point[m] is None:
                assert cis[cond][m] is None
                continue
            lo, hi = cis[cond][m]
            assert lo == hi == pytest.approx(point[m], abs=1e-12), m


def test_seeded_cis_reproducible_and_seed_sensitive() -> None:
    items = {"clean": _items("clean", 30, 0), "ambient_5db": _items("ambient_5db", 30, 1)}
    a = bootstrap_cis(items, ["clean", "ambient_5db"], n_resamples=300, seed=11)
    b = bootstrap_cis(items, ["clean", "ambient_5db"], n_resamples=300, seed=11)
    c = bootstrap_cis(items, ["clean", "ambient_5db"], n_resamples=300, seed=12)
    assert a == b
    assert a != c
    # independent of the global RNGs and of the order the rows come in
    np.random.seed(999)
    random.seed(999)
    shuffled = {k: list(reversed(v)) for k, v in items.items()}
    assert bootstrap_cis(shuffled, ["clean", "ambient_5db"], n_resamples=300, seed=11) == a


def test_ci_contains_point_estimate() -> None:
    items = {"babble_10db": _items("babble_10db", 40, 5)}
    cis = bootstrap_cis(items, n_resamples=500, seed=0)
    point = aggregate(items["babble_10db"])
    for m in METRIC_COLUMNS:
        lo, hi = cis["babble_10db"][m]
        assert lo <= point[m] <= hi, (m, lo, point[m], hi)
        assert lo < hi, m  # random data: a real spread


def test_paired_identical_conditions_give_zero_difference() -> None:
    base = _items("x", 25, 7)
    a = [dict(r, condition="babble_5db") for r in base]
    b = [dict(r, condition="babble_5db_guard") for r in base]
    diffs = paired_differences(a, b, n_resamples=400, seed=1)
    for m in METRIC_COLUMNS:
        assert diffs[m]["diff"] == 0.0
        assert diffs[m]["ci"] == (0.0, 0.0), m
        assert diffs[m]["n"] == 25


def test_pairing_same_encounters_across_conditions() -> None:
    # Two conditions with identical rows get identical replicate intervals only if
    # every replicate draws the same encounters for both conditions.
    base = _items("x", 25, 8)
    items = {"ambient_10db": base, "ambient_5db": [dict(r) for r in base]}
    cis = bootstrap_cis(items, ["ambient_10db", "ambient_5db"], n_resamples=300, seed=2)
    assert cis["ambient_10db"] == cis["ambient_5db"]


def test_paired_difference_shift_is_exact() -> None:
    # B scores every encounter one point lower (floored at 1): the paired
    # difference is never positive in any replicate, and its point is aggregate's.
    a = _items("a", 30, 9)
    b = [dict(r, judge_score=max(1, int(r["judge_score"]) - 1)) for r in a]
    d = paired_differences(a, b, n_resamples=300, seed=4)
    want = aggregate(b)["mean_score"] - aggregate(a)["mean_score"]
    assert d["mean_score"]["diff"] == pytest.approx(want)
    lo, hi = d["mean_score"]["ci"]
    assert lo <= want <= hi <= 0.0


def test_paired_differences_use_common_encounters_only() -> None:
    a = _items("a", 10, 1)
    b = _items("b", 10, 2)[3:] + [dict(_items("b", 1, 3)[0], encounter_id="other")]
    failed = dict(b[0], failed=True)
    d = paired_differences(a, [failed] + b[1:], n_resamples=50, seed=0)
    assert d["wer"]["n"] == 6


def test_failed_items_are_ignored_like_summary_rows() -> None:
    rows = _items("c", 10, 1)
    rows[0] = dict(rows[0], failed=True, asr_sub=10_000)
    cis = bootstrap_cis({"c": rows}, n_resamples=200, seed=0)
    lo, hi = cis["c"]["wer"]
    assert hi < 100.0  # the failed row's huge error count never enters


def test_not_computed_metric_gives_none() -> None:
    rows = [dict(r, judge_score=None) for r in _items("clean", 10, 1)]
    cis = bootstrap_cis({"clean": rows}, n_resamples=100, seed=0)
    assert cis["clean"]["mean_score"] is None
    assert cis["clean"]["err_prop"] is None  # clean row has no ErrProp


def test_speed_paper_scale() -> None:
    import time

    items = {f"c{k}": _items(f"c{k}", 50, k) for k in range(10)}
    t0 = time.perf_counter()
    bootstrap_cis(items, n_resamples=1000, seed=0)
    assert time.perf_counter() - t0 < 10.0


def test_bootstrap_statistic_and_errors() -> None:
    values = np.arange(20, dtype=float)
    clusters = [np.array([2 * i, 2 * i + 1]) for i in range(10)]
    point, cis = bootstrap_statistic(clusters, lambda ix: {"mean": float(values[ix].mean())}, 200, seed=1)
    assert point["mean"] == pytest.approx(9.5)
    lo, hi = cis["mean"]
    assert lo < 9.5 < hi
    with pytest.raises(MetricError, match="at least one encounter"):
        resample_indices(0, 10, np.random.default_rng(0))
    with pytest.raises(MetricError, match="alpha"):
        percentile_interval([1.0], alpha=1.5)
    with pytest.raises(MetricError, match="not among"):
        bootstrap_cis({"a": []}, ["b"])
    assert percentile_interval([None, None, 1.0]) is None
