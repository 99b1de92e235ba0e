"""The run configuration: YAML → strict pydantic model → stages.

Unknown or mistyped keys are errors naming the key path and the YAML line.
Relative paths in the file are resolved against the config file's folder; the
resolved config is written into every run directory.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from stresstest.asr.stage import ASRConfig
from stresstest.errors import ConfigError
from stresstest.grid import Condition, ConditionGrid
from stresstest.ids import id_problem
from stresstest.llm.config import LLMConfig
from stresstest.llm.gpu import needs_gpu_memory
from stresstest.noise import NoiseSpec
from stresstest.noise.chain import Step, check_chain
from stresstest.records import revise
from stresstest.speech import TTSConfig
from stresstest.yamlcfg import read_yaml_mapping, validate_strict

FAMILIES = ("ambient", "babble")
#: SNR grid bounds (dB): beyond them the mixture is all noise or all speech and the ±0.1 dB check is meaningless.
SNR_MIN_DB, SNR_MAX_DB = -20.0, 50.0
#: Upper bound for report.n_resamples (the bootstrap holds resamples × encounters indices in memory).
MAX_RESAMPLES = 100_000
_COND = re.compile(r"^(ambient|babble)_(-?\d+(?:\.\d+)?)db$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExecutorConfig(BaseModel):
    """``run.executor``: where the stage tasks run.

    ``kind: inprocess`` (default) runs everything in this process. ``kind: ray``
    sends tasks to a Ray cluster: ``address`` names a running cluster
    (``ray://host:10001`` or ``auto``), or, when None, the run starts a local
    cluster bound to 127.0.0.1 with ``num_cpus`` / ``object_store_mb`` and its
    temp dir inside the stage cache, and stops it at the end.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["inprocess", "ray"] = Field(default="inprocess", description="inprocess | ray.")
    address: str | None = Field(
        default=None, description="ray: cluster address ('auto', 'ray://host:10001'); None = start a local one."
    )
    num_cpus: int | None = Field(default=None, ge=1, description="ray, local cluster: CPUs it may use.")
    num_gpus: int | None = Field(default=None, ge=0, description="ray, local cluster: GPUs (None = all visible).")
    object_store_mb: int = Field(default=256, ge=64, description="ray, local cluster: object store size in MiB.")
    asr_workers: int | Literal["auto"] = Field(
        default="auto", description="ASR actors: 'auto' = one per GPU of the cluster (1 without GPUs)."
    )
    asr_gpus_per_worker: float = Field(default=1.0, ge=0, description="GPUs each ASR actor holds (when GPUs exist).")
    llm_engines: int = Field(default=1, ge=1, description="LLM structurer actors (data-parallel engines).")
    llm_gpus_per_engine: float = Field(
        default=0.0,
        ge=0,
        description="GPUs each LLM engine actor holds: for a vLLM engine at least its "
        "tensor_parallel_size × data_parallel_size (a config error otherwise, unless num_gpus is 0).",
    )
    shard_size: int = Field(default=8, ge=1, description="Items per pool shard (progress and load balance).")


class RunSettings(_Strict):
    """Run-wide settings."""

    seed: int = Field(default=1234, description="Run seed: every per-item RNG derives from it.")
    max_failures: float = Field(
        default=0.25,
        ge=0,
        description="Failed items allowed before the run stops: a fraction (< 1) of all items or a count (≥ 1).",
    )
    cache_dir: str | None = Field(
        default=None, description="Stage cache (default $STRESSTEST_CACHE or ~/.cache/stresstest)."
    )
    progress: bool = Field(
        default=True,
        description="Progress on stderr: tqdm bars on a terminal, plain lines (done/total, rate, ETA; one end "
        "line per stage) when stderr is a file or pipe; false prints neither.",
    )
    executor: ExecutorConfig = Field(
        default_factory=ExecutorConfig, description="Where stage tasks run: in process (default) or on Ray."
    )


class CorpusConfig(_Strict):
    """Which encounters to evaluate."""

    kind: Literal["osce", "primock57", "aci-bench", "manifest"]
    path: str = Field(description="Corpus folder (or manifest file), relative to the config file.")
    ids: list[str] | None = Field(default=None, description="Encounter ids to use (default: all).")
    limit: int | None = Field(default=None, ge=1, description="Use the first N encounters (sorted by id).")
    max_turns: int | None = Field(
        default=None,
        ge=1,
        description="Keep only the first N turns of each dialogue (a gold record's scope_turns takes precedence).",
    )

    @field_validator("ids")
    @classmethod
    def _plain_ids(cls, v: list[str] | None) -> list[str] | None:
        """Ids are checked here, at load, with the rule every writer applies (``ids.id_problem``)."""
        for eid in v or []:
            problem = id_problem(eid)
            if problem is not None:
                raise ValueError(f"encounter id {eid!r} cannot be used as a file name: {problem}")
        return v


class GoldConfig(_Strict):
    """Where gold references come from."""

    path: str | None = Field(default=None, description="Folder of gold YAML files (default: the shipped set).")
    required: bool = Field(
        default=False, description="Error if an encounter has no gold (else its safety metrics stay empty)."
    )


class NoteQualityConfig(_Strict):
    """docs/spec.md §8 note-quality judges, asked through the run's LLM session (the structuring model)."""

    entailment: bool = Field(
        default=False, description="completeness / conciseness (vs gold) and groundedness (vs the transcript)."
    )
    hallucination: bool = Field(
        default=False, description="halluc_lexical and halluc_inference: literal vs inference-aware judge."
    )
    pairwise: list[Literal["noisy_vs_clean", "guard_vs_unmitigated"]] = Field(
        default_factory=list, description="Within-run pairwise comparisons on the PDSQI-9-derived dimensions."
    )
    prompt_version: str = Field(default="v1", description="Version of the judge prompts (stresstest/metrics/prompts).")
    ontology_version: str = Field(default="v1", description="Version of the ontology grounding file.")
    batch_statements: int = Field(
        default=12, ge=1, le=64, description="At most this many statements per judge call (longer lists are split)."
    )

    def enabled(self) -> bool:
        """True when any note-quality measure is asked for."""
        return self.entailment or self.hallucination or bool(self.pairwise)


class JudgeConfig(_Strict):
    """Which judge fills Mean Score / Unsafe, and which note-quality judges run."""

    backend: Literal["rules", "llm", "none"] = Field(
        default="rules",
        description="'rules' = deterministic rubric mapping; 'llm' = the served LLM with the rubric prompt.",
    )
    note_quality: NoteQualityConfig = Field(default_factory=NoteQualityConfig)


class MitigationConfig(_Strict):
    """Extra mitigated conditions (the evidence-grounded guard)."""

    conditions: list[str] = Field(
        default_factory=list, description="Noisy condition ids, e.g. ['ambient_5db', 'babble_5db']."
    )

    @field_validator("conditions")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        for c in v:
            if not _COND.match(c):
                raise ValueError(f"expected a noisy condition id like 'ambient_5db' or 'babble_5db', got {c!r}")
        return v


_CHAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ChainsConfig(_Strict):
    """Conditions as chains of transforms (:mod:`stresstest.noise.chain`), next to the family × SNR grid.

    ``axes`` expands to the product of its axes, in the order written: each axis maps labels to a list of
    steps; a condition concatenates one label's steps per axis (in axis order, so write the axes in chain
    order: room, then channel) and is named by its labels joined with ``_`` (``rt0.3_g711``). An empty
    step list is allowed on an axis (``wideband: []``). ``conditions`` names further chains one by one.
    """

    axes: dict[str, dict[str, list[Step]]] = Field(
        default_factory=dict, description="Axis name -> {label: steps}; the grid is their product."
    )
    conditions: dict[str, list[Step]] = Field(default_factory=dict, description="Condition name -> steps.")

    @model_validator(mode="after")
    def _names(self) -> ChainsConfig:
        for axis, labels in self.axes.items():
            if not labels:
                raise ValueError(f"axes.{axis}: expected at least one label")
            for label in labels:
                if not _CHAIN_NAME.match(label) or "_" in label:
                    raise ValueError(
                        f"axes.{axis}: label {label!r} must be letters, digits, '.' or '-' "
                        "(labels are joined with '_' into condition names)"
                    )
        for name, _, _ in self.expand():
            if not _CHAIN_NAME.match(name) or id_problem(name) is not None:
                raise ValueError(f"chain condition name {name!r}: expected letters, digits, '.', '_' or '-'")
            if name == "clean" or name.endswith("_guard") or _COND.match(name):
                raise ValueError(f"chain condition name {name!r} is reserved (clean, <family>_<snr>db, *_guard)")
        seen: set[str] = set()
        for name, steps, _ in self.expand():
            if name in seen:
                raise ValueError(f"condition {name!r} is defined twice")
            seen.add(name)
            try:
                check_chain(steps)
            except ValueError as exc:
                raise ValueError(f"condition {name!r}: {exc}") from None
        return self

    def expand(self) -> list[tuple[str, list[Step], dict[str, str] | None]]:
        """(name, steps, axis labels) of every chain condition: the axes' product first, then ``conditions``."""
        import itertools

        out: list[tuple[str, list[Step], dict[str, str] | None]] = []
        if self.axes:
            names = list(self.axes)
            for combo in itertools.product(*(list(self.axes[a].items()) for a in names)):
                steps = [s for _, st in combo for s in st]
                out.append(
                    (
                        "_".join(label for label, _ in combo),
                        steps,
                        {a: label for a, (label, _) in zip(names, combo, strict=True)},
                    )
                )
        out += [(name, list(steps), None) for name, steps in self.conditions.items()]
        return out


class ReportConfig(_Strict):
    """The report written at the end of a run."""

    enabled: bool = True
    n_resamples: int = Field(
        default=1000,
        ge=100,
        le=MAX_RESAMPLES,
        description="Cluster-bootstrap resamples for the 95% CIs (100 to 100000).",
    )


class RunConfig(_Strict):
    """A whole paired stress-test run."""

    run: RunSettings = Field(default_factory=RunSettings)
    corpus: CorpusConfig
    speech: TTSConfig = Field(default_factory=TTSConfig)
    noise: dict[str, NoiseSpec] = Field(
        default_factory=dict, description="Noise family name ('ambient', 'babble') -> where its noise comes from."
    )
    snr_db: list[float] = Field(
        default_factory=lambda: [15.0, 10.0, 5.0],
        description=f"SNR grid in dB: finite values in [{SNR_MIN_DB:g}, {SNR_MAX_DB:g}], no repeats; at least one "
        f"unless `chains` defines conditions (then [] runs the chain conditions only).",
    )
    asr: ASRConfig = Field(default_factory=ASRConfig)
    structure: LLMConfig = Field(default_factory=LLMConfig)
    gold: GoldConfig = Field(default_factory=GoldConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    mitigation: MitigationConfig = Field(default_factory=MitigationConfig)
    chains: ChainsConfig = Field(
        default_factory=ChainsConfig, description="Conditions as chains of transforms (room, noise, channel, level)."
    )
    report: ReportConfig = Field(default_factory=ReportConfig)

    @field_validator("snr_db")
    @classmethod
    def _grid(cls, v: list[float]) -> list[float]:
        """The grid is checked before anything runs: NaN/inf, out of range and repeats are errors (an empty grid
        is an error unless chain conditions fill the grid, see :meth:`_grid_not_empty`)."""
        # Canonical values: -0.0 is 0 (else 'ambient_-0db' and 'ambient_0db' would be two conditions of one SNR).
        v = [x + 0.0 for x in v]
        seen: dict[str, float] = {}
        for x in v:
            if not math.isfinite(x):
                raise ValueError(f"expected finite SNRs in dB, got {x!r}")
            if not SNR_MIN_DB <= x <= SNR_MAX_DB:
                raise ValueError(f"expected SNRs between {SNR_MIN_DB:g} and {SNR_MAX_DB:g} dB, got {x:g}")
            name = f"{x:g}"
            if name in seen:
                raise ValueError(f"SNR {x:g} dB appears twice in the grid")
            seen[name] = x
        return v

    @field_validator("noise")
    @classmethod
    def _families(cls, v: dict[str, NoiseSpec]) -> dict[str, NoiseSpec]:
        for name, spec in v.items():
            if name not in FAMILIES:
                raise ValueError(f"noise families are {FAMILIES}, got {name!r}")
            if spec.family != name:
                raise ValueError(f"noise.{name}.family is {spec.family!r}; it must equal its key {name!r}")
        return v

    @model_validator(mode="after")
    def _note_quality_needs_llm(self) -> RunConfig:
        if self.judge.note_quality.enabled() and self.structure.backend == "rules":
            raise ValueError(
                "judge.note_quality asks for LLM judges, but structure.backend is 'rules' (no LLM in this run); "
                "expected structure.backend 'openai' or 'vllm-offline', or turn judge.note_quality off"
            )
        return self

    @model_validator(mode="after")
    def _ray_engine_holds_its_gpus(self) -> RunConfig:
        """On Ray an actor sees only the GPUs it holds: a vLLM engine actor holding fewer than the engine shards
        over would start ``vllm serve`` with no GPU, after the whole ASR stage. A local cluster started with
        ``num_gpus: 0`` (vLLM's CPU build) holds none by design."""
        ex = self.run.executor
        if ex.kind != "ray" or ex.num_gpus == 0 or not needs_gpu_memory(self.structure):
            return self
        srv = self.structure.server
        served = self.structure.backend == "openai"
        size = srv.tensor_parallel_size * (srv.data_parallel_size if served else 1)
        if ex.llm_gpus_per_engine < size:
            what = (
                f"tensor_parallel_size × data_parallel_size = {srv.tensor_parallel_size} × {srv.data_parallel_size}"
                if served
                else f"tensor_parallel_size = {srv.tensor_parallel_size}"
            )
            raise ValueError(
                f"run.executor.llm_gpus_per_engine is {ex.llm_gpus_per_engine:g}, but each vLLM engine runs on "
                f"{size} GPU(s) (structure.server.{what}) and Ray hides every GPU an actor does not hold: "
                f"expected run.executor.llm_gpus_per_engine: {size} (or run.executor.num_gpus: 0 for vLLM's CPU "
                "build)"
            )
        return self

    @model_validator(mode="after")
    def _grid_not_empty(self) -> RunConfig:
        if not self.snr_db and not self.chains.expand():
            raise ValueError(
                "snr_db: expected at least one SNR in dB (an empty grid would run the clean row only; "
                "`snr_db: []` is for a grid of chain conditions only)"
            )
        return self

    @model_validator(mode="after")
    def _chains_valid(self) -> RunConfig:
        for name, steps, _ in self.chains.expand():
            try:
                check_chain(steps, list(self.noise))
            except ValueError as exc:
                raise ValueError(f"chains: condition {name!r}: {exc}") from None
        return self

    @model_validator(mode="after")
    def _mitigation_in_grid(self) -> RunConfig:
        self.grid()  # raises ValueError naming a mitigation condition that is not in the grid
        return self

    def grid(self) -> ConditionGrid:
        """Clean first, then each family × SNR (grid order), then the chain conditions, then mitigated rows."""
        chains = [
            Condition.chained(name, [s.to_json() for s in steps], axes) for name, steps, axes in self.chains.expand()
        ]
        return ConditionGrid.build(
            [f for f in FAMILIES if f in self.noise], self.snr_db, self.mitigation.conditions, chains
        )


class _ExtendsProbe(BaseModel):
    """Reads only the ``extends`` key of a config (everything else is validated later)."""

    model_config = ConfigDict(extra="allow")
    extends: str | None = None


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _sets(raw: Any, loc: tuple[Any, ...]) -> bool:
    """True when the mapping ``raw`` sets the value at key path ``loc`` (or a scalar/list above it)."""
    node = raw
    for key in loc:
        if isinstance(node, dict):
            if key not in node:
                return False
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            return True  # a list or scalar here replaced the base's whole value
    return True


def _load_validated(path: str | Path) -> RunConfig:
    """Validate ``path``; with ``extends: OTHER.yaml``, ``OTHER`` (same folder) overlaid key by key.

    Rule: the extended file is a complete config in the same folder (so its
    relative paths mean the same); mappings merge recursively, any other value
    (lists included) replaces the base's; an extended file may not extend again.
    Both files and the merged result are validated exactly like a plain config
    (strict types, unknown keys), and an error names the file and line that set
    the key.
    """
    p = Path(path)
    raw, root = read_yaml_mapping(p)
    probe = validate_strict(_ExtendsProbe, {"extends": raw["extends"]} if "extends" in raw else {}, str(p), root)
    if probe.extends is None:
        return validate_strict(RunConfig, raw, str(p), root)
    base_path = p.parent / probe.extends
    if base_path.resolve().parent != p.resolve().parent or base_path.resolve() == p.resolve():
        raise ConfigError(f"{p}: extends: expected another config file in the same folder, got {probe.extends!r}")
    base_raw, base_root = read_yaml_mapping(base_path)
    if base_raw.get("extends") is not None:
        raise ConfigError(f"{p}: extends: {probe.extends} extends {base_raw['extends']} in turn (one level only)")
    validate_strict(RunConfig, base_raw, str(base_path), base_root)
    over = {k: v for k, v in raw.items() if k != "extends"}

    def locate(loc: tuple[Any, ...]) -> tuple[str, Any]:
        if not _sets(over, loc) and _sets(base_raw, loc):
            return str(base_path), base_root
        return str(p), root

    return validate_strict(RunConfig, _deep_merge(base_raw, over), str(p), root, locate)


def load_config(path: str | Path) -> RunConfig:
    """Load and validate a run config; relative paths become absolute (config folder).

    A config may start from another one with ``extends: OTHER.yaml`` (see :func:`_load_validated`).
    """
    cfg = _load_validated(path)
    base = Path(path).resolve().parent

    def res(p: str | None) -> str | None:
        return None if p is None else str((base / p).resolve()) if not Path(p).is_absolute() else p

    corpus = revise(cfg.corpus, path=res(cfg.corpus.path))
    gold = revise(cfg.gold, path=res(cfg.gold.path))
    noise = {k: revise(v, root=res(v.root)) if getattr(v, "root", None) else v for k, v in cfg.noise.items()}
    run = revise(cfg.run, cache_dir=res(cfg.run.cache_dir))
    py = cfg.structure.server.python
    # Not resolved: a venv's bin/python is a symlink to the base interpreter, and only the link's path makes
    # Python start inside the venv (with its packages).
    py_abs = py if py is None or Path(py).is_absolute() else os.path.normpath(base / py)
    server = revise(cfg.structure.server, python=py_abs)
    structure = revise(cfg.structure, server=server)

    def res_steps(steps: list[Step]) -> list[Step]:  # a measured impulse response is a path too
        return [
            revise(s, room=revise(s.room, ir=res(s.room.ir))) if s.room is not None and s.room.ir is not None else s
            for s in steps
        ]

    chains = revise(
        cfg.chains,
        axes={a: {lab: res_steps(st) for lab, st in labels.items()} for a, labels in cfg.chains.axes.items()},
        conditions={n: res_steps(st) for n, st in cfg.chains.conditions.items()},
    )
    return revise(cfg, corpus=corpus, gold=gold, noise=noise, run=run, structure=structure, chains=chains)
