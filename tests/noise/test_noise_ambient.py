"""Built-in ambient generators: determinism, exact length, stationarity, rebuild from recipe."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stresstest.errors import NoiseError
from stresstest.noise import AMBIENT_RECIPES, AmbientNoise, NoiseSource, render_ambient


def frame_db(x: np.ndarray, frame: int = 16000) -> np.ndarray:
    n = len(x) // frame
    f = x[: n * frame].reshape(n, frame).astype(np.float64)
    return 10 * np.log10(np.mean(f**2, axis=1) + 1e-20)


@pytest.mark.parametrize("recipe", AMBIENT_RECIPES)
def test_same_seed_bit_identical_and_seeds_differ(recipe: str) -> None:
    src = AmbientNoise((recipe,))
    a = src.segment(3.0, np.random.default_rng(7))
    b = src.segment(3.0, np.random.default_rng(7))
    c = src.segment(3.0, np.random.default_rng(8))
    assert a.audio.dtype == np.float32
    assert np.array_equal(a.audio, b.audio)
    assert a.recipe == b.recipe
    assert not np.array_equal(a.audio, c.audio)
    assert a.source == f"builtin:ambient/{recipe}"
    json.dumps(a.recipe)  # recipe must be JSON-able


@pytest.mark.parametrize("duration", [0.5, 1.23456, 7.00003, 11.0])
def test_exact_length(duration: float) -> None:
    seg = AmbientNoise().segment(duration, np.random.default_rng(1))
    assert len(seg.audio) == round(duration * 16000)
    assert np.all(np.isfinite(seg.audio))


@pytest.mark.parametrize("recipe", AMBIENT_RECIPES)
def test_stationary(recipe: str) -> None:
    # 1-s frame levels stay within a few dB over 20 s, for several parameter draws.
    for seed in range(3):
        levels = frame_db(AmbientNoise((recipe,)).segment(20.0, np.random.default_rng(seed)).audio)
        assert np.ptp(levels) < 4.5, (recipe, seed, np.ptp(levels))


def test_recipe_rebuilds_segment() -> None:
    seg = AmbientNoise().segment(2.0, np.random.default_rng(3))
    recipe = json.loads(json.dumps(seg.recipe))  # survives a round trip through a manifest
    assert np.array_equal(render_ambient(recipe), seg.audio)


def test_rng_picks_several_recipes() -> None:
    names = {AmbientNoise().segment(0.2, np.random.default_rng(s)).recipe["recipe"] for s in range(40)}
    assert len(names) >= 4


def test_hvac_hum_peaks_at_mains() -> None:
    seg = AmbientNoise(("hvac",)).segment(4.0, np.random.default_rng(11))
    mains = seg.recipe["params"]["mains_hz"]
    spec = np.abs(np.fft.rfft(seg.audio.astype(np.float64)))
    f = np.fft.rfftfreq(len(seg.audio), 1 / 16000)
    at_mains = spec[np.argmin(np.abs(f - mains))]
    neighbourhood = spec[(f > mains + 5) & (f < mains + 20)].mean()
    assert at_mains > 10 * neighbourhood


def test_errors_and_protocol() -> None:
    assert isinstance(AmbientNoise(), NoiseSource)
    assert AmbientNoise().for_encounter("X") is not None
    with pytest.raises(NoiseError, match="unknown ambient recipe"):
        AmbientNoise(("jackhammer",))
    with pytest.raises(NoiseError, match="positive"):
        AmbientNoise().segment(0.0, np.random.default_rng(0))
