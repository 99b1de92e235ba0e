"""DEMAND and MUSAN readers on fake layouts written in tmp_path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from stresstest.errors import NoiseError
from stresstest.noise import DemandNoise, MusanSpeechNoise, NoiseSpec, make_noise_source


def _write(path: Path, seconds: float, sr: int, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    # A ramp plus noise, so offsets are recognisable and files differ.
    n = round(seconds * sr)
    x = 0.1 * rng.standard_normal(n) + np.linspace(-0.5, 0.5, n)
    sf.write(str(path), x.astype(np.float32), sr, subtype="FLOAT")


@pytest.fixture()
def demand_root(tmp_path: Path) -> Path:
    root = tmp_path / "demand"
    for i, sub in enumerate(("OOFFICE", "PCAFETER", "STRAFFIC")):
        for ch in range(1, 4):
            _write(root / sub / f"ch{ch:02d}.wav", 2.0, 48000 if sub == "OOFFICE" else 16000, 10 * i + ch)
    return root


@pytest.fixture()
def musan_root(tmp_path: Path) -> Path:
    root = tmp_path / "musan"
    for k in range(3):
        _write(root / "speech" / "librivox" / f"speech-librivox-{k:04d}.wav", 1.5, 16000, 100 + k)
        _write(root / "speech" / "us-gov" / f"speech-us-gov-{k:04d}.wav", 1.0, 16000, 200 + k)
    return root


def test_demand_segment_deterministic_and_inside_file(demand_root: Path) -> None:
    src = DemandNoise(demand_root)
    a = src.segment(1.0, np.random.default_rng(4))
    b = src.segment(1.0, np.random.default_rng(4))
    assert len(a.audio) == 16000 and a.audio.dtype == np.float32
    assert np.array_equal(a.audio, b.audio) and a.recipe == b.recipe
    assert a.recipe["subset"] in ("OOFFICE", "PCAFETER", "STRAFFIC")
    assert Path(a.source).name.startswith("ch") and a.recipe["loops"] == 0
    assert 0.0 <= a.offset_s <= 1.0
    picks = {(src.segment(1.0, np.random.default_rng(s)).source) for s in range(30)}
    assert len(picks) > 3  # subsets and channels really vary


def test_demand_segment_matches_file_at_offset(demand_root: Path) -> None:
    src = DemandNoise(demand_root, subsets=("PCAFETER",))  # 16 kHz files: no resampling
    seg = src.segment(0.5, np.random.default_rng(9))
    x, _ = sf.read(seg.source, dtype="float32")
    start = seg.recipe["start_sample"]
    assert np.array_equal(seg.audio, x[start : start + len(seg.audio)])


def test_demand_loops_with_crossfade(demand_root: Path) -> None:
    seg = DemandNoise(demand_root, subsets=("STRAFFIC",)).segment(5.3, np.random.default_rng(1))
    assert len(seg.audio) == round(5.3 * 16000)
    assert seg.recipe["loops"] >= 2
    assert np.all(np.isfinite(seg.audio))


def test_demand_missing_root_and_subset(tmp_path: Path, demand_root: Path) -> None:
    with pytest.raises(NoiseError, match=r"nowhere.*ch01\.wav"):
        DemandNoise(tmp_path / "nowhere")
    with pytest.raises(NoiseError, match=r"DLIVING.*ch01\.wav"):
        DemandNoise(demand_root, subsets=("OOFFICE", "DLIVING"))


def test_musan_concatenates_deterministically(musan_root: Path) -> None:
    src = MusanSpeechNoise(musan_root)
    a = src.segment(4.0, np.random.default_rng(2))
    b = src.segment(4.0, np.random.default_rng(2))
    c = src.segment(4.0, np.random.default_rng(3))
    assert len(a.audio) == 64000
    assert np.array_equal(a.audio, b.audio)
    assert not np.array_equal(a.audio, c.audio)
    assert len(a.recipe["files"]) >= 3  # no file is 4 s long
    assert all("/speech/" in f for f in a.recipe["files"])


def test_musan_missing_root(tmp_path: Path) -> None:
    with pytest.raises(NoiseError, match=r"speech.*librivox,us-gov"):
        MusanSpeechNoise(tmp_path)
    (tmp_path / "speech" / "librivox").mkdir(parents=True)
    with pytest.raises(NoiseError, match="no .wav files"):
        MusanSpeechNoise(tmp_path)


def test_factory_builds_corpus_readers(demand_root: Path, musan_root: Path, tmp_path: Path) -> None:
    d = make_noise_source(
        NoiseSpec(family="ambient", kind="demand", root=str(demand_root)), encounters=[], cache_dir=tmp_path
    )
    m = make_noise_source(
        NoiseSpec(family="babble", kind="musan", root=str(musan_root)), encounters=[], cache_dir=tmp_path
    )
    assert isinstance(d, DemandNoise) and d.family == "ambient"
    assert isinstance(m, MusanSpeechNoise) and m.family == "babble"
    with pytest.raises(NoiseError, match="DEMAND corpus not found"):
        spec = NoiseSpec(family="ambient", kind="demand", root=str(tmp_path / "x"))
        make_noise_source(spec, encounters=[], cache_dir=tmp_path)
