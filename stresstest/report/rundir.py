"""Reading a run directory for the report (manifest, items, summary, records).

The report only reads what the runner wrote; anything missing or malformed is
a :class:`~stresstest.errors.ReportError` naming the file (and line or key).
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
from stresstest.metrics.summary import in_pairing
from stresstest.schema import ClinicalRecord, RecordEnvelope

CLEAN = "clean"  # the clean-ASR reference condition id (summary_rows aggregates it with is_clean=True)


@dataclass
class RunData:
    """Everything the report needs from one run directory."""

    run_dir: Path
    manifest: dict[str, Any]
    items: list[dict[str, Any]]
    conditions: list[dict[str, Any]]
    summary: dict[str, dict[str, str]] | None
    summary_columns: list[str]
    _records: dict[str, RecordEnvelope | None] = field(default_factory=dict, repr=False)

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.run_dir.name)

    def ok_items(self, condition: str) -> list[dict[str, Any]]:
        """Paired rows of one condition (the rows ``summary_rows`` aggregates: see ``in_pairing``)."""
        return [it for it in self.items if it.get("condition") == condition and in_pairing(it)]

    def items_by_condition(self) -> dict[str, list[dict[str, Any]]]:
        return {str(c["condition"]): self.ok_items(str(c["condition"])) for c in self.conditions}

    def item(self, encounter_id: str, condition: str) -> dict[str, Any] | None:
        for it in self.items:
            if it.get("encounter_id") == encounter_id and it.get("condition") == condition:
                return it
        return None

    def record(self, item: dict[str, Any] | None) -> ClinicalRecord | None:
        """The structured record of an item (None when missing or failed); cached."""
        if item is None:
            return None
        rel = item.get("record_path") or f"records/{item['condition']}/{item['encounter_id']}.json"
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


def _conditions(manifest: dict[str, Any], items: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    raw = manifest.get("conditions")
    conds: list[dict[str, Any]] = []
    if isinstance(raw, list) and raw:
        for k, c in enumerate(raw):
            if not isinstance(c, dict) or "condition" not in c:
                raise ReportError(f"{path}: conditions[{k}] should be an object with a 'condition' key, got {c!r}")
            conds.append(
                {
                    "condition": str(c["condition"]),
                    "family": c.get("family", "clean"),
                    "snr_db": c.get("snr_db"),
                    "mitigated": bool(c.get("mitigated", False)),
                }
            )
    else:
        # Older or partial manifests: take the conditions in the order items name them.
        seen: dict[str, dict[str, Any]] = {}
        for it in items:
            name = str(it.get("condition"))
            if name not in seen:
                seen[name] = {
                    "condition": name,
                    "family": it.get("family", "clean"),
                    "snr_db": it.get("snr_db"),
                    "mitigated": bool(it.get("mitigated", False)),
                }
        conds = list(seen.values())
    return conds


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
    try:
        manifest = json.loads(man_path.read_text("utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportError(f"{man_path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(manifest, dict):
        raise ReportError(f"{man_path}: expected a JSON object, got {type(manifest).__name__}")
    try:
        items = list(read_jsonl(items_path))
    except ValueError as exc:
        raise ReportError(str(exc)) from exc
    for n, it in enumerate(items, start=1):
        for key in ("encounter_id", "condition"):
            if key not in it:
                raise ReportError(f"{items_path}:{n}: item row has no '{key}' field")
    if not items:
        raise ReportError(f"{items_path}: no item rows; expected one per (encounter, condition)")
    summary, cols = _read_summary(run_dir / "summary.csv")
    return RunData(
        run_dir=run_dir,
        manifest=manifest,
        items=items,
        conditions=_conditions(manifest, items, man_path),
        summary=summary,
        summary_columns=cols,
    )
