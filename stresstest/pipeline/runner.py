"""The runner: corpus → speech → conditions → ASR → structure → score → report.

Each stage is a function over records; expensive stages cache their outputs
(content-hash keys), so an interrupted run resumes where it stopped and a
finished one recomputes nothing. Per-item failures are recorded with their
stage and reason in a :class:`~stresstest.pipeline.failures.FailureLedger`,
counted against ``run.max_failures``, and never dropped; a run with failures
within the limit exits 0 and says so on stderr. The pairing rule (docs/spec.md §11,
:mod:`stresstest.pipeline.pairing`) then takes an encounter with a failed item
out of every row. Run-directory rules (``--out``, stale artefacts, wall time
across resumes): :mod:`stresstest.pipeline.housekeeping`. Stage work runs as
(stage, item) tasks on the configured executor (:mod:`stresstest.pipeline.executor`).
"""

from __future__ import annotations

import csv
import io
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from stresstest import __version__
from stresstest.asr.stage import ASRItem
from stresstest.cache import (
    REJECTED,
    atomic_write_json,
    atomic_write_text,
    confine_tool_dirs,
    default_cache_dir,
    rejected_entries,
)
from stresstest.config import RunConfig, load_config
from stresstest.console import text_table
from stresstest.corpus import load_corpus
from stresstest.errors import CorpusError, RunError
from stresstest.gold.model import GoldRecord
from stresstest.grid import ConditionGrid
from stresstest.ids import check_id, id_path
from stresstest.llm.engine import LLMEngine
from stresstest.metrics.summary import CSV_COLUMNS, QUALITY_COLUMNS, SummaryRow, summary_rows
from stresstest.noise import make_noise_source
from stresstest.noise.factory import bank_encounters
from stresstest.noise.stage import mix_jobs
from stresstest.pipeline.executor import Executor, make_executor
from stresstest.pipeline.failures import FailureLedger
from stresstest.pipeline.ownership import RunDirClaim
from stresstest.pipeline.tasks import (
    ASROutcome,
    ASRWorker,
    MixContext,
    MixOutcome,
    SpeechResult,
    StructureInit,
    StructureTask,
    StructureWorker,
    chain_task,
    mix_task,
    speech_task,
)
from stresstest.progress import StageProgress, duration, say
from stresstest.records import Encounter, MixInfo, SpeechAudio, Transcript, revise
from stresstest.results import (
    MANIFEST_SCHEMA_VERSION,
    AsrInfo,
    CorpusInfo,
    ItemScore,
    NoiseInfo,
    NoteQualityInfo,
    RunManifest,
    SpeechInfo,
    StructureInfo,
    items_jsonl,
)
from stresstest.schema import RecordEnvelope


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` returns: the run directory, its ``summary.csv`` rows, its ``items.jsonl`` rows and the
    manifest it wrote last (the same objects the files hold; read a run written earlier with
    :func:`stresstest.results.read_run`)."""

    out: Path
    rows: list[SummaryRow]
    items: list[ItemScore]
    manifest: RunManifest


@dataclass
class RunState:
    """Everything the stages produce, keyed by (encounter_id, condition); the driver's view of a run."""

    out: Path
    cfg: RunConfig
    grid: ConditionGrid
    executor: Executor
    ledger: FailureLedger = field(default_factory=lambda: FailureLedger(0.0, 1))
    encounters: dict[str, Encounter] = field(default_factory=dict)
    speech: dict[str, SpeechAudio] = field(default_factory=dict)
    audio: dict[tuple[str, str], Path] = field(default_factory=dict)
    mix: dict[tuple[str, str], MixInfo] = field(default_factory=dict)
    transcripts: dict[tuple[str, str], Transcript] = field(default_factory=dict)
    records: dict[tuple[str, str], RecordEnvelope] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    gold: dict[str, GoldRecord] = field(default_factory=dict)
    extra_manifest: dict[str, Any] = field(default_factory=dict)  # invocations, completed, pairing
    structure_fp: dict[str, Any] | None = None  # computed once: the manifest is rewritten at every stage
    llm_engine: LLMEngine | None = None  # the run's single engine (structure, guard, judges); None for 'rules'
    asr_released_at: str | None = None


@contextmanager
def _stage(state: RunState, name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        state.stage_seconds[name] = round(state.stage_seconds.get(name, 0.0) + time.perf_counter() - t0, 3)


def _bar(state: RunState, total: int, desc: str, *, bar: bool = True, unit: str = "item") -> StageProgress:
    # A tqdm bar on a terminal, plain progress lines in a log (stresstest.progress); none with run.progress false.
    return StageProgress(desc, total, enabled=state.cfg.run.progress, bar=bar, unit=unit)


def _announce(state: RunState, cache: Path) -> None:
    """The run's first line: what will run (encounters, conditions, audio hours, backends) and the cache hits."""
    from stresstest.speech import planned_speech

    cfg, grid = state.cfg, state.grid
    plans = [planned_speech(e, cache, cfg.speech) for e in state.encounters.values()]
    known = [p.seconds for p in plans if p.seconds is not None]
    hits = sum(1 for p in plans if p.cached)
    n_rec = sum(1 for p in plans if p.cached is None)
    n = len(state.encounters)
    cached = ", ".join(
        ([f"{hits} of {n - n_rec} TTS renderings in the cache"] if n_rec < n else [])
        + ([f"{n_rec} recordings"] if n_rec else [])
    )
    hours = (
        (
            f"{sum(known) / 3600:.2f} h ({duration(sum(known))}) of speech"
            + ("" if len(known) == n else f" known for {len(known)} of {n} encounters")
        )
        if known
        else ("hours of speech known once rendered")
    )
    st = cfg.structure
    say(
        f"run: {n} encounters × {len(grid)} conditions = {n * len(grid)} items ({', '.join(grid.ids)}); {hours}; "
        f"{cached}; ASR {cfg.asr.backend} "
        f"{cfg.asr.model or '(bundled model)'}; "
        f"structure {st.backend}{'' if st.backend == 'rules' else ' ' + (st.server.model or '(bundled model)')}; "
        f"judge {cfg.judge.backend}; executor {state.executor.kind}",
        enabled=cfg.run.progress,
    )


def _load_encounters(state: RunState) -> None:
    cfg = state.cfg
    encs = load_corpus(cfg.corpus.kind, cfg.corpus.path, ids=cfg.corpus.ids, limit=cfg.corpus.limit)
    from stresstest.pipeline.score import load_gold_for

    state.gold = load_gold_for([e.encounter_id for e in encs], cfg.gold)
    for e in encs:
        check_id(e.encounter_id, where=e.source_path or str(cfg.corpus.path))  # every loader, one rule
        g = state.gold.get(e.encounter_id)
        scope = getattr(g, "scope_turns", None) if g is not None else None
        cut = e.truncated(scope if scope else cfg.corpus.max_turns)
        if cut.audio_path and len(cut.turns) < len(e.turns) and cut.audio_end_s is None:
            # Cutting the reference but not the audio would count every later turn as insertions (WER > 100%).
            why = f"its gold record's scope_turns={scope}" if scope else f"corpus.max_turns={cfg.corpus.max_turns}"
            raise CorpusError(
                f"{e.source_path}: encounter {e.encounter_id}: {why} keeps {len(cut.turns)} of {len(e.turns)} turns, "
                "but the recording cannot be cut with them: its turns have no start_s/end_s timings; give turn "
                "timings, or drop the turn limit for recordings"
            )
        state.encounters[e.encounter_id] = cut
    state.ledger = FailureLedger(
        cfg.run.max_failures, len(state.encounters) * len(state.grid), state.out / "manifest.json"
    )


def _speech_stage(state: RunState, cache: Path) -> None:
    encs = list(state.encounters.values())
    bar = _bar(state, len(encs), "speech", unit="encounter")
    results: list[SpeechResult] = state.executor.map_tasks(
        "speech",
        speech_task,
        (state.cfg.speech, cache),
        encs,
        on_result=lambda i, r: bar.update(failed=int(r.speech is None)),
    )
    bar.close()
    for r in results:
        if r.speech is not None:
            state.speech[r.encounter_id] = r.speech
            state.audio[(r.encounter_id, "clean")] = Path(r.speech.path)
        else:
            for c in state.grid:
                state.ledger.record("speech", (r.encounter_id, c.id), r.error or "no speech")


def _conditions_stage(state: RunState, cache: Path, all_encounters: list[Encounter]) -> None:
    cfg = state.cfg
    jobs = mix_jobs(list(state.speech), state.grid)
    # Sources are built once here (a babble bank renders or reads its cached sentences) and shared by every task.
    sources = {
        fam: make_noise_source(spec, encounters=all_encounters, cache_dir=cache) for fam, spec in cfg.noise.items()
    }
    ctx = MixContext(
        sources=sources,
        noise_specs={f: s.model_dump(mode="json") for f, s in cfg.noise.items()},
        seed=cfg.run.seed,
        cache_dir=cache,
    )
    bar = _bar(state, sum(len(j.conditions) for j in jobs), "mix")
    results: list[list[MixOutcome]] = state.executor.map_tasks(
        "mix",
        mix_task,
        ctx,
        [(j, state.speech[j.encounter_id]) for j in jobs],
        on_result=lambda i, r: bar.update(len(r), failed=sum(o.error is not None for o in r)),
    )
    bar.close()
    for job, outcomes in zip(jobs, results, strict=True):
        for o in outcomes:
            key = (job.encounter_id, o.condition)
            if o.error is not None or o.path is None or o.info is None:
                state.ledger.record("mix", key, o.error or "no mixture")
            else:
                state.audio[key] = Path(o.path)
                state.mix[key] = o.info
    _chain_stage(state, ctx)


def _chain_stage(state: RunState, ctx: MixContext) -> None:
    """Audio of the chain conditions (stresstest.noise.chain): one task per (encounter, chain condition)."""
    chained = state.grid.chained()
    if not chained:
        return
    jobs = [(eid, c.id, list(c.chain or []), sp) for eid, sp in state.speech.items() for c in chained]
    bar = _bar(state, len(jobs), "chain")
    outcomes: list[MixOutcome] = state.executor.map_tasks(
        "chain", chain_task, ctx, jobs, on_result=lambda i, r: bar.update(failed=int(r.error is not None))
    )
    bar.close()
    for (eid, *_), o in zip(jobs, outcomes, strict=True):
        key = (eid, o.condition)
        if o.error is not None or o.path is None or o.info is None:
            state.ledger.record("mix", key, o.error or "no audio")
        else:
            state.audio[key] = Path(o.path)
            state.mix[key] = o.info


def _asr_workers(state: RunState) -> tuple[int, float]:
    ex = state.cfg.run.executor
    gpus = state.executor.gpu_count()
    if gpus <= 0:
        return (1 if ex.asr_workers == "auto" else ex.asr_workers), 0.0
    per = ex.asr_gpus_per_worker
    n = (
        max(1, int(gpus // per))
        if ex.asr_workers == "auto" and per > 0
        else (1 if ex.asr_workers == "auto" else ex.asr_workers)
    )
    return n, per


def _asr_stage(state: RunState, cache: Path) -> None:
    items = [ASRItem(eid, cond, path) for (eid, cond), path in sorted(state.audio.items())]
    bar = _bar(state, len(items), "asr")
    workers, gpus = _asr_workers(state)
    # Shards hold whole batch groups (batch_size // 2 encounters), so batches are the ones a single process forms.
    group = max(1, state.cfg.asr.batch_size // 2) if state.cfg.asr.batch_size > 1 else 1
    shard = -(-state.cfg.run.executor.shard_size // group) * group
    results: list[ASROutcome] = state.executor.map_pool(
        "asr",
        ASRWorker,
        (state.cfg.asr, cache),
        items,
        workers=workers,
        gpus_per_worker=gpus,
        shard_size=shard,
        on_result=lambda i, r: bar.update(failed=int(r.transcript is None)),
    )
    bar.close()
    for r in results:
        it = r.item
        if r.transcript is None:
            state.ledger.record("asr", (it.encounter_id, it.condition), r.error or "no transcript")
        else:
            state.transcripts[(it.encounter_id, it.condition)] = r.transcript
            atomic_write_json(
                id_path(state.out, "transcripts", it.condition, it.encounter_id, suffix=".json"),
                r.transcript.model_dump(mode="json"),
            )


def _release_asr(state: RunState) -> None:
    """Free the ASR model (and its GPU memory) before the LLM engine starts — the order is fixed here.

    The LLM engine starts lazily inside the structure stage, after this; with vLLM it measures the free GPU
    memory at that moment. The release itself is the ASR package's (``release_asr_models``).
    """
    import gc
    from importlib import import_module

    report = None
    for module in ("stresstest.asr", "stresstest.asr.backends"):
        release = getattr(import_module(module), "release_asr_models", None)
        if callable(release):
            report = release()
            break
    gc.collect()  # the in-process ASR worker that held the model is unreferenced by now
    from stresstest.asr.backends import live_asr_models

    alive = live_asr_models()
    if alive or (isinstance(report, dict) and report.get("still_loaded")):
        import logging

        logging.getLogger(__name__).warning(
            "ASR release: %d CTranslate2 model(s) returned from unload_model still loaded, %d still referenced; "
            "their memory is freed only when collected, so the LLM engine may find less free GPU memory",
            (report or {}).get("still_loaded", 0),
            alive,
        )
    state.asr_released_at = datetime.now(timezone.utc).isoformat(timespec="seconds")


def _structure_stage(state: RunState, cache: Path) -> None:
    ts = sorted(state.transcripts.items())
    tasks = [StructureTask(eid, cond, t.text) for (eid, cond), t in ts]
    for c in state.grid.mitigated():
        tasks += [StructureTask(eid, c.id, t.text, guarded=True) for (eid, cond), t in ts if cond == c.base]
    ex = state.cfg.run.executor
    # One shard per engine: each structuring call opens an LLM session (a managed server starts once per call).
    # In this process the workers use the run's engine; a Ray actor cannot share it and owns one.
    engine = state.llm_engine if state.executor.kind == "inprocess" else None
    bar = _bar(state, len(tasks), "structure", bar=False)  # on a terminal the LLM calls have their own bar
    envs: list[RecordEnvelope] = state.executor.map_pool(
        "structure",
        StructureWorker,
        StructureInit(state.cfg.structure, cache, state.out / "logs", engine),
        tasks,
        workers=ex.llm_engines,
        gpus_per_worker=ex.llm_gpus_per_engine,
        shard_size=max(1, -(-len(tasks) // ex.llm_engines)),
        on_result=lambda i, r: bar.update(failed=int(r.failed)),
    )
    bar.close()
    for env in envs:
        key = (env.encounter_id, env.condition)
        state.records[key] = env
        atomic_write_json(
            id_path(state.out, "records", env.condition, env.encounter_id, suffix=".json"),
            env.model_dump(mode="json"),
        )
        if env.failed:
            state.ledger.record("structure", key, env.error or "structuring failed")


def _summary_csv(rows: list[SummaryRow]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    # The note-quality columns are always written (empty = not computed, docs/spec.md §10) so the header is stable.
    # Columns added later go last, so every earlier column keeps its position (a reader by index still works).
    w.writerow(CSV_COLUMNS)
    for r in rows:
        w.writerow(
            [
                "" if v is None else (f"{v:.4f}".rstrip("0").rstrip(".") if isinstance(v, float) else v)
                for v in r.cells().values()
            ]
        )
    return buf.getvalue()


def format_quality_table(rows: list[SummaryRow], note_quality: NoteQualityInfo | None = None) -> str:
    """The note-quality columns per condition, with the judge's adequacy; empty string when not computed."""
    cells = [r.cells() for r in rows]
    if all(r[c] is None for r in cells for c in QUALITY_COLUMNS):
        return ""
    heads = ["condition", "Complete%", "Concise%", "Grounded%", "Halluc-lit%", "Halluc-inf%"]
    body = [
        [str(r["condition"])] + ["–" if (v := r[c]) is None else f"{v:.1f}" for c in QUALITY_COLUMNS] for r in cells
    ]
    lines = [text_table(heads, body)]
    if note_quality is not None and not note_quality.adequate:
        lines.append(f"NOT INTERPRETABLE as note quality: {note_quality.adequacy} (mechanics only; see the report)")
    return "\n".join(lines)


def format_table(rows: list[SummaryRow]) -> str:
    """The results table printed at the end of a run (Table-2 layout)."""
    heads = ["condition", "n", "WER%", "Ins%", "NegErr%", "ErrProp", "Triage=%", "SCER%", "Under%", "Score", "Unsafe%"]
    keys = [
        "condition",
        "n",
        "wer",
        "ins_rate",
        "neg_err",
        "err_prop",
        "triage_match",
        "scer",
        "under_triage",
        "mean_score",
        "unsafe",
    ]
    body = [
        [("–" if (v := cells[k]) is None else (f"{v:.2f}" if isinstance(v, float) else str(v))) for k in keys]
        for cells in (r.cells() for r in rows)
    ]
    return text_table(heads, body)


def run(config_path: str | Path, out_dir: str | Path | None = None, *, replace: bool = False) -> RunResult:
    """Run a whole sweep; returns its :class:`RunResult` (run dir, summary rows, items, manifest).

    ``--out`` must be new, empty, or a run directory of this config (or an
    unfinished one); ``replace=True`` lets a different config replace a finished
    run there. Nothing of an existing run is rewritten before the config and
    corpus validated (:mod:`stresstest.pipeline.ownership`).

    Raises:
        StressTestError: for every user error (bad config, missing corpus, a
            run directory that is not this run's...) and when more items fail
            than ``run.max_failures`` allows.
    """
    from stresstest.pipeline.ownership import claim_run_dir, config_inputs, config_sections, out_problem

    cfg = load_config(config_path)
    out = Path(out_dir) if out_dir else Path("runs") / Path(config_path).stem
    cache = Path(cfg.run.cache_dir) if cfg.run.cache_dir else default_cache_dir()
    sections = config_sections(cfg.model_dump(mode="json"))
    problem = out_problem(out, cache, config_inputs(cfg, config_path), sections, replace=replace)  # as `check` does
    if problem:
        raise RunError(problem)
    claim = claim_run_dir(out, sections, replace=replace)
    committed: list[bool] = []
    try:
        return _run_claimed(cfg, out, cache, claim, committed)
    finally:
        claim.release(failed_before_commit=not committed)


def _run_claimed(cfg: RunConfig, out: Path, cache: Path, claim: RunDirClaim, committed: list[bool]) -> RunResult:
    """The run itself, in a claimed and locked ``out``; appends to ``committed`` once ``out`` is rewritten."""
    from stresstest.metrics.summary import in_pairing
    from stresstest.pipeline.housekeeping import WallClock, announce_failures, prune_stale
    from stresstest.pipeline.pairing import apply_pairing
    from stresstest.pipeline.preflight import preflight
    from stresstest.pipeline.score import ScoreInputs, extra_summary_columns, judge_note_quality, score_items

    REJECTED.clear()  # this invocation's count of refused cache entries (recorded in the manifest)
    confine_tool_dirs(cache)  # third-party caches (matplotlib, onnxruntime) go under the cache dir, not $HOME
    preflight(cfg, out=out, cache=cache)  # models, CUDA libraries, folders, disk: fail now, not hours in
    clock = WallClock(out)
    written: list[RunManifest] = []  # the manifest the last checkpoint wrote (returned)
    with make_executor(cfg.run.executor, cache_dir=cache) as executor:
        state = RunState(out=out, cfg=cfg, grid=cfg.grid(), executor=executor, stage_seconds=dict(clock.carried_stages))
        executor_info = executor.describe()
        if cfg.structure.backend != "rules":
            # One engine per run, passed to structuring, Draft/Guard and every LLM judge (started at the
            # first cache miss, stopped when the stages are done). With the Ray executor each structuring
            # actor runs an engine of its own (run.executor.llm_engines).
            state.llm_engine = LLMEngine(
                cfg.structure, cache_dir=cache, log_dir=out / "logs", progress=cfg.run.progress
            )

        def checkpoint(completed: bool = False) -> None:
            # The manifest is rewritten at every stage boundary, so a killed run leaves its time behind.
            if not committed:  # the config or corpus did not validate: an earlier run's manifest stays as it was
                return
            state.stage_seconds["total"] = clock.total()
            state.extra_manifest["invocations"] = clock.invocations(completed)
            state.extra_manifest["completed"] = completed
            state.extra_manifest["cache_rejected"] = rejected_entries()
            written[:] = [_write_manifest(state, executor_info)]

        try:
            with _stage(state, "corpus"):
                _load_encounters(state)
                _announce(state, cache)
                all_encs = load_corpus(cfg.corpus.kind, cfg.corpus.path) if "babble" in cfg.noise else []
                for spec in cfg.noise.values():  # a pinned babble id that is missing fails here, not after TTS
                    if spec.bank_encounters is not None:
                        bank_encounters(spec, all_encs)
                # Config and corpus validated: only now is anything of an earlier run in ``out`` replaced.
                # Stale files first, then the marker: a kill in between leaves them listed for the next run.
                committed.append(True)
                if claim.previous is not None:
                    prune_stale(
                        out, claim.previous.conditions, claim.previous.encounter_ids, state.grid.ids, state.encounters
                    )
                claim.commit(state.grid.ids, state.encounters)
                atomic_write_text(
                    out / "config.resolved.yaml", yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
                )
            checkpoint()
            with _stage(state, "speech"):
                _speech_stage(state, cache)
            checkpoint()
            with _stage(state, "conditions"):
                _conditions_stage(state, cache, all_encs)
            checkpoint()
            with _stage(state, "asr"):
                _asr_stage(state, cache)
                _release_asr(state)
            checkpoint()
            with _stage(state, "structure"):
                _structure_stage(state, cache)
            checkpoint()
            with _stage(state, "score"):
                failures = {
                    (eid, c.id): f
                    for eid in state.encounters
                    for c in state.grid
                    if (f := state.ledger.failed((eid, c.id), base=c.base)) is not None
                }
                inputs = ScoreInputs(
                    out=out,
                    grid=state.grid,
                    encounters=state.encounters,
                    gold=state.gold,
                    audio=state.audio,
                    mix=state.mix,
                    transcripts=state.transcripts,
                    records=state.records,
                    failures=failures,
                    judge_backend=cfg.judge.backend,
                    structure=cfg.structure,
                    engine=state.llm_engine,
                )
                with _bar(state, len(state.encounters) * len(state.grid), "score", bar=False) as bar:
                    items = score_items(inputs, cache, executor=executor, progress=bar.update)
            if cfg.judge.note_quality.enabled():
                checkpoint()
                with _stage(state, "note_quality"):
                    items, state.extra_manifest["note_quality"] = judge_note_quality(
                        inputs, items, cfg.judge.note_quality, cache
                    )
            with _stage(state, "score"):
                items, pairing = apply_pairing(items, state.grid)
                state.extra_manifest["pairing"] = pairing.manifest()
        finally:
            if state.llm_engine is not None:
                state.llm_engine.close()
            checkpoint()
    rows = extra_summary_columns([it for it in items if in_pairing(it)], summary_rows(items, state.grid))
    # docs/spec.md §11: each row says how many encounters it covers (n) and which were dropped
    rows = [revise(r, n_dropped=pairing.n_dropped, dropped=" ".join(sorted(pairing.dropped))) for r in rows]
    atomic_write_text(out / "summary.csv", _summary_csv(rows))
    atomic_write_text(out / "items.jsonl", items_jsonl(items))
    checkpoint()
    if cfg.report.enabled:
        with _stage(state, "report"):
            from stresstest.report import build_report

            t0 = time.perf_counter()
            build_report(out, n_resamples=cfg.report.n_resamples, seed=cfg.run.seed)
            say(
                f"report done in {duration(time.perf_counter() - t0)}: {out / 'report' / 'report.html'}, items in "
                f"{out / 'report' / 'items' / 'index.html'}",
                enabled=cfg.run.progress,
            )
    checkpoint(completed=True)
    announce_failures(
        state.ledger.records(),
        state.ledger.total_items,
        cfg.run.max_failures,
        out / "manifest.json",
        pairing.sentence() if pairing.dropped else None,
    )
    return RunResult(out=out, rows=rows, items=items, manifest=written[-1])


def _write_manifest(state: RunState, executor_info: dict[str, Any]) -> RunManifest:
    from stresstest.provenance import environment

    cfg = state.cfg
    from stresstest.structure.stage import structure_fingerprint

    if state.structure_fp is not None:
        structure = state.structure_fp
    else:
        try:
            structure = structure_fingerprint(cfg.structure)
            if cfg.mitigation.conditions:
                from stresstest.mitigation.agent import mitigation_fingerprint

                structure = {**structure, "mitigation": mitigation_fingerprint(cfg.structure)}
            state.structure_fp = structure
        except Exception as exc:  # the manifest must be written even when the stage cannot describe itself
            structure = {"backend": cfg.structure.backend, "error": str(exc)}
    manifest = RunManifest(
        schema_version=MANIFEST_SCHEMA_VERSION,
        run_id=state.out.name,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        stresstest_version=__version__,
        python=sys.version.split()[0],
        seed=cfg.run.seed,
        corpus=CorpusInfo(
            kind=cfg.corpus.kind,
            path=cfg.corpus.path,
            n_encounters=len(state.encounters),
            encounter_ids=sorted(state.encounters),
        ),
        asr=AsrInfo(
            backend=cfg.asr.backend,
            model=cfg.asr.model,
            decoding=cfg.asr.decoding.model_dump(),
            models_used=sorted({t.model for t in state.transcripts.values()}),
        ),
        structure=StructureInfo.model_validate(structure),
        judge=cfg.judge.backend,
        llm_engines=[state.llm_engine.info()] if state.llm_engine is not None else [],
        asr_released_at=state.asr_released_at,
        executor=executor_info,
        environment=environment(),
        conditions=list(state.grid),
        noise={fam: NoiseInfo.model_validate(spec.model_dump(mode="json")) for fam, spec in cfg.noise.items()},
        mixtures=[
            {"encounter_id": eid, "condition": cond, **info.model_dump(mode="json")}
            for (eid, cond), info in sorted(state.mix.items())
        ],
        speech={
            eid: SpeechInfo.model_validate(
                {"duration_s": sp.duration_s, "segments_source": sp.segments_source, "recipe": sp.recipe}
            )
            for eid, sp in sorted(state.speech.items())
        },
        failures=state.ledger.records(),
        n_failures=len(state.ledger),
        stage_seconds=state.stage_seconds,
        **state.extra_manifest,
    )
    atomic_write_json(state.out / "manifest.json", manifest.to_json())
    return manifest
