"""Paired cause→effect examples mined from a run (the report's Table-1 analogue).

Cause: a trigger event in ``triggers_vs_clean`` (clean-ASR span → noisy-ASR span).
Effect: what changed between the clean-ASR record and this condition's record
of the same encounter. Claims are matched on (category, normalised concept,
status); a concept present in both with another status is reported as a
status flip, and a matched claim whose value/unit/time differ as changed.

Attribution rule: a trigger explains a record change only when its span
overlaps that change's evidence or concept — the event's clean-ASR span
overlaps a verbatim evidence quote of the changed claim/flag/triage located in
the clean-ASR transcript (or its noisy-ASR span one located in the noisy-ASR
transcript, for what the noisy record added), or the span's words contain the
changed concept's words, or the event's concept is that concept. A change that
no trigger of the item explains is listed as *unexplained*; co-occurrence in
one item never links them. Everything is deterministic: candidates are ranked
by a fixed key and ties broken by (encounter id, condition).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stresstest.report.rundir import CLEAN, RunData
from stresstest.results import TRIGGER_TYPES, ItemScore, TriggerEvent
from stresstest.schema import CRITICAL_FLAG_KINDS, ClinicalRecord, flag_key, triage_ord

_WS = re.compile(r"[^a-z0-9]+")
CONTEXT_WORDS = 8  # words of transcript shown either side of a span
MAX_SPAN_WORDS = 24  # longer spans are shown as head … tail (real detectors can return whole turns)
LONG_SPAN_WORDS = 16  # an event whose two spans together exceed this ranks below short, crisp ones
MAX_EXPLANATION_CHARS = 200


def clip_words(text: str, max_words: int = MAX_SPAN_WORDS) -> str:
    """``text``, or its first and last words around an ellipsis when it has more than ``max_words``."""
    words = text.split()
    if len(words) <= max_words:
        return text
    keep = max(1, (max_words - 1) // 2)
    return " ".join(words[:keep]) + " … " + " ".join(words[-keep:])


def clip_chars(text: str, max_chars: int = MAX_EXPLANATION_CHARS) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"


def _norm(text: str | None) -> str:
    return _WS.sub(" ", (text or "").lower()).strip()


@dataclass(frozen=True)
class Change:
    """One changed element of a record diff, with what can tie it to a transcript span.

    Attributes:
        line: the human-readable effect line (as in :meth:`RecordDiff.describe`).
        concepts: normalised concept names it is about (claim concept, flag name).
        clean_quotes: evidence quotes of the clean-ASR record for it (they quote the clean-ASR transcript).
        noisy_quotes: evidence quotes of the condition's record for it (they quote the noisy-ASR transcript).
    """

    line: str
    concepts: tuple[str, ...] = ()
    clean_quotes: tuple[str, ...] = ()
    noisy_quotes: tuple[str, ...] = ()


@dataclass
class RecordDiff:
    """What changed from the clean-ASR record to a condition's record."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    flipped: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    flags_added: list[str] = field(default_factory=list)
    flags_removed: list[str] = field(default_factory=list)
    triage: tuple[str, str] | None = None
    available: bool = True
    concepts: set[str] = field(default_factory=set)
    changes: list[Change] = field(default_factory=list)

    @property
    def n_changes(self) -> int:
        return (
            len(self.added)
            + len(self.removed)
            + len(self.flipped)
            + len(self.changed)
            + len(self.flags_added)
            + len(self.flags_removed)
            + (1 if self.triage else 0)
        )

    @property
    def critical_added(self) -> list[str]:
        return [f for f in self.flags_added if f.split(":", 1)[0] in CRITICAL_FLAG_KINDS]

    def describe(self, gold_triage: str | None = None) -> list[str]:
        """Human-readable effect lines, most consequential first."""
        if not self.available:
            return ["record not available (structuring failed or file missing)"]
        lines: list[str] = []
        if self.triage:
            a, b = self.triage
            if gold_triage and triage_ord(b) < triage_ord(gold_triage):
                moved = "under-triage"
            elif gold_triage and triage_ord(b) > triage_ord(gold_triage):
                moved = "over-triage"
            else:
                moved = "down" if triage_ord(b) < triage_ord(a) else "up"
            lines.append(f"triage {a} → {b} ({moved}{', gold ' + gold_triage if gold_triage else ''})")
        lines += [f"critical flag added: {f}" for f in self.critical_added]
        lines += [f"flag added: {f}" for f in self.flags_added if f not in self.critical_added]
        lines += [f"flag removed: {f}" for f in self.flags_removed]
        lines += [f"status flipped: {s}" for s in self.flipped]
        lines += [f"claim changed: {s}" for s in self.changed]
        lines += [f"claim added: {s}" for s in self.added]
        lines += [f"claim removed: {s}" for s in self.removed]
        return lines or ["no change in the structured record"]


def _detail(value: str | None, unit: str | None, time: str | None) -> str:
    return " ".join(p for p in (value, unit, f"({time})" if time else None) if p)


def diff_records(clean: ClinicalRecord | None, noisy: ClinicalRecord | None) -> RecordDiff:
    """Diff two records of the same encounter (clean-ASR → condition)."""
    if clean is None or noisy is None:
        return RecordDiff(available=False)

    def claim_map(rec: ClinicalRecord) -> dict[tuple[str, str, str], str]:
        out: dict[tuple[str, str, str], list[str]] = {}
        for c in rec.claims:
            out.setdefault((c.category, _norm(c.concept), c.status), []).append(_detail(c.value, c.unit, c.time))
        # Several claims can share one identity; show each one's details, "no value" for an empty one.
        return {k: "; ".join(sorted({x or "no value" for x in v})) if any(v) else "" for k, v in out.items()}

    def quotes(rec: ClinicalRecord, key: tuple[str, ...], flags: bool = False) -> tuple[str, ...]:
        """Evidence quotes of the claims with this (category, concept[, status]) or of the flag ``key[0]``."""
        if flags:
            ids = [f.id for f in rec.safety_flags if flag_key(f) == key[0]]
        else:
            ids = [c.id for c in rec.claims if (c.category, _norm(c.concept), c.status)[: len(key)] == key]
        return tuple(q for i in ids for q in rec.field_evidence.get(i, []))

    a, b = claim_map(clean), claim_map(noisy)
    d = RecordDiff()
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    flipped_pairs = {(k[0], k[1]) for k in only_a} & {(k[0], k[1]) for k in only_b}
    for cat, concept in sorted(flipped_pairs):
        sa = "/".join(k[2] for k in only_a if k[:2] == (cat, concept))
        sb = "/".join(k[2] for k in only_b if k[:2] == (cat, concept))
        d.flipped.append(f"{cat} '{concept}' {sa} → {sb}")
        d.concepts.add(concept)
        d.changes.append(
            Change(
                f"status flipped: {d.flipped[-1]}",
                (concept,),
                quotes(clean, (cat, concept)),
                quotes(noisy, (cat, concept)),
            )
        )
    for k in only_b:
        if k[:2] not in flipped_pairs:
            d.added.append(f"{k[0]} '{k[1]}' ({k[2]}{', ' + b[k] if b[k] else ''})")
            d.concepts.add(k[1])
            d.changes.append(Change(f"claim added: {d.added[-1]}", (k[1],), (), quotes(noisy, k)))
    for k in only_a:
        if k[:2] not in flipped_pairs:
            d.removed.append(f"{k[0]} '{k[1]}' ({k[2]}{', ' + a[k] if a[k] else ''})")
            d.concepts.add(k[1])
            d.changes.append(Change(f"claim removed: {d.removed[-1]}", (k[1],), quotes(clean, k), ()))
    for k in sorted(set(a) & set(b)):
        if a[k] != b[k]:
            d.changed.append(f"{k[0]} '{k[1]}': {a[k] or '—'} → {b[k] or '—'}")
            d.concepts.add(k[1])
            d.changes.append(Change(f"claim changed: {d.changed[-1]}", (k[1],), quotes(clean, k), quotes(noisy, k)))
    fa = {flag_key(f) for f in clean.safety_flags}
    fb = {flag_key(f) for f in noisy.safety_flags}
    d.flags_added = sorted(fb - fa)
    d.flags_removed = sorted(fa - fb)
    d.concepts.update(f.split(":", 1)[1] for f in d.flags_added + d.flags_removed)
    for f in d.flags_added:
        kind = "critical flag added" if f.split(":", 1)[0] in CRITICAL_FLAG_KINDS else "flag added"
        d.changes.append(Change(f"{kind}: {f}", (f.split(":", 1)[1],), (), quotes(noisy, (f,), flags=True)))
    for f in d.flags_removed:
        d.changes.append(Change(f"flag removed: {f}", (f.split(":", 1)[1],), quotes(clean, (f,), flags=True), ()))
    if clean.triage.level != noisy.triage.level:
        d.triage = (clean.triage.level, noisy.triage.level)
        d.changes.insert(
            0,
            Change(
                f"triage {clean.triage.level} → {noisy.triage.level}",
                (),
                tuple(clean.field_evidence.get("triage", [])),
                tuple(noisy.field_evidence.get("triage", [])),
            ),
        )
    return d


def quote_ranges(text: str, quotes: Iterable[str]) -> list[tuple[int, int]]:
    """Character ranges of every occurrence of each quote in ``text`` (case- and whitespace-insensitive)."""
    out = []
    for q in quotes:
        words = q.split()
        if not words:
            continue
        pat = re.compile(r"\s+".join(re.escape(w) for w in words), flags=re.IGNORECASE)
        out += [(m.start(), m.end()) for m in pat.finditer(text)]
    return out


def _event_range(ev: TriggerEvent, side: str, text: str) -> tuple[int, int] | None:
    if side == "ref":
        return _offsets(text, ev.ref_span, ev.ref_start, ev.ref_end)
    return _offsets(text, ev.hyp_span, ev.hyp_start, ev.hyp_end)


def explains(ev: TriggerEvent, change: Change, clean_text: str, noisy_text: str) -> bool:
    """Does trigger event ``ev`` (of ``triggers_vs_clean``) explain ``change`` (see the module's rule)?"""
    for side, text, quotes in (("ref", clean_text, change.clean_quotes), ("hyp", noisy_text, change.noisy_quotes)):
        span = _event_range(ev, side, text)
        if span is not None and span[1] > span[0]:
            if any(a < span[1] and b > span[0] for a, b in quote_ranges(text, quotes)):
                return True
    if not change.concepts:
        return False
    ev_concept = _norm(ev.concept or "")
    span_words = set(_norm(f"{ev.ref_span} {ev.hyp_span}").split())
    for c in change.concepts:
        cw = _norm(c).split()
        if ev_concept and ev_concept == _norm(c):
            return True
        if cw and set(cw) <= span_words:
            return True
    return False


def _offsets(text: str, span: str, start: Any, end: Any) -> tuple[int, int] | None:
    """Where ``span`` sits in ``text``: the event's own offsets when they agree, else the first match."""
    if isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= len(text):
        if text[start:end].lower() == span.lower():
            return start, end  # also an empty span: an insertion point
    if not span.strip():
        return None
    m = re.search(r"\s+".join(re.escape(w) for w in span.split()), text, flags=re.IGNORECASE)
    return (m.start(), m.end()) if m else None


def context(
    text: str, span: str, width: int = CONTEXT_WORDS, start: Any = None, end: Any = None
) -> tuple[str, str, str] | None:
    """(before, span as written, after) around ``span`` in ``text``.

    The event's character offsets are used when they point at the span (so a
    repeated phrase is shown where the event is); otherwise the first
    case-insensitive match. An empty span with offsets is an insertion point
    (``span`` comes back empty). ``before`` ends with a space and ``after``
    starts with one exactly where the transcript had whitespace, so
    "penicillin," stays "penicillin," when the three parts are concatenated.
    """
    if not text:
        return None
    pos = _offsets(text, span, start, end)
    if pos is None:
        return None
    head, mid, tail = text[: pos[0]], text[pos[0] : pos[1]], text[pos[1] :]
    before, after = head.split(), tail.split()
    pre = ("… " if len(before) > width else "") + " ".join(before[-width:])
    post = " ".join(after[:width]) + (" …" if len(after) > width else "")
    if pre and head[-1:].isspace():
        pre += " "
    if post and tail[:1].isspace():
        post = " " + post
    return pre, clip_words(mid), post


@dataclass
class Example:
    """One mined cause→effect example."""

    trigger_type: str
    encounter_id: str
    condition: str
    ref_span: str
    hyp_span: str
    concept: str
    explanation: str
    clean_context: tuple[str, str, str] | None
    noisy_context: tuple[str, str, str] | None
    effects: list[str]
    linked: bool
    other_events: int
    record_path: str | None
    clean_record_path: str | None
    unexplained: list[str] = field(default_factory=list)
    weight: float = 1.0

    def as_row(self) -> dict[str, Any]:
        return {
            "trigger_type": self.trigger_type,
            "encounter_id": self.encounter_id,
            "condition": self.condition,
            "ref_span": self.ref_span,
            "hyp_span": self.hyp_span,
            "concept": self.concept,
            "clean_context": " ".join(p for p in (self.clean_context or ()) if p),
            "noisy_context": " ".join(p for p in (self.noisy_context or ()) if p),
            "effects": "; ".join(self.effects),
            "linked_to_record_change": self.linked,
            "unexplained_changes": "; ".join(self.unexplained),
            "weight": self.weight,
            "other_events_in_item": self.other_events,
            "record_path": self.record_path,
        }


def mine_examples(run: RunData, per_type: int = 2) -> dict[str, list[Example]]:
    """The clearest examples per trigger type, at most one per encounter.

    An example's effects are the record changes the event explains (module
    docstring); when it explains none, ``linked`` is False and its effects say
    so. ``unexplained`` lists the item's changes that none of its events explains.

    Rank (best first): the event explains a record change; short
    spans (a whole rewritten turn explains little); fewest
    other trigger events in the same item (cleanest attribution); a new critical
    flag or a triage move; more record changes; then encounter id, condition.
    """
    cands: dict[str, list[tuple[tuple[Any, ...], Example]]] = {t: [] for t in TRIGGER_TYPES}
    for it in run.items:
        if it.failed or it.mitigated or it.condition == CLEAN:
            continue
        events = it.triggers_vs_clean or []
        if not events:
            continue
        eid, cond = it.key
        clean_item = run.item(eid, CLEAN)
        diff = diff_records(run.record(clean_item), run.record(it))
        clean_text = (clean_item.hypothesis_text if clean_item is not None else None) or ""
        noisy_text = it.hypothesis_text or ""
        evs = list(events)
        explained = {
            id(ev): [c for c in diff.changes if explains(ev, c, clean_text, noisy_text)] if diff.available else []
            for ev in evs
        }
        covered = {c.line for lst in explained.values() for c in lst}
        unexplained = [c.line for c in diff.changes if c.line not in covered]
        for ev in evs:
            ttype: str = ev.type
            if ttype not in cands:
                cands[ttype] = []
            mine = explained[id(ev)]
            linked = bool(mine)
            if not diff.available:
                effects = diff.describe()
            elif linked:
                effects = [c.line for c in mine]
            elif diff.changes:
                effects = ["no record change overlaps this span (see unexplained changes)"]
            else:
                effects = ["no change in the structured record"]
            ex = Example(
                trigger_type=ttype,
                encounter_id=eid,
                condition=cond,
                ref_span=clip_words(ev.ref_span),
                hyp_span=clip_words(ev.hyp_span),
                concept=ev.concept or "",
                explanation=clip_chars(ev.explanation),
                clean_context=context(clean_text, ev.ref_span, start=ev.ref_start, end=ev.ref_end),
                noisy_context=context(noisy_text, ev.hyp_span, start=ev.hyp_start, end=ev.hyp_end),
                effects=effects,
                linked=linked,
                other_events=len(events) - 1,
                record_path=it.record_path,
                clean_record_path=clean_item.record_path if clean_item is not None else None,
                unexplained=unexplained,
                weight=float(ev.weight or 0.0),
            )
            n_words = len(ev.ref_span.split()) + len(ev.hyp_span.split())
            key = (
                not linked,
                n_words > LONG_SPAN_WORDS,
                len(events) - 1,
                not any(c.line.startswith(("triage", "critical")) for c in mine),
                -len(mine),
                -diff.n_changes,
                eid,
                cond,
            )
            cands[ttype].append((key, ex))
    out: dict[str, list[Example]] = {}
    for ttype, lst in cands.items():
        chosen: list[Example] = []
        seen: set[str] = set()
        for _, ex in sorted(lst, key=lambda kv: kv[0]):
            if ex.encounter_id in seen:
                continue
            chosen.append(ex)
            seen.add(ex.encounter_id)
            if len(chosen) >= per_type:
                break
        out[ttype] = chosen
    return out


def trigger_event_rows(items: Iterable[ItemScore]) -> list[dict[str, Any]]:
    """One row per ``triggers_vs_clean`` event (for tables/triggers.*)."""
    return [
        {
            "encounter_id": it.encounter_id,
            "condition": it.condition,
            "family": it.family,
            "snr_db": it.snr_db,
            "mitigated": bool(it.mitigated),
            "event": k,
            "type": ev.type,
            "ref_span": ev.ref_span,
            "hyp_span": ev.hyp_span,
            "concept": ev.concept,
            "weight": ev.weight,
            "explanation": ev.explanation,
        }
        for it in items
        for k, ev in enumerate(it.triggers_vs_clean or [])
    ]


def count_by_type(examples: dict[str, Sequence[Example]]) -> dict[str, int]:
    return {t: len(v) for t, v in examples.items()}
