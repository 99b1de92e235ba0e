"""Paired non-parametric cluster bootstrap over encounters (docs/spec.md §8).

The unit of resampling is the *encounter*: one replicate draws M encounter ids
with replacement and every condition (and, for :func:`paired_differences`,
both runs) is re-aggregated on that SAME multiset of encounters. This keeps
the within-encounter pairing of the design, so a difference between two
conditions is not inflated by case-mix noise.

Every replicate value comes from :func:`stresstest.metrics.summary.aggregate`,
the one aggregation of the project; this module only decides *which* item rows
each replicate sees. Intervals are percentile intervals of the replicate
values. All randomness comes from a seeded :class:`numpy.random.Generator`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from stresstest.errors import MetricError
from stresstest.metrics.summary import METRIC_COLUMNS, ItemLike, aggregate, as_items
from stresstest.results import ItemScore

Item = ItemScore
Interval = tuple[float, float]

# A replicate where a metric is undefined (e.g. no judged item drawn) is left
# out of that metric's interval; below this share of defined replicates the
# interval is reported as not estimable instead of being built from a few.
MIN_DEFINED_SHARE = 0.5


def resample_indices(n_units: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``n_resamples`` bootstrap samples of ``n_units`` units (one row per replicate)."""
    if n_units <= 0:
        raise MetricError(f"bootstrap: expected at least one encounter to resample, got {n_units}")
    if n_resamples <= 0:
        raise MetricError(f"bootstrap: expected n_resamples >= 1, got {n_resamples}")
    return rng.integers(0, n_units, size=(n_resamples, n_units))


def percentile_interval(values: Sequence[float | None] | np.ndarray, alpha: float = 0.05) -> Interval | None:
    """Percentile interval of replicate values; ``None`` when too few replicates are defined.

    Args:
        values: one value per replicate; ``None``/NaN marks an undefined replicate.
        alpha: 1 - coverage (0.05 gives a 95% interval).
    """
    if not 0.0 < alpha < 1.0:
        raise MetricError(f"bootstrap: expected 0 < alpha < 1, got {alpha}")
    arr = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    finite = arr[np.isfinite(arr)]
    if arr.size == 0 or finite.size < MIN_DEFINED_SHARE * arr.size:
        return None
    lo, hi = np.quantile(finite, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


def _encounter_table(
    items_by_condition: Mapping[str, Sequence[ItemLike]], conditions: Sequence[str]
) -> tuple[list[str], dict[str, list[Item | None]]]:
    """Align each condition's items on one sorted list of encounter ids.

    A condition without a (non-failed) row for an encounter gets ``None`` there,
    so a resampled encounter simply contributes nothing to that condition —
    the same rows :func:`aggregate` sees for the point estimate.
    """
    eids: set[str] = set()
    table: dict[str, dict[str, Item]] = {}
    for cond in conditions:
        if cond not in items_by_condition:
            raise MetricError(
                f"bootstrap: condition {cond!r} requested but not among the item groups {sorted(items_by_condition)}"
            )
        rows: dict[str, Item] = {}
        for it in as_items(items_by_condition[cond]):
            if it.failed:
                continue
            eid = it.encounter_id
            if eid in rows:
                raise MetricError(f"bootstrap: encounter {eid!r} appears twice in condition {cond!r}")
            rows[eid] = it
        table[cond] = rows
        eids.update(rows)
    order = sorted(eids)  # sorted so the result does not depend on input row order
    return order, {c: [table[c].get(e) for e in order] for c in conditions}


def _take(aligned: list[Item | None], idx: np.ndarray) -> list[Item]:
    return [row for row in (aligned[i] for i in idx) if row is not None]


def bootstrap_cis(
    items_by_condition: Mapping[str, Sequence[ItemLike]],
    conditions: Sequence[str] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    *,
    clean_condition: str = "clean",
    metrics: Sequence[str] = METRIC_COLUMNS,
    aggregate_fn: Callable[[Sequence[Item], bool], Mapping[str, float | None]] | None = None,
) -> dict[str, dict[str, Interval | None]]:
    """Paired cluster-bootstrap percentile CIs for every docs/spec.md §6 metric of every condition.

    Args:
        items_by_condition: ``{condition: item rows}``; failed rows are ignored
            (as in :func:`~stresstest.metrics.summary.summary_rows`).
        conditions: which conditions to resample (default: all keys, sorted).
        n_resamples: bootstrap replicates.
        seed: seed of the :class:`numpy.random.Generator`.
        alpha: 1 - coverage.
        clean_condition: the clean-ASR reference condition (aggregated with
            ``is_clean=True``, hence no ErrProp).
        metrics: which metrics to report (default the docs/spec.md §6 ones).
        aggregate_fn: ``(rows, is_clean) -> {metric: value}`` (default
            :func:`~stresstest.metrics.summary.aggregate`); e.g. the note-quality means.

    Returns:
        ``{condition: {metric: (lo, hi) or None}}`` for every metric in
        :data:`~stresstest.metrics.summary.METRIC_COLUMNS`; ``None`` where the
        metric is not computed or not estimable.
    """
    conds = list(conditions) if conditions is not None else sorted(items_by_condition)
    agg_fn = aggregate_fn or (lambda rows, clean: aggregate(rows, is_clean=clean))
    out: dict[str, dict[str, Interval | None]] = {c: dict.fromkeys(metrics) for c in conds}
    eids, aligned = _encounter_table(items_by_condition, conds)
    if not eids:
        return out
    idx = resample_indices(len(eids), n_resamples, np.random.default_rng(seed))
    reps: dict[str, dict[str, list[float | None]]] = {c: {m: [] for m in metrics} for c in conds}
    for r in range(n_resamples):
        for c in conds:  # the same idx[r] for every condition: that is the pairing
            agg = agg_fn(_take(aligned[c], idx[r]), c == clean_condition)
            for m in metrics:
                reps[c][m].append(agg[m])
    for c in conds:
        point = agg_fn([row for row in aligned[c] if row is not None], c == clean_condition)
        for m in metrics:
            out[c][m] = None if point[m] is None else percentile_interval(reps[c][m], alpha)
    return out


def paired_differences(
    items_a: Sequence[ItemLike],
    items_b: Sequence[ItemLike],
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    *,
    is_clean_a: bool = False,
    is_clean_b: bool = False,
    rng_indices: np.ndarray | None = None,
    encounter_ids: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Difference B − A of every metric on the encounters both sides have, with a paired CI.

    Only encounters with a non-failed row on *both* sides are used, so A and B
    are compared on exactly the same dialogues, and each replicate resamples
    those encounters once for both sides.

    Args:
        items_a: rows of side A (one condition of one run).
        items_b: rows of side B (another condition, or the same condition of another run).
        n_resamples: bootstrap replicates.
        seed: generator seed (ignored when ``rng_indices`` is given).
        alpha: 1 - coverage.
        is_clean_a: aggregate A as the clean-ASR reference row.
        is_clean_b: aggregate B as the clean-ASR reference row.
        rng_indices: pre-drawn replicate indices into ``encounter_ids`` — lets a
            caller use one set of resampled encounters for several comparisons.
        encounter_ids: the sorted common encounter ids ``rng_indices`` refers to.

    Returns:
        ``{metric: {"a": value, "b": value, "diff": b - a, "ci": (lo, hi) or None,
        "n": common encounters}}``; values are ``None`` where not computed.
    """
    rows_a = {it.encounter_id: it for it in as_items(items_a) if not it.failed}
    rows_b = {it.encounter_id: it for it in as_items(items_b) if not it.failed}
    common = sorted(set(rows_a) & set(rows_b))
    if encounter_ids is not None:
        if list(encounter_ids) != common:
            raise MetricError(
                "paired_differences: the given encounter_ids differ from the encounters common to A and B "
                f"({len(encounter_ids)} given, {len(common)} common)"
            )
    out: dict[str, dict[str, Any]] = {}
    if not common:
        return {m: {"a": None, "b": None, "diff": None, "ci": None, "n": 0} for m in METRIC_COLUMNS}
    a_list = [rows_a[e] for e in common]
    b_list = [rows_b[e] for e in common]
    pa = aggregate(a_list, is_clean=is_clean_a)
    pb = aggregate(b_list, is_clean=is_clean_b)
    if rng_indices is None:
        rng_indices = resample_indices(len(common), n_resamples, np.random.default_rng(seed))
    reps: dict[str, list[float | None]] = {m: [] for m in METRIC_COLUMNS}
    for idx in rng_indices:
        ra = aggregate([a_list[i] for i in idx], is_clean=is_clean_a)
        rb = aggregate([b_list[i] for i in idx], is_clean=is_clean_b)
        for m in METRIC_COLUMNS:
            va, vb = ra[m], rb[m]
            reps[m].append(None if va is None or vb is None else vb - va)
    for m in METRIC_COLUMNS:
        a, b = pa[m], pb[m]
        diff = None if a is None or b is None else b - a
        out[m] = {
            "a": a,
            "b": b,
            "diff": diff,
            "n": len(common),
            "ci": None if diff is None else percentile_interval(reps[m], alpha),
        }
    return out


def bootstrap_statistic(
    clusters: Sequence[np.ndarray],
    statistic: Callable[[np.ndarray], Mapping[str, float]],
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[dict[str, float], dict[str, Interval | None]]:
    """Cluster bootstrap of an arbitrary item-level statistic.

    Used for statistics that are not rates of one condition (rank
    correlations, AUROC across items): each cluster (encounter) owns a set of
    row indices, a replicate concatenates the rows of the resampled clusters.

    Args:
        clusters: for each encounter, the integer row indices it owns.
        statistic: maps an index array to ``{name: value}`` (NaN = undefined).
        n_resamples: bootstrap replicates.
        seed: generator seed.
        alpha: 1 - coverage.

    Returns:
        (point estimates on all rows, ``{name: (lo, hi) or None}``).
    """
    all_idx = np.concatenate(list(clusters)) if clusters else np.zeros(0, dtype=int)
    point = dict(statistic(all_idx))
    idx = resample_indices(len(clusters), n_resamples, np.random.default_rng(seed))
    reps: dict[str, list[float]] = {k: [] for k in point}
    for row in idx:
        vals = statistic(np.concatenate([clusters[i] for i in row]))
        for k in point:
            reps[k].append(float(vals.get(k, np.nan)))
    cis = {k: (percentile_interval(reps[k], alpha) if np.isfinite(point[k]) else None) for k in point}
    return point, cis
