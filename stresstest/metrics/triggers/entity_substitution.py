"""``entity_substitution``: one clinical entity replaced by a different one of the same kind, a
clinical term heard as one of another kind, a laterality swap or a hypo-/hyper- swap (docs/spec.md §6, §10).
"""

from __future__ import annotations

from collections.abc import Sequence

from stresstest.clinical.lexicon import Mention
from stresstest.clinical.vocab import category_weight
from stresstest.metrics.align import AlignedPair
from stresstest.metrics.triggers.regions import _Ann, _event, _named, _near_concepts, _overlapping, _Region, _Side
from stresstest.metrics.triggers.words import _ENTITY_GROUPS, _LATERALITY, _SIDE_NOUNS
from stresstest.results import TriggerEvent


def _group_concepts(anns: Sequence[_Ann]) -> dict[str, dict[str, _Ann]]:
    out: dict[str, dict[str, _Ann]] = {}
    for a in anns:
        m = a.item
        if isinstance(m, Mention) and m.category in _ENTITY_GROUPS:
            out.setdefault(_ENTITY_GROUPS[m.category], {}).setdefault(m.concept, a)
    return out


def _laterality(words: Sequence[str]) -> set[str]:
    return {_LATERALITY[w] for w in words if w in _LATERALITY}


def _entities(pair: AlignedPair, g: _Region, ref: _Side, hyp: _Side) -> tuple[list[TriggerEvent], set[str]]:
    """Entity substitutions in a region; also returns the hypothesis concepts they explain."""
    events: list[TriggerEvent] = []
    explained: set[str] = set()
    rg = _group_concepts(_overlapping(ref.mentions, g.r0, g.r1))
    hg = _group_concepts(_overlapping(hyp.mentions, g.h0, g.h1))
    ref_near = _near_concepts(ref, g.r0, g.r1, 3)
    hyp_near = _near_concepts(hyp, g.h0, g.h1, 3)
    for group in sorted(set(rg) & set(hg)):
        lost = [c for c in rg[group] if c not in hyp_near]
        new = [c for c in hg[group] if c not in ref_near]
        if lost and new:
            a, b = rg[group][lost[0]], hg[group][new[0]]
            why = f"{group} {_named(lost[0], pair.ref.original[a.start : a.end])} replaced by "
            why += _named(new[0], pair.hyp.original[b.start : b.end])
            events.append(_event("entity_substitution", pair, g, why, lost[0], [a], [b]))
            explained.update(new)
    if not events:
        events += _cross_kind(pair, g, rg, hg, ref_near, hyp_near, explained)
    rl, hl = _laterality(g.ref_words), _laterality(g.hyp_words)
    if rl and hl and rl != hl and _sided(pair, g):
        events.append(
            _event(
                "entity_substitution",
                pair,
                g,
                f"laterality {'/'.join(sorted(rl))} replaced by {'/'.join(sorted(hl))}",
                "laterality",
                weight=category_weight("laterality"),
            )
        )
    for rw in g.ref_words:
        for hw in g.hyp_words:
            if _hypo_hyper(rw, hw):
                events.append(
                    _event(
                        "entity_substitution",
                        pair,
                        g,
                        f"{rw!r} replaced by its opposite {hw!r}",
                        rw,
                    )
                )
                explained.add(hw)
    return events, explained


def _cross_kind(
    pair: AlignedPair,
    g: _Region,
    rg: dict[str, dict[str, _Ann]],
    hg: dict[str, dict[str, _Ann]],
    ref_near: set[str],
    hyp_near: set[str],
    explained: set[str],
) -> list[TriggerEvent]:
    """A clinical term heard as one of another kind ("Eucrisa" -> "urethra"): drug -> body site etc.

    A part of the other term does not count ("chest pain" -> "chest" is a lost word, not a new entity).
    """
    lost = [a for grp in sorted(rg) for c, a in rg[grp].items() if c not in hyp_near]
    new = [b for grp in sorted(hg) for c, b in hg[grp].items() if c not in ref_near]
    for a in lost:
        for b in new:
            sa = set(pair.ref.original[a.start : a.end].lower().split())
            sb = set(pair.hyp.original[b.start : b.end].lower().split())
            if sa <= sb or sb <= sa:
                continue
            ma, mb = a.item, b.item
            if not (isinstance(ma, Mention) and isinstance(mb, Mention)):
                continue
            why = f"{ma.category} {_named(ma.concept, ma.surface)} replaced by {mb.category} "
            why += _named(mb.concept, mb.surface)
            explained.add(mb.concept)
            return [_event("entity_substitution", pair, g, why, ma.concept, [a], [b])]
    return []


def _sided(pair: AlignedPair, g: _Region) -> bool:
    """'right' is a laterality only next to a body part ("right knee", "on the left side")."""
    words = [*pair.ref.words[max(0, g.r0 - 3) : g.r1 + 3], *pair.hyp.words[max(0, g.h0 - 3) : g.h1 + 3]]
    return any(w in _SIDE_NOUNS or w.rstrip("s") in _SIDE_NOUNS for w in words)


def _hypo_hyper(a: str, b: str) -> bool:
    for x, y in (("hypo", "hyper"), ("hyper", "hypo")):
        if a.startswith(x) and b.startswith(y) and a[len(x) :] == b[len(y) :] and len(a) > len(x) + 3:
            return True
    return False
