"""The failure ledger: every failed (stage, item) of a run, and the ``run.max_failures`` policy.

Rules (DESIGN §7, docs/spec.md §10):

* A failed item is recorded with its stage and a one-line reason and is never
  dropped: it stays in ``items.jsonl`` (``failed: true``) and in the manifest.
* ``run.max_failures`` is a fraction of all items when < 1 (``0.25`` = a quarter
  of encounters × conditions) or an absolute count when ≥ 1. The run stops with
  a :class:`~stresstest.errors.RunError` as soon as the number of recorded
  failures exceeds it; within it, the run finishes and says so.
* An item is one (encounter, condition). A mitigated condition has no audio of
  its own: it fails with its base (see :meth:`FailureLedger.failed`).

The ledger is a small object outside the run state (Inspect AI's sample-error
handler is the model), so that the runner, the executor and the report agree on
one count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from stresstest.errors import RunError
from stresstest.results import FailureRecord


class ItemKey(NamedTuple):
    """Identity of one item of the grid."""

    encounter_id: str
    condition: str


class FailureLedger:
    """Failures of one run, in the order they were recorded, with the stop policy.

    Args:
        max_failures: ``run.max_failures`` (fraction < 1, or a count ≥ 1).
        total_items: encounters × conditions of the run (the fraction's denominator).
        manifest_path: where the list is written (named in the stop message).
    """

    def __init__(self, max_failures: float, total_items: int, manifest_path: Path | None = None) -> None:
        if max_failures < 0:
            raise ValueError(f"max_failures must be ≥ 0, got {max_failures}")
        self.max_failures = max_failures
        self.total_items = max(1, total_items)
        self.manifest_path = manifest_path
        self._records: list[FailureRecord] = []
        self._by_item: dict[ItemKey, FailureRecord] = {}

    @property
    def allowed(self) -> float:
        """How many failures the policy tolerates (the run stops above it)."""
        return self.max_failures * self.total_items if self.max_failures < 1 else self.max_failures

    def record(self, stage: str, item: ItemKey | tuple[str, str], reason: str, *, enforce: bool = True) -> None:
        """Record one failure; then stop the run if the policy is exceeded.

        Args:
            stage: the stage that failed (speech, mix, asr, structure...).
            item: (encounter_id, condition).
            reason: one line saying what went wrong.
            enforce: raise when the policy is exceeded (False: only record; call
                :meth:`check` later).

        Raises:
            RunError: more failures than ``max_failures`` allows.
        """
        key = ItemKey(*item)
        rec = FailureRecord(encounter_id=key.encounter_id, condition=key.condition, stage=stage, error=reason)
        self._records.append(rec)
        self._by_item.setdefault(key, rec)
        if enforce:
            self.check()

    def check(self) -> None:
        """Raise :class:`RunError` when the recorded failures exceed the policy."""
        if self.exceeded:
            last = self._records[-1]
            where = f"; see {self.manifest_path}" if self.manifest_path else ""
            raise RunError(
                f"{len(self._records)} failed items exceed run.max_failures={self.max_failures:g} "
                f"(last: {last.encounter_id}/{last.condition} at {last.stage}: {last.error}){where}"
            )

    @property
    def exceeded(self) -> bool:
        """True when more failures were recorded than the policy allows."""
        return len(self._records) > self.allowed

    def failure(self, item: ItemKey | tuple[str, str]) -> FailureRecord | None:
        """The first failure recorded for exactly this item, if any."""
        return self._by_item.get(ItemKey(*item))

    def failed(self, item: ItemKey | tuple[str, str], base: str | None = None) -> str | None:
        """``"stage: reason"`` of the item's first failure, else of its base condition's; None if it did not fail.

        Args:
            item: (encounter_id, condition).
            base: the condition whose audio/transcript the item uses (a guard row's base).
        """
        key = ItemKey(*item)
        rec = self._by_item.get(key)
        if rec is None and base is not None and base != key.condition:
            rec = self._by_item.get(ItemKey(key.encounter_id, base))
        return f"{rec.stage}: {rec.error}" if rec is not None else None

    def count_by_stage(self) -> dict[str, int]:
        """Number of recorded failures per stage (in first-seen stage order)."""
        return dict(Counter(r.stage for r in self._records))

    def failed_encounters(self, stage: str | None = None) -> list[str]:
        """Sorted ids of encounters with at least one failed item (at ``stage`` when given)."""
        return sorted({r.encounter_id for r in self._records if stage is None or r.stage == stage})

    def failed_items(self) -> list[ItemKey]:
        """Items with at least one failure, in first-failure order."""
        return list(self._by_item)

    def records(self) -> list[FailureRecord]:
        """Every recorded failure, in order (what the manifest lists)."""
        return list(self._records)

    def extend(self, records: Iterable[FailureRecord]) -> None:
        """Add failures recorded elsewhere (e.g. by a worker), then apply the policy."""
        for r in records:
            self.record(r.stage, (r.encounter_id, r.condition), r.error, enforce=False)
        self.check()

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[FailureRecord]:
        return iter(self._records)

    def __bool__(self) -> bool:
        return bool(self._records)
