"""The conditions stage: clean speech + one noise segment per (encounter, family) → mixtures.

For each (encounter, family) the noise segment is drawn once from
``item_rng(seed, encounter_id, family)`` and reused at every SNR of that
family, so SNR is the only thing that changes between those conditions.
Mixtures are cached by (clean speech hash, noise spec, seed, SNR, code
version): re-running a finished sweep recomputes nothing, and adding an SNR
computes only that condition (the segment is rebuilt deterministically).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stresstest.audio import read_wav_exact
from stresstest.cache import KeyValueCache, hash_obj, sha256_file
from stresstest.grid import Condition
from stresstest.noise import NoiseSource
from stresstest.noise.mix import active_mask, fit_length, item_rng, write_mixture
from stresstest.records import MixInfo, SpeechAudio

MIX_CODE_VERSION = "mix-3"  # bump whenever the mixer arithmetic changes: cached mixtures depend on it


@dataclass(frozen=True)
class MixJob:
    """All SNRs of one (encounter, family)."""

    encounter_id: str
    family: str
    snrs_db: tuple[float, ...]
    conditions: tuple[str, ...]


def mixture_key(
    speech_sha: str, family: str, noise_spec: dict[str, Any], source_token: str | None, seed: int, snr_db: float
) -> str:
    """Cache key of one mixture: the source token covers what the spec does not (babble bank audio, corpus files)."""
    return hash_obj("mixture", MIX_CODE_VERSION, speech_sha, family, noise_spec, source_token, seed, float(snr_db))


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
    todo: list[tuple[str, float, str, Path]] = []
    for cond, snr in zip(job.conditions, job.snrs_db, strict=True):
        key = mixture_key(speech_sha, job.family, noise_spec, getattr(source, "cache_token", None), seed, snr)
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
        clean = read_wav_exact(speech.path)
        mask = active_mask(clean.size, speech.segments_s)
        rng = item_rng(seed, job.encounter_id, job.family)
        seg = source.segment(speech.duration_s, rng, exclude_encounter_id=job.encounter_id)
        noise = fit_length(seg.audio, clean.size)
    except Exception as exc:
        for cond, *_ in todo:
            on_done(cond, None, None, f"noise segment for {job.family}: {type(exc).__name__}: {exc}")
        return
    for cond, snr, key, wav in todo:
        try:
            info = write_mixture(
                wav, speech.path, clean, noise, mask, snr, family=job.family, noise_source=seg.source,
                noise_offset_s=seg.offset_s, noise_recipe=seg.recipe,
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
