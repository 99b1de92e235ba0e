"""Babble logic on a synthetic bank (no piper): exclusion, determinism, non-stationarity, errors.

The piper-rendered bank is covered in tests/speech/test_speech_render.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from stresstest.errors import NoiseError
from stresstest.noise import AmbientNoise, BabbleBank, BabbleNoise, BabbleSentence, NoiseSpec, sentence_pairs
from stresstest.noise.babble import select_pairs
from stresstest.records import Encounter, Turn

SR = 16000


def _fake_sentence(seed: int) -> np.ndarray:
    """Speech-like stand-in: harmonic "words" of 0.15-0.5 s with short gaps and uneven loudness, unit RMS."""
    rng = np.random.default_rng(seed)
    f0 = rng.uniform(100, 220)
    words = []
    for _ in range(int(rng.integers(3, 9))):
        n = int(rng.uniform(0.15, 0.5) * SR)
        t = np.arange(n) / SR
        voice = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6))
        words.append(rng.uniform(0.3, 1.0) * voice * np.hanning(n))
        words.append(np.zeros(int(rng.uniform(0.03, 0.2) * SR)))
    x = np.concatenate(words)
    return (x / np.sqrt(np.mean(x**2))).astype(np.float32)


@pytest.fixture(scope="module")
def bank() -> BabbleBank:
    sentences = [
        BabbleSentence(f"E{e}#{k}", f"E{e}", f"sentence {k} of E{e}", _fake_sentence(10 * e + k))
        for e in range(4)
        for k in range(5)
    ]
    return BabbleBank(sentences)


def _ids(recipe: dict) -> list[str]:
    return [sid for t in recipe["talkers"] for sid in t["sentence_ids"]]


def test_never_uses_excluded_encounter(bank: BabbleBank) -> None:
    src = BabbleNoise(bank)
    for seed in range(10):
        seg = src.for_encounter("E2").segment(8.0, np.random.default_rng(seed))
        ids = _ids(seg.recipe)
        assert ids and not any(i.startswith("E2#") for i in ids)
        assert seg.recipe["exclude_encounter_id"] == "E2"
    # The keyword form does the same.
    seg = src.segment(8.0, np.random.default_rng(0), exclude_encounter_id="E0")
    assert not any(i.startswith("E0#") for i in _ids(seg.recipe))


def test_deterministic_exact_length_and_recipe(bank: BabbleBank) -> None:
    src = BabbleNoise(bank, "E1")
    a = src.segment(6.789, np.random.default_rng(42))
    b = src.segment(6.789, np.random.default_rng(42))
    c = src.segment(6.789, np.random.default_rng(43))
    assert len(a.audio) == round(6.789 * SR) and a.audio.dtype == np.float32
    assert np.array_equal(a.audio, b.audio) and a.recipe == b.recipe
    assert not np.array_equal(a.audio, c.audio)
    assert 3 <= a.recipe["n_talkers"] <= 7
    assert len(a.recipe["talkers"]) == a.recipe["n_talkers"]
    for t in a.recipe["talkers"]:
        assert -3.0 <= t["gain_db"] <= 3.0
    json.dumps(a.recipe)


def test_talker_count_range(bank: BabbleBank) -> None:
    src = BabbleNoise(bank, "E0", n_talkers_min=3, n_talkers_max=7)
    counts = {src.segment(1.0, np.random.default_rng(s)).recipe["n_talkers"] for s in range(60)}
    assert counts == set(range(3, 8))


def test_babble_is_not_stationary_unlike_ambient(bank: BabbleBank) -> None:
    def spread(x: np.ndarray) -> float:
        f = x[: len(x) // 4000 * 4000].reshape(-1, 4000).astype(np.float64)
        return float(np.std(10 * np.log10(np.mean(f**2, axis=1) + 1e-20)))

    babble = BabbleNoise(bank, "E3", n_talkers_min=3, n_talkers_max=3).segment(20.0, np.random.default_rng(1))
    ambient = AmbientNoise().segment(20.0, np.random.default_rng(1))
    assert spread(babble.audio) > 1.5
    assert spread(babble.audio) > 2 * spread(ambient.audio)


def test_errors(bank: BabbleBank) -> None:
    with pytest.raises(NoiseError, match="target encounter"):
        BabbleNoise(bank).segment(1.0, np.random.default_rng(0))
    only_one = BabbleBank([s for s in bank.sentences if s.encounter_id == "E0"])
    with pytest.raises(NoiseError, match="other than 'E0'"):
        BabbleNoise(only_one, "E0").segment(1.0, np.random.default_rng(0))
    with pytest.raises(NoiseError, match="n_talkers_min"):
        BabbleNoise(bank, n_talkers_min=5, n_talkers_max=3)
    with pytest.raises(NoiseError, match="empty"):
        BabbleBank([])


def test_sentence_selection_is_even_and_deterministic() -> None:
    encs = [
        Encounter(
            encounter_id=f"X{e}",
            corpus="osce",
            source_path="mem",
            turns=tuple(
                Turn(speaker="doctor", text=f"Take {k} tablets of aspirin daily. Ok. Any chest pain {e}?")
                for k in range(6)
            ),
        )
        for e in range(3)
    ]
    pairs = sentence_pairs(encs, min_words=4)
    assert all(len(s.split()) >= 4 for _, s in pairs)  # "Ok." filtered out
    assert len(pairs) == 3 * 12
    chosen = select_pairs(pairs, 7)
    assert chosen == select_pairs(pairs, 7)
    per_enc = {e: sum(1 for c in chosen if c[0] == e) for e in ("X0", "X1", "X2")}
    assert sorted(per_enc.values()) == [2, 2, 3]


def test_spec_validation() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="needs 'root'"):
        NoiseSpec(family="ambient", kind="demand")
    with pytest.raises(ValidationError, match="n_talkers_min"):
        NoiseSpec(family="babble", n_talkers_min=6, n_talkers_max=4)
    with pytest.raises(ValidationError, match="extra"):
        NoiseSpec(family="babble", talkers=4)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        NoiseSpec(family="music")  # type: ignore[arg-type]


def test_cache_tokens_identify_content(bank: BabbleBank) -> None:
    smaller = BabbleBank(bank.sentences[:-1])
    assert BabbleNoise(bank).cache_token == BabbleNoise(bank).for_encounter("E1").cache_token
    assert BabbleNoise(bank).cache_token != BabbleNoise(smaller).cache_token
    assert AmbientNoise().cache_token != AmbientNoise(("hvac",)).cache_token
