"""Noise sources for the two families of docs/spec.md §2: corpus readers and built-in generators.

Runner usage::

    source = make_noise_source(spec, encounters=corpus, cache_dir=cache)   # once per family
    seg = source.for_encounter(enc.encounter_id).segment(duration_s, rng)  # once per (encounter, family)
"""

from __future__ import annotations

from stresstest.noise.ambient import AMBIENT_RECIPES, AmbientNoise, coloured_noise, render_ambient
from stresstest.noise.babble import BabbleBank, BabbleNoise, BabbleSentence, sentence_pairs
from stresstest.noise.base import NoiseSegment, NoiseSource
from stresstest.noise.corpora import DEMAND_SUBSETS, DemandNoise, MusanSpeechNoise
from stresstest.noise.factory import NoiseSpec, make_noise_source

__all__ = [
    "AMBIENT_RECIPES",
    "DEMAND_SUBSETS",
    "AmbientNoise",
    "BabbleBank",
    "BabbleNoise",
    "BabbleSentence",
    "DemandNoise",
    "MusanSpeechNoise",
    "NoiseSegment",
    "NoiseSource",
    "NoiseSpec",
    "coloured_noise",
    "make_noise_source",
    "render_ambient",
    "sentence_pairs",
]
