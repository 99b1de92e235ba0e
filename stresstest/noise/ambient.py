"""Built-in stationary ("ambient") noise generators that need no corpus.

The rng picks one recipe and its parameters, then a child seed for the
waveform; ``recipe`` records all of them, so :func:`render_ambient` rebuilds a
segment bit-identically from its recipe alone. Recipes (details in
``noise_corpora/README.md``):

``hvac``         mains hum (50 or 60 Hz + harmonics) over band-limited airflow noise
``ventilation``  pink noise, band-limited, with a gentle spectral tilt
``drone``        equipment drone: a few tonal partials with slow AM/FM over a pink floor
``traffic``      distant traffic rumble: low-passed brown noise with slow swells (±1.2 dB at most)
``office``       hvac + ventilation + faint drone
``cafeteria``    ventilation + traffic rumble + drone, denser and brighter than office

All are stationary by construction: every modulation is slow and shallow, so
1-s frame RMS stays within a few dB.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stresstest.audio import SAMPLE_RATE_HZ
from stresstest.cache import hash_obj
from stresstest.errors import NoiseError
from stresstest.noise.base import EncounterFreeSource, NoiseSegment, child_seed

#: Bumped whenever a change here changes the audio a recipe produces.
AMBIENT_CODE_VERSION = "ambient-1"
AMBIENT_RECIPES = ("hvac", "ventilation", "drone", "traffic", "office", "cafeteria")


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if x.size else 0.0


def _unit(x: np.ndarray) -> np.ndarray:
    r = _rms(x)
    return x / r if r > 0 else x


def coloured_noise(
    n: int, rng: np.random.Generator, exponent: float, f_lo_hz: float = 20.0, f_hi_hz: float = 7000.0
) -> np.ndarray:
    """Gaussian noise with power spectrum ~ 1/f^exponent, band-limited, unit RMS.

    Shaped in the frequency domain (one rfft of white noise) with 2nd-order
    Butterworth-like magnitude edges: exact length, no filter start-up
    transient, and deterministic for a given rng state.
    """
    white = rng.standard_normal(n)
    spec = np.fft.rfft(white)
    f = np.fft.rfftfreq(n, 1.0 / SAMPLE_RATE_HZ)
    f_safe = np.maximum(f, 1.0)
    shape = f_safe ** (-exponent / 2)
    shape *= 1.0 / np.sqrt(1.0 + (f_lo_hz / f_safe) ** 4)  # high-pass edge (kills DC drift of brown noise)
    shape *= 1.0 / np.sqrt(1.0 + (f / f_hi_hz) ** 4)  # low-pass edge
    shape[0] = 0.0
    return _unit(np.fft.irfft(spec * shape, n))


def _tones(
    n: int, freqs: list[float], amps: list[float], phases: list[float], am: list[tuple[float, float, float]]
) -> np.ndarray:
    """Sum of partials; ``am`` = (rate Hz, depth 0..1, phase) per partial for slow amplitude wobble."""
    t = np.arange(n, dtype=np.float64) / SAMPLE_RATE_HZ
    out = np.zeros(n)
    for f, a, ph, (rate, depth, aph) in zip(freqs, amps, phases, am, strict=True):
        env = 1.0 + depth * np.sin(2 * np.pi * rate * t + aph)
        out += a * env * np.sin(2 * np.pi * f * t + ph)
    return out


def _sample_params(name: str, rng: np.random.Generator) -> dict[str, Any]:
    """Draw the parameters of one recipe (all JSON-able)."""
    u = rng.uniform
    if name == "hvac":
        mains = float(rng.choice([50.0, 60.0]))
        n_harm = int(rng.integers(4, 9))
        return {
            "mains_hz": mains,
            "harmonic_amps": [float(u(0.2, 1.0) / k) for k in range(1, n_harm + 1)],
            "harmonic_phases": [float(u(0, 2 * np.pi)) for _ in range(n_harm)],
            "airflow_exponent": float(u(0.5, 1.2)),
            "airflow_hi_hz": float(u(2000, 5000)),
            "hum_to_air_db": float(u(-12, 0)),
        }
    if name == "ventilation":
        return {"exponent": float(u(0.8, 1.2)), "lo_hz": float(u(40, 120)), "hi_hz": float(u(3000, 7500))}
    if name == "drone":
        n_part = int(rng.integers(2, 6))
        return {
            "freqs_hz": [float(u(70, 420)) for _ in range(n_part)],
            "amps": [float(u(0.3, 1.0)) for _ in range(n_part)],
            "phases": [float(u(0, 2 * np.pi)) for _ in range(n_part)],
            "am": [[float(u(0.1, 1.0)), float(u(0.02, 0.12)), float(u(0, 2 * np.pi))] for _ in range(n_part)],
            "floor_db": float(u(-15, -6)),
        }
    if name == "traffic":
        n_swell = int(rng.integers(2, 4))
        return {
            "lo_hz": float(u(20, 35)),
            "hi_hz": float(u(250, 700)),
            "swell_rates_hz": [float(u(0.02, 0.12)) for _ in range(n_swell)],
            "swell_phases": [float(u(0, 2 * np.pi)) for _ in range(n_swell)],
            "swell_depth_db": float(u(0.3, 1.2)),
        }
    if name == "office":
        return {
            "hvac": _sample_params("hvac", rng),
            "ventilation": _sample_params("ventilation", rng),
            "drone": _sample_params("drone", rng),
            "weights_db": {"hvac": 0.0, "ventilation": float(u(-6, 0)), "drone": float(u(-18, -8))},
        }
    if name == "cafeteria":
        return {
            "ventilation": _sample_params("ventilation", rng),
            "traffic": _sample_params("traffic", rng),
            "drone": _sample_params("drone", rng),
            "weights_db": {"ventilation": 0.0, "traffic": float(u(-6, 0)), "drone": float(u(-12, -4))},
        }
    raise NoiseError(f"unknown ambient recipe {name!r}; expected one of {', '.join(AMBIENT_RECIPES)}")


def _synth(name: str, p: dict[str, Any], n: int, rng: np.random.Generator) -> np.ndarray:
    """Waveform for a recipe; ``rng`` only supplies the noise samples. Unit RMS, float64."""
    if name == "hvac":
        k = len(p["harmonic_amps"])
        freqs = [p["mains_hz"] * (i + 1) for i in range(k)]
        hum = _unit(_tones(n, freqs, p["harmonic_amps"], p["harmonic_phases"], [(0.0, 0.0, 0.0)] * k))
        air = coloured_noise(n, rng, p["airflow_exponent"], 60.0, p["airflow_hi_hz"])
        return _unit(10 ** (p["hum_to_air_db"] / 20) * hum + air)
    if name == "ventilation":
        return coloured_noise(n, rng, p["exponent"], p["lo_hz"], p["hi_hz"])
    if name == "drone":
        am = [tuple(a) for a in p["am"]]
        tones = _unit(_tones(n, p["freqs_hz"], p["amps"], p["phases"], am))
        return _unit(tones + 10 ** (p["floor_db"] / 20) * coloured_noise(n, rng, 1.0, 40.0, 6000.0))
    if name == "traffic":
        rumble = coloured_noise(n, rng, 2.0, p["lo_hz"], p["hi_hz"])
        t = np.arange(n, dtype=np.float64) / SAMPLE_RATE_HZ
        pairs = zip(p["swell_rates_hz"], p["swell_phases"], strict=True)
        swell = sum(np.sin(2 * np.pi * r * t + ph) for r, ph in pairs)
        swell = swell / max(len(p["swell_rates_hz"]), 1)  # in [-1, 1]
        return _unit(rumble * 10 ** (p["swell_depth_db"] * swell / 20))
    if name in ("office", "cafeteria"):
        out = np.zeros(n)
        for part, w_db in p["weights_db"].items():
            out += 10 ** (w_db / 20) * _synth(part, p[part], n, rng)
        return _unit(out)
    raise NoiseError(f"unknown ambient recipe {name!r}; expected one of {', '.join(AMBIENT_RECIPES)}")


def render_ambient(recipe: dict[str, Any]) -> np.ndarray:
    """Rebuild an ambient segment from the ``recipe`` a previous :meth:`AmbientNoise.segment` returned."""
    n = int(recipe["n_samples"])
    wave_rng = np.random.default_rng(int(recipe["waveform_seed"]))
    return (0.1 * _synth(recipe["recipe"], recipe["params"], n, wave_rng)).astype(np.float32)


class AmbientNoise(EncounterFreeSource):
    """Stationary built-in noise: the rng picks a recipe among ``recipes`` and its parameters.

    Args:
        recipes: Allowed recipe names (default: all of :data:`AMBIENT_RECIPES`).
        family: Family name reported with the segment (the paper's "ambient").
    """

    def __init__(self, recipes: tuple[str, ...] | list[str] = AMBIENT_RECIPES, family: str = "ambient") -> None:
        bad = [r for r in recipes if r not in AMBIENT_RECIPES]
        if bad or not recipes:
            raise NoiseError(
                f"unknown ambient recipe(s) {bad or '[] (empty list)'}; expected some of {list(AMBIENT_RECIPES)}"
            )
        self.recipes = tuple(recipes)
        self.family = family
        self.cache_token = hash_obj("ambient", AMBIENT_CODE_VERSION, self.recipes)[:16]

    def _cut(self, n: int, rng: np.random.Generator) -> NoiseSegment:
        """A stationary segment of ``n`` samples (level 0.1 RMS; the mixer rescales)."""
        name = str(self.recipes[int(rng.integers(len(self.recipes)))])
        params = _sample_params(name, rng)
        recipe = {
            "generator": "ambient",
            "recipe": name,
            "params": params,
            "waveform_seed": child_seed(rng),
            "n_samples": n,
        }
        return NoiseSegment(audio=render_ambient(recipe), source=f"builtin:ambient/{name}", offset_s=0.0, recipe=recipe)
