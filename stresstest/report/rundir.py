"""The run directory as the report reads it: :func:`stresstest.results.read_run` plus the report's views.

:func:`load_run` reads through the public reader (``manifest.json`` as a :class:`~stresstest.results.RunManifest`,
migrated when older, every ``items.jsonl`` row as an :class:`~stresstest.results.ItemScore`, ``summary.csv``,
the records on first use; docs/run-format.md) and turns what it cannot read into a
:class:`~stresstest.errors.ReportError` naming the file (and line or key). :class:`RunData` adds what only the
report asks: the paired rows of a condition (the pairing rule, :func:`~stresstest.metrics.summary.in_pairing`)
and ``summary.csv`` cells by condition and column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stresstest.errors import ReportError, RunDirError
from stresstest.grid import CLEAN, ConditionGrid
from stresstest.metrics.summary import in_pairing
from stresstest.results import ItemScore, RunDir, RunManifest, read_run
from stresstest.schema import ClinicalRecord

__all__ = ["CLEAN", "RunData", "load_run"]


@dataclass
class RunData:
    """Everything the report needs from one run directory (read by :func:`~stresstest.results.read_run`)."""

    source: RunDir

    @property
    def run_dir(self) -> Path:
        return self.source.path

    @property
    def manifest(self) -> RunManifest:
        return self.source.manifest

    @property
    def items(self) -> list[ItemScore]:  # the rows of items.jsonl
        return self.source.items

    @property
    def conditions(self) -> ConditionGrid:
        return self.source.conditions

    @property
    def summary(self) -> dict[str, dict[str, str]] | None:  # summary.csv: {condition: {column: cell}}
        if self.source.summary is None:
            return None
        return {s.condition: s.cells for s in self.source.summary}

    @property
    def summary_columns(self) -> list[str]:
        return self.source.summary_columns

    @property
    def notes(self) -> list[str]:  # what reading the run had to do (a migrated manifest)
        return self.source.notes

    @property
    def run_id(self) -> str:
        return self.source.run_id

    def ok_items(self, condition: str) -> list[ItemScore]:
        """Paired rows of one condition (the rows ``summary_rows`` aggregates: see ``in_pairing``)."""
        return [it for it in self.items if it.condition == condition and in_pairing(it)]

    def items_by_condition(self) -> dict[str, list[ItemScore]]:
        return {c.id: self.ok_items(c.id) for c in self.conditions}

    def item(self, encounter_id: str, condition: str) -> ItemScore | None:
        return self.source.item(encounter_id, condition)

    def summary_cell(self, condition: str, column: str) -> str | None:
        """The ``summary.csv`` cell of a condition as written (None: no summary, no such row or column)."""
        line = self.source.summary_line(condition)
        return None if line is None else line.cells.get(column)

    def record(self, item: ItemScore | None) -> ClinicalRecord | None:
        """The structured record of an item (None when missing or failed); read once."""
        if item is None:
            return None
        env = self.source.envelope(item)
        return None if env is None or env.failed else env.record


def load_run(run_dir: str | Path) -> RunData:
    """Load a run directory written by the runner.

    Raises:
        ReportError: the directory, ``manifest.json`` or ``items.jsonl`` is
            missing or malformed.
    """
    try:
        return RunData(read_run(run_dir))
    except RunDirError as exc:
        raise ReportError(str(exc)) from exc


def items_vs_manifest(run: RunData) -> list[str]:
    """Where ``items.jsonl`` and ``manifest.json`` disagree, one line each ([] when they agree).

    The runner writes one item per (encounter, condition) of the manifest's corpus and grid: a missing item (a
    lost line) or an item of an encounter or condition the manifest does not list (another run's items) means
    the files are not one run's.
    """
    listed = run.manifest.corpus.encounter_ids
    # A manifest without the encounter list (older runs): every encounter of the items, in every condition.
    encounters = listed or sorted({it.encounter_id for it in run.items})
    expected = {(e, c.id) for e in encounters for c in run.conditions}
    have = {it.key for it in run.items}
    out = []
    n = run.manifest.corpus.n_encounters
    if not listed and n is not None and len(encounters) != n:
        out.append(f"items.jsonl holds {len(encounters)} encounter(s), manifest.json says {n}")
    missing = sorted(expected - have)
    if missing:
        shown = ", ".join(f"{e}/{c}" for e, c in missing[:5]) + (" ..." if len(missing) > 5 else "")
        out.append(
            f"items.jsonl lacks {len(missing)} of the {len(expected)} items manifest.json lists ({shown}); "
            "the numbers cover only the items present"
        )
    extra = sorted(have - expected)
    if extra:
        shown = ", ".join(f"{e}/{c}" for e, c in extra[:5]) + (" ..." if len(extra) > 5 else "")
        out.append(
            f"items.jsonl holds {len(extra)} item(s) of encounters or conditions manifest.json does not "
            f"list ({shown}): items of another run?"
        )
    return out
