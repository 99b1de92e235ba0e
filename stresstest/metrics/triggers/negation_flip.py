"""``negation_flip``: an entity's negation status changes (the NegErr decision,
:mod:`stresstest.metrics.negation`), or a negation cue is lost or gained with no cue on the other side.
"""

from __future__ import annotations

from collections.abc import Sequence

from stresstest.clinical.lexicon import Mention
from stresstest.clinical.text import Token as ClinicalToken
from stresstest.clinical.vocab import category_weight
from stresstest.metrics.align import AlignedPair
from stresstest.metrics.negation import entity_mentions, mismatches_from_mentions
from stresstest.metrics.triggers.regions import _event, _Region, _Side
from stresstest.metrics.triggers.words import _ANSWER_PARTICLES, _HEDGES, _NEG_CUES, _POLLUTION_MIN_WORDS, _is_content
from stresstest.results import TriggerEvent


def _negation_cue(pair: AlignedPair, g: _Region, ref: _Side, hyp: _Side) -> list[TriggerEvent]:
    """A negation cue lost or gained in a region with no known entity of its own ("the injection didn't
    help" -> "the injection, did it help"): negation_flip, heavier next to a clinical term."""
    rc = [k for k in range(g.r0, g.r1) if pair.ref.words[k] in _NEG_CUES]
    hc = [k for k in range(g.h0, g.h1) if pair.hyp.words[k] in _NEG_CUES]
    if bool(rc) == bool(hc) or (hc and len(g.hyp_words) - len(g.ref_words) >= _POLLUTION_MIN_WORDS):
        return []  # no change, or a cue inside a long inserted run (nonspeech_pollution's content)
    other = pair.hyp.words[max(0, g.h0 - 1) : g.h1 + 1] if rc else pair.ref.words[max(0, g.r0 - 1) : g.r1 + 1]
    if any(w in _NEG_CUES for w in other):
        return []  # the cue only moved
    side, ks = (ref, rc) if rc else (hyp, hc)
    words = side.tt.words
    near = words[max(0, ks[0] - 3) : ks[-1] + 4]
    particles = all(words[k] in _ANSWER_PARTICLES for k in ks)
    if particles and not any(
        _is_content(w) and w.isalpha() and len(w) > 2 and w not in _NEG_CUES | _HEDGES for w in near
    ):
        return []  # "no, that i can do", "no probably, i guess": a bare answer particle
    if not particles and ks[-1] + 1 >= len(words):
        return []  # a trailing "not" negates nothing said
    lo, hi = ks[0] - 4, ks[-1] + 5
    clinical = bool(side.mentions.overlapping(lo, hi) or side.terms.overlapping(lo, hi))
    what = "lost" if rc else "gained"
    quoted = pair.ref.quote(g.r0, g.r1) if rc else pair.hyp.quote(g.h0, g.h1)
    return [
        _event(
            "negation_flip",
            pair,
            g,
            f"negation cue {what}: {quoted!r}",
            None,
            weight=category_weight("negation_flip" if clinical else "negation_cue"),
        )
    ]


def _negation_events(
    pair: AlignedPair,
    ref_found: list[Mention],
    hyp_found: list[Mention],
    concepts: Sequence[str],
    tokens: tuple[list[ClinicalToken], list[ClinicalToken]],
) -> list[TriggerEvent]:
    ref_ents = entity_mentions(pair.ref.original, concepts, found=ref_found)
    hyp_ents = entity_mentions(pair.hyp.original, concepts, found=hyp_found)
    out = []
    for m in mismatches_from_mentions(pair, ref_ents, hyp_ents, tokens=tokens):
        why = f"{m.concept!r} is {m.ref_status} in the reference"
        why += f" (cue {m.ref_cue!r})" if m.ref_cue else ""
        why += f" but {m.hyp_status} in the hypothesis"
        why += f" (cue {m.hyp_cue!r})" if m.hyp_cue else ""
        out.append(
            TriggerEvent(
                type="negation_flip",
                weight=category_weight("negation_flip"),
                ref_span=m.ref_quote,
                hyp_span=m.hyp_quote,
                explanation=why,
                ref_start=m.ref_start,
                ref_end=m.ref_end,
                hyp_start=m.hyp_start,
                hyp_end=m.hyp_end,
                concept=m.concept,
            )
        )
    return out
