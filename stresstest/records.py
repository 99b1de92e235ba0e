"""Records that flow between stages and are written to disk.

Every record is a pydantic model with stable ids (``encounter_id``, ``condition``)
and a ``schema_version``. Records are never mutated in place: derive a new one
with :func:`revise`, the one way a model of this package is changed (it validates the result).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from stresstest.steps import ChainStepFacts

SCHEMA_VERSION = 1

M = TypeVar("M", bound=BaseModel)


def revise(model: M, /, *, unset: Iterable[str] = (), **changes: Any) -> M:
    """A validated copy of ``model`` with ``changes`` applied and the fields in ``unset`` back to their defaults.

    The one way a model of this package is changed (instead of pydantic's unvalidated
    copy-with-update): the copy is validated as a whole, so a wrong value, a field the model does not
    have, or a combination its validators refuse raises :class:`ValueError` here, where it is made. The fields
    that count as set (what ``exclude_unset`` dumps write) are the original's, plus ``changes``, minus ``unset``.

    Raises:
        ValueError: an unknown field name, or a value the model refuses (pydantic's ``ValidationError``).
    """
    cls = type(model)
    fields = cls.model_fields
    drop = set(unset)
    unknown = sorted((set(changes) | drop) - set(fields))
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {', '.join(map(repr, unknown))}")
    data: dict[str, Any] = {name: getattr(model, name) for name in fields if name not in drop}
    data.update(model.model_extra or {})
    data.update(changes)
    out = cls.model_validate(data, by_name=True)
    object.__setattr__(out, "__pydantic_fields_set__", (set(model.model_fields_set) - drop) | set(changes))
    return out


Speaker = Literal["doctor", "patient", "other"]


class Record(BaseModel):
    """Base for on-disk records: strict about unknown fields, frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Turn(Record):
    """One speaker turn of a dialogue."""

    speaker: Speaker = Field(description="Who speaks: doctor, patient or other.")
    text: str = Field(description="What was said, transcriber tags already resolved.")
    start_s: float | None = Field(default=None, description="Turn start in the recording, if known.")
    end_s: float | None = Field(default=None, description="Turn end in the recording, if known.")


_WS = re.compile(r"\s+")


class Encounter(Record):
    """A clinical dialogue: turns, optional recording, optional reference note."""

    schema_version: int = SCHEMA_VERSION
    encounter_id: str = Field(description="Stable id, unique within a run (e.g. 'CAR0001').")
    corpus: str = Field(description="Which loader made it: osce, primock57, aci-bench, manifest.")
    source_path: str = Field(description="File the encounter was read from.")
    turns: tuple[Turn, ...] = Field(description="Speaker turns in order.")
    audio_path: str | None = Field(default=None, description="Real recording, if the user has one.")
    audio_channels: tuple[str, ...] = Field(
        default=(),
        description="Separate per-speaker recordings of the same session (PriMock57: doctor, patient), "
        "mixed into one recording; audio_path is then the first of them.",
    )
    reference_note: str | None = Field(default=None, description="Clinician note, if the corpus has one.")
    specialty: str | None = Field(default=None, description="Specialty code where known (OSCE: RES, CAR...).")
    audio_end_s: float | None = Field(
        default=None,
        description="The recording is used up to here only: a turn limit cut the reference and the audio together "
        "(None: the whole recording).",
    )

    def reference_text(self) -> str:
        """The human reference transcript used for WER.

        Rule (documented in the README): the turns' texts in order, joined by
        one space, speaker labels dropped, runs of whitespace collapsed. Tag
        handling is the loader's job and happens before this.
        """
        return _WS.sub(" ", " ".join(t.text for t in self.turns)).strip()

    def truncated(self, max_turns: int | None) -> Encounter:
        """The first ``max_turns`` turns (all when None); the id is unchanged.

        With a recording whose kept turns all have timings, the audio is cut too
        (``audio_end_s`` = the latest end among the kept turns), so the reference
        and the audio still say the same thing. Without timings the audio cannot
        be cut: ``audio_end_s`` stays None and the runner refuses such a run.
        """
        if max_turns is None or max_turns >= len(self.turns):
            return self
        kept = self.turns[:max_turns]
        update: dict[str, Any] = {"turns": kept}
        if self.audio_path and all(t.end_s is not None for t in kept):
            update["audio_end_s"] = max(float(t.end_s) for t in kept)  # type: ignore[arg-type]
        return revise(self, **update)


class SpeechAudio(Record):
    """Clean dialogue audio at 16 kHz mono, with the active-speech segments."""

    schema_version: int = SCHEMA_VERSION
    encounter_id: str
    path: str = Field(description="16 kHz mono float WAV of the clean dialogue.")
    duration_s: float
    sample_rate_hz: int = 16000
    segments_s: tuple[tuple[float, float], ...] = Field(
        description="Active speech (start, end) in seconds: turn boundaries or a VAD mask."
    )
    segments_source: Literal["tts_turns", "corpus_timings", "vad"] = Field(
        description="Where the active-speech segments come from."
    )
    recipe: dict[str, object] = Field(
        default_factory=dict, description="How the audio was made (TTS voice, variants, gaps) or read."
    )


class MixInfo(Record):
    """Everything sampled or measured to build one mixture (or one chain condition's audio).

    A chain condition (:mod:`stresstest.noise.chain`) has ``family`` ``chain``, its steps in ``chain``,
    and SNR fields only when one of its steps adds noise. ``chain`` is left out of the serialised form
    when None, so a plain mixture's record is byte-identical to what it was before chains existed.
    """

    family: str = Field(description="Noise family: 'ambient' or 'babble' (or a user name); 'chain' for a chain.")
    noise_source: str = Field(description="Corpus file or generator recipe the segment came from ('' if none).")
    noise_offset_s: float = Field(description="Offset of the segment within the source.")
    noise_recipe: dict[str, object] = Field(default_factory=dict, description="Generator recipe/kwargs.")
    target_snr_db: float | None = Field(description="Target SNR (None for a chain without a noise step).")
    measured_snr_db: float | None = Field(description="SNR measured back on active speech (None without noise).")
    speech_rms: float = Field(description="RMS of the speech over active segments.")
    noise_gain: float = Field(description="Gain applied to the unit-RMS noise segment (0 without noise).")
    clip_scale: float = Field(description="Scale applied to the whole mixture to avoid clipping (1 = none).")
    chain: list[ChainStepFacts] | None = Field(
        default=None,
        description="Chain condition: each step's kind, parameters, seeds and measurements, in order "
        "(one :data:`stresstest.steps.ChainStepFacts` per step).",
    )

    @model_serializer(mode="wrap")
    def _drop_empty_chain(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("chain", 0) is None:
            data.pop("chain")
        return data


#: Whisper decodes at most 30 s at once: the fixed window length (stresstest.asr.base).
WINDOW_S = 30.0
#: Shortest window accepted: a window shorter than a second holds less than one word.
MIN_WINDOW_S = 1.0


class DecodingOptions(BaseModel):
    """Pinned ASR decoding (:mod:`stresstest.asr.base`); recorded with every transcript."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    language: Literal["en"] = "en"
    temperature: float = Field(
        default=0.0, ge=0.0, le=1.0, description="0 (the study's setting); no fallback temperatures. 0 to 1."
    )
    beam_size: int = Field(default=1, ge=1, le=16, description="Greedy decoding (1); 1 to 16.")
    best_of: int = Field(default=1, ge=1, le=16, description="Candidates when sampling (temperature > 0); 1 to 16.")
    condition_on_previous_text: bool = False
    without_timestamps: bool = Field(default=False, description="Keep Whisper's timestamp mode (see module doc).")
    window_s: float = Field(
        default=WINDOW_S,
        ge=MIN_WINDOW_S,
        le=WINDOW_S,
        description=f"Fixed window length; windows do not overlap. {MIN_WINDOW_S:g} to "
        f"{WINDOW_S:g} s (Whisper decodes at most 30 s at once).",
    )
    no_speech_threshold: float | None = Field(
        default=0.6,
        ge=0.0,
        le=1.0,
        description="Whisper's default silence skipping (window dropped if no-speech prob is high "
        "and the average log-prob is below log_prob_threshold).",
    )
    log_prob_threshold: float | None = Field(
        default=-1.0, ge=-20.0, le=0.0, description="Average log-probability threshold (-20 to 0)."
    )
    suppress_blank: bool = True


class Transcript(Record):
    """ASR output for one (encounter, condition), with the decoding that made it."""

    schema_version: int = SCHEMA_VERSION
    encounter_id: str
    condition: str
    text: str
    backend: str
    model: str
    decoding: DecodingOptions = Field(description="Every decoding option that shaped this text.")
    audio_sha256: str
    segments: tuple[tuple[float, float, str], ...] = Field(default=(), description="(start, end, text).")
    elapsed_s: float = 0.0
    runtime: dict[str, object] = Field(
        default_factory=dict, description="Device, precision/compute type, batch size, package versions."
    )
    token_limit_hits: int | None = Field(
        default=None,
        description="Decodes that reached the 224-token sample length and continued from their "
        "last timestamp (None: the backend does not report it).",
    )
