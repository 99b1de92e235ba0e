"""The runner: corpus → speech → conditions → ASR → structure → score → report.

Each stage is a function over records; expensive stages cache their outputs
(content-hash keys), so an interrupted run resumes where it stopped and a
finished one recomputes nothing. Per-item failures are recorded with their
stage and reason, counted against ``run.max_failures``, and never dropped; a
run with failures within the limit exits 0 and says so on stderr. The pairing
rule (SPEC §11, :mod:`stresstest.pipeline.pairing`) then takes an encounter
with a failed item out of every row. Run-directory rules (``--out``, stale
artefacts, wall time across resumes): :mod:`stresstest.pipeline.housekeeping`.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from tqdm import tqdm

from stresstest import __version__
from stresstest.asr.stage import ASRItem, transcribe_items
from stresstest.cache import atomic_write_json, atomic_write_text, confine_tool_dirs, default_cache_dir
from stresstest.config import RunConfig, load_config
from stresstest.corpus import load_corpus
from stresstest.errors import RunError, StressTestError
from stresstest.ids import check_id, id_path
from stresstest.metrics.summary import SUMMARY_COLUMNS, summary_rows
from stresstest.noise import make_noise_source
from stresstest.noise.stage import build_mixtures, mix_jobs
from stresstest.records import Encounter, MixInfo, SpeechAudio, Transcript
from stresstest.schema import RecordEnvelope
from stresstest.speech import speech_for


@dataclass
class RunState:
    """Everything the stages produce, keyed by (encounter_id, condition)."""

    out: Path
    cfg: RunConfig
    encounters: dict[str, Encounter] = field(default_factory=dict)
    speech: dict[str, SpeechAudio] = field(default_factory=dict)
    audio: dict[tuple[str, str], Path] = field(default_factory=dict)
    mix: dict[tuple[str, str], MixInfo] = field(default_factory=dict)
    transcripts: dict[tuple[str, str], Transcript] = field(default_factory=dict)
    records: dict[tuple[str, str], RecordEnvelope] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    gold: dict[str, Any] = field(default_factory=dict)
    extra_manifest: dict[str, Any] = field(default_factory=dict)
    structure_fp: dict[str, Any] | None = None  # computed once: the manifest is rewritten at every stage

    def fail(self, eid: str, cond: str, stage: str, error: str) -> None:
        self.failures.append({"encounter_id": eid, "condition": cond, "stage": stage, "error": error})
        total = max(1, len(self.encounters) * len(self.cfg.conditions()))
        limit = self.cfg.run.max_failures
        allowed = limit * total if limit < 1 else limit
        if len(self.failures) > allowed:
            raise RunError(
                f"{len(self.failures)} failed items exceed run.max_failures={limit:g} "
                f"(last: {eid}/{cond} at {stage}: {error}); see {self.out / 'manifest.json'}"
            )

    def failed(self, eid: str, cond: str) -> str | None:
        for f in self.failures:
            if f["encounter_id"] == eid and f["condition"] == cond:
                return f"{f['stage']}: {f['error']}"
        return None


@contextmanager
def _stage(state: RunState, name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        state.stage_seconds[name] = round(state.stage_seconds.get(name, 0.0) + time.perf_counter() - t0, 3)


def _bar(state: RunState, total: int, desc: str) -> tqdm:
    return tqdm(total=total, desc=desc, unit="item", disable=not state.cfg.run.progress, file=sys.stderr,
                dynamic_ncols=True, leave=False)


def _load_encounters(state: RunState) -> None:
    cfg = state.cfg
    encs = load_corpus(cfg.corpus.kind, cfg.corpus.path, ids=cfg.corpus.ids, limit=cfg.corpus.limit)
    from stresstest.pipeline.score import load_gold_for

    state.gold = load_gold_for([e.encounter_id for e in encs], cfg.gold)
    for e in encs:
        check_id(e.encounter_id, where=e.source_path or str(cfg.corpus.path))  # every loader, one rule
        g = state.gold.get(e.encounter_id)
        scope = getattr(g, "scope_turns", None) if g is not None else None
        state.encounters[e.encounter_id] = e.truncated(scope if scope else cfg.corpus.max_turns)


def _speech_stage(state: RunState, cache: Path) -> None:
    bar = _bar(state, len(state.encounters), "speech")
    for eid, enc in state.encounters.items():
        try:
            sp = speech_for(enc, cache, state.cfg.speech)
            state.speech[eid] = sp
            state.audio[(eid, "clean")] = Path(sp.path)
        except StressTestError as exc:
            for c in state.cfg.conditions():
                state.fail(eid, c["condition"], "speech", str(exc))
        bar.update()
    bar.close()


def _conditions_stage(state: RunState, cache: Path, all_encounters: list[Encounter]) -> None:
    cfg = state.cfg
    conds = cfg.conditions()
    jobs = mix_jobs(list(state.speech), conds)
    sources = {
        fam: make_noise_source(spec, encounters=all_encounters, cache_dir=cache) for fam, spec in cfg.noise.items()
    }
    bar = _bar(state, sum(len(j.conditions) for j in jobs), "mix")
    for job in jobs:
        def done(
            cond: str, path: Path | None, info: MixInfo | None, err: str | None, eid: str = job.encounter_id
        ) -> None:
            if err is not None or path is None or info is None:
                state.fail(eid, cond, "mix", err or "no mixture")
            else:
                state.audio[(eid, cond)] = path
                state.mix[(eid, cond)] = info
            bar.update()

        build_mixtures(job, state.speech[job.encounter_id], sources[job.family],
                       cfg.noise[job.family].model_dump(mode="json"), seed=cfg.run.seed, cache_dir=cache, on_done=done)
    bar.close()


def _asr_stage(state: RunState, cache: Path) -> None:
    items = [ASRItem(eid, cond, path) for (eid, cond), path in sorted(state.audio.items())]
    bar = _bar(state, len(items), "asr")

    def done(it: ASRItem, t: Transcript | None, err: str | None) -> None:
        if t is None:
            state.fail(it.encounter_id, it.condition, "asr", err or "no transcript")
        else:
            state.transcripts[(it.encounter_id, it.condition)] = t
            atomic_write_json(id_path(state.out / "transcripts", it.condition, it.encounter_id, suffix=".json"),
                              t.model_dump(mode="json"))
        bar.update()

    transcribe_items(items, state.cfg.asr, cache_dir=cache, on_done=done)
    bar.close()


def _structure_stage(state: RunState, cache: Path) -> None:
    from stresstest.mitigation import mitigate_many
    from stresstest.structure.stage import StructureItem, structure_many

    log_dir = state.out / "logs"
    plain = [StructureItem(encounter_id=eid, condition=cond, transcript_text=t.text)
             for (eid, cond), t in sorted(state.transcripts.items())]
    envs = structure_many(plain, state.cfg.structure, cache_dir=cache, log_dir=log_dir)
    mitigated = []
    for c in state.cfg.conditions():
        if c["mitigated"]:
            base = c["condition"].removesuffix("_guard")
            for (eid, cond), t in sorted(state.transcripts.items()):
                if cond == base:
                    mitigated.append(StructureItem(encounter_id=eid, condition=c["condition"], transcript_text=t.text))
    if mitigated:
        envs = list(envs) + list(mitigate_many(mitigated, state.cfg.structure, cache_dir=cache, log_dir=log_dir))
    for env in envs:
        key = (env.encounter_id, env.condition)
        state.records[key] = env
        atomic_write_json(
            id_path(state.out / "records", env.condition, env.encounter_id, suffix=".json"),
            env.model_dump(mode="json"),
        )
        if env.failed:
            state.fail(env.encounter_id, env.condition, "structure", env.error or "structuring failed")


def _summary_csv(rows: list[dict[str, Any]], extra_cols: list[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = list(SUMMARY_COLUMNS) + extra_cols
    w.writerow(cols)
    for r in rows:
        w.writerow(["" if r.get(c) is None else (f"{r[c]:.4f}".rstrip("0").rstrip(".") if isinstance(r[c], float)
                    else r[c]) for c in cols])
    return buf.getvalue()


def format_table(rows: list[dict[str, Any]]) -> str:
    """The results table printed at the end of a run (Table-2 layout)."""
    heads = ["condition", "n", "WER%", "Ins%", "NegErr%", "ErrProp", "Triage=%", "SCER%", "Under%", "Score", "Unsafe%"]
    keys = ["condition", "n", "wer", "ins_rate", "neg_err", "err_prop", "triage_match", "scer", "under_triage",
            "mean_score", "unsafe"]
    body = [[("–" if r.get(k) is None else (f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k]))) for k in keys]
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(heads)]
    line = "  ".join(h.ljust(widths[0]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(heads))
    out = [line, "-" * len(line)]
    for b in body:
        out.append("  ".join(v.ljust(widths[0]) if i == 0 else v.rjust(widths[i]) for i, v in enumerate(b)))
    return "\n".join(out)


def run(config_path: str | Path, out_dir: str | Path | None = None) -> tuple[Path, list[dict[str, Any]]]:
    """Run a whole sweep; returns (run dir, summary rows).

    Raises:
        StressTestError: for every user error (bad config, missing corpus...) and
            when more items fail than ``run.max_failures`` allows.
    """
    from stresstest.pipeline.housekeeping import WallClock, announce_failures, check_out_dir, prune_stale
    from stresstest.pipeline.pairing import apply_pairing
    from stresstest.pipeline.score import ScoreInputs, score_items

    cfg = load_config(config_path)
    out = Path(out_dir) if out_dir else Path("runs") / Path(config_path).stem
    check_out_dir(out)
    cache = Path(cfg.run.cache_dir) if cfg.run.cache_dir else default_cache_dir()
    confine_tool_dirs(cache)  # third-party caches (matplotlib, onnxruntime) go under the cache dir, not $HOME
    clock = WallClock(out)
    atomic_write_text(out / "config.resolved.yaml", yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    state = RunState(out=out, cfg=cfg, stage_seconds=dict(clock.carried_stages))

    def checkpoint(completed: bool = False) -> None:
        # The manifest is rewritten at every stage boundary, so a killed run leaves its time behind.
        state.stage_seconds["total"] = clock.total()
        state.extra_manifest["invocations"] = clock.invocations(completed)
        state.extra_manifest["completed"] = completed
        _write_manifest(state)

    try:
        checkpoint()
        with _stage(state, "corpus"):
            _load_encounters(state)
            all_encs = load_corpus(cfg.corpus.kind, cfg.corpus.path) if "babble" in cfg.noise else []
            prune_stale(out, [c["condition"] for c in cfg.conditions()], state.encounters)
        checkpoint()
        with _stage(state, "speech"):
            _speech_stage(state, cache)
        checkpoint()
        with _stage(state, "conditions"):
            _conditions_stage(state, cache, all_encs)
        checkpoint()
        with _stage(state, "asr"):
            _asr_stage(state, cache)
        checkpoint()
        with _stage(state, "structure"):
            _structure_stage(state, cache)
        checkpoint()
        with _stage(state, "score"):
            items = score_items(ScoreInputs(
                out=out, conditions=cfg.conditions(), encounters=state.encounters, gold=state.gold,
                audio=state.audio, mix=state.mix, transcripts=state.transcripts, records=state.records,
                failed=state.failed, judge_backend=cfg.judge.backend, structure=cfg.structure,
            ), cache)
            pairing = apply_pairing(items, cfg.conditions())
            state.extra_manifest["pairing"] = pairing.manifest()
    finally:
        checkpoint()
    rows = summary_rows(items, cfg.conditions())
    from stresstest.metrics.summary import in_pairing
    from stresstest.pipeline.score import extra_summary_columns

    extra = extra_summary_columns([it for it in items if in_pairing(it)], rows)
    for r in rows:  # SPEC §11: each row says how many encounters it covers (n) and which were dropped
        r["n_dropped"] = pairing.n_dropped
        r["dropped"] = " ".join(sorted(pairing.dropped))
    extra_cols = list(dict.fromkeys(k for r in extra for k in r)) + ["n_dropped", "dropped"]
    atomic_write_text(out / "summary.csv", _summary_csv(rows, extra_cols))
    atomic_write_text(out / "items.jsonl", "".join(json.dumps(it, sort_keys=True, ensure_ascii=False) + "\n"
                                                  for it in items))
    checkpoint()
    if cfg.report.enabled:
        with _stage(state, "report"):
            from stresstest.report import build_report

            build_report(out, n_resamples=cfg.report.n_resamples, seed=cfg.run.seed)
    checkpoint(completed=True)
    n_items = len(state.encounters) * len(cfg.conditions())
    announce_failures(state.failures, n_items, cfg.run.max_failures, out / "manifest.json",
                      pairing.sentence() if pairing.dropped else None)
    return out, rows


def _write_manifest(state: RunState) -> None:
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
    manifest = {
        "schema_version": 1,
        "run_id": state.out.name,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "stresstest_version": __version__,
        "python": sys.version.split()[0],
        "seed": cfg.run.seed,
        "corpus": {"kind": cfg.corpus.kind, "path": cfg.corpus.path, "n_encounters": len(state.encounters),
                   "encounter_ids": sorted(state.encounters)},
        "asr": {"backend": cfg.asr.backend, "model": cfg.asr.model, "decoding": cfg.asr.decoding.model_dump(),
                "models_used": sorted({t.model for t in state.transcripts.values()})},
        "structure": structure,
        "judge": cfg.judge.backend,
        "conditions": cfg.conditions(),
        "noise": {fam: spec.model_dump(mode="json") for fam, spec in cfg.noise.items()},
        "mixtures": [
            {"encounter_id": eid, "condition": cond, **info.model_dump(mode="json")}
            for (eid, cond), info in sorted(state.mix.items())
        ],
        "speech": {eid: {"duration_s": sp.duration_s, "segments_source": sp.segments_source, "recipe": sp.recipe}
                   for eid, sp in sorted(state.speech.items())},
        "failures": state.failures,
        "n_failures": len(state.failures),
        "stage_seconds": state.stage_seconds,
        **state.extra_manifest,
    }
    atomic_write_json(state.out / "manifest.json", manifest)
