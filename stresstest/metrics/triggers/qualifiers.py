"""Course, severity and frequency qualifiers: one heard as another value of its scale
(``entity_substitution``), or a course or severity word lost to other words (``clinical_omission``).
"""

from __future__ import annotations

from collections.abc import Sequence

from stresstest.clinical.vocab import category_weight, qualifiers
from stresstest.metrics.align import AlignedPair
from stresstest.metrics.triggers.regions import _event, _Region
from stresstest.metrics.triggers.words import _CLOSE, _ratio
from stresstest.records import revise
from stresstest.results import TriggerEvent

# Course and severity words whose loss to other words changes the statement ("getting worse" -> "getting first").
_LOSABLE_SCALES = frozenset({"course", "severity"})


def _qualifier_changes(pair: AlignedPair, g: _Region, taken: Sequence[TriggerEvent]) -> list[TriggerEvent]:
    """A qualifier heard as another value of its scale ("worse" -> "better", "mild" -> "severe"):
    entity_substitution; a course or severity word lost to other words: clinical_omission."""
    table = qualifiers()
    rq = [(k, *table[w]) for k in range(g.r0, g.r1) if (w := pair.ref.words[k]) in table]
    if not rq:
        return []
    hq = [(k, *table[w]) for k in range(g.h0, g.h1) if (w := pair.hyp.words[k]) in table]
    out: list[TriggerEvent] = []
    for k, scale, value in rq:
        rs, re_ = pair.ref.char_span(k, k + 1)
        if any(e.ref_start < re_ and e.ref_end > rs for e in taken):
            continue  # already an event of its own ("constant" of "constant pain")
        same_scale = [v for _, sc, v in hq if sc == scale]
        word = pair.ref.words[k]
        if same_scale and value not in same_scale:
            why = f"{scale} word {word!r} heard as {'/'.join(sorted(set(same_scale)))!r}"
            ev = _event("entity_substitution", pair, g, why, scale, weight=category_weight("qualifier"))
        elif not same_scale and scale in _LOSABLE_SCALES and g.h1 > g.h0:
            pi, pj = pair.hyp_range_for_ref(k, k + 1)
            window = pair.hyp.words[max(0, pi - 1) : pj + 1]
            if word in window or any(_ratio(word, h) >= _CLOSE for h in window):
                continue
            near = pair.hyp.words[max(0, pi - 4) : pj + 4]
            if any(table.get(h, ("",))[0] == scale for h in near):
                continue  # "any better or any worse" -> "any better or any world": still asks the course
            why = f"{scale} word {word!r} does not survive in the hypothesis"
            ev = _event("clinical_omission", pair, g, why, scale, weight=category_weight("qualifier_lost"))
        else:
            continue
        out.append(revise(ev, ref_start=rs, ref_end=re_, ref_span=pair.ref.original[rs:re_]))
    return out
