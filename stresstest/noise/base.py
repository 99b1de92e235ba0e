"""The noise-source interface shared by corpus readers and built-in generators.

Contract (the mixer relies on it):

* ``source.segment(duration_s, rng)`` returns exactly ``round(duration_s * 16000)``
  float32 samples at 16 kHz; the level is arbitrary (the mixer rescales).
* It is a pure function of the generator state: the same ``rng`` state gives
  bit-identical audio. Nothing else random is touched.
* ``recipe`` holds everything that was sampled, JSON-able, so the segment can
  be rebuilt and audited.
* ``source.for_encounter(encounter_id)`` binds the target encounter; sources
  that do not care (everything but babble) return themselves (:class:`EncounterFreeSource`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from stresstest.audio import SAMPLE_RATE_HZ
from stresstest.errors import NoiseError


@dataclass(frozen=True)
class NoiseSegment:
    """A continuous noise segment of a dialogue's duration."""

    audio: np.ndarray
    """float32, 16 kHz mono, exactly ``round(duration_s * 16000)`` samples."""
    source: str
    """Corpus file path, or ``builtin:<family>/<recipe>`` for generators."""
    offset_s: float
    """Where the segment starts within ``source`` (0 for generators)."""
    recipe: dict[str, Any] = field(default_factory=dict)
    """Everything sampled to build the segment (JSON-able)."""


@runtime_checkable
class NoiseSource(Protocol):
    """Anything that can cut a deterministic noise segment of a given duration."""

    family: str
    cache_token: str
    """Identifies the source's content (bank, file list, recipes): part of mixture cache keys."""

    def segment(
        self, duration_s: float, rng: np.random.Generator, *, exclude_encounter_id: str | None = None
    ) -> NoiseSegment:
        """Return a segment of ``duration_s`` seconds using only ``rng`` for randomness."""
        ...

    def for_encounter(self, encounter_id: str) -> NoiseSource:
        """This source bound to a target encounter (babble excludes its sentences)."""
        ...


class EncounterFreeSource:
    """Base of every source whose segments do not depend on the target encounter (all but babble).

    :meth:`for_encounter` returns the source itself; :meth:`segment` validates the duration and leaves the cut of
    ``n`` samples to the subclass's :meth:`_cut` (``exclude_encounter_id`` does not apply).
    """

    family: str
    cache_token: str

    def for_encounter(self, encounter_id: str) -> NoiseSource:
        """The segments do not depend on the encounter: returns ``self``."""
        return self

    def segment(
        self, duration_s: float, rng: np.random.Generator, *, exclude_encounter_id: str | None = None
    ) -> NoiseSegment:
        """A segment of ``duration_s`` seconds (:meth:`_cut`), every choice drawn from ``rng``."""
        return self._cut(n_samples(duration_s), rng)

    def _cut(self, n: int, rng: np.random.Generator) -> NoiseSegment:
        raise NotImplementedError


def n_samples(duration_s: float) -> int:
    """Sample count for a duration, validated (user-facing: no assert)."""
    if not np.isfinite(duration_s) or duration_s <= 0:
        raise NoiseError(f"noise duration must be a positive number of seconds, got {duration_s!r}")
    return round(duration_s * SAMPLE_RATE_HZ)


def child_seed(rng: np.random.Generator) -> int:
    """Draw a seed for a sub-generator and record it, so a recipe can rebuild the waveform."""
    return int(rng.integers(0, 2**63 - 1))


def crossfade_concat(pieces: list[np.ndarray], xfade: int) -> np.ndarray:
    """Concatenate pieces with an equal-power crossfade of ``xfade`` samples between neighbours.

    Equal-power (sin/cos) rather than linear because joined noise pieces are
    uncorrelated: a linear fade would leave a level dip of up to 3 dB.
    """
    if not pieces:
        return np.zeros(0, dtype=np.float32)
    out = np.asarray(pieces[0], dtype=np.float32)
    for nxt in pieces[1:]:
        nxt = np.asarray(nxt, dtype=np.float32)
        k = min(xfade, len(out), len(nxt))
        if k <= 0:
            out = np.concatenate([out, nxt])
            continue
        t = (np.arange(k, dtype=np.float64) + 0.5) / k
        fade_out, fade_in = np.cos(t * np.pi / 2), np.sin(t * np.pi / 2)
        mid = (out[-k:] * fade_out + nxt[:k] * fade_in).astype(np.float32)
        out = np.concatenate([out[:-k], mid, nxt[k:]])
    return out


def loop_from(x: np.ndarray, start: int, n: int, xfade: int) -> tuple[np.ndarray, int]:
    """``n`` samples of ``x`` from ``start``, looping with crossfades when ``x`` runs out.

    Returns the audio and how many loop joins were needed.
    """
    if len(x) == 0:
        raise NoiseError("cannot loop an empty noise file")
    if start + n <= len(x):
        return np.asarray(x[start : start + n], dtype=np.float32), 0
    k = min(xfade, len(x) // 4)  # never fade across more than a quarter of a short file
    out = np.asarray(x[start:], dtype=np.float32)
    joins = 0
    while len(out) < n:
        out = crossfade_concat([out, x], k)
        joins += 1
    return out[:n].astype(np.float32), joins
