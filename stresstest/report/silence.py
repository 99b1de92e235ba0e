"""The report's "silence probes" section: ``halluc_per_min`` per condition and the record fields traced to it.

Shown only for a run with a chain condition whose first step is ``silence``. Every rate comes from the
item rows through :func:`stresstest.metrics.summary.aggregate_probes` (what ``summary.csv`` holds; checked
against it), with the paired encounter-cluster bootstrap CI the report's other rates have. The attribution
rule is :mod:`stresstest.metrics.silence`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from stresstest.metrics.bootstrap import Interval, bootstrap_cis
from stresstest.metrics.summary import ItemLike, aggregate_probes
from stresstest.report.markup import esc, html_table, md_cell, md_table
from stresstest.report.rundir import CLEAN, RunData
from stresstest.results import ItemScore, ProbeField

TITLE = "Silence probes: what the ASR writes where nobody speaks"
EXPLANATION = (
    "Chain conditions whose first step is `silence` insert stretches of non-speech (the recording's own noise "
    "floor, digital silence for a TTS rendering; then the chain's room, noise and channel) into pauses between "
    "turns. Words written inside a stretch: the hypothesis words the word alignment inserts at the boundary "
    "between the turn before the stretch and the turn after it (the backends give no word timestamps). "
    "halluc_per_min = 60 · Σ those words / Σ seconds inserted, over the condition's paired encounters; 95% "
    "paired cluster-bootstrap CI over encounters. A record field is traced when every occurrence of one of its "
    "evidence quotes in the transcript lies inside those words."
)
TOLERANCE = 1e-3
ZERO_EVENTS_95 = -math.log(0.05)  # Poisson: with no event seen in T, rates above this / T are excluded at 95%


@dataclass(frozen=True)
class ProbeRow:
    """One condition with silence probes."""

    condition: str
    n: int
    words: int
    seconds: float
    rate: float | None
    ci: Interval | None
    n_traced: int
    twin: str | None = None
    twin_words: int | None = None

    def to_row(self) -> dict[str, object]:
        """The ``silence_probes`` table row."""
        return {
            "condition": self.condition,
            "n": self.n,
            "words": self.words,
            "seconds": round(self.seconds, 6),
            "halluc_per_min": self.rate,
            "halluc_per_min_lo": self.ci[0] if self.ci else None,
            "halluc_per_min_hi": self.ci[1] if self.ci else None,
            "traced_fields": self.n_traced,
            "twin": self.twin,
            "twin_words": self.twin_words,
        }


@dataclass(frozen=True)
class TracedField:
    """One record field traced to words written inside a stretch."""

    encounter_id: str
    condition: str
    field: ProbeField

    def to_row(self) -> dict[str, object]:
        """The ``silence_probe_fields`` table row."""
        return {"encounter_id": self.encounter_id, "condition": self.condition, **self.field.model_dump()}


@dataclass
class ProbeSection:
    """What the section shows (``computed`` False: no condition of the run has silence probes)."""

    computed: bool
    rows: list[ProbeRow] = field(default_factory=list)
    traced: list[TracedField] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _values(rows: Sequence[ItemLike], is_clean: bool) -> dict[str, float | None]:
    return aggregate_probes(rows)


def probe_section(run: RunData, n_resamples: int, seed: int) -> ProbeSection:
    """``halluc_per_min`` with its CI per condition with probes, and every traced field (paired rows)."""
    by_cond = run.items_by_condition()
    names = [c.id for c in run.conditions if any(it.probe_s is not None for it in by_cond[c.id])]
    if not names:
        return ProbeSection(computed=False)
    cis = bootstrap_cis(
        by_cond,
        names,
        n_resamples=n_resamples,
        seed=seed,
        clean_condition=CLEAN,
        metrics=("halluc_per_min",),
        aggregate_fn=_values,
    )
    sec = ProbeSection(computed=True)
    for name in names:
        its: list[ItemScore] = [it for it in by_cond[name] if it.probe_s is not None]
        rate = aggregate_probes(its)["halluc_per_min"]
        cell = run.summary_cell(name, "halluc_per_min")
        if cell is not None:
            want = float(cell) if cell != "" else None
            if (want is None) != (rate is None) or (
                want is not None and rate is not None and abs(want - rate) > TOLERANCE
            ):
                sec.problems.append(f"{name}/halluc_per_min: summary.csv has {cell!r}, items give {rate}")
        traced = [TracedField(it.encounter_id, name, f) for it in its for f in (it.probe_fields or [])]
        sec.traced += traced
        twins = {it.probe_twin for it in its}
        twin = twins.pop() if len(twins) == 1 and all(it.probe_words_twin is not None for it in its) else None
        sec.rows.append(
            ProbeRow(
                condition=name,
                n=len(its),
                words=sum(int(it.probe_words or 0) for it in its),
                seconds=sum(float(it.probe_s or 0.0) for it in its),
                rate=rate,
                ci=cis[name]["halluc_per_min"],
                n_traced=len(traced),
                twin=twin,
                twin_words=sum(int(it.probe_words_twin or 0) for it in its) if twin else None,
            )
        )
    return sec


def sentence(r: ProbeRow) -> str:
    """One sentence that stays true at small n."""
    minutes = r.seconds / 60.0
    enc = "encounter" if r.n == 1 else "encounters"
    head = (
        f"{r.condition}: {r.words} word{'' if r.words == 1 else 's'} written at the probed pauses "
        f"({minutes:.1f} min of inserted non-speech) over {r.n} {enc}"
    )
    if r.rate is None:
        return head + "."
    ci = f", 95% CI [{r.ci[0]:.2f}, {r.ci[1]:.2f}]" if r.ci is not None else ""
    out = f"{head}: {r.rate:.2f} per minute{ci}."
    if r.twin is not None and r.twin_words is not None:
        same = f" The same pauses in {r.twin} (the chain without its `silence` step, same encounters) got "
        out += same + (
            "no word either."
            if r.twin_words == 0
            else f"{r.twin_words} word{'' if r.twin_words == 1 else 's'}: what the ASR writes at a turn "
            "boundary anyway, counted in the rate too."
        )
    elif r.words:
        out += (
            " This counts what the ASR would write at those turn boundaries without the probe too; the same "
            "chain without its `silence` step (not in this grid) would be the baseline."
        )
    if r.words == 0 and minutes > 0:
        out += (
            f" No word in {minutes:.1f} min does not show the rate is zero: a Poisson count with none seen "
            f"allows up to {ZERO_EVENTS_95 / minutes:.2f} per minute (95%)."
        )
    if r.n < 10:
        out += (
            f" With {r.n} {enc} the interval resamples only these {enc}; it does not cover what other "
            "encounters would give."
        )
    if r.n_traced:
        verb = "field rests" if r.n_traced == 1 else "fields rest"
        out += f" {r.n_traced} record {verb} on such words (listed below)."
    else:
        out += " No record field was traced to such words."
    return out


def _rate(r: ProbeRow) -> str:
    if r.rate is None:
        return "–"
    return f"{r.rate:.2f}" + (f" [{r.ci[0]:.2f}, {r.ci[1]:.2f}]" if r.ci is not None else "")


HEAD = [
    "Condition",
    "n",
    "Words at probed pauses",
    "Minutes inserted",
    "halluc_per_min [95% CI]",
    "Traced fields",
    "Same pauses without the probe",
]
TRACED_HEAD = ["Encounter", "Condition", "Field", "Kind", "Name", "Evidence quote"]


def _body(sec: ProbeSection) -> list[list[str]]:
    return [
        [
            r.condition,
            str(r.n),
            str(r.words),
            f"{r.seconds / 60.0:.2f}",
            _rate(r),
            str(r.n_traced),
            f"{r.twin_words} words ({r.twin})" if r.twin is not None else "– (no twin in the grid)",
        ]
        for r in sec.rows
    ]


def _traced_body(sec: ProbeSection) -> list[list[str]]:
    return [
        [t.encounter_id, t.condition, t.field.field_id, t.field.kind, t.field.name, t.field.quote] for t in sec.traced
    ]


def probes_html(sec: ProbeSection) -> str:
    """The HTML section ('' when the run has no silence probes)."""
    if not sec.computed:
        return ""

    parts = [
        f"<h2>{esc(TITLE)}</h2>",
        f"<p class='sub'>{esc(EXPLANATION)}</p>",
        html_table(HEAD, _body(sec)),
        "<ul>" + "".join(f"<li>{esc(sentence(r))}</li>" for r in sec.rows) + "</ul>",
    ]
    if sec.traced:
        parts += ["<h3>Record fields traced to a silence probe</h3>", html_table(TRACED_HEAD, _traced_body(sec))]
    if sec.problems:
        parts.append("<div class='warn'>Disagreement with summary.csv: " + esc("; ".join(sec.problems)) + "</div>")
    return "\n".join(parts)


def probes_markdown(sec: ProbeSection) -> list[str]:
    """The Markdown section, as lines (none when the run has no silence probes)."""
    if not sec.computed:
        return []

    def table(head: list[str], body: list[list[str]]) -> list[str]:
        return md_table(head, [[md_cell(c) for c in row] for row in body], text=True)

    out = [f"## {TITLE}", "", EXPLANATION, ""] + table(HEAD, _body(sec)) + [""]
    out += [f"- {sentence(r)}" for r in sec.rows] + [""]
    if sec.traced:
        out += ["### Record fields traced to a silence probe", ""] + table(TRACED_HEAD, _traced_body(sec)) + [""]
    if sec.problems:
        out += ["**Disagreement with summary.csv:** " + "; ".join(sec.problems), ""]
    return out
