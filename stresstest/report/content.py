"""The report's content, computed once and rendered to HTML and Markdown."""

from __future__ import annotations

from dataclasses import astuple, dataclass, field
from pathlib import Path

from stresstest.metrics.bootstrap import Interval
from stresstest.report.error_rates import ErrorRateSection
from stresstest.report.examples import Example
from stresstest.report.guard import Removal
from stresstest.report.predictive import EndpointResult
from stresstest.report.quality import QualitySection
from stresstest.report.silence import ProbeSection
from stresstest.report.tables import Row


@dataclass(frozen=True)
class Headline:
    """The run in one line under the title (the same text as those run facts)."""

    corpus: str = ""
    encounters: str = ""
    asr: str = ""
    structuring: str = ""


@dataclass(frozen=True)
class FailureRow:
    """One failed item as the report lists it (from the manifest, or from a failed item row)."""

    encounter_id: str
    condition: str
    stage: str | None
    error: str | None

    def cells(self) -> tuple[object, ...]:
        return astuple(self)


@dataclass(frozen=True)
class MitigationRow:
    """How the guard behaved on one guard condition (pooled over its items)."""

    condition: str
    n: int
    abstention_rate_pct: float | None  # Σ nulled / Σ fields, as summary.csv's abstention_rate
    fields_nulled: int
    fields_total: int
    quotes_discarded: int | None
    guard: str  # how the guard ran

    def cells(self) -> tuple[object, ...]:
        return astuple(self)


@dataclass(frozen=True)
class EffectRow:
    """Guard − unmitigated per metric over the encounters both completed, with paired CIs."""

    condition: str
    baseline: str
    n_common: int
    diffs: dict[str, float | None]
    cis: dict[str, Interval | None]

    def to_row(self) -> dict[str, object]:
        """The ``mitigation_effect`` table row: condition, baseline, n_common, then each metric with its CI."""
        row: dict[str, object] = {"condition": self.condition, "baseline": self.baseline, "n_common": self.n_common}
        for m, d in self.diffs.items():
            ci = self.cis[m]
            row.update({m: d, f"{m}_lo": ci[0] if ci else None, f"{m}_hi": ci[1] if ci else None})
        return row


@dataclass
class ReportContent:
    """Everything both renderers show."""

    run_id: str
    title: str
    facts: list[tuple[str, str]]
    table2: list[Row]
    judge: str
    n_resamples: int
    seed: int
    alpha: float
    problems: list[str]
    trigger_rates: dict[str, dict[str, tuple[float | None, Interval | None]]]
    trigger_rows: list[Row]
    examples: dict[str, list[Example]]
    predictive: list[EndpointResult]
    predictive_sentences: list[str]
    predictive_summary: str
    predictive_n_items: int
    mitigation: list[MitigationRow]
    mitigation_effects: list[EffectRow]
    failures: list[FailureRow]
    stage_seconds: list[tuple[str, float]]
    plots: dict[str, Path]  # name -> PNG path (relative to the report dir when rendered)
    tables: list[Path] = field(default_factory=list)
    quality: QualitySection | None = None  # note-quality judges (docs/spec.md §8); None = section not built
    guard_sentences: list[str] = field(default_factory=list)  # per guard condition: what was removed, counted
    guard_removed: list[Removal] = field(default_factory=list)
    error_rates: ErrorRateSection | None = None  # clinical-term WER and WER by speaker; None = not built
    probes: ProbeSection | None = None  # silence probes (halluc_per_min, traced fields); None = not built
    headline: Headline = field(default_factory=Headline)
