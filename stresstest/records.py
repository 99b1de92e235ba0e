"""Records that flow between stages and are written to disk.

Every record is a pydantic model with stable ids (``encounter_id``, ``condition``)
and a ``schema_version``. Records are never mutated in place: derive a new one
with ``model_copy(update=...)``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

SCHEMA_VERSION = 1

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
        update: dict[str, object] = {"turns": kept}
        if self.audio_path and all(t.end_s is not None for t in kept):
            update["audio_end_s"] = max(float(t.end_s) for t in kept)  # type: ignore[arg-type]
        return self.model_copy(update=update)


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
    chain: list[dict[str, object]] | None = Field(
        default=None, description="Chain condition: each step's kind, parameters, seeds and measurements, in order."
    )

    @model_serializer(mode="wrap")
    def _drop_empty_chain(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("chain", 0) is None:
            data.pop("chain")
        return data


class Transcript(Record):
    """ASR output for one (encounter, condition), with the decoding that made it."""

    schema_version: int = SCHEMA_VERSION
    encounter_id: str
    condition: str
    text: str
    backend: str
    model: str
    decoding: dict[str, object] = Field(description="Every decoding option that shaped this text.")
    audio_sha256: str
    segments: tuple[tuple[float, float, str], ...] = Field(default=(), description="(start, end, text).")
    elapsed_s: float = 0.0
    runtime: dict[str, object] = Field(
        default_factory=dict, description="Device, precision/compute type, batch size, package versions."
    )
    token_limit_hits: int | None = Field(
        default=None, description="Decodes that reached the 224-token sample length and continued from their "
        "last timestamp (None: the backend does not report it)."
    )
