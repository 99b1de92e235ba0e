"""Readers for the reference noise corpora in their published folder layouts.

DEMAND (ambient):  ``<root>/<SUBSET>/ch01.wav … ch16.wav`` — 16 kHz or 48 kHz mono,
                   about 300 s each (the ``<SUBSET>_16k.zip`` / ``_48k.zip`` archives unpack so).
MUSAN (semantic):  ``<root>/speech/librivox/*.wav`` and ``<root>/speech/us-gov/*.wav``
                   (``<root>`` is the unpacked ``musan/`` folder; 16 kHz mono).

Files are read through :func:`stresstest.audio.load_audio` without peak
normalisation (the mixer rescales), i.e. downmixed and resampled to 16 kHz.
See ``noise_corpora/README.md`` for download and licence notes.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from stresstest.audio import SAMPLE_RATE_HZ, load_audio
from stresstest.cache import hash_obj
from stresstest.errors import AudioError, NoiseError
from stresstest.noise.base import EncounterFreeSource, NoiseSegment, crossfade_concat, loop_from

DEMAND_SUBSETS = ("OOFFICE", "PCAFETER", "STRAFFIC")
MUSAN_SPEECH_DIRS = ("librivox", "us-gov")
DEMAND_LAYOUT = "<root>/<SUBSET>/ch01.wav … ch16.wav (DEMAND, 16 or 48 kHz)"
MUSAN_LAYOUT = "<root>/speech/{librivox,us-gov}/*.wav (MUSAN)"
AUDIO_GLOBS = ("*.wav", "*.flac")


@functools.lru_cache(maxsize=6)
def _load(path: str) -> np.ndarray:
    """Cached canonical read: a DEMAND channel is ~19 MB at 16 kHz, so keep only a few."""
    try:
        x = load_audio(path, normalise=False)
    except AudioError as exc:
        raise NoiseError(f"noise file unreadable: {exc}") from exc
    x.setflags(write=False)  # shared between calls: nobody may modify it in place
    return x


def _list_audio(folder: Path) -> list[Path]:
    files: set[Path] = set()
    for pattern in AUDIO_GLOBS:
        files.update(folder.glob(pattern))
    return sorted(files)  # sorted so that an rng index means the same file on every machine


class DemandNoise(EncounterFreeSource):
    """Continuous segments from DEMAND multichannel environment recordings.

    The rng picks a subset, one channel file of it, and a continuous start
    offset; a file shorter than the request is looped with an equal-power
    crossfade of ``crossfade_s``.

    Args:
        root: Folder holding the subset folders.
        subsets: Subset folder names (paper: OOFFICE, PCAFETER, STRAFFIC).
        family: Family name reported (the paper's "ambient").
        crossfade_s: Crossfade length at loop joins.

    Raises:
        NoiseError: when ``root`` or a subset folder is missing or has no channel files.
    """

    def __init__(
        self,
        root: str | Path,
        subsets: tuple[str, ...] | list[str] = DEMAND_SUBSETS,
        family: str = "ambient",
        crossfade_s: float = 0.05,
    ) -> None:
        self.root = Path(root)
        self.family = family
        self.crossfade_s = crossfade_s
        if not subsets:
            raise NoiseError("DEMAND: no subsets requested (e.g. OOFFICE, PCAFETER, STRAFFIC)")
        if not self.root.is_dir():
            raise NoiseError(f"DEMAND corpus not found at {self.root}; expected layout {DEMAND_LAYOUT}")
        self.files: dict[str, list[Path]] = {}
        for sub in subsets:
            folder = self.root / sub
            chans = sorted(folder.glob("ch[0-9][0-9].wav")) if folder.is_dir() else []
            if not chans:
                raise NoiseError(
                    f"DEMAND subset {sub!r} missing or empty: expected {folder}/ch01.wav … ch16.wav "
                    f"(layout {DEMAND_LAYOUT})"
                )
            self.files[sub] = chans
        self.subsets = tuple(subsets)
        listing = {sub: [(f.name, f.stat().st_size) for f in fs] for sub, fs in self.files.items()}
        self.cache_token = hash_obj("demand", str(self.root), listing, crossfade_s)[:16]

    def _cut(self, n: int, rng: np.random.Generator) -> NoiseSegment:
        """Subset, channel and offset drawn from ``rng``; loops with a crossfade if needed."""
        sub = self.subsets[int(rng.integers(len(self.subsets)))]
        path = self.files[sub][int(rng.integers(len(self.files[sub])))]
        x = _load(str(path))
        # Offset drawn over the part of the file where the segment fits without looping, if any.
        start = int(rng.integers(0, max(len(x) - n, 0) + 1)) if len(x) else 0
        audio, joins = loop_from(x, start, n, round(self.crossfade_s * SAMPLE_RATE_HZ))
        recipe = {
            "reader": "demand",
            "subset": sub,
            "file": str(path),
            "start_sample": start,
            "loops": joins,
            "crossfade_s": self.crossfade_s,
            "n_samples": n,
        }
        return NoiseSegment(audio=audio, source=str(path), offset_s=start / SAMPLE_RATE_HZ, recipe=recipe)


class MusanSpeechNoise(EncounterFreeSource):
    """Continuous segments from MUSAN's ``speech/`` part (single talkers: read books, US-gov speech).

    The rng picks a file and an offset; when the rest of that file is shorter
    than the request, further rng-chosen files are appended (equal-power
    crossfade), so the segment is continuous speech of the full duration.

    Args:
        root: The unpacked ``musan/`` folder (containing ``speech/``).
        family: Family name reported (the paper's "babble"/semantic).
        crossfade_s: Crossfade length between files.

    Raises:
        NoiseError: when ``<root>/speech`` is missing or holds no audio files.
    """

    def __init__(self, root: str | Path, family: str = "babble", crossfade_s: float = 0.05) -> None:
        self.root = Path(root)
        self.family = family
        self.crossfade_s = crossfade_s
        speech = self.root / "speech"
        if not speech.is_dir():
            raise NoiseError(f"MUSAN speech folder not found at {speech}; expected layout {MUSAN_LAYOUT}")
        files: list[Path] = []
        for sub in MUSAN_SPEECH_DIRS:
            if (speech / sub).is_dir():
                files.extend(_list_audio(speech / sub))
        if not files:
            raise NoiseError(f"MUSAN: no .wav files under {speech}/{{librivox,us-gov}}; layout {MUSAN_LAYOUT}")
        self.files = files
        listing = [(str(f.relative_to(self.root)), f.stat().st_size) for f in files]
        self.cache_token = hash_obj("musan", str(self.root), listing, crossfade_s)[:16]

    def _cut(self, n: int, rng: np.random.Generator) -> NoiseSegment:
        """One file (plus more if needed) and an offset, all drawn from ``rng``."""
        xfade = round(self.crossfade_s * SAMPLE_RATE_HZ)
        first = self.files[int(rng.integers(len(self.files)))]
        x = _load(str(first))
        start = int(rng.integers(0, max(len(x) - n, 0) + 1))
        pieces = [np.asarray(x[start:])]
        used = [str(first)]
        have = len(pieces[0])
        while have < n:
            nxt = self.files[int(rng.integers(len(self.files)))]
            y = _load(str(nxt))  # never empty: load_audio rejects files without samples
            pieces.append(np.asarray(y))
            used.append(str(nxt))
            have += len(y) - min(xfade, len(y))
        audio = crossfade_concat(pieces, xfade)[:n]
        if len(audio) < n:  # tiny files: crossfades ate more than counted; pad by looping the result
            audio, _ = loop_from(audio, 0, n, xfade)
        recipe = {
            "reader": "musan_speech",
            "files": used,
            "start_sample": start,
            "crossfade_s": self.crossfade_s,
            "n_samples": n,
        }
        return NoiseSegment(
            audio=audio.astype(np.float32), source=str(first), offset_s=start / SAMPLE_RATE_HZ, recipe=recipe
        )
