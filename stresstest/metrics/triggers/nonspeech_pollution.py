"""``nonspeech_pollution``: content absent from the reference that appears in the hypothesis (a
background talker, a hallucinated phrase), docs/spec.md §6, §10.
"""

from __future__ import annotations

from stresstest.clinical.lexicon import Mention
from stresstest.clinical.vocab import category_weight
from stresstest.metrics.align import AlignedPair
from stresstest.metrics.triggers.regions import _event, _near_concepts, _overlapping, _Region, _Side
from stresstest.metrics.triggers.words import _NOVELTY_WINDOW, _POLLUTION_MIN_WORDS, _is_content
from stresstest.results import TriggerEvent, TriggerType


def _pollution(pair: AlignedPair, g: _Region, ref: _Side, hyp: _Side, explained: set[str]) -> list[TriggerEvent]:
    n_ins = len(g.hyp_words) - len(g.ref_words)
    ref_content = [w for w in g.ref_words if _is_content(w)]
    if n_ins <= 0 and ref_content:
        return []  # a like-for-like substitution, not inserted material
    lo, hi = max(0, g.r0 - _NOVELTY_WINDOW), g.r1 + _NOVELTY_WINDOW
    ref_vocab = set(pair.ref.words[lo:hi])
    ref_concepts = _near_concepts(ref, g.r0, g.r1, _NOVELTY_WINDOW)
    new_entities = [
        a
        for a in _overlapping(hyp.mentions, g.h0, g.h1)
        if isinstance(a.item, Mention)
        and a.item.category != "body_site"
        and a.item.concept not in ref_concepts
        and a.item.concept not in explained
    ]
    if new_entities:
        names = ", ".join(repr(pair.hyp.original[a.start : a.end]) for a in new_entities)
        # Same number of words, only function words replaced: a misrecognition, not inserted material
        # ("pain felt" -> "pain fell"): an ordinary word heard as a clinical term.
        kind: TriggerType = "entity_substitution" if n_ins <= 0 else "nonspeech_pollution"
        what = "ordinary words heard as clinical content" if n_ins <= 0 else "hypothesis inserts clinical content"
        return [
            _event(
                kind,
                pair,
                g,
                f"{what} absent from the reference: {names}",
                new_entities[0].item.concept if isinstance(new_entities[0].item, Mention) else None,
                weight=category_weight("nonspeech_clinical"),
            )
        ]
    novel = [w for w in g.hyp_words if _is_content(w) and w not in ref_vocab]
    if n_ins >= _POLLUTION_MIN_WORDS and len(novel) >= _POLLUTION_MIN_WORDS:
        return [
            _event(
                "nonspeech_pollution",
                pair,
                g,
                f"hypothesis inserts {n_ins} words absent from the reference ({' '.join(novel[:8])})",
                None,
            )
        ]
    return []
