"""Conditions as a chain of transforms (docs/spec.md §13): room → noise → channel → level, as data.

A chain condition is clean speech passed through the steps listed in the config, in order. Each
step is a one-key mapping, ``{kind: {params}}`` (lhotse's ``{name, kwargs}``), and each applied step
is recorded per item with its parameters, everything it sampled and what it measured
(:attr:`stresstest.records.MixInfo.chain`).

Steps (units in the names):

``silence``
    Silence probes (issue 28): ``pause_s`` seconds of non-speech inserted into the pauses between turns,
    so that what the ASR writes where nobody speaks can be counted (``halluc_per_min``,
    :mod:`stresstest.metrics.silence`). The pauses are the gaps between consecutive active-speech runs of
    the recording (one run per turn for TTS renderings and for corpus timings without overlaps; anything
    else is refused: a stretch must sit between two known turns). Gap ``k`` (after run ``k``) gets a
    stretch when ``k % every == phase``, ``phase`` drawn from ``item_rng(seed, encounter, "silence")``;
    the stretch is inserted at the gap's midpoint, so the turns keep their own pauses on both sides.
    ``fill: floor`` (default) fills it with the recording's own non-speech samples (everything outside
    the active-speech mask, read cyclically from a seeded offset: the room's noise floor of a real
    recording, digital silence for a TTS rendering); ``fill: zeros`` with digital silence. It must be the
    first step: it lengthens the timeline, and every later step (room, noise, channel) then acts on the
    whole lengthened recording, so a ``noise`` step puts its noise into the stretches at the level its
    SNR (set on speech) gives the rest of the recording. The active-speech mask the later steps measure
    on is shifted with the speech; each stretch is recorded with the turn it follows (``after_turn``),
    the insertion point in the input timeline (``at_s``) and its ``start_s`` / ``end_s`` in the output
    timeline (:func:`shift_time` maps an input time to the output timeline).
``room``
    Reverberation. Either simulated: a shoebox room (``room_dim_m``, default 6 × 5 × 3 m, a consulting
    room) whose wall absorption gives ``rt60_s`` by Sabine's formula, talker and microphone at 1.2 m
    height ``distance_m`` apart around the room's centre, impulse response by pyroomacoustics' image
    source method (deterministic: no randomised images, no ray tracing); or measured: ``ir`` names a WAV
    file, or a folder of them from which one is drawn per encounter (``item_rng(seed, encounter,
    "room-ir")``). The filter latency before the direct path is removed (the propagation delay
    ``distance_m / c`` stays), the tail is cut at the recording's length, and the reverberant speech is
    rescaled to the dry speech's RMS on active speech (so levels stay comparable). The RT60 measured on
    the simulated response is recorded next to the target (the image method on a box overshoots Sabine).
``noise``
    Additive noise of a configured family at ``snr_db``: the same segment as the family's plain
    conditions (drawn from ``item_rng(seed, encounter, family)``), scaled so that the SNR, measured on
    the active-speech mask, is ``snr_db``. **Where the SNR is set:** on the signal at this point of the
    chain — after the room (the talker's reverberant speech is what the microphone receives; the room
    noise adds to it there), before any channel (a phone line carries speech and room noise together,
    so its band limit and codec act on both and do not redefine the acoustic SNR). The SNR measured
    back on that mixture must agree with the target to ±0.1 dB, as for plain mixtures.
``telephone``
    Narrow-band channel: anti-aliased resampling to 8 kHz, then a 4th-order Butterworth band-pass
    ``low_hz``–``high_hz`` (default 300–3400 Hz). Later steps run at 8 kHz; the chain's output is
    resampled back to 16 kHz for the ASR.
``mulaw``
    G.711 μ-law: every 8-kHz sample through the 8-bit encoder and decoder of ITU-T G.711 (14-bit
    linear, bias 0x84, eight segments; bit-exact with the reference g711.c), implemented with numpy.
    Needs a ``telephone`` step before it.
``opus``
    Opus at ``bitrate_kbps`` through libsndfile's Ogg/Opus encoder and decoder (the one bundled with
    the ``soundfile`` wheel): bitrate b maps to libsndfile's compression level ``1 − (b − 6000) / 250000``
    (its own mapping); Opus runs in its default VBR mode around that target (libsndfile refuses a
    constant-bitrate request for Opus), and the Ogg file's size gives the bitrate reached (recorded).
``packet_loss``
    Frames of ``packet_ms`` (default 20 ms, one Opus/RTP packet) lost independently with probability
    ``rate`` and replaced by silence (no concealment: a worst case). Each frame draws one uniform
    number from ``item_rng(seed, encounter, "packet_loss")`` and is lost when it is below ``rate``, so
    the pattern is the same in every condition of an encounter and a 5% pattern is a subset of a 10% one.
``level``
    Gain ``gain_db`` then hard clipping at ``clip`` (full scale = 1.0), the fraction of clipped samples
    recorded.

A chain's output has the length of its input (plus the inserted stretches of a ``silence`` step).
Finally, a chain whose output would exceed the mixer's clip limit is scaled down as a whole
(``clip_scale``), as plain mixtures are.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from stresstest.audio import SAMPLE_RATE_HZ, load_audio
from stresstest.errors import MixError
from stresstest.noise.base import NoiseSource
from stresstest.noise.mix import CLIP_LIMIT, SNR_TOLERANCE_DB, _gain, _rms, fit_length, item_rng
from stresstest.steps import (  # the step models live in the base layer (MixInfo.chain records them)
    SPEED_OF_SOUND_M_S,
    LevelStep,
    MulawStep,
    NoiseStep,
    OpusStep,
    PacketLossStep,
    RoomStep,
    SilenceStep,
    TelephoneStep,
)
from stresstest.steps import Step as Step  # re-exported

CHAIN_CODE_VERSION = "chain-1"  # bump whenever a step's arithmetic changes: cached chain mixtures depend on it
TELEPHONE_RATE_HZ = 8000


def check_chain(steps: Sequence[Step], families: Sequence[str] | None = None) -> None:
    """Order rules of a chain (ValueError naming the step).

    Room and noise act on the 16-kHz acoustic signal, so they come before any channel step; ``mulaw``
    needs the 8-kHz telephone channel before it; ``silence`` changes the timeline, so it comes first; a kind
    appears at most once; a noise family must be configured (checked when ``families`` is given).
    """
    if not steps:
        raise ValueError("expected at least one step (the clean condition is built in)")
    seen: dict[str, int] = {}
    for i, s in enumerate(steps):
        k = s.kind
        if k == "silence" and i > 0:
            raise ValueError(
                f"step {i}: 'silence' must be the first step (it lengthens the timeline every other "
                f"step acts on), got it after {steps[0].kind!r}"
            )
        if k in seen:
            raise ValueError(f"step {i}: {k!r} appears twice (steps {seen[k]} and {i})")
        seen[k] = i
        if k in ("room", "noise") and any(c in seen for c in ("telephone", "mulaw", "opus", "packet_loss")):
            raise ValueError(
                f"step {i}: {k!r} must come before the channel steps (it acts on the 16-kHz acoustic signal)"
            )
        if k == "mulaw" and "telephone" not in seen:
            raise ValueError(f"step {i}: 'mulaw' (G.711, 8 kHz) needs a 'telephone' step before it")
        if k == "noise" and s.noise is not None and families is not None and s.noise.family not in families:
            raise ValueError(
                f"step {i}: noise family {s.noise.family!r} is not configured under `noise:` "
                f"(configured: {sorted(families)})"
            )


# ------------------------------------------------------------------ arithmetic


def _snr_db(speech: np.ndarray, noise: np.ndarray, mask: np.ndarray) -> float:
    s, n = _rms(speech[mask]), _rms(noise[mask])
    if n == 0.0:
        return math.inf
    return -math.inf if s == 0.0 else 20.0 * math.log10(s / n)


@lru_cache(maxsize=8)
def _shoebox_rir(
    rt60_s: float, distance_m: float, room_dim_m: tuple[float, float, float]
) -> tuple[np.ndarray, dict[str, Any]]:
    try:
        import pyroomacoustics as pra
    except ImportError as exc:  # a core dependency; a broken install says how to repair it
        raise MixError("the room step needs pyroomacoustics (pip install pyroomacoustics)") from exc
    absorption, max_order = pra.inverse_sabine(rt60_s, list(room_dim_m))
    room = pra.ShoeBox(
        list(room_dim_m),
        fs=SAMPLE_RATE_HZ,
        materials=pra.Material(absorption),
        max_order=max_order,
        use_rand_ism=False,
        air_absorption=False,
    )
    cx, cy = room_dim_m[0] / 2.0, room_dim_m[1] / 2.0
    room.add_source([cx + distance_m / 2.0, cy, 1.2])
    room.add_microphone([cx - distance_m / 2.0, cy, 1.2])
    room.compute_rir()
    h = np.asarray(room.rir[0][0], dtype=np.float64)
    measured = float(np.asarray(room.measure_rt60()).ravel()[0])
    facts = {
        "method": f"pyroomacoustics {pra.__version__} image source",
        "absorption": round(float(absorption), 6),
        "max_order": int(max_order),
        "measured_rt60_s": round(measured, 4),
        "mic_xyz_m": [cx - distance_m / 2.0, cy, 1.2],
        "source_xyz_m": [cx + distance_m / 2.0, cy, 1.2],
    }
    return _align_direct(h, distance_m), facts


def _align_direct(h: np.ndarray, distance_m: float | None) -> np.ndarray:
    """Drop what precedes the direct path except the propagation delay (filter latency, silent lead-in)."""
    peak = int(np.argmax(np.abs(h)))
    keep = 0 if distance_m is None else int(round(distance_m / SPEED_OF_SOUND_M_S * SAMPLE_RATE_HZ))
    return h[max(0, peak - keep) :]


def mask_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` sample ranges of the runs of True in ``mask``, in order."""
    m = np.concatenate([[False], np.asarray(mask, dtype=bool), [False]])
    edges = np.flatnonzero(m[1:] != m[:-1])
    return [(int(a), int(b)) for a, b in zip(edges[0::2], edges[1::2], strict=True)]


def shift_time(t_s: float, stretches: Sequence[Mapping[str, Any]]) -> float:
    """A time of the input timeline in the output timeline of a ``silence`` step (its recorded stretches).

    Every stretch inserted at or before ``t_s`` (``at_s`` <= ``t_s``) delays it by its length.
    """
    return t_s + sum(float(st["end_s"]) - float(st["start_s"]) for st in stretches if float(st["at_s"]) <= t_s)


def _silence(
    x: np.ndarray, mask: np.ndarray, p: SilenceStep, seed: int, eid: str, turn_ids: Sequence[int] | None
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Insert the stretches; returns the lengthened audio, the shifted mask and the facts."""
    runs = mask_runs(mask)
    ids = list(range(len(runs))) if turn_ids is None else list(turn_ids)
    if len(ids) != len(runs):
        raise MixError(
            f"silence: the recording has {len(runs)} active-speech runs but {len(ids)} turns with "
            "speech; the stretches must sit between known turns (overlapping turns or a VAD mask "
            "cannot carry silence probes)"
        )
    rng = item_rng(seed, eid, "silence")
    phase = int(rng.integers(p.every))
    n_pause = int(round(p.pause_s * SAMPLE_RATE_HZ))
    floor = x[~mask]
    use_floor = p.fill == "floor" and floor.size > 0 and bool(np.any(floor != 0.0))
    offset = int(rng.integers(floor.size)) if floor.size else 0
    pieces: list[np.ndarray] = []
    mpieces: list[np.ndarray] = []
    stretches: list[dict[str, Any]] = []
    cursor = 0
    inserted = 0
    for k in range(len(runs) - 1):
        if k % p.every != phase:
            continue
        at = (runs[k][1] + runs[k + 1][0]) // 2
        pieces.append(x[cursor:at])
        mpieces.append(mask[cursor:at])
        if use_floor:
            fill = floor[(offset + inserted + np.arange(n_pause)) % floor.size].astype(np.float32)
        else:
            fill = np.zeros(n_pause, np.float32)
        pieces.append(fill)
        mpieces.append(np.zeros(n_pause, bool))
        start = at + inserted
        stretches.append(
            {
                "after_run": k,
                "after_turn": None if turn_ids is None else int(ids[k]),
                "at_s": round(at / SAMPLE_RATE_HZ, 6),
                "start_s": round(start / SAMPLE_RATE_HZ, 6),
                "end_s": round((start + n_pause) / SAMPLE_RATE_HZ, 6),
            }
        )
        inserted += n_pause
        cursor = at
    pieces.append(x[cursor:])
    mpieces.append(mask[cursor:])
    facts = {
        "stretches": stretches,
        "inserted_s": round(inserted / SAMPLE_RATE_HZ, 6),
        "phase": phase,
        "runs": len(runs),
        "fill_source": "floor" if use_floor else "zeros",
        "floor_offset": offset if use_floor else None,
        "rng": "item_rng(seed, encounter_id, 'silence')",
    }
    return np.concatenate(pieces).astype(np.float32), np.concatenate(mpieces), facts


def _room(x: np.ndarray, mask: np.ndarray, p: RoomStep, seed: int, eid: str) -> tuple[np.ndarray, dict[str, Any]]:
    from scipy.signal import fftconvolve

    if p.ir is not None:
        path = Path(p.ir)
        files = sorted(q for q in path.iterdir() if q.suffix.lower() in (".wav", ".flac")) if path.is_dir() else [path]
        if not files:
            raise MixError(f"{path}: no .wav or .flac impulse response in this folder")
        k = int(item_rng(seed, eid, "room-ir").integers(len(files))) if len(files) > 1 else 0
        h = _align_direct(load_audio(files[k], normalise=False).astype(np.float64), None)
        facts: dict[str, Any] = {
            "method": "measured impulse response",
            "ir_file": str(files[k]),
            "ir_index": k,
            "ir_choices": len(files),
        }
    else:
        assert p.rt60_s is not None  # by RoomStep's validator
        h, facts = _shoebox_rir(float(p.rt60_s), float(p.distance_m), tuple(p.room_dim_m))
        facts = dict(facts)
    y = fftconvolve(x.astype(np.float64), h)[: x.size]
    dry, wet = _rms(x[mask]), _rms(y[mask])
    if wet == 0.0:
        raise MixError("the impulse response silenced the speech")
    scale = dry / wet
    facts.update(ir_samples=int(h.size), level_scale=round(scale, 6))
    return (y * scale).astype(np.float32), facts


def _noise(
    x: np.ndarray, mask: np.ndarray, p: NoiseStep, source: NoiseSource, seed: int, eid: str, duration_s: float
) -> tuple[np.ndarray, dict[str, Any], dict[str, Any]]:
    rng = item_rng(seed, eid, p.family)  # the family's segment: the same as its plain SNR conditions
    seg = source.segment(duration_s, rng, exclude_encounter_id=eid)
    noise = fit_length(seg.audio, x.size)
    s_rms = _rms(x[mask])
    gain = _gain(s_rms, _rms(noise[mask]), p.snr_db)
    y = np.multiply(noise, np.float32(gain), dtype=np.float32)
    y += x
    measured = _snr_db(x, y.astype(np.float64) - x.astype(np.float64), mask)
    if not abs(measured - p.snr_db) <= SNR_TOLERANCE_DB:
        raise MixError(
            f"measured SNR {measured:.3f} dB differs from target {p.snr_db} dB by more than {SNR_TOLERANCE_DB} dB"
        )
    facts = {
        "noise_source": seg.source,
        "noise_offset_s": seg.offset_s,
        "noise_gain": gain,
        "speech_rms": s_rms,
        "target_snr_db": float(p.snr_db),
        "measured_snr_db": round(measured, 4),
    }
    return y, facts, dict(seg.recipe)


def _telephone(x: np.ndarray, p: TelephoneStep) -> tuple[np.ndarray, dict[str, Any]]:
    from scipy.signal import butter, resample_poly, sosfilt

    y = resample_poly(x.astype(np.float64), 1, SAMPLE_RATE_HZ // TELEPHONE_RATE_HZ)
    sos = butter(4, [p.low_hz, p.high_hz], btype="bandpass", fs=TELEPHONE_RATE_HZ, output="sos")
    return sosfilt(sos, y).astype(np.float32), {"sample_rate_hz": TELEPHONE_RATE_HZ, "filter": "butterworth-4"}


_ULAW_BIAS = 0x84
_ULAW_CLIP14 = 8159
_ULAW_SEG_END = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF])


def mulaw_encode(x16: np.ndarray) -> np.ndarray:
    """G.711 μ-law codes (uint8) of 16-bit linear samples (ints in [-32768, 32767]).

    The reference encoder (the Sun g711.c CPython's former audioop used): the 16-bit sample is taken to
    14 bits by an arithmetic shift, its magnitude clipped at 8159, biased by 33, its segment is the first
    segment end it does not exceed, and all bits of sign | segment | 4-bit mantissa are inverted.
    """
    v = np.asarray(x16, dtype=np.int32) >> 2
    neg = v < 0
    mag = np.minimum(np.where(neg, -v, v), _ULAW_CLIP14) + (_ULAW_BIAS >> 2)
    seg = np.searchsorted(_ULAW_SEG_END, mag, side="left").astype(np.int32)
    uval = np.where(seg >= 8, 0x7F, (seg << 4) | ((mag >> np.minimum(seg + 1, 8)) & 0x0F))  # past the last segment
    return (uval ^ np.where(neg, 0x7F, 0xFF)).astype(np.uint8)


def mulaw_decode(codes: np.ndarray) -> np.ndarray:
    """16-bit linear samples (int32) of G.711 μ-law codes."""
    u = ~np.asarray(codes, dtype=np.int32) & 0xFF
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    mag = (((mantissa << 3) + _ULAW_BIAS) << exponent) - _ULAW_BIAS
    return np.where(u & 0x80, -mag, mag).astype(np.int32)


def _mulaw(x: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    x16 = np.clip(np.round(x.astype(np.float64) * 32768.0), -32768, 32767).astype(np.int32)
    y = mulaw_decode(mulaw_encode(x16)).astype(np.float64) / 32768.0
    saturated = int(np.count_nonzero(np.abs(x16 >> 2) > _ULAW_CLIP14))
    return y.astype(np.float32), {"bits_per_sample": 8, "saturated": saturated}


def _opus(x: np.ndarray, sr: int, p: OpusStep) -> tuple[np.ndarray, dict[str, Any]]:
    import soundfile as sf

    bitrate = p.bitrate_kbps * 1000.0
    level = 1.0 - (bitrate - 6000.0) / 250000.0
    buf = io.BytesIO()
    # libsndfile's Opus encoder refuses SFC_SET_BITRATE_MODE: it runs Opus's default VBR around the target.
    with sf.SoundFile(buf, "w", sr, 1, format="OGG", subtype="OPUS", compression_level=level) as f:
        f.write(x.astype(np.float32))
    size = len(buf.getvalue())
    buf.seek(0)
    y, _ = sf.read(buf, dtype="float32")
    y = np.asarray(y, dtype=np.float32).reshape(-1)
    y = y[: x.size] if y.size >= x.size else np.concatenate([y, np.zeros(x.size - y.size, np.float32)])
    return y, {
        "libsndfile": sf.__libsndfile_version__,
        "compression_level": round(level, 6),
        "achieved_kbps": round(size * 8.0 / (x.size / sr) / 1000.0, 3),
    }


def _packet_loss(x: np.ndarray, sr: int, p: PacketLossStep, seed: int, eid: str) -> tuple[np.ndarray, dict[str, Any]]:
    frame = max(1, int(round(p.packet_ms / 1000.0 * sr)))
    n_frames = -(-x.size // frame)
    lost = item_rng(seed, eid, "packet_loss").random(n_frames) < p.rate
    y = x.copy()
    for k in np.flatnonzero(lost):
        y[k * frame : (k + 1) * frame] = 0.0
    return y, {
        "frame_samples": frame,
        "n_frames": int(n_frames),
        "n_lost": int(lost.sum()),
        "rng": "item_rng(seed, encounter_id, 'packet_loss')",
        "concealment": "silence",
    }


def _level(x: np.ndarray, p: LevelStep) -> tuple[np.ndarray, dict[str, Any]]:
    y = x.astype(np.float64) * 10.0 ** (p.gain_db / 20.0)
    clipped = int(np.count_nonzero(np.abs(y) > p.clip))
    return np.clip(y, -p.clip, p.clip).astype(np.float32), {"clipped_fraction": round(clipped / max(1, y.size), 6)}


def render_chain(
    clean: np.ndarray,
    mask: np.ndarray,
    steps: Sequence[Step],
    *,
    seed: int,
    encounter_id: str,
    sources: Mapping[str, NoiseSource],
    duration_s: float | None = None,
    turn_ids: Sequence[int] | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Pass clean 16-kHz speech through ``steps``; return the 16-kHz result and its facts.

    The facts hold ``chain`` (one ``{kind, params, ...measured}`` entry per step, in order),
    ``clip_scale``, and — when a noise step ran — that step's ``noise_*``, ``speech_rms``,
    ``target_snr_db`` / ``measured_snr_db`` and the segment's ``noise_recipe``. ``duration_s`` is the
    recording's duration as the speech record states it (what the family mixer asks its noise source
    for, so a noise step cuts the very same segment); default: the sample count / 16 kHz. ``turn_ids``: the
    turn index of each active-speech run of ``mask`` (a ``silence`` step records it as ``after_turn``);
    default unknown (``after_turn`` None; the run index ``after_run`` is recorded in every case). The
    output has the input's length plus what a ``silence`` step inserted (``inserted_s`` in the facts).
    """
    from scipy.signal import resample_poly

    if clean.ndim != 1 or clean.shape != mask.shape:
        raise MixError(f"speech and mask must be 1-D of equal length, got {clean.shape}, {mask.shape}")
    if not mask.any():
        raise MixError("active-speech mask is empty: cannot measure speech RMS")
    x = np.asarray(clean, dtype=np.float32)
    sr = SAMPLE_RATE_HZ
    duration_s = clean.size / SAMPLE_RATE_HZ if duration_s is None else duration_s
    record: list[dict[str, Any]] = []
    out: dict[str, Any] = {}
    n_out = clean.size
    for s in steps:
        entry: dict[str, Any] = {"kind": s.kind, "params": s.params.model_dump(mode="json")}
        if isinstance(s.params, SilenceStep):
            if record:
                raise MixError("silence must be the first step of a chain")
            x, mask, facts = _silence(x, mask, s.params, seed, encounter_id, turn_ids)
            n_out = x.size
            duration_s += float(facts["inserted_s"])
            out["inserted_s"] = float(facts["inserted_s"])
        elif isinstance(s.params, RoomStep):
            x, facts = _room(x, mask, s.params, seed, encounter_id)
        elif isinstance(s.params, NoiseStep):
            x, facts, recipe = _noise(x, mask, s.params, sources[s.params.family], seed, encounter_id, duration_s)
            out.update(
                {
                    k: facts[k]
                    for k in (
                        "noise_source",
                        "noise_offset_s",
                        "noise_gain",
                        "speech_rms",
                        "target_snr_db",
                        "measured_snr_db",
                    )
                }
            )
            out.update(family=s.params.family, noise_recipe=recipe)
        elif isinstance(s.params, TelephoneStep):
            x, facts = _telephone(x, s.params)
            sr = TELEPHONE_RATE_HZ
        elif isinstance(s.params, MulawStep):
            x, facts = _mulaw(x)
        elif isinstance(s.params, OpusStep):
            x, facts = _opus(x, sr, s.params)
        elif isinstance(s.params, PacketLossStep):
            x, facts = _packet_loss(x, sr, s.params, seed, encounter_id)
        else:
            assert isinstance(s.params, LevelStep)
            x, facts = _level(x, s.params)
        entry.update(facts)
        record.append(entry)
    if sr != SAMPLE_RATE_HZ:
        x = resample_poly(x.astype(np.float64), SAMPLE_RATE_HZ // sr, 1).astype(np.float32)
    x = np.concatenate([x, np.zeros(n_out - x.size, np.float32)]) if x.size < n_out else x[:n_out]
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    clip_scale = 1.0 if peak <= CLIP_LIMIT else CLIP_LIMIT / peak
    if clip_scale != 1.0:
        x = (x * np.float32(clip_scale)).astype(np.float32)
    out.update(chain=record, clip_scale=clip_scale)
    return np.ascontiguousarray(x, dtype=np.float32), out


# ------------------------------------------------------------------ the stage: one (encounter, chain condition)


def speech_turn_ids(speech: Any) -> list[int] | None:
    """Turn index of each active-speech run of a TTS rendering (its recipe's placements); None otherwise.

    A recording with corpus timings has one run per timed non-empty turn unless turns overlap (merged):
    its stretches carry the run index only and the score stage maps runs to turns (and checks the count).
    """
    if speech.segments_source != "tts_turns":
        return None
    placements = speech.recipe.get("placements")
    if not isinstance(placements, list):
        return None
    ids = [int(pl["turn"]) for pl in placements if isinstance(pl, dict) and "start_s" in pl]
    return ids if len(ids) == len(speech.segments_s) else None


def ir_problem(ir: str) -> str | None:
    """Why the measured impulse response ``ir`` (a WAV/FLAC file or a folder of them) cannot be used, or ``None``.

    Checked before the first stage (``stresstest check`` and ``run``'s pre-flight), not per item after the ASR.
    """
    import soundfile as sf

    path = Path(ir)
    try:
        if path.is_dir():
            files = sorted(q for q in path.iterdir() if q.suffix.lower() in (".wav", ".flac"))
            if not files:
                return f"{path}: no .wav or .flac impulse response in this folder"
        elif path.is_file():
            files = [path]
        elif path.exists():
            return f"{path}: not a regular file or folder; expected a WAV/FLAC impulse response or a folder of them"
        else:
            return f"{path}: impulse response not found (expected a WAV/FLAC file or a folder of them)"
        for f in files:
            info = sf.info(str(f))
            if info.frames == 0:
                return f"{f}: the impulse response holds no samples"
    except (OSError, RuntimeError) as exc:  # soundfile raises LibsndfileError (a RuntimeError) on non-audio
        return f"{path}: cannot read the impulse response ({' '.join(str(exc).split())})"
    return None


def _ir_files(steps: Sequence[Step]) -> list[Path]:
    out: list[Path] = []
    for s in steps:
        if s.room is not None and s.room.ir is not None:
            p = Path(s.room.ir)
            out += sorted(q for q in p.iterdir() if q.suffix.lower() in (".wav", ".flac")) if p.is_dir() else [p]
    return out


def chain_key(
    speech_sha: str,
    steps: Sequence[Step],
    noise: Mapping[str, tuple[dict[str, Any], str | None]],
    ir_shas: list[str],
    seed: int,
) -> str:
    """Cache key of one chain condition's audio: speech, steps, the noise sources it draws from, IR files, seed."""
    from stresstest.cache import hash_obj

    return hash_obj(
        "chain-mixture",
        CHAIN_CODE_VERSION,
        speech_sha,
        [s.to_json() for s in steps],
        {f: [spec, token] for f, (spec, token) in sorted(noise.items())},
        ir_shas,
        seed,
    )


def build_chain(
    encounter_id: str,
    steps_json: Sequence[Mapping[str, Any]],
    speech: Any,
    sources: Mapping[str, NoiseSource],
    noise_specs: Mapping[str, dict[str, Any]],
    *,
    seed: int,
    cache_dir: Path,
) -> tuple[Path | None, Any, str | None]:
    """Write (or reuse) one chain condition's audio for one encounter: ``(wav, MixInfo, None)`` or an error.

    Cached like plain mixtures (verified WAV + facts under the ``mixtures`` namespace), keyed by
    :func:`chain_key`; the same seed gives the same audio bit for bit.
    """
    from stresstest.audio import read_wav_exact, write_wav
    from stresstest.cache import KeyValueCache, sha256_file
    from stresstest.noise.mix import active_mask
    from stresstest.records import MixInfo

    try:
        steps = [Step.model_validate(s) for s in steps_json]
        fams = [s.noise.family for s in steps if s.noise is not None]
        noise = {f: (dict(noise_specs[f]), getattr(sources[f], "cache_token", None)) for f in fams}
        key = chain_key(sha256_file(speech.path), steps, noise, [sha256_file(p) for p in _ir_files(steps)], seed)
        cache = KeyValueCache(cache_dir, "mixtures")
        wav = cache.file_path(key, ".wav")
        hit = cache.get(key, validate=MixInfo.model_validate, files={"wav": wav})
        if hit is not None:
            return wav, hit, None
        clean = read_wav_exact(speech.path)
        mask = active_mask(clean.size, speech.segments_s)
        probes = any(s.silence is not None for s in steps)
        if probes and speech.segments_source == "vad":
            raise MixError(
                "silence: the recording's speech mask comes from a VAD, not from turns; silence probes "
                "need turn timings (a TTS rendering or a corpus with turn timings)"
            )
        turn_ids = speech_turn_ids(speech) if probes else None
        audio, facts = render_chain(
            clean,
            mask,
            steps,
            seed=seed,
            encounter_id=encounter_id,
            sources=sources,
            duration_s=float(speech.duration_s),
            turn_ids=turn_ids,
        )
        write_wav(wav, audio)
        info = MixInfo(
            family="chain",
            noise_source=str(facts.get("noise_source", "")),
            noise_offset_s=float(facts.get("noise_offset_s", 0.0)),
            noise_recipe=dict(facts.get("noise_recipe") or {}),
            target_snr_db=facts.get("target_snr_db"),
            measured_snr_db=facts.get("measured_snr_db"),
            speech_rms=float(facts.get("speech_rms", _rms(clean[mask]))),
            noise_gain=float(facts.get("noise_gain", 0.0)),
            clip_scale=float(facts["clip_scale"]),
            chain=list(facts["chain"]),
        )
        cache.put(key, info.model_dump(mode="json"), files={"wav": wav})
        return wav, info, None
    except Exception as exc:  # recorded per item, counted against run.max_failures
        return None, None, f"chain: {type(exc).__name__}: {exc}"
