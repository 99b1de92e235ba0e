"""The report's content, computed once and rendered to HTML and Markdown."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stresstest.metrics.bootstrap import Interval
from stresstest.report.error_rates import ErrorRateSection
from stresstest.report.examples import Example
from stresstest.report.predictive import EndpointResult
from stresstest.report.quality import QualitySection
from stresstest.report.tables import Row


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
    mitigation: list[dict[str, Any]]
    mitigation_effects: list[dict[str, Any]]
    failures: list[dict[str, Any]]
    stage_seconds: list[tuple[str, float]]
    plots: dict[str, Path]  # name -> PNG path (relative to the report dir when rendered)
    tables: list[Path] = field(default_factory=list)
    quality: QualitySection | None = None  # note-quality judges (SPEC §8); None = section not built
    guard_sentences: list[str] = field(default_factory=list)  # per guard condition: what was removed, counted
    guard_removed: list[dict[str, Any]] = field(default_factory=list)  # report.guard.REMOVAL_COLUMNS rows
    error_rates: ErrorRateSection | None = None  # clinical-term WER and WER by speaker; None = not built
