"""The human report of a run and the side-by-side comparison of two runs.

``build_report(RUN_DIR)`` writes ``RUN_DIR/report/`` (self-contained HTML,
Markdown, PNG plots, CSV/Parquet tables); ``compare_runs(A, B)`` writes the
paired B − A comparison. ``cli_report`` / ``cli_compare`` return the text the
CLI prints.
"""

from stresstest.report.build import ReportPaths, build_report, cli_report
from stresstest.report.compare import CompareResult, cli_compare, compare_runs

__all__ = ["CompareResult", "ReportPaths", "build_report", "cli_compare", "cli_report", "compare_runs"]
