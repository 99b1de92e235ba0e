"""Reading a run directory for the report (manifest, items, summary, records).

The report only reads what the runner wrote; anything missing or malformed is
a :class:`~stresstest.errors.ReportError` naming the file (and line or key).
``manifest.json`` is read as a :class:`~stresstest.results.RunManifest` and
every ``items.jsonl`` row as an :class:`~stresstest.results.ItemScore`, and the
report reads only those models. A manifest of an older schema is migrated
(:func:`~stresstest.results.migrate_manifest`; :attr:`RunData.notes` says so); a
run written by a newer schema than this code reads is refused, naming the version.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from stresstest.cache import read_jsonl
from stresstest.errors import ReportError
from stresstest.grid import CLEAN, ConditionGrid
from stresstest.metrics.summary import in_pairing
from stresstest.results import ITEM_SCHEMA_VERSION, ItemScore, RunManifest, migrate_manifest
from stresstest.schema import ClinicalRecord, RecordEnvelope

__all__ = ["CLEAN", "RunData", "load_run"]


@dataclass
class RunData:
    """Everything the report needs from one run directory."""

    run_dir: Path
    manifest: RunManifest
    items: list[ItemScore]  # the rows of items.jsonl
    conditions: ConditionGrid
    summary: dict[str, dict[str, str]] | None  # summary.csv: {condition: {column: cell}}
    summary_columns: list[str]
    notes: list[str] = field(default_factory=list)  # what reading the run had to do (a migrated manifest)
    _records: dict[str, RecordEnvelope | None] = field(default_factory=dict, repr=False)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id or self.run_dir.name

    def ok_items(self, condition: str) -> list[ItemScore]:
        """Paired rows of one condition (the rows ``summary_rows`` aggregates: see ``in_pairing``)."""
        return [it for it in self.items if it.condition == condition and in_pairing(it)]

    def items_by_condition(self) -> dict[str, list[ItemScore]]:
        return {c.id: self.ok_items(c.id) for c in self.conditions}

    def item(self, encounter_id: str, condition: str) -> ItemScore | None:
        for it in self.items:
            if it.key == (encounter_id, condition):
                return it
        return None

    def summary_cell(self, condition: str, column: str) -> str | None:
        """The ``summary.csv`` cell of a condition as written (None: no summary, no such row or column)."""
        if self.summary is None or condition not in self.summary:
            return None
        return self.summary[condition].get(column)

    def record(self, item: ItemScore | None) -> ClinicalRecord | None:
        """The structured record of an item (None when missing or failed); cached."""
        if item is None:
            return None
        rel = item.record_path or f"records/{item.condition}/{item.encounter_id}.json"
        if rel not in self._records:
            self._records[rel] = _load_envelope(self.run_dir / rel)
        env = self._records[rel]
        return None if env is None or env.failed else env.record


def _load_envelope(path: Path) -> RecordEnvelope | None:
    # A missing record is not fatal for the report: the example miner just
    # cannot say what changed for that item, and says so.
    if not path.is_file():
        return None
    try:
        return RecordEnvelope.model_validate_json(path.read_text("utf-8"))
    except (ValidationError, ValueError, OSError):
        return None


def _read_summary(path: Path) -> tuple[dict[str, dict[str, str]] | None, list[str]]:
    if not path.is_file():
        return None, []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        cols = list(reader.fieldnames or [])
        if "condition" not in cols:
            raise ReportError(f"{path}: expected a 'condition' column in the header, got {cols}")
        rows = {row["condition"]: row for row in reader}
    return rows, cols


def _validation_message(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {err['msg']}{more}" if loc else f"{err['msg']}{more}"


def _conditions(manifest: RunManifest, items: list[ItemScore], path: Path) -> ConditionGrid:
    try:
        if manifest.conditions:
            return ConditionGrid(manifest.conditions)
        # Older or partial manifests: take the conditions in the order items name them.
        seen: dict[str, dict[str, Any]] = {}
        for it in items:
            if it.condition not in seen:
                seen[it.condition] = {"condition": it.condition, "family": it.family or "clean",
                                      "snr_db": it.snr_db, "mitigated": bool(it.mitigated)}
        return ConditionGrid.from_json(seen.values())
    except ValidationError as exc:
        raise ReportError(f"{path}: conditions: {_validation_message(exc)}") from exc
    except ValueError as exc:
        raise ReportError(f"{path}: conditions: {exc}") from exc


def load_run(run_dir: str | Path) -> RunData:
    """Load a run directory written by the runner.

    Raises:
        ReportError: the directory, ``manifest.json`` or ``items.jsonl`` is
            missing or malformed.
    """
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise ReportError(f"{run_dir} is a file, not a run directory (expected the DIR written by 'stresstest run')")
    if not run_dir.is_dir():
        raise ReportError(f"run directory {run_dir} does not exist (expected the DIR written by 'stresstest run')")
    man_path = run_dir / "manifest.json"
    items_path = run_dir / "items.jsonl"
    for p in (man_path, items_path):
        if not p.is_file():
            raise ReportError(f"{p} is missing: expected a finished run directory with manifest.json and items.jsonl")
    meta, notes = _read_manifest(man_path)
    items = _read_items(items_path)
    summary, cols = _read_summary(run_dir / "summary.csv")
    return RunData(
        run_dir=run_dir,
        manifest=meta,
        items=items,
        conditions=_conditions(meta, items, man_path),
        summary=summary,
        summary_columns=cols,
        notes=notes,
    )


def _read_manifest(path: Path) -> tuple[RunManifest, list[str]]:
    try:
        raw = json.loads(path.read_text("utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(raw, dict):
        raise ReportError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    try:
        raw, note = migrate_manifest(raw)
    except ValueError as exc:
        raise ReportError(f"{path}: {exc}") from exc
    try:
        meta = RunManifest.model_validate(raw)
    except ValidationError as exc:
        raise ReportError(f"{path}: not a stresstest manifest: {_validation_message(exc)}") from exc
    if meta.items_schema_version > ITEM_SCHEMA_VERSION:
        raise ReportError(f"{path}: written by a newer stresstest (items schema {meta.items_schema_version}); "
                          f"this one reads items schema up to {ITEM_SCHEMA_VERSION}")
    return meta, [f"manifest.json: {note}"] if note else []


def _read_items(path: Path) -> list[ItemScore]:
    try:
        rows = list(read_jsonl(path))
    except ValueError as exc:
        raise ReportError(str(exc)) from exc
    items = []
    for n, row in enumerate(rows, start=1):
        for key in ("encounter_id", "condition"):
            if key not in row:
                raise ReportError(f"{path}:{n}: item row has no '{key}' field")
        try:
            items.append(ItemScore.model_validate(row))
        except ValidationError as exc:
            raise ReportError(f"{path}:{n}: not an item row: {_validation_message(exc)}") from exc
    if not items:
        raise ReportError(f"{path}: no item rows; expected one per (encounter, condition)")
    return items


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
        out.append(f"items.jsonl lacks {len(missing)} of the {len(expected)} items manifest.json lists ({shown}); "
                   "the numbers cover only the items present")
    extra = sorted(have - expected)
    if extra:
        shown = ", ".join(f"{e}/{c}" for e, c in extra[:5]) + (" ..." if len(extra) > 5 else "")
        out.append(f"items.jsonl holds {len(extra)} item(s) of encounters or conditions manifest.json does not "
                   f"list ({shown}): items of another run?")
    return out
