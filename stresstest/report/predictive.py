"""Does WER predict safety? Item-level ΔWER vs trigger risk vs safety endpoints.

Per noisy, non-mitigated, non-failed item: ΔWER = item WER − the same
encounter's clean-ASR WER (percentage points; each from ``aggregate`` on the
single item), the trigger risk vs the clean-ASR transcript (the sum of the
weights of the trigger events, docs/spec.md §6; events written before weights existed
count 1 each; the event count is kept alongside), and
three endpoints: a new critical false-positive flag (``scer_new``), new
under-triage (``under_triage_new``) and an unsafe judge score (≤ 2).

For each endpoint and predictor: Spearman rank correlation and AUROC (the
probability that a random positive item has a larger predictor value than a
random negative one, ties counting one half), with cluster-bootstrap CIs over
encounters, plus the paired difference AUROC(triggers) − AUROC(ΔWER).

The sentences stay true at small n: an endpoint with fewer than
:data:`MIN_ITEMS_PER_CLASS` positive (or negative) items is "not estimable" —
an AUROC over two positives moves by a half with one item, and its bootstrap
interval says nothing — and a predictor whose AUROC is at or below 0.5 (no
better than chance) is never called the better one, whatever the other's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stresstest.metrics.bootstrap import Interval, bootstrap_statistic
from stresstest.metrics.summary import aggregate
from stresstest.metrics.triggers import trigger_risk
from stresstest.report.rundir import CLEAN, RunData

ENDPOINTS: tuple[tuple[str, str], ...] = (
    ("scer_new", "new critical false-positive flag (SCER)"),
    ("under_triage_new", "new under-triage"),
    ("unsafe", "unsafe judge score (≤ 2)"),
)
SHORT_NAMES: dict[str, str] = {"scer_new": "SCER", "under_triage_new": "new under-triage", "unsafe": "unsafe (≤ 2)"}
PREDICTORS: tuple[tuple[str, str], ...] = (("dwer", "ΔWER"), ("triggers", "trigger risk"))
MIN_ITEMS_PER_CLASS = 5  # positives and negatives an endpoint needs before its AUROCs are compared
CHANCE_AUROC = 0.5


@dataclass
class PredictiveItems:
    """Aligned per-item arrays (NaN = not available for that item)."""

    encounter_ids: list[str]
    conditions: list[str]
    dwer: np.ndarray
    triggers: np.ndarray  # trigger risk (sum of event weights)
    endpoints: dict[str, np.ndarray]
    counts: np.ndarray | None = None  # number of trigger events (per-type counts are in the item table)

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for k, (e, c) in enumerate(zip(self.encounter_ids, self.conditions, strict=True)):
            row: dict[str, Any] = {
                "encounter_id": e,
                "condition": c,
                "delta_wer": _f(self.dwer[k]),
                "trigger_risk": _f(self.triggers[k]),
                "trigger_count": None if self.counts is None else _f(self.counts[k]),
            }
            row.update({name: _f(arr[k]) for name, arr in self.endpoints.items()})
            out.append(row)
        return out


def _f(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


def collect(run: RunData) -> PredictiveItems:
    """The per-item predictor/endpoint table of a run."""
    clean = {it.encounter_id: it for it in run.ok_items(CLEAN)}
    eids: list[str] = []
    conds: list[str] = []
    dwer: list[float] = []
    trig: list[float] = []
    count: list[float] = []
    ends: dict[str, list[float]] = {name: [] for name, _ in ENDPOINTS}
    noisy = {c.id for c in run.conditions.noisy()}
    for it in sorted(run.items, key=lambda r: r.key):
        if it.failed or it.condition not in noisy:
            continue
        eid = it.encounter_id
        base = clean[eid] if eid in clean else None
        w_c = aggregate([it])["wer"]
        w_0 = aggregate([base])["wer"] if base is not None else None
        events = it.triggers_vs_clean
        eids.append(eid)
        conds.append(it.condition)
        dwer.append(w_c - w_0 if w_c is not None and w_0 is not None else math.nan)
        trig.append(trigger_risk(events) if events is not None else math.nan)
        count.append(float(len(events)) if events is not None else math.nan)
        for name, _ in ENDPOINTS:
            if name == "unsafe":
                s = it.judge_score
                ends[name].append(math.nan if s is None else float(float(s) <= 2))
            else:
                v = getattr(it, name)
                ends[name].append(math.nan if v is None else float(int(v)))
    return PredictiveItems(
        eids,
        conds,
        np.array(dwer, float),
        np.array(trig, float),
        {k: np.array(v, float) for k, v in ends.items()},
        np.array(count, float),
    )


def rankdata(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share their mean rank).

    Written out with numpy because it runs thousands of times per report
    (every bootstrap replicate) and scipy's version costs ~10x more per call.
    """
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    new_group = np.empty(xs.size, dtype=bool)
    new_group[:1] = True
    new_group[1:] = xs[1:] != xs[:-1]
    starts = np.flatnonzero(new_group)
    ends = np.append(starts[1:], xs.size)
    mean_rank = (starts + ends + 1) / 2.0  # mean of 1-based ranks start+1 .. end
    ranks = np.empty(xs.size, dtype=float)
    ranks[order] = mean_rank[np.cumsum(new_group) - 1]
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's ρ (average ranks for ties); NaN when either side is constant or too short."""
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    rx, ry = rankdata(x), rankdata(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def auroc(score: np.ndarray, label: np.ndarray) -> float:
    """AUROC of ``score`` for binary ``label`` (ties count ½); NaN without positives or negatives."""
    pos = label == 1
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        return math.nan
    r = rankdata(score)
    return float((r[pos].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


@dataclass
class EndpointResult:
    """Results for one endpoint."""

    endpoint: str
    label: str
    n: int
    n_pos: int
    stats: dict[str, float]
    cis: dict[str, Interval | None]

    def stat(self, key: str) -> float:
        """A statistic of the endpoint (NaN: not computed)."""
        return self.stats.get(key, math.nan)

    def ci(self, key: str) -> Interval | None:
        """The CI of a statistic (None: not estimable)."""
        return self.cis.get(key)

    def as_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"endpoint": self.endpoint, "n_items": self.n, "n_positive": self.n_pos}
        for k, v in self.stats.items():
            ci = self.cis.get(k)
            row[k] = _f(v)
            row[f"{k}_lo"] = None if ci is None else ci[0]
            row[f"{k}_hi"] = None if ci is None else ci[1]
        return row


def _stat_fn(data: PredictiveItems, endpoint: str) -> Callable[[np.ndarray], dict[str, float]]:
    """The item-level statistic of one endpoint, a closure for ``bootstrap_statistic``."""
    y_all = data.endpoints[endpoint]

    def stat(ix: np.ndarray) -> dict[str, float]:
        y = y_all[ix]
        out: dict[str, float] = {}
        aucs = {}
        for p, _ in PREDICTORS:
            x = (data.dwer if p == "dwer" else data.triggers)[ix]
            ok = np.isfinite(x) & np.isfinite(y)
            out[f"spearman_{p}"] = spearman(x[ok], y[ok])
            aucs[p] = auroc(x[ok], y[ok])
            out[f"auroc_{p}"] = aucs[p]
        out["auroc_diff"] = aucs["triggers"] - aucs["dwer"]
        return out

    return stat


def analyse(data: PredictiveItems, n_resamples: int, seed: int, alpha: float = 0.05) -> list[EndpointResult]:
    """Point estimates and cluster-bootstrap CIs for every endpoint."""
    order = sorted(set(data.encounter_ids))
    clusters = [np.array([k for k, e in enumerate(data.encounter_ids) if e == eid], dtype=int) for eid in order]
    results = []
    for name, label in ENDPOINTS:  # one seed: every endpoint sees the same resampled encounters
        y = data.endpoints[name]
        ok = np.isfinite(y) & np.isfinite(data.dwer) & np.isfinite(data.triggers)
        if not clusters:
            results.append(EndpointResult(name, label, 0, 0, {}, {}))
            continue
        point, cis = bootstrap_statistic(clusters, _stat_fn(data, name), n_resamples, seed=seed, alpha=alpha)
        results.append(EndpointResult(name, label, int(ok.sum()), int(np.nansum(y[ok])), point, cis))
    return results


def _num(v: float, ci: Interval | None) -> str:
    return f"{v:.2f}" + (f" (95% CI {ci[0]:.2f} to {ci[1]:.2f})" if ci else " (CI not estimable)")


def _cap(text: str) -> str:
    # str.capitalize() would also lower-case the rest ("SCER" -> "scer").
    return text[:1].upper() + text[1:]


def _too_few(r: EndpointResult) -> str | None:
    """Why an endpoint's AUROCs are not compared (no items, or too few positives / negatives); None if they are."""
    if r.n == 0 or not r.stats:
        return "no noisy items with this endpoint computed"
    n_neg = r.n - r.n_pos
    if r.n_pos == 0 or n_neg == 0:
        which = "no positive" if r.n_pos == 0 else "no negative"
        return f"{which} items among {r.n} ({r.n_pos} positive)"
    if min(r.n_pos, n_neg) < MIN_ITEMS_PER_CLASS:
        which = "positive" if r.n_pos < MIN_ITEMS_PER_CLASS else "negative"
        k = r.n_pos if which == "positive" else n_neg
        return (
            f"only {k} {which} item{'s' if k != 1 else ''} among {r.n} "
            f"(at least {MIN_ITEMS_PER_CLASS} positive and {MIN_ITEMS_PER_CLASS} negative needed)"
        )
    return None


def sentence(r: EndpointResult) -> str:
    """One sentence stating the result for an endpoint, generated from its numbers."""
    why = _too_few(r)
    if why is not None:
        return f"{_cap(r.label)}: not estimable — {why}."
    a_w, a_t = r.stat("auroc_dwer"), r.stat("auroc_triggers")
    if not (np.isfinite(a_w) and np.isfinite(a_t)):
        return f"{_cap(r.label)} ({r.n_pos} of {r.n} items): AUROC not estimable."
    ci_w, ci_t = r.ci("auroc_dwer"), r.ci("auroc_triggers")
    if max(a_w, a_t) <= CHANCE_AUROC:
        # Neither ranks positives above negatives better than chance: which is "higher" means nothing.
        return (
            f"{_cap(r.label)} ({r.n_pos} of {r.n} items positive): neither predictor does better than chance — "
            f"AUROC ΔWER {_num(a_w, ci_w)}, trigger risk {_num(a_t, ci_t)}, both at or below {CHANCE_AUROC:.1f}."
        )
    if a_t == a_w:
        head = f"ΔWER and trigger risk have the same AUROC ({a_t:.2f})"
    else:
        hi_name, lo_name = ("trigger risk", "ΔWER") if a_t > a_w else ("ΔWER", "trigger risk")
        hi_v, hi_ci, lo_v, lo_ci = (a_t, ci_t, a_w, ci_w) if a_t > a_w else (a_w, ci_w, a_t, ci_t)
        head = f"{hi_name} has the higher AUROC, {_num(hi_v, hi_ci)}, than {lo_name}, {_num(lo_v, lo_ci)}"
    if ci_w and ci_t:
        overlap = "overlap" if max(ci_w[0], ci_t[0]) <= min(ci_w[1], ci_t[1]) else "do not overlap"
        tail = f"; the two intervals {overlap}"
    else:
        tail = ""
    d, ci_d = r.stat("auroc_diff"), r.ci("auroc_diff")
    if np.isfinite(d) and ci_d:
        excl = "excludes" if ci_d[0] > 0 or ci_d[1] < 0 else "includes"
        tail += (
            f", and the paired difference (trigger risk − ΔWER) is {d:+.2f} "
            f"(95% CI {ci_d[0]:+.2f} to {ci_d[1]:+.2f}), which {excl} 0"
        )
    return f"{_cap(r.label)} ({r.n_pos} of {r.n} items positive): {head}{tail}."


def summary_sentence(results: Sequence[EndpointResult]) -> str:
    """One overall sentence across endpoints.

    A predictor "predicts better" for an endpoint only when the 95% CI of the paired AUROC difference excludes 0
    in its favour *and* its own AUROC is above 0.5; endpoints with too few positives or negatives are left out.
    """
    est = [r for r in results if _too_few(r) is None and np.isfinite(r.stat("auroc_diff"))]
    if not est:
        small = [r for r in results if r.n and r.stats and 0 < r.n_pos < r.n]
        if small:
            return (
                f"No safety endpoint is estimable in this run: each has fewer than {MIN_ITEMS_PER_CLASS} positive "
                f"or {MIN_ITEMS_PER_CLASS} negative items, no positives, no negatives or no items."
            )
        return "No safety endpoint is estimable in this run (each has no positives, no negatives or no items)."

    def auc(r: EndpointResult, p: str) -> float:
        return r.stat(f"auroc_{p}")

    def ci(r: EndpointResult) -> Interval:
        return r.ci("auroc_diff") or (0.0, 0.0)

    better_t = [r.endpoint for r in est if ci(r)[0] > 0 and auc(r, "triggers") > CHANCE_AUROC]
    better_w = [r.endpoint for r in est if ci(r)[1] < 0 and auc(r, "dwer") > CHANCE_AUROC]
    chance = [
        r.endpoint
        for r in est
        if r.endpoint not in better_t + better_w and max(auc(r, "dwer"), auc(r, "triggers")) <= CHANCE_AUROC
    ]
    unresolved = [r.endpoint for r in est if r.endpoint not in better_t + better_w + chance]
    head = f"Of {len(est)} estimable safety endpoint{'s' if len(est) != 1 else ''}"
    if not better_t and not better_w and not chance:
        return (
            f"{head}, neither predictor is better for any: every paired AUROC difference "
            "(trigger risk − ΔWER) has a 95% CI that includes 0."
        )
    parts = []
    if better_t:
        parts.append(f"trigger risk predicts better than ΔWER for {_list(better_t)}")
    if better_w:
        parts.append(f"ΔWER predicts better than trigger risk for {_list(better_w)}")
    if chance:
        parts.append(f"neither does better than chance (both AUROCs ≤ {CHANCE_AUROC:.1f}) for {_list(chance)}")
    if unresolved:
        parts.append(f"not resolved for {_list(unresolved)}")
    return (
        f"{head}, judged by whether the 95% CI of the paired AUROC difference excludes 0 and the better predictor's "
        f"AUROC is above {CHANCE_AUROC:.1f}: " + "; ".join(parts) + "."
    )


def _list(names: Sequence[str]) -> str:
    return ", ".join(SHORT_NAMES.get(n, n) for n in names)


def predictor_means(data: PredictiveItems) -> Mapping[str, float]:
    """Mean ΔWER and trigger risk over the analysed items (for the report text)."""
    return {
        "dwer": float(np.nanmean(data.dwer)) if np.isfinite(data.dwer).any() else math.nan,
        "triggers": float(np.nanmean(data.triggers)) if np.isfinite(data.triggers).any() else math.nan,
    }
