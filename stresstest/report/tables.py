"""Table 2 (results with CIs), trigger rates, per-item table and their CSV/Parquet files.

Every rate shown comes from :func:`stresstest.metrics.summary.aggregate` on the
run's non-failed item rows (exactly what ``summary.csv`` holds) and its CI from
the paired encounter bootstrap, which also calls ``aggregate``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from stresstest.cache import atomic_write_bytes, atomic_write_text
from stresstest.grid import CHAIN, Condition
from stresstest.metrics.bootstrap import Interval, percentile_interval, resample_indices
from stresstest.metrics.summary import HIGHER_IS_BETTER, METRIC_COLUMNS, aggregate, trigger_rate
from stresstest.report.rundir import CLEAN, RunData
from stresstest.results import TRIGGER_TYPES as TRIGGER_TYPES  # re-exported
from stresstest.results import ItemScore, RunManifest

TRIGGER_LABELS: dict[str, str] = {
    "negation_flip": "Negation loss / flip",
    "number_unit_conflict": "Critical number / unit conflict",
    "temporal_distortion": "Temporal distortion",
    "nonspeech_pollution": "Non-speech pollution",
    "entity_substitution": "Clinical entity substitution",
    "clinical_omission": "Clinical omission",
}

# Column header: (name as in the paper, unit line). Arrows come from HIGHER_IS_BETTER.
METRIC_HEADERS: dict[str, tuple[str, str]] = {
    "wer": ("WER", "%"),
    "ins_rate": ("InsRate", "%"),
    "neg_err": ("NegErr", "%"),
    "err_prop": ("ErrProp", "new err / 100 ΔASR errs"),
    "triage_match": ("TriageMatch", "%"),
    "scer": ("SCER", "%"),
    "under_triage": ("UnderTriage", "%"),
    "mean_score": ("Mean Score", "1–5 scale"),
    "unsafe": ("Unsafe", "%"),
}
FAMILY_HEADINGS: dict[str, str] = {
    "babble": "Non-Stationary Semantic Interference",
    "ambient": "Stationary Ambient Interference",
    "chain": "Room, channel and level (chains of transforms)",
}
MITIGATION_HEADING = "Mitigation Study (evidence-grounded guard)"
DASH = "–"
# summary.csv is written with 4 decimals; a report value that differs from it
# by more than this is a real disagreement, not rounding.
SUMMARY_TOLERANCE = 1e-3


def arrow(metric: str) -> str:
    return "↑" if HIGHER_IS_BETTER[metric] else "↓"


def fmt(v: float | None, nd: int = 2) -> str:
    """A value with ``nd`` decimals, or the dash for "not computed"."""
    return DASH if v is None else f"{v:.{nd}f}"


def fmt_ci(ci: Interval | None, nd: int = 2) -> str:
    return "" if ci is None else f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"


def _snr_label(snr: Any) -> str:
    return f"{float(snr):g} dB" if snr is not None else ""


def noise_source(manifest: RunManifest, family: str) -> str:
    """A short description of a family's noise source from the manifest, if it says one."""
    if family not in manifest.noise:
        return ""
    spec = manifest.noise[family]
    if isinstance(spec, str):
        return spec
    if spec.kind == "builtin":
        # Corpus subsets may sit in a builtin spec as defaults; they do not apply, so they are not shown.
        lo, hi = spec.n_talkers_min, spec.n_talkers_max
        if family == "ambient" and spec.ambient_recipes:
            return "built-in generators: " + ", ".join(spec.ambient_recipes)
        if family == "babble" and lo is not None and hi is not None:
            return f"built-in synthetic talkers ({lo}–{hi} voices)"
        return "built-in generator"
    parts = [v for v in (spec.corpus, spec.source, spec.kind, spec.generator) if isinstance(v, str)]
    if spec.subsets:
        parts.append(", ".join(spec.subsets))
    return " · ".join(dict.fromkeys(parts))


@dataclass
class Row:
    """One line of Table 2: a heading (``condition`` None) or a condition row."""

    label: str
    condition: str | None = None
    family: str = ""
    snr_db: float | None = None
    mitigated: bool = False
    n: int = 0
    values: dict[str, float | None] = field(default_factory=dict)
    cis: dict[str, Interval | None] = field(default_factory=dict)

    def value(self, metric: str) -> float | None:
        """The row's value of ``metric`` (None: not computed)."""
        return self.values.get(metric)

    def ci(self, metric: str) -> Interval | None:
        """The CI of ``metric`` (None: not computed or not estimable)."""
        return self.cis.get(metric)


def table2_rows(run: RunData, cis: Mapping[str, Mapping[str, Interval | None]]) -> list[Row]:
    """Rows of Table 2 in the paper's order: reference, babble, ambient, other families, mitigation."""
    by_fam: dict[str, list[Condition]] = {}
    mitigated: list[Condition] = []
    clean: list[Condition] = []
    for c in run.conditions:
        if c.is_clean:
            clean.append(c)
        elif c.mitigated:
            mitigated.append(c)
        else:
            by_fam.setdefault(c.family, []).append(c)

    def snr_key(c: Condition) -> float:
        return -float(c.snr_db) if c.snr_db is not None else 0.0

    def make(c: Condition, label: str) -> Row:
        name = c.id
        its = run.ok_items(name)
        return Row(
            label=label,
            condition=name,
            family=c.family,
            snr_db=c.snr_db,
            mitigated=c.mitigated,
            n=len(its),
            values=aggregate(its, is_clean=name == CLEAN),
            cis=dict(cis.get(name, {})),
        )

    rows = [make(c, "Reference (clean-ASR)" if c.is_clean else c.id) for c in clean]
    fam_order = (
        [f for f in ("babble", "ambient") if f in by_fam]
        + sorted(f for f in by_fam if f not in FAMILY_HEADINGS)
        + [f for f in (CHAIN,) if f in by_fam]
    )
    for fam in fam_order:
        src = noise_source(run.manifest, fam)
        head = FAMILY_HEADINGS.get(fam, f"{fam.capitalize()} interference")
        rows.append(Row(label=f"{head} ({fam}{' — ' + src if src else ''})", family=fam))
        rows += [make(c, _snr_label(c.snr_db) or c.id) for c in sorted(by_fam[fam], key=snr_key)]
    if mitigated:
        rows.append(Row(label=MITIGATION_HEADING))
        fam_rank = {"babble": 0, "ambient": 1}
        for c in sorted(mitigated, key=lambda c: (fam_rank.get(c.family, 2), snr_key(c), c.id)):
            rows.append(make(c, f"{c.family.capitalize()} {_snr_label(c.snr_db)} + guard".strip()))
    return rows


def check_against_summary(run: RunData, rows: Sequence[Row]) -> list[str]:
    """Disagreements between the report's numbers and ``summary.csv`` (empty when they agree)."""
    if run.summary is None:
        return ["summary.csv is missing; numbers were computed from items.jsonl only"]
    problems: list[str] = []
    for r in rows:
        if r.condition is None:
            continue
        if r.condition not in run.summary:
            problems.append(f"summary.csv has no row for condition {r.condition!r}")
            continue
        n_cell = run.summary_cell(r.condition, "n") or ""
        if n_cell.strip() and int(float(n_cell)) != r.n:
            problems.append(f"{r.condition}: n is {r.n} in items.jsonl but {n_cell} in summary.csv")
        for m in METRIC_COLUMNS:
            cell = (run.summary_cell(r.condition, m) or "").strip()
            mine = r.value(m)
            theirs = float(cell) if cell else None
            if (mine is None) != (theirs is None) or (
                mine is not None and theirs is not None and abs(mine - theirs) > SUMMARY_TOLERANCE
            ):
                problems.append(f"{r.condition}.{m}: {fmt(mine, 4)} from items.jsonl, {cell or 'empty'} in summary.csv")
    return problems


def _has_trigger_counts(its: Sequence[ItemScore]) -> bool:
    return any(it.trigger_counts is not None for it in its)


def trigger_rates(
    run: RunData, n_resamples: int, seed: int, alpha: float = 0.05
) -> dict[str, dict[str, tuple[float | None, Interval | None]]]:
    """Per condition and trigger type: rate and paired encounter-bootstrap CI.

    Trigger rates are not docs/spec.md §6 metrics, so ``aggregate`` does not produce
    them; they are checked against the ``trig_*`` columns of summary.csv instead.
    Every condition of the run has every type: ``(None, None)`` when not computed.
    """
    by_cond = run.items_by_condition()
    eids = sorted({it.encounter_id for its in by_cond.values() for it in its})
    out: dict[str, dict[str, tuple[float | None, Interval | None]]] = {}
    if not eids:
        return {cond: dict.fromkeys(TRIGGER_TYPES, (None, None)) for cond in by_cond}
    # Same generator and encounter order as bootstrap_cis: the same resampled encounters as Table 2.
    idx = resample_indices(len(eids), n_resamples, np.random.default_rng(seed))
    pos = {e: k for k, e in enumerate(eids)}
    for cond, its in by_cond.items():
        out[cond] = {}
        if not _has_trigger_counts(its):
            out[cond] = dict.fromkeys(TRIGGER_TYPES, (None, None))
            continue
        hit = np.full(len(eids), np.nan)
        for it in its:
            if it.trigger_counts is not None:
                hit[pos[it.encounter_id]] = 0.0
        for t in TRIGGER_TYPES:
            h = hit.copy()
            for it in its:
                if it.trigger_counts is not None and it.trigger_counts.count(t) > 0:
                    h[pos[it.encounter_id]] = 1.0
            sample = h[idx]
            valid = np.isfinite(sample)
            with np.errstate(invalid="ignore", divide="ignore"):
                reps = 100.0 * np.nansum(sample, axis=1) / valid.sum(axis=1)
            out[cond][t] = (trigger_rate(its, t), percentile_interval(list(reps), alpha))
    return out


def check_trigger_rates(run: RunData, rates: Mapping[str, Mapping[str, tuple[float | None, Any]]]) -> list[str]:
    """Disagreements between the report's trigger rates and the ``trig_*`` columns of summary.csv."""
    problems: list[str] = []
    if run.summary is None:
        return problems
    for cond, per in rates.items():
        for t, (v, _) in per.items():
            cell = (run.summary_cell(cond, f"trig_{t}") or "").strip()
            if f"trig_{t}" not in run.summary_columns:
                continue
            theirs = float(cell) if cell else None
            if (v is None) != (theirs is None) or (
                v is not None and theirs is not None and abs(v - theirs) > SUMMARY_TOLERANCE
            ):
                problems.append(f"{cond}.trig_{t}: {fmt(v, 4)} from items.jsonl, {cell or 'empty'} in summary.csv")
    return problems


def table2_records(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Flat machine-readable Table 2 (one dict per condition, value/lo/hi per metric)."""
    out = []
    for r in rows:
        if r.condition is None:
            continue
        rec: dict[str, Any] = {
            "condition": r.condition,
            "label": r.label,
            "family": r.family,
            "snr_db": None if r.snr_db is None else float(r.snr_db),
            "mitigated": r.mitigated,
            "n": r.n,
        }
        for m in METRIC_COLUMNS:
            ci = r.ci(m)
            rec[m] = r.value(m)
            rec[f"{m}_lo"] = None if ci is None else ci[0]
            rec[f"{m}_hi"] = None if ci is None else ci[1]
        out.append(rec)
    return out


def write_table(path_stem: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> list[Path]:
    """Write ``rows`` as ``<stem>.csv`` and ``<stem>.parquet``; returns both paths.

    Columns are typed once here (numbers as float64, everything else as
    string) so pandas/DuckDB see one stable type per column.
    """
    cols = list(columns) if columns is not None else list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow(["" if r.get(c) is None else r.get(c) for c in cols])
    csv_path = path_stem.with_suffix(".csv")
    atomic_write_text(csv_path, buf.getvalue())
    arrays = {}
    for c in cols:
        vals = [r.get(c) for r in rows]
        present = [v for v in vals if v is not None]
        if present and all(isinstance(v, bool) for v in present):
            arrays[c] = pa.array(vals, type=pa.bool_())
        elif present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
            arrays[c] = pa.array([None if v is None else float(v) for v in vals], type=pa.float64())
        else:
            arrays[c] = pa.array([None if v is None else str(v) for v in vals], type=pa.string())
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(arrays) if cols else pa.table({}), sink)
    pq_path = path_stem.with_suffix(".parquet")
    atomic_write_bytes(pq_path, sink.getvalue().to_pybytes())
    return [csv_path, pq_path]
