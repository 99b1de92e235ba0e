"""The project's one text normalisation for word-level comparison (documented in :mod:`stresstest.metrics.wer`).

It sits at the bottom of the package so that the clinical vocabulary (set phrases), the aligner and WER all
normalise with the same function without importing one another.
"""

from __future__ import annotations

from functools import lru_cache

from whisper_normalizer.english import EnglishTextNormalizer

__all__ = ["normalise", "normaliser", "spelling_map"]


@lru_cache(maxsize=1)
def normaliser() -> EnglishTextNormalizer:
    """Whisper's ``EnglishTextNormalizer``, built once per process.

    Building it compiles a few hundred regexes and loads the spelling map.
    """
    return EnglishTextNormalizer()


@lru_cache(maxsize=1)
def spelling_map() -> dict[str, str]:
    """The normaliser's British -> American spelling map."""
    return dict(normaliser().standardize_spellings.mapping)


@lru_cache(maxsize=256)
def normalise(text: str) -> str:
    """The project's one documented text normalisation for word-level scoring.

    Results are cached (the last 256 texts): a run compares each reference with
    every condition's hypothesis, and the normaliser is the slowest step.

    Args:
        text: any transcript text (reference or ASR hypothesis).

    Returns:
        The normalised text: lower-case words separated by single spaces (see
        :mod:`stresstest.metrics.wer` for every rule). Empty when nothing countable is
        left (e.g. only fillers and punctuation).
    """
    return " ".join(normaliser()(text).split())
