"""The pairing rule (docs/spec.md §11): every row of a run covers the same encounters.

Rule: an encounter takes part in the paired comparison only if **every** item
of it in the grid succeeded (clean, every noisy condition, every guard row).
Every row of Table 2 is read against the clean row, and the guard rows against
their unmitigated twins, so each condition "needs" every other one; an
encounter with one failed item therefore leaves *all* rows, the clean row
included, and no row silently mixes different encounter sets.

The failed item itself keeps ``failed: true`` and its reason; the encounter's
other items stay in ``items.jsonl`` with ``paired: false`` and
``unpaired_reason`` naming the failure that dropped them, so nothing is lost.
Rows are copied with their pairing fields set, never changed in place.
:func:`in_pairing` is the one test the summary, the report and ``compare`` use
to decide whether an item row enters a rate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from stresstest.grid import Condition
from stresstest.metrics.summary import in_pairing
from stresstest.results import ItemScore

__all__ = ["Pairing", "apply_pairing", "in_pairing"]


@dataclass
class Pairing:
    """Which encounters every row covers, and why the others were dropped."""

    encounters: list[str]
    paired: list[str]
    dropped: dict[str, list[str]] = field(default_factory=dict)

    @property
    def n_dropped(self) -> int:
        return len(self.dropped)

    def manifest(self) -> dict[str, Any]:
        """The ``pairing`` block of manifest.json."""
        return {
            "rule": "an encounter with any failed item leaves every row (clean included); docs/spec.md §11",
            "n_encounters": len(self.encounters),
            "n_paired": len(self.paired),
            "n_dropped": self.n_dropped,
            "dropped": dict(sorted(self.dropped.items())),
        }

    def sentence(self) -> str:
        """One line for stderr and the report."""
        if not self.dropped:
            return f"every row covers all {len(self.encounters)} encounters"
        ids = ", ".join(sorted(self.dropped)[:10]) + (" ..." if len(self.dropped) > 10 else "")
        return (
            f"every row covers the same {len(self.paired)} of {len(self.encounters)} encounters; "
            f"{self.n_dropped} dropped from every row because one of their items failed: {ids}"
        )


def apply_pairing(items: Iterable[ItemScore], conditions: Iterable[Condition]) -> tuple[list[ItemScore], Pairing]:
    """The rows with ``paired`` true/false set by the rule of the module doc, and the coverage.

    An encounter also counts as failed for a condition of the grid that has no
    item row at all (it cannot be compared there).
    """
    rows = list(items)
    grid = [c.id for c in conditions]
    reasons: dict[str, list[str]] = {}
    seen: dict[str, set[str]] = {}
    for it in rows:
        seen.setdefault(it.encounter_id, set()).add(it.condition)
        if it.failed:
            reasons.setdefault(it.encounter_id, []).append(f"{it.condition}: {it.error or 'failed'}")
    for eid, conds in seen.items():
        for cond in grid:
            if cond not in conds:
                reasons.setdefault(eid, []).append(f"{cond}: no item row")
    out = []
    for it in rows:
        eid = it.encounter_id
        if eid in reasons and not it.failed:
            it = it.revise(paired=False, unpaired_reason=f"encounter dropped from every row: {reasons[eid][0]}")
        else:
            it = it.revise(unset=("unpaired_reason",), paired=eid not in reasons)
        out.append(it)
    encounters = sorted(seen)
    return out, Pairing(
        encounters=encounters,
        paired=[e for e in encounters if e not in reasons],
        dropped={e: reasons[e] for e in sorted(reasons)},
    )
