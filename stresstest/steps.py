"""A noise chain's steps and what each step recorded, as models (the base layer's contract).

The steps (:class:`Step`, one of :data:`STEP_KINDS`) are what a config lists under ``chains:`` and what
:mod:`stresstest.noise.chain` runs; the facts (:data:`ChainStepFacts`, one model per kind) are what it writes
into :attr:`stresstest.records.MixInfo.chain`, one entry per step, in order: ``kind``, ``params`` (the step with
every default filled in) and what the step measured or drew. A facts entry serialises to the keys it was given,
in the order the chain writes them, so a mixture record reads back and is written again byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

SPEED_OF_SOUND_M_S = 343.0
STEP_KINDS = ("room", "noise", "telephone", "mulaw", "opus", "packet_loss", "level", "silence")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SilenceStep(_Strict):
    """Silence probes: ``pause_s`` of non-speech inserted into every ``every``-th pause between turns."""

    pause_s: float = Field(ge=0.5, le=60.0, description="Seconds of non-speech inserted per chosen pause.")
    every: int = Field(default=1, ge=1, le=1000, description="A stretch in one pause of every `every` (seeded phase).")
    fill: Literal["floor", "zeros"] = Field(
        default="floor", description="floor: the recording's own non-speech samples; zeros: digital silence."
    )


#: Largest room side (m) accepted for a simulated room.
MAX_ROOM_DIM_M = 50.0
#: Highest image-source order simulated. pyroomacoustics keeps every image up to this order (about
#: 4/3·π·order³ of them) in memory: order 200 (RT60 1.5 s in the default 6 × 5 × 3 m room) peaked at 2.7 GB and
#: took 31 s on one core; order 400 (3 s there) does not finish in two minutes, and a 2 m cube at 3 s (order 727)
#: dies with std::bad_alloc.
MAX_IMAGE_ORDER = 200


def shoebox_problem(rt60_s: float, room_dim_m: Sequence[float]) -> str | None:
    """Why pyroomacoustics cannot simulate this room, or ``None`` (its ``inverse_sabine`` arithmetic, no import).

    A room too large for the RT60 needs wall absorption above 1; a small room with a long RT60 needs more images
    than :data:`MAX_IMAGE_ORDER` allows (memory grows with the order's cube).
    """
    x, y, z = (float(d) for d in room_dim_m)
    volume, surface = x * y * z, 2.0 * (x * y + x * z + y * z)
    absorption = 24.0 * math.log(10.0) * volume / (SPEED_OF_SOUND_M_S * surface * rt60_s)
    if absorption > 1.0:
        return (
            f"rt60_s {rt60_s:g} is too short for a {x:g} × {y:g} × {z:g} m room (Sabine needs wall absorption "
            f"{absorption:.2f} > 1): choose a smaller room or a longer rt60_s"
        )
    r_min = min(a * b / math.hypot(a, b) for a, b in ((x, y), (x, z), (y, z)))
    order = math.ceil(SPEED_OF_SOUND_M_S * rt60_s / r_min - 1)
    if order > MAX_IMAGE_ORDER:
        longest = (MAX_IMAGE_ORDER + 1) * r_min / SPEED_OF_SOUND_M_S
        return (
            f"rt60_s {rt60_s:g} in a {x:g} × {y:g} × {z:g} m room needs image sources up to order {order} "
            f"(memory grows with its cube; at most {MAX_IMAGE_ORDER}, about 2.7 GB): choose rt60_s <= "
            f"{math.floor(longest * 100) / 100:g} for this room, a larger room, or a measured ir"
        )
    return None


class RoomStep(_Strict):
    """Reverberation: a simulated shoebox room (``rt60_s``, ``distance_m``) or a measured impulse response."""

    rt60_s: float | None = Field(default=None, ge=0.1, le=3.0, description="Target reverberation time (s).")
    distance_m: float = Field(default=1.0, ge=0.1, le=5.0, description="Talker–microphone distance (m).")
    room_dim_m: tuple[float, float, float] = Field(default=(6.0, 5.0, 3.0), description="Room size (m).")
    ir: str | None = Field(default=None, description="Measured IR: a WAV file or a folder of them.")

    @model_validator(mode="after")
    def _one_source(self) -> RoomStep:
        if (self.rt60_s is None) == (self.ir is None):
            raise ValueError("expected either rt60_s (a simulated room) or ir (a measured impulse response)")
        if not all(math.isfinite(d) for d in self.room_dim_m):
            raise ValueError(f"expected finite room dimensions in m, got {list(self.room_dim_m)}")
        if min(self.room_dim_m) < 2.0 or max(self.room_dim_m) > MAX_ROOM_DIM_M:
            raise ValueError(
                f"expected every room dimension between 2 and {MAX_ROOM_DIM_M:g} m, got {list(self.room_dim_m)}"
            )
        if self.rt60_s is not None:
            problem = shoebox_problem(self.rt60_s, self.room_dim_m)
            if problem is not None:
                raise ValueError(problem)
        if self.ir is None and self.distance_m > self.room_dim_m[0] - 1.0:
            raise ValueError(
                f"distance_m {self.distance_m:g} does not fit in a {self.room_dim_m[0]:g} m room "
                "with 0.5 m to each wall"
            )
        return self


class NoiseStep(_Strict):
    """Additive noise of a configured family at an SNR (set on active speech, see the module docstring)."""

    family: str = Field(description="A noise family configured under `noise:` (ambient, babble).")
    snr_db: float = Field(ge=-20.0, le=50.0, description="Target SNR in dB.")


class TelephoneStep(_Strict):
    """Narrow-band telephone channel at 8 kHz."""

    low_hz: float = Field(default=300.0, ge=50.0, le=1000.0)
    high_hz: float = Field(default=3400.0, ge=2000.0, le=3900.0)


class MulawStep(_Strict):
    """G.711 μ-law codec (no parameters)."""


class OpusStep(_Strict):
    """Opus codec at a target bitrate."""

    bitrate_kbps: float = Field(ge=6.0, le=256.0, description="Bitrate in kbit/s (6 to 256).")


class PacketLossStep(_Strict):
    """Independent frame loss at a rate, frames replaced by silence."""

    rate: float = Field(gt=0.0, le=0.5, description="Probability that a frame is lost.")
    packet_ms: float = Field(default=20.0, ge=5.0, le=120.0, description="Frame (packet) length in ms.")


class LevelStep(_Strict):
    """Gain, then hard clipping at ``clip`` (1.0 = full scale)."""

    gain_db: float = Field(default=0.0, ge=-60.0, le=60.0)
    clip: float = Field(default=1.0, gt=0.0, le=1.0)


class Step(_Strict):
    """One transform of a chain: a mapping with exactly one key, the step kind."""

    room: RoomStep | None = None
    noise: NoiseStep | None = None
    telephone: TelephoneStep | None = None
    mulaw: MulawStep | None = None
    opus: OpusStep | None = None
    packet_loss: PacketLossStep | None = None
    level: LevelStep | None = None
    silence: SilenceStep | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Step:
        kinds = [k for k in STEP_KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"expected exactly one step kind of {list(STEP_KINDS)} per list entry, got {kinds}")
        return self

    @property
    def kind(self) -> str:
        """The step's kind (its one key)."""
        return next(k for k in STEP_KINDS if getattr(self, k) is not None)

    @property
    def params(self) -> BaseModel:
        """The step's parameters."""
        return getattr(self, self.kind)  # type: ignore[no-any-return]

    def to_json(self) -> dict[str, Any]:
        """``{kind: {params}}`` with every default filled in (the recorded form)."""
        return {self.kind: self.params.model_dump(mode="json")}


# ------------------------------------------------------------------ what each step recorded (MixInfo.chain)


#: A measured number is written back as it was computed (3 stays 3, 3.0 stays 3.0).
Num = int | float


class _Facts(BaseModel):
    """One step's entry of ``MixInfo.chain``: typed, and written back with exactly the keys it was given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}


class SilenceStretch(BaseModel):
    """One stretch of non-speech a ``silence`` step inserted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    after_run: int = Field(description="Index of the active-speech run it follows.")
    after_turn: int | None = Field(default=None, description="Index of the turn it follows (None: by run).")
    at_s: float = Field(description="Insertion point in the input timeline (s).")
    start_s: float = Field(description="Start in the output timeline (s).")
    end_s: float = Field(description="End in the output timeline (s).")

    @property
    def seconds(self) -> float:
        """The stretch's length (s)."""
        return self.end_s - self.start_s


class SilenceFacts(_Facts):
    """``silence``: the inserted stretches and how they were drawn."""

    kind: Literal["silence"]
    params: SilenceStep
    stretches: list[SilenceStretch] = Field(default_factory=list)
    inserted_s: Num = 0.0
    phase: int | None = None
    runs: int | None = Field(default=None, description="Active-speech runs of the input.")
    fill_source: Literal["floor", "zeros"] | None = None
    floor_offset: int | None = None
    rng: str | None = None


class RoomFacts(_Facts):
    """``room``: the impulse response used (measured or simulated) and the level correction."""

    kind: Literal["room"]
    params: RoomStep
    method: str | None = None
    ir_file: str | None = None
    ir_index: int | None = None
    ir_choices: int | None = None
    absorption: Num | None = None
    max_order: int | None = None
    measured_rt60_s: Num | None = None
    mic_xyz_m: list[Num] | None = None
    source_xyz_m: list[Num] | None = None
    ir_samples: int | None = None
    level_scale: Num | None = None


class NoiseFacts(_Facts):
    """``noise``: the noise segment drawn and the SNR set and measured."""

    kind: Literal["noise"]
    params: NoiseStep
    noise_source: str | None = None
    noise_offset_s: Num | None = None
    noise_gain: Num | None = None
    speech_rms: Num | None = None
    target_snr_db: Num | None = None
    measured_snr_db: Num | None = None


class TelephoneFacts(_Facts):
    """``telephone``: the channel's rate and filter."""

    kind: Literal["telephone"]
    params: TelephoneStep
    sample_rate_hz: int | None = None
    filter: str | None = None


class MulawFacts(_Facts):
    """``mulaw``: the codec's bits and the saturated samples."""

    kind: Literal["mulaw"]
    params: MulawStep
    bits_per_sample: int | None = None
    saturated: int | None = None


class OpusFacts(_Facts):
    """``opus``: the encoder and the bitrate it reached."""

    kind: Literal["opus"]
    params: OpusStep
    libsndfile: str | None = None
    compression_level: Num | None = None
    achieved_kbps: Num | None = None


class PacketLossFacts(_Facts):
    """``packet_loss``: the frames and how many were lost."""

    kind: Literal["packet_loss"]
    params: PacketLossStep
    frame_samples: int | None = None
    n_frames: int | None = None
    n_lost: int | None = None
    rng: str | None = None
    concealment: str | None = None


class LevelFacts(_Facts):
    """``level``: the fraction of samples clipped."""

    kind: Literal["level"]
    params: LevelStep
    clipped_fraction: Num | None = None


#: One entry of ``MixInfo.chain``, told apart by its ``kind``.
ChainStepFacts = Annotated[
    SilenceFacts | RoomFacts | NoiseFacts | TelephoneFacts | MulawFacts | OpusFacts | PacketLossFacts | LevelFacts,
    Field(discriminator="kind"),
]

if tuple(sorted(STEP_KINDS)) != tuple(
    sorted(  # pragma: no cover - a definition error
        f.model_fields["kind"].annotation.__args__[0]  # type: ignore[union-attr]
        for f in (
            SilenceFacts,
            RoomFacts,
            NoiseFacts,
            TelephoneFacts,
            MulawFacts,
            OpusFacts,
            PacketLossFacts,
            LevelFacts,
        )
    )
):
    raise TypeError("one facts model per step kind")
