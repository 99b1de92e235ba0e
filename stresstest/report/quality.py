"""The report's note-quality section (docs/spec.md §8): entailment, hallucination, pairwise preference.

Every number comes from the run's item rows: per-condition means via
:func:`stresstest.metrics.summary.aggregate_quality` (what ``summary.csv`` holds; checked against it) with
encounter-cluster bootstrap CIs, and pairwise win / tie / loss with preference scores via
:func:`stresstest.metrics.note_quality.pairwise_summary`. Whether the numbers may be read as results is
the judge's *adequacy* recorded in the manifest (calibration checks; the embedded 135M demo model never
is): for an inadequate judge the section says so and shows the numbers only as a mechanics check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stresstest.metrics.bootstrap import Interval, bootstrap_cis
from stresstest.metrics.note_quality import PAIRWISE_DIMENSIONS, PairwiseStat, pairwise_summary
from stresstest.metrics.summary import QUALITY_COLUMNS, aggregate_quality, in_pairing
from stresstest.report.markup import esc, html_table, md_cell, md_table
from stresstest.report.rundir import CLEAN, RunData
from stresstest.report.tables import write_table
from stresstest.results import CalibrationCheck, ItemScore, NoteQualityInfo

QUALITY_HEADERS: dict[str, str] = {
    "completeness": "Completeness ↑",
    "conciseness": "Conciseness ↑",
    "groundedness": "Groundedness ↑",
    "halluc_lexical": "Halluc. literal ↓",
    "halluc_inference": "Halluc. inference-aware ↓",
}
EXPLANATIONS: tuple[tuple[str, str], ...] = (
    (
        "Completeness",
        "share of the gold reference's statements that the structured record entails (recall against gold).",
    ),
    (
        "Conciseness",
        "share of the record's statements that the gold reference entails; content the reference "
        "does not hold lowers it (precision against gold).",
    ),
    (
        "Groundedness",
        "share of the record's statements entailed by the item's own transcript — support in what "
        "the ASR heard, not in what was said.",
    ),
    (
        "Entailment labels",
        "entailed = 1, partially entailed = ½, not entailed = 0, not applicable left out; an "
        "item scores the mean weight (100% when every statement is not applicable), a "
        "condition the mean over its items.",
    ),
    (
        "Halluc. literal / inference-aware",
        "percent of the record's statements a strictly literal judge calls "
        "unsupported by the transcript, and the percent still unsupported when "
        "paraphrase, trade/generic drug names, abstraction of findings and "
        "sound clinical inference are accepted (with retrieved ontology lines). "
        "The gap is what a literal judge over-flags.",
    ),
    (
        "Pairwise",
        "two records of the same encounter compared on eight PDSQI-9-derived dimensions (plus "
        "'cited'), reading the human reference transcript; each pair judged twice with the positions "
        "swapped, a side wins only when both orders agree, otherwise a tie; Overall = the side that wins "
        "at least 5 of the 8. Win = the row's condition preferred over its baseline; PS = win + ½ tie "
        "(50 = no preference).",
    ),
)
SIDE_FROM_ITEM = {"win": "y", "tie": "tie", "loss": "x"}
TOLERANCE = 1e-3


@dataclass(frozen=True)
class QualityRow:
    """One condition's note-quality means (percent; None: no item judged) with CIs and judged-item counts."""

    condition: str
    values: dict[str, float | None]
    cis: dict[str, Interval | None]
    n: dict[str, int]

    def to_row(self) -> dict[str, Any]:
        """The ``note_quality`` table row: condition, then per measure its mean, CI bounds and items judged."""
        row: dict[str, Any] = {"condition": self.condition}
        for col in QUALITY_COLUMNS:
            ci = self.cis[col]
            row.update(
                {
                    col: self.values[col],
                    f"{col}_lo": ci[0] if ci else None,
                    f"{col}_hi": ci[1] if ci else None,
                    f"n_{col}": self.n[col],
                }
            )
        return row


@dataclass(frozen=True)
class PairwiseRow:
    """Win / tie / loss of ``condition`` against ``baseline`` on one dimension (a pooled label for a kind)."""

    condition: str
    baseline: str
    stat: PairwiseStat

    def to_row(self) -> dict[str, Any]:
        return {"condition": self.condition, "baseline": self.baseline, **self.stat.to_row()}


@dataclass
class QualitySection:
    """What the note-quality section shows."""

    computed: bool
    adequate: bool = False
    adequacy: str = ""
    judge_model: str = ""
    prompts: dict[str, str] = field(default_factory=dict)
    calibration: list[CalibrationCheck] = field(default_factory=list)
    rows: list[QualityRow] = field(default_factory=list)
    pairwise: list[PairwiseRow] = field(default_factory=list)
    consistency: list[dict[str, Any]] = field(default_factory=list)
    n_failures: int = 0
    problems: list[str] = field(default_factory=list)
    n_scored_unpaired: int = 0  # items with note-quality scores left out by the pairing rule (docs/spec.md §11)


def _pairs(items: Sequence[ItemScore]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for it in items:
        pw = it.pairwise
        if not in_pairing(it) or pw is None or pw.outcomes is None:
            continue
        outcomes = {d: SIDE_FROM_ITEM[s] for d, s in pw.outcomes.items()}
        out.setdefault((it.condition, pw.vs), []).append(
            {
                "encounter_id": it.encounter_id,
                "outcomes": outcomes,
                "consistent": pw.consistent,
                "identical": bool(pw.identical),
            }
        )
    return out


def pairwise_rows(
    items: Sequence[ItemScore], n_resamples: int, seed: int
) -> tuple[list[PairwiseRow], list[dict[str, Any]]]:
    """Win/tie/loss/PS rows per (condition, baseline, dimension), pooled rows per baseline kind, and
    position-consistency rows."""
    groups = _pairs(items)
    # Pooled rows ("all noisy" vs clean, "all guard" vs unmitigated) when a kind has several conditions;
    # pairwise_summary resamples all pairs of one encounter together.
    pooled: dict[tuple[str, str], list[dict[str, Any]]] = {}
    n_conds: Counter[tuple[str, str]] = Counter()
    for (_cond, base), ps in groups.items():
        kind = ("all noisy", "clean") if base == CLEAN else ("all guard", "unmitigated")
        pooled.setdefault(kind, []).extend(ps)
        n_conds[kind] += 1
    rows: list[PairwiseRow] = []
    cons: list[dict[str, Any]] = []
    labelled = [(c, b, ps) for (c, b), ps in sorted(groups.items())]
    labelled += [(k, b, ps) for (k, b), ps in sorted(pooled.items()) if n_conds[(k, b)] > 1]
    for cond, base, ps in labelled:
        rows += [PairwiseRow(cond, base, s) for s in pairwise_summary(ps, n_resamples=n_resamples, seed=seed)]
        judged = [p for p in ps if not p["identical"] and isinstance(p["consistent"], int)]
        n_dim = len(PAIRWISE_DIMENSIONS)
        cons.append(
            {
                "condition": cond,
                "baseline": base,
                "pairs": len(ps),
                "identical_pairs": len(ps) - len(judged),
                "position_consistent_pct": (
                    100.0 * sum(p["consistent"] for p in judged) / (n_dim * len(judged)) if judged else None
                ),
            }
        )
    return rows, cons


def quality_section(run: RunData, n_resamples: int, seed: int) -> QualitySection:
    """Compute the section from a run directory's items, manifest and summary."""
    man = run.manifest.note_quality
    has_values = any(getattr(it, c) is not None for it in run.items for c in QUALITY_COLUMNS) or any(
        it.pairwise is not None for it in run.items
    )
    if man is None and not has_values:
        return QualitySection(computed=False)
    man = man if man is not None else NoteQualityInfo()
    by_cond = run.items_by_condition()
    names = [c.id for c in run.conditions]
    cis = bootstrap_cis(
        by_cond,
        names,
        n_resamples=n_resamples,
        seed=seed,
        clean_condition=CLEAN,
        metrics=QUALITY_COLUMNS,
        aggregate_fn=lambda rows, _clean: aggregate_quality(rows),
    )
    rows, problems = [], []
    for name in names:
        its = by_cond[name]
        vals = aggregate_quality(its)
        for col in QUALITY_COLUMNS:
            cell = run.summary_cell(name, col)
            if cell is not None and col in run.summary_columns:
                want = float(cell) if cell != "" else None
                got = vals[col]
                if (want is None) != (got is None) or (
                    want is not None and got is not None and abs(want - got) > TOLERANCE
                ):
                    problems.append(f"{name}/{col}: summary.csv has {cell!r}, items give {got}")
        rows.append(
            QualityRow(
                name,
                dict(vals),
                {col: cis[name][col] for col in QUALITY_COLUMNS},
                {col: sum(1 for it in its if getattr(it, col) is not None) for col in QUALITY_COLUMNS},
            )
        )
    pw, cons = pairwise_rows(run.items, n_resamples, seed)
    unpaired = sum(
        1
        for it in run.items
        if not it.failed and not in_pairing(it) and any(getattr(it, c) is not None for c in QUALITY_COLUMNS)
    )
    return QualitySection(
        computed=True,
        adequate=bool(man.adequate),
        adequacy=str(man.adequacy or "the run did not record a judge calibration"),
        judge_model=str(man.judge_model or "–"),
        prompts={str(k): str(v) for k, v in man.prompts.items()},
        calibration=list(man.calibration.checks) if man.calibration is not None else [],
        rows=rows,
        pairwise=pw,
        consistency=cons,
        n_failures=int(man.n_failures or 0),
        problems=problems,
        n_scored_unpaired=unpaired,
    )


def table_records(sec: QualitySection) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(note_quality rows, pairwise rows) for the CSV/Parquet tables."""
    return [r.to_row() for r in sec.rows], [r.to_row() for r in sec.pairwise]


# ------------------------------------------------------------------ rendering


def _f(v: Any, nd: int = 1) -> str:
    return "–" if not isinstance(v, (int, float)) else f"{v:.{nd}f}"


def _vci(v: float | None, lo: float | None, hi: float | None) -> str:
    if not isinstance(v, (int, float)):
        return "–"
    return f"{v:.1f}" + (
        f" [{lo:.1f}, {hi:.1f}]" if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) else ""
    )


def _vci_ci(v: float | None, ci: Interval | None) -> str:
    return _vci(v, *(ci if ci else (None, None)))


def _banner(sec: QualitySection) -> str:
    if sec.adequate:
        text = f"Judge: {sec.judge_model} — {sec.adequacy}."
    else:
        text = (
            f"Not interpretable as note quality: {sec.adequacy}. The numbers below only show that the "
            "mechanics ran (prompts rendered, outputs parsed, orders swapped, aggregation); do not read them as "
            "measurements."
        )
    if sec.n_scored_unpaired:
        text += (
            f" {sec.n_scored_unpaired} judged item(s) belong to encounters the pairing rule (docs/spec.md §11) "
            "dropped from every row, so the rows leave them out; their scores are in items.jsonl and quality/."
        )
    return text


def _measure_body(sec: QualitySection) -> tuple[list[str], list[list[str]]]:
    head = ["Condition"] + [f"{QUALITY_HEADERS[c]} (%)" for c in QUALITY_COLUMNS] + ["n judged"]
    body = [
        [r.condition]
        + [_vci_ci(r.values[c], r.cis[c]) for c in QUALITY_COLUMNS]
        + [" / ".join(str(r.n[c]) for c in QUALITY_COLUMNS)]
        for r in sec.rows
    ]
    return head, body


def _pairwise_body(sec: QualitySection) -> tuple[list[str], list[list[str]]]:
    head = ["Condition", "vs", "Dimension", "n", "Win %", "Tie %", "Loss %", "PS [95% CI]"]
    body = [
        [
            r.condition,
            r.baseline,
            r.stat.dimension,
            str(r.stat.n),
            _f(r.stat.win),
            _f(r.stat.tie),
            _f(r.stat.loss),
            _vci(r.stat.ps, r.stat.ps_lo, r.stat.ps_hi),
        ]
        for r in sec.pairwise
    ]
    return head, body


def _calibration_body(sec: QualitySection) -> tuple[list[str], list[list[str]]]:
    return ["Check", "Expected", "Got", "Passed"], [
        [str(c.check), ", ".join(map(str, c.expected)), str(c.got), "yes" if c.passed else "NO"]
        for c in sec.calibration
    ]


def quality_html(sec: QualitySection) -> str:
    """The HTML section."""
    if not sec.computed:
        return (
            "<h2>Note quality (docs/spec.md §8)</h2><p class='sub'>Not computed in this run: the entailment, "
            "hallucination and pairwise judges need an LLM (<code>judge.note_quality</code> with an LLM "
            "structure backend); the five summary.csv columns are empty.</p>"
        )
    parts = [
        "<h2>Note quality (docs/spec.md §8)</h2>",
        f"<div class='{'finding' if sec.adequate else 'warn'}'><b>{esc(_banner(sec))}</b></div>",
        "<ul class='sub'>" + "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in EXPLANATIONS) + "</ul>",
    ]
    inner = []
    head, body = _measure_body(sec)
    inner.append(
        "<h3>Entailment and hallucination per condition (mean of items, 95% cluster-bootstrap CI)</h3>"
        + html_table(head, body)
    )
    if sec.pairwise:
        head, body = _pairwise_body(sec)
        inner.append(
            "<h3>Pairwise preference (both orders; ties when the orders disagree)</h3>" + html_table(head, body)
        )
        inner.append(
            html_table(
                ["Condition", "vs", "pairs", "identical pairs", "position-consistent %"],
                [
                    [
                        c["condition"],
                        c["baseline"],
                        str(c["pairs"]),
                        str(c["identical_pairs"]),
                        _f(c["position_consistent_pct"]),
                    ]
                    for c in sec.consistency
                ],
            )
        )
    if sec.adequate:
        parts += inner
    else:
        parts.append("<details><summary>Mechanics only — not results</summary>" + "".join(inner) + "</details>")
    if sec.calibration:
        head, body = _calibration_body(sec)
        parts.append("<h3>Judge calibration checks</h3>" + html_table(head, body, "main left"))
    facts = [
        f"judge model {sec.judge_model}",
        f"{sec.n_failures} failed judge call(s) recorded (items left out of that measure)",
    ] + [f"{k} sha256 {v[:12]}…" for k, v in sec.prompts.items()]
    parts.append("<p class='sub'>" + esc("; ".join(facts)) + "</p>")
    if sec.problems:
        parts.append("<div class='warn'>Disagreement with summary.csv: " + esc("; ".join(sec.problems)) + "</div>")
    return "\n".join(parts)


def _md_table(head: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    return [*md_table([md_cell(h) for h in head], [[md_cell(c) for c in row] for row in body]), ""]


def quality_markdown(sec: QualitySection) -> list[str]:
    """The Markdown section, as lines."""
    out = ["## Note quality (docs/spec.md §8)", ""]
    if not sec.computed:
        return out + [
            "Not computed in this run: the entailment, hallucination and pairwise judges need an LLM "
            "(`judge.note_quality` with an LLM structure backend); the five summary.csv columns are "
            "empty.",
            "",
        ]
    out += [f"> **{_banner(sec)}**", ""] + [f"- **{k}**: {v}" for k, v in EXPLANATIONS] + [""]
    if not sec.adequate:
        out += ["### Mechanics only — not results", ""]
    head, body = _measure_body(sec)
    out += ["Entailment and hallucination per condition (mean of items, 95% cluster-bootstrap CI):", ""]
    out += _md_table(head, body)
    if sec.pairwise:
        head, body = _pairwise_body(sec)
        out += ["Pairwise preference (both orders; ties when the orders disagree):", ""] + _md_table(head, body)
        out += _md_table(
            ["Condition", "vs", "pairs", "identical pairs", "position-consistent %"],
            [
                [
                    c["condition"],
                    c["baseline"],
                    str(c["pairs"]),
                    str(c["identical_pairs"]),
                    _f(c["position_consistent_pct"]),
                ]
                for c in sec.consistency
            ],
        )
    if sec.calibration:
        head, body = _calibration_body(sec)
        out += ["### Judge calibration checks", ""] + _md_table(head, body)
    out += [
        f"Judge model {sec.judge_model}; {sec.n_failures} failed judge call(s) recorded; prompts: "
        + ", ".join(f"{k} `{v[:12]}`" for k, v in sec.prompts.items()),
        "",
    ]
    if sec.problems:
        out += ["> **Disagreement with summary.csv:** " + "; ".join(sec.problems), ""]
    return out


def write_quality_tables(sec: QualitySection, table_dir: Path) -> list[Path]:
    """``note_quality`` and ``pairwise`` CSV/Parquet tables (only when computed)."""
    if not sec.computed:
        return []
    rows, pairwise = table_records(sec)
    paths = write_table(table_dir / "note_quality", rows)
    if pairwise:
        paths += write_table(table_dir / "pairwise", pairwise)
    return paths
