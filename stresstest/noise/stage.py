"""The conditions stage: clean speech + one noise segment per (encounter, family) → mixtures.

For each (encounter, family) the noise segment is drawn once from
``item_rng(seed, encounter_id, family)`` and reused at every SNR of that
family, so SNR is the only thing that changes between those conditions.
Mixtures are cached by (clean speech hash, noise spec, seed, SNR, code
version): re-running a finished sweep recomputes nothing, and adding an SNR
computes only that condition (the segment is rebuilt deterministically).

Memory does not grow with the recording's length: the clean speech is read from
its file a block at a time (:func:`~stresstest.noise.mix.write_mixture`), and a
noise segment is generated for at most :data:`NOISE_PERIOD_MAX_S` seconds; a
longer recording hears that segment repeated end to end (the ``tile`` rule of
:func:`~stresstest.noise.mix.fit_length`; recorded as ``loop_period_s`` in the
mixture's noise recipe). Recordings up to that length get exactly the segment
they always got.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stresstest.audio import wav_frames
from stresstest.cache import KeyValueCache, hash_obj, sha256_file
from stresstest.grid import Condition
from stresstest.noise import NoiseSource
from stresstest.noise.mix import SpanMask, item_rng, tiled_noise, write_mixture
from stresstest.records import MixInfo, SpeechAudio

MIX_CODE_VERSION = "mix-3"  # bump whenever the mixer arithmetic changes: cached mixtures depend on it
#: Longest noise segment generated for one (encounter, family): 10 minutes (a few hundred MB while it is built).
NOISE_PERIOD_MAX_S = 600.0


@dataclass(frozen=True)
class MixJob:
    """All SNRs of one (encounter, family)."""

    encounter_id: str
    family: str
    snrs_db: tuple[float, ...]
    conditions: tuple[str, ...]


def mixture_key(
    speech_sha: str,
    family: str,
    noise_spec: dict[str, Any],
    source_token: str | None,
    seed: int,
    snr_db: float,
    loop_period_s: float | None = None,
) -> str:
    """Cache key of one mixture: the source token covers what the spec does not (babble bank audio, corpus files).

    ``loop_period_s`` (recordings longer than :data:`NOISE_PERIOD_MAX_S`) joins the key only when set, so
    the keys of every shorter recording are what they were.
    """
    loop = () if loop_period_s is None else (("loop_period_s", float(loop_period_s)),)
    return hash_obj(
        "mixture", MIX_CODE_VERSION, speech_sha, family, noise_spec, source_token, seed, float(snr_db), *loop
    )


def noise_period_s(duration_s: float) -> float | None:
    """The noise period a recording of ``duration_s`` hears, when it is shorter than the recording."""
    return NOISE_PERIOD_MAX_S if duration_s > NOISE_PERIOD_MAX_S else None


def build_mixtures(
    job: MixJob,
    speech: SpeechAudio,
    source: NoiseSource,
    noise_spec: dict[str, Any],
    *,
    seed: int,
    cache_dir: Path,
    on_done: Callable[[str, Path | None, MixInfo | None, str | None], None],
) -> None:
    """Write (or reuse) the mixtures of ``job``; report each via ``on_done(condition, path, info, error)``."""
    cache = KeyValueCache(cache_dir, "mixtures")
    speech_sha = sha256_file(speech.path)
    period = noise_period_s(speech.duration_s)
    todo: list[tuple[str, float, str, Path]] = []
    for cond, snr in zip(job.conditions, job.snrs_db, strict=True):
        key = mixture_key(speech_sha, job.family, noise_spec, getattr(source, "cache_token", None), seed, snr, period)
        wav = cache.file_path(key, ".wav")
        # Verified read: the WAV's size and sha256 must match what was recorded at write, else recompute.
        hit = cache.get(key, validate=MixInfo.model_validate, files={"wav": wav})
        if hit is not None:
            on_done(cond, wav, hit, None)
        else:
            todo.append((cond, snr, key, wav))
    if not todo:
        return
    try:
        mask = SpanMask.from_segments(wav_frames(speech.path), speech.segments_s)
        rng = item_rng(seed, job.encounter_id, job.family)
        seg = source.segment(period or speech.duration_s, rng, exclude_encounter_id=job.encounter_id)
        noise = tiled_noise(seg.audio)
        recipe = dict(seg.recipe) if period is None else {**seg.recipe, "loop_period_s": period}
    except Exception as exc:
        for cond, *_ in todo:
            on_done(cond, None, None, f"noise segment for {job.family}: {type(exc).__name__}: {exc}")
        return
    for cond, snr, key, wav in todo:
        try:
            info = write_mixture(
                wav,
                speech.path,
                noise,
                mask,
                snr,
                family=job.family,
                noise_source=seg.source,
                noise_offset_s=seg.offset_s,
                noise_recipe=recipe,
            )
        except Exception as exc:
            on_done(cond, None, None, f"mixing: {type(exc).__name__}: {exc}")
            continue
        cache.put(key, info.model_dump(mode="json"), files={"wav": wav})
        on_done(cond, wav, info, None)


def mix_jobs(encounter_ids: Sequence[str], grid: Iterable[Condition]) -> list[MixJob]:
    """Group the grid's noisy, non-mitigated conditions by (encounter, family), encounters outermost."""
    fams: dict[str, list[Condition]] = {}
    for c in grid:
        if not c.is_clean and not c.mitigated and not c.is_chain:  # chains: stresstest.noise.chain
            fams.setdefault(c.family, []).append(c)
    return [
        MixJob(eid, fam, tuple(float(c.snr_db) for c in cs if c.snr_db is not None), tuple(c.id for c in cs))
        for eid in encounter_ids
        for fam, cs in fams.items()
    ]
