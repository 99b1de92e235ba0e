"""Each stage as (stage, item) tasks the executor can run anywhere.

The task functions and workers here are thin adapters over the stages' own
entry points (``speech_for``, ``build_mixtures``, ``transcribe_items``,
``structure_many`` / ``mitigate_many``): they take picklable inputs, write only
the stage cache, and return results (per-item failures included) for the driver
to record and persist. Nothing here reads or writes the run directory, except
the LLM server log the structuring session keeps under ``logs/`` (a path the
driver passes in).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stresstest.asr.stage import ASRConfig, ASRItem
from stresstest.errors import StressTestError
from stresstest.llm.config import LLMConfig
from stresstest.llm.engine import LLMEngine
from stresstest.records import Encounter, MixInfo, SpeechAudio, Transcript
from stresstest.schema import RecordEnvelope
from stresstest.speech import TTSConfig

# ------------------------------------------------------------------ speech (CPU task per encounter)


@dataclass(frozen=True)
class SpeechResult:
    """Clean speech of one encounter, or why it could not be made."""

    encounter_id: str
    speech: SpeechAudio | None
    error: str | None


def speech_task(ctx: tuple[TTSConfig, Path], enc: Encounter) -> SpeechResult:
    """Render (or read back from the cache) one encounter's clean speech."""
    from stresstest.speech import speech_for

    tts, cache = ctx
    try:
        return SpeechResult(enc.encounter_id, speech_for(enc, cache, tts), None)
    except StressTestError as exc:
        return SpeechResult(enc.encounter_id, None, str(exc))


# ------------------------------------------------------------------ mixing (CPU task per encounter × family)


@dataclass(frozen=True)
class MixContext:
    """What every mixing task shares: the noise sources (built once by the driver), specs, seed, cache."""

    sources: Mapping[str, Any]
    noise_specs: Mapping[str, dict[str, Any]]
    seed: int
    cache_dir: Path


@dataclass(frozen=True)
class MixOutcome:
    """One mixture of a job: its condition, the cached WAV and facts, or the error."""

    condition: str
    path: str | None
    info: MixInfo | None
    error: str | None


def mix_task(ctx: MixContext, job_speech: tuple[Any, SpeechAudio]) -> list[MixOutcome]:
    """Write (or reuse) every SNR of one (encounter, family) job."""
    from stresstest.noise.stage import build_mixtures

    job, speech = job_speech
    out: list[MixOutcome] = []

    def done(cond: str, path: Path | None, info: MixInfo | None, err: str | None) -> None:
        out.append(MixOutcome(cond, str(path) if path is not None else None, info, err))

    build_mixtures(
        job,
        speech,
        ctx.sources[job.family],
        ctx.noise_specs[job.family],
        seed=ctx.seed,
        cache_dir=ctx.cache_dir,
        on_done=done,
    )
    order = {c: i for i, c in enumerate(job.conditions)}
    return sorted(out, key=lambda o: order[o.condition])


def chain_task(ctx: MixContext, job: tuple[str, str, list[dict[str, Any]], SpeechAudio]) -> MixOutcome:
    """Write (or reuse) one chain condition's audio for one encounter (:mod:`stresstest.noise.chain`)."""
    from stresstest.noise.chain import build_chain

    eid, cond, steps, speech = job
    path, info, err = build_chain(
        eid, steps, speech, ctx.sources, ctx.noise_specs, seed=ctx.seed, cache_dir=ctx.cache_dir
    )
    return MixOutcome(cond, str(path) if path is not None else None, info, err)


# ------------------------------------------------------------------ ASR (model-holding worker: one per GPU)


@dataclass(frozen=True)
class ASROutcome:
    """One transcribed item, or why it failed."""

    item: ASRItem
    transcript: Transcript | None
    error: str | None


class ASRWorker:
    """Holds one ASR backend (its model loads on first use and stays loaded) and transcribes shards."""

    def __init__(self, init: tuple[ASRConfig, Path]) -> None:
        from stresstest.asr.stage import make_backend

        self.cfg, self.cache_dir = init
        self.backend = make_backend(self.cfg, self.cache_dir)

    def run(self, shard: list[ASRItem], emit: Callable[[int, ASROutcome], None] | None = None) -> list[ASROutcome]:
        from stresstest.asr.stage import transcribe_items

        index = {id(it): i for i, it in enumerate(shard)}
        out: list[ASROutcome | None] = [None] * len(shard)

        def done(it: ASRItem, t: Transcript | None, err: str | None) -> None:
            i = index[id(it)]
            out[i] = ASROutcome(it, t, err if t is None else None)
            if emit is not None:
                emit(i, out[i])  # type: ignore[arg-type]

        # The model stays loaded across shards; the runner releases it after the stage (in process) or the
        # actor's process ends (Ray).
        transcribe_items(shard, self.cfg, cache_dir=self.cache_dir, on_done=done, backend=self.backend, release=False)
        return [o if o is not None else ASROutcome(shard[i], None, "no transcript") for i, o in enumerate(out)]


# ------------------------------------------------------------------ structuring (worker per LLM engine)


@dataclass(frozen=True)
class StructureTask:
    """One transcript to structure; ``guarded`` items go through the evidence-grounded guard."""

    encounter_id: str
    condition: str
    transcript_text: str
    guarded: bool = False


@dataclass(frozen=True)
class StructureInit:
    """What a structuring worker is built from.

    Attributes:
        cfg: the run's LLM config (the ``structure`` section).
        cache_dir: stage cache root.
        log_dir: the run's log directory.
        engine: the run's engine when the worker runs in the driver's process (shared with the judges);
            None in a process of its own (a Ray actor), where the worker owns an engine.
    """

    cfg: LLMConfig
    cache_dir: Path
    log_dir: Path
    engine: LLMEngine | None = None


class StructureWorker:
    """Structures shards of transcripts with one LLM engine (or the rules extractor).

    In the driver's process the engine is the run's (passed in :class:`StructureInit`); in a process of its
    own (a Ray actor) the worker owns one engine for its lifetime — started at the first cache miss, reused by
    every shard and by Draft/Guard — and stops it in :meth:`close`.
    """

    def __init__(self, init: StructureInit) -> None:
        self.cfg, self.cache_dir, self.log_dir = init.cfg, init.cache_dir, init.log_dir
        self._run_engine = init.engine
        self._own_engine: LLMEngine | None = None

    def _engine(self) -> LLMEngine | None:
        if self.cfg.backend == "rules":
            return None
        if self._run_engine is not None:
            return self._run_engine
        if self._own_engine is None:
            self._own_engine = LLMEngine(self.cfg, cache_dir=self.cache_dir, log_dir=self.log_dir)
        return self._own_engine

    def close(self) -> None:
        """Stop the engine this worker owns (none when it used the run's)."""
        if self._own_engine is not None:
            self._own_engine.close()
            self._own_engine = None

    def run(
        self, shard: list[StructureTask], emit: Callable[[int, RecordEnvelope], None] | None = None
    ) -> list[RecordEnvelope]:
        from stresstest.mitigation import mitigate_many
        from stresstest.structure.stage import StructureItem, structure_many

        plain = [(i, t) for i, t in enumerate(shard) if not t.guarded]
        guard = [(i, t) for i, t in enumerate(shard) if t.guarded]
        out: list[RecordEnvelope | None] = [None] * len(shard)
        for group, fn in ((plain, structure_many), (guard, mitigate_many)):
            if not group:
                continue
            items = [
                StructureItem(encounter_id=t.encounter_id, condition=t.condition, transcript_text=t.transcript_text)
                for _, t in group
            ]
            envs = list(fn(items, self.cfg, cache_dir=self.cache_dir, log_dir=self.log_dir, engine=self._engine()))
            for (i, _), env in zip(group, envs, strict=True):
                out[i] = env
                if emit is not None:
                    emit(i, env)
        return [e for e in out if e is not None]
