"""What the guard removed: per guard condition, the Draft's claims, flags and values that the Guard or the
deterministic evidence filter took out, and why.

Read from the mitigated items' envelope extras written by :mod:`stresstest.mitigation.agent`
(``draft_record``, ``guard_report``, ``filter_report``; typed in :class:`stresstest.results.RecordExtra`). A guard
row of Table 2 can only differ from its unmitigated twin through these removals, so the report lists them: a
reader sees *what* the guard took out (a dose heard wrong, a quote that is not in the transcript), not only how
many fields.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, astuple, dataclass, fields

from stresstest.report.rundir import RunData
from stresstest.results import ItemScore, RecordExtra
from stresstest.schema import ClinicalRecord, FilterReport, GuardReport


@dataclass(frozen=True)
class Removal:
    """A claim, flag or value the guard or the evidence filter removed from a Draft."""

    condition: str
    encounter_id: str
    item: str
    what: str
    removed_by: str
    why: str

    def cells(self) -> tuple[str, ...]:
        return astuple(self)

    def to_row(self) -> dict[str, str]:
        return asdict(self)


REMOVAL_COLUMNS = [f.name for f in fields(Removal)]


def _describe(record: ClinicalRecord, item_id: str) -> list[str]:
    """'medication claim: warfarin 15 mg' / 'allergy flag: penicillin (rash)' for each item of the Draft under an
    id (a Draft can give two claims one id: each is described)."""
    field = ""
    if "." in item_id:
        item_id, field = item_id.split(".", 1)
    out: list[str] = []
    for c in record.claims:
        if c.id == item_id:
            value = " ".join(v for v in (c.value, c.unit) if v)
            text = f"{c.category} claim: {c.concept}" + (f" {value}" if value else "")
            out.append(text + (f" — {field} {getattr(c, field, None)!r}" if field else ""))
    for f in record.safety_flags:
        if f.id == item_id:
            text = f"{f.kind} flag: {f.name}" + (f" ({f.detail})" if f.detail else "")
            out.append(text + (f" — {field} {getattr(f, field, None)!r}" if field else ""))
    if out:
        return out
    return ["chief complaint" if item_id == "chief_complaint" else item_id]


def _what(record: ClinicalRecord, item_id: str, times: int) -> str:
    """The ``what`` cell of one removal row: every Draft item under the id, and a count when the report listed
    the id more than once or the Draft had more than one item under it (one row, not identical duplicates)."""
    descs = _describe(record, item_id)
    notes = ([f"×{times}"] if times > 1 else []) + (
        [f"the Draft had {len(descs)} items under this id"] if len(descs) > 1 else []
    )
    return "; ".join(descs) + (f" ({'; '.join(notes)})" if notes else "")


def _reports(extra: RecordExtra | None) -> tuple[ClinicalRecord, GuardReport | None, FilterReport] | None:
    """The Draft and the two reports of one mitigated item; None when the run did not record them."""
    if extra is None or extra.draft_record is None or extra.filter_report is None:
        return None
    return extra.draft_record, extra.guard_report, extra.filter_report


def _filter_why(filt: FilterReport, item_id: str) -> str:
    bad = [d.quote for d in filt.discarded if d.field == item_id]
    if bad:
        return "its quote is not in the raw transcript: " + "; ".join(repr(q) for q in bad)
    return "no quote"


def _item_removals(draft: ClinicalRecord, guard: GuardReport | None, filt: FilterReport) -> list[tuple[str, str, str]]:
    """(item, removed by, why) for one mitigated record."""
    out: list[tuple[str, str, str]] = []
    if guard is not None:
        out += [(i, "Guard", "deleted by the Guard") for i in (*guard.removed_claims, *guard.removed_flags)]
        out += [(i, "Guard", "set to null by the Guard") for i in guard.nulled_values]
    out += [(i, "evidence filter", _filter_why(filt, i)) for i in (*filt.removed_claims, *filt.removed_flags)]
    out += [(i, "evidence filter", "a number in it is in none of its quotes") for i in filt.values_nulled]
    return out


def removals(run: RunData) -> list[Removal]:
    """One row per distinct claim, flag or value removed from a Draft in a guard condition (in report order)."""
    rows: list[Removal] = []
    for c in run.conditions.mitigated():
        for it in sorted(run.ok_items(c.id), key=lambda r: r.encounter_id):
            rows += item_removals(it) or []
    return rows


def item_removals(it: ItemScore) -> list[Removal] | None:
    """What the Guard and the evidence filter removed from one guard item's Draft; None when not recorded."""
    got = _reports(it.extra)
    if got is None:
        return None
    # One row per distinct removal: a Draft with two claims under one id makes the reports list it twice.
    times = Counter(_item_removals(*got))
    return [
        Removal(it.condition, it.encounter_id, item, _what(got[0], item, n), by, why)
        for (item, by, why), n in times.items()
    ]


def guard_sentences(run: RunData) -> list[str]:
    """One sentence per guard condition: what the Guard and the filter removed, counted over its records."""
    out = []
    for c in run.conditions.mitigated():
        its = run.ok_items(c.id)
        got = [g for g in (_reports(it.extra) for it in its) if g is not None]
        if not got:
            out.append(f"{c.id}: what the guard removed is not recorded in this run ({len(its)} records).")
            continue
        total = sum(len(d.claims) + len(d.safety_flags) for d, _, _ in got)
        by_guard = sum(g.fields_removed for _, g, _ in got if g is not None)
        f_items = [(f, i) for _, _, f in got for i in (*f.removed_claims, *f.removed_flags)]
        bad = sum(1 for f, i in f_items if any(d.field == i for d in f.discarded))
        values = sum(len(f.values_nulled) + (len(g.nulled_values) if g else 0) for _, g, f in got)
        q_total = sum(f.quotes_total for _, _, f in got)
        q_gone = sum(f.quotes_discarded for _, _, f in got)
        undone = sum(len(g.added_dropped) + len(g.changes_reverted) for _, g, _ in got if g is not None)
        head = f"{c.id}: {len(got)} record{'s' if len(got) != 1 else ''}, {total} Draft claims and flags"
        if len(got) < len(its):
            head += f" ({len(its) - len(got)} more record{'s' if len(its) - len(got) != 1 else ''} without a report)"
        if any(g is None for _, g, _ in got):
            guard_part = "the Guard did not run (rules backend: the evidence filter alone)"
        else:
            guard_part = f"the Guard removed {by_guard}"
        if by_guard + len(f_items) + values == 0:
            out.append(f"{head}; {guard_part}, and nothing was removed: every record equals its Draft.")
            continue
        parts = [
            guard_part,
            f"the evidence filter removed {len(f_items)} ({bad} whose quotes are not in the raw transcript, "
            f"{len(f_items) - bad} without a quote)"
            if f_items
            else "the evidence filter removed no item",
            f"{values} value{'s' if values != 1 else ''} set to null",
            f"{q_gone} of {q_total} quotes discarded",
        ]
        if undone:
            parts.append(
                f"{undone} Guard addition{'s' if undone != 1 else ''} or change{'s' if undone != 1 else ''} undone"
            )
        out.append(f"{head}; " + "; ".join(parts) + ".")
    return out
