"""The report's "error rates a clinician reads" section: clinical-term WER and WER by speaker.

Every number comes from the run's item rows through
:func:`stresstest.metrics.summary.aggregate_error_rates` (what ``summary.csv`` holds; checked against
it), with the paired encounter-cluster bootstrap CIs every other rate of the report has. One figure
shows, per condition, WER next to clinical-term WER and the clinician / patient split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stresstest.metrics.bootstrap import Interval, bootstrap_cis
from stresstest.metrics.summary import ERROR_RATE_COLUMNS, ItemLike, aggregate, aggregate_error_rates
from stresstest.report.markup import esc, html_table, md_table
from stresstest.report.rundir import CLEAN, RunData

#: Columns of the section: WER (for comparison) then the split ones.
COLUMNS: tuple[str, ...] = ("wer", *ERROR_RATE_COLUMNS)
HEADERS: dict[str, str] = {
    "wer": "WER",
    "clinical_wer": "Clinical-term WER",
    "wer_clinician": "WER clinician",
    "wer_patient": "WER patient",
    "clinical_wer_clinician": "Clin. WER clinician",
    "clinical_wer_patient": "Clin. WER patient",
}
EXPLANATION = (
    "Read off the same word alignment as WER. Clinical-term WER: substituted or deleted reference words "
    "inside a clinical term (the project's lexicon, drug names and the medwer term list behind its overlay) "
    "over all such words — insertions are not "
    "counted, no term owns them. Speaker split: a reference word belongs to its turn's speaker (doctor = "
    "clinician); an inserted word belongs to the reference word it follows, so what the ASR writes in the "
    "pause after a turn counts against that turn's speaker. Other speakers enter neither split. All "
    "micro-averaged over words like WER; 95% paired cluster-bootstrap CIs over encounters."
)
TOLERANCE = 1e-3


@dataclass(frozen=True)
class ErrorRateRow:
    """One condition's rates (percent; None: no reference word of that kind) with their CIs."""

    condition: str
    n: int
    values: dict[str, float | None]
    cis: dict[str, Interval | None]

    def to_row(self) -> dict[str, Any]:
        """The ``error_rates`` table row: condition, n, then each column with its CI bounds."""
        row: dict[str, Any] = {"condition": self.condition, "n": self.n}
        for col in COLUMNS:
            ci = self.cis[col]
            row.update({col: self.values[col], f"{col}_lo": ci[0] if ci else None, f"{col}_hi": ci[1] if ci else None})
        return row


@dataclass
class ErrorRateSection:
    """What the section shows."""

    computed: bool
    rows: list[ErrorRateRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _values(rows: Sequence[ItemLike], is_clean: bool) -> dict[str, float | None]:
    return {"wer": aggregate(rows, is_clean=is_clean)["wer"], **aggregate_error_rates(rows)}


def error_rate_section(run: RunData, n_resamples: int, seed: int) -> ErrorRateSection:
    """Per-condition rates with CIs (conditions with audio of their own; guard rows share their base's)."""
    if not any(it.clin_words is not None for it in run.items):
        return ErrorRateSection(computed=False)
    by_cond = run.items_by_condition()
    names = [c.id for c in run.conditions.with_audio()]
    cis = bootstrap_cis(
        by_cond, names, n_resamples=n_resamples, seed=seed, clean_condition=CLEAN, metrics=COLUMNS, aggregate_fn=_values
    )
    rows, problems = [], []
    for name in names:
        its = by_cond[name]
        vals = _values(its, name == CLEAN)
        for col in COLUMNS:
            cell = run.summary_cell(name, col)
            if col in ERROR_RATE_COLUMNS and cell is not None:
                want = float(cell) if cell != "" else None
                got = vals[col]
                if (want is None) != (got is None) or (
                    want is not None and got is not None and abs(want - got) > TOLERANCE
                ):
                    problems.append(f"{name}/{col}: summary.csv has {cell!r}, items give {got}")
        rows.append(
            ErrorRateRow(name, len(its), {col: vals[col] for col in COLUMNS}, {col: cis[name][col] for col in COLUMNS})
        )
    return ErrorRateSection(computed=True, rows=rows, problems=problems)


def error_rate_plot(sec: ErrorRateSection, path: Path) -> Path:
    """Grouped bars per condition: WER, clinical-term WER, WER clinician, WER patient, with CIs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cols = ("wer", "clinical_wer", "wer_clinician", "wer_patient")
    colours = ("0.45", "#c0392b", "#2471a3", "#117a65")
    fig, ax = plt.subplots(figsize=(max(4.4, 1.0 + 0.9 * len(sec.rows)), 3.5), dpi=110)
    x = np.arange(len(sec.rows))
    width = 0.8 / len(cols)
    for k, (col, colour) in enumerate(zip(cols, colours, strict=True)):
        y = np.array([np.nan if (v := r.values[col]) is None else float(v) for r in sec.rows])
        lo = np.array([np.nan if (ci := r.cis[col]) is None else float(ci[0]) for r in sec.rows])
        hi = np.array([np.nan if (ci := r.cis[col]) is None else float(ci[1]) for r in sec.rows])
        err = np.vstack([np.where(np.isfinite(lo), y - lo, 0.0), np.where(np.isfinite(hi), hi - y, 0.0)])
        ax.bar(
            x + (k - (len(cols) - 1) / 2) * width,
            np.nan_to_num(y),
            width,
            color=colour,
            label=HEADERS[col],
            yerr=np.nan_to_num(err),
            capsize=2,
            error_kw={"elinewidth": 0.8},
        )
    ax.set_xticks(x)
    ax.set_xticklabels([r.condition for r in sec.rows], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("% of reference words", fontsize=8)
    ax.set_title("Error rates a clinician reads ↓", fontsize=10)
    ax.tick_params(labelsize=8)
    ax.grid(axis="y", alpha=0.3, lw=0.6)
    ax.legend(fontsize=6.5, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.32), ncol=4)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight", pad_inches=0.08)
    plt.close(fig)
    return path


def _vci(r: ErrorRateRow, key: str) -> str:
    v, ci = r.values[key], r.cis[key]
    lo, hi = ci if ci else (None, None)
    if not isinstance(v, (int, float)):
        return "–"
    return f"{v:.1f}" + (
        f" [{lo:.1f}, {hi:.1f}]" if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) else ""
    )


def _body(sec: ErrorRateSection) -> tuple[list[str], list[list[str]]]:
    head = ["Condition", "n"] + [f"{HEADERS[c]} (%)" for c in COLUMNS]
    return head, [[r.condition, str(r.n)] + [_vci(r, c) for c in COLUMNS] for r in sec.rows]


TITLE = "Error rates a clinician reads"


def error_rates_html(sec: ErrorRateSection, img_src: str | None) -> str:
    """The HTML section (``img_src``: the plot as a data URI, or None)."""
    if not sec.computed:
        return f"<h2>{TITLE}</h2><p class='sub'>Not computed in this run (items carry no clinical-term counts).</p>"
    head, body = _body(sec)
    parts = [f"<h2>{TITLE}</h2>", f"<p class='sub'>{esc(EXPLANATION)}</p>", html_table(head, body)]
    if img_src:
        parts.append(f"<p><img alt='error_rates' style='max-width:640px' src='{img_src}'></p>")
    if sec.problems:
        parts.append("<div class='warn'>Disagreement with summary.csv: " + esc("; ".join(sec.problems)) + "</div>")
    return "\n".join(parts)


def error_rates_markdown(sec: ErrorRateSection, plot: Path | None) -> list[str]:
    """The Markdown section, as lines (``plot``: the figure's path relative to the report)."""
    out = [f"## {TITLE}", ""]
    if not sec.computed:
        return out + ["Not computed in this run (items carry no clinical-term counts).", ""]
    head, body = _body(sec)
    out += [EXPLANATION, "", *md_table(head, body), ""]
    if plot is not None:
        out += [f"![error_rates]({plot.as_posix()})", ""]
    if sec.problems:
        out += ["**Disagreement with summary.csv:** " + "; ".join(sec.problems), ""]
    return out
