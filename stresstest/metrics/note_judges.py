"""The note-quality judges (docs/spec.md §8) as LLM calls: entailment, hallucination (literal and inference-aware),
pairwise preference.

Every judge goes through a :class:`JudgeSession` — the run's one LLM session (today
:class:`stresstest.llm.session.LLMSession`: served or offline, cache first, failures returned, never
raised) — so judging uses the same model, decoding φ, cache and server as structuring. Prompts are the
versioned files of :mod:`stresstest.metrics.prompts`; their sha256 is part of every call's cache key.

Output is schema-constrained. An entailment or hallucination call judges up to ``batch`` statements and
its schema has exactly one required property per statement id (``h1..hk`` / ``c1..ck``), each an enum,
so a valid answer always labels every statement once; longer lists are split into several calls, never
truncated. A pairwise call returns a one-sentence rationale and one of ``A`` / ``B`` / ``tie`` per
dimension; each pair is asked twice, positions swapped, and adjudicated by
:func:`stresstest.metrics.note_quality.adjudicate_pair`. Two byte-identical notes are a tie on every
dimension without a call (no judge can prefer one of two equal texts).

A call that fails after the client's retries leaves that item's measure empty (None) with the reason;
the caller records it. Scores are never made up for a failed call.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, create_model

from stresstest.cache import hash_obj
from stresstest.llm.client import CallResult
from stresstest.llm.prompts import Prompt, load_prompt
from stresstest.llm.session import LLMCall
from stresstest.metrics.note_quality import (
    PAIRWISE_DIMENSIONS,
    adjudicate_pair,
    entailment_score,
    inference_rate,
    lexical_rate,
)
from stresstest.metrics.ontology import grounding, ontology_hash
from stresstest.metrics.statements import Statement, numbered

M = TypeVar("M", bound=BaseModel)
QUALITY_PROMPTS = "stresstest.metrics.prompts"
DEFAULT_BATCH = 12
RATIONALE_MAX_CHARS = 300


class JudgeSession(Protocol):
    """What the judges need from the run's LLM session (LLMSession satisfies it)."""

    @property
    def model_id(self) -> str: ...

    def run(
        self,
        calls: Sequence[LLMCall],
        model_cls: type[M],
        *,
        namespace: str,
        schema_name: str,
        schema: dict[str, Any] | None = None,
        desc: str = "llm",
    ) -> list[CallResult[M]]: ...


def quality_prompt(name: str, version: str = "v1") -> Prompt:
    """``entailment``, ``halluc_lexical``, ``halluc_inference`` or ``pairwise`` prompt of a version."""
    return load_prompt(name, version, package=QUALITY_PROMPTS)


PROMPT_NAMES: tuple[str, ...] = ("entailment", "halluc_lexical", "halluc_inference", "pairwise")


def prompt_fingerprint(version: str = "v1", ontology_version: str = "v1") -> dict[str, str]:
    """``{prompt id: sha256}`` of every judge prompt plus the ontology hash (for the manifest)."""
    out = {quality_prompt(n, version).id: quality_prompt(n, version).sha256 for n in PROMPT_NAMES}
    out[f"ontology_{ontology_version}"] = ontology_hash(ontology_version)
    return out


# ------------------------------------------------------------------ output schemas


class EntailmentVerdict(BaseModel):
    """The judge's answer for one statement."""

    model_config = ConfigDict(extra="forbid")

    lines: list[int] = Field(max_length=3, description="Source line numbers relied on (at most 3).")
    label: Literal["entailed", "partially_entailed", "not_entailed", "not_applicable"]


class LexicalVerdict(BaseModel):
    """Literal judge: is the claim stated explicitly?"""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["supported", "unsupported"]


class InferenceVerdict(BaseModel):
    """Inference-aware judge: on what basis does the claim stand (or not)?"""

    model_config = ConfigDict(extra="forbid")

    basis: Literal["direct", "paraphrase", "trade_generic", "abstraction", "inference", "fabricated", "contradicted"]


PositionVerdict = Literal["A", "B", "tie"]


class PairVerdict(BaseModel):
    """One pass of the pairwise judge: a rationale, then A / B / tie per dimension."""

    model_config = ConfigDict(extra="forbid")

    rationale: str = Field(max_length=RATIONALE_MAX_CHARS, description="One sentence.")
    accurate: PositionVerdict
    thorough: PositionVerdict
    useful: PositionVerdict
    organized: PositionVerdict
    comprehensible: PositionVerdict
    succinct: PositionVerdict
    synthesized: PositionVerdict
    stigmatizing: PositionVerdict
    cited: PositionVerdict


_VERDICT_MODELS: dict[str, tuple[type[BaseModel], str]] = {
    "entailment": (EntailmentVerdict, "h"),
    "halluc_lexical": (LexicalVerdict, "c"),
    "halluc_inference": (InferenceVerdict, "c"),
}


@functools.lru_cache(maxsize=256)
def keyed_model(kind: str, n: int) -> type[BaseModel]:
    """Output model with exactly ``n`` required properties ``<p>1..<p>n`` of the kind's verdict model."""
    verdict, prefix = _VERDICT_MODELS[kind]
    fields: dict[str, Any] = {f"{prefix}{i}": (verdict, ...) for i in range(1, n + 1)}
    model: type[BaseModel] = create_model(
        f"{''.join(p.title() for p in kind.split('_'))}{n}", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


def chunks(statements: Sequence[Statement], size: int, prefix: str) -> list[list[Statement]]:
    """Split statements into calls of at most ``size``, renumbered ``<prefix>1..`` within each call."""
    size = max(1, int(size))
    out = []
    for start in range(0, len(statements), size):
        part = statements[start : start + size]
        out.append([Statement(f"{prefix}{i}", s.text, s.field) for i, s in enumerate(part, start=1)])
    return out


@dataclass
class JudgedStatements:
    """One item's verdicts for one measure.

    Attributes:
        item_id: ``<encounter>/<condition>``.
        measure: completeness, conciseness, groundedness, halluc_lexical or halluc_inference.
        verdicts: one dict per hypothesis statement (``text``, ``field`` and the judge's fields), in order;
            None when a call failed.
        score: the item's score in percent (None when not computed or a call failed).
        error: why it failed (None on success).
        calls: calls made for it; ``cached``: how many came from the cache.
    """

    item_id: str
    measure: str
    verdicts: list[dict[str, Any]] | None
    score: float | None
    error: str | None = None
    calls: int = 0
    cached: int = 0
    knowledge: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Job:
    task: int
    part: list[Statement]
    call: LLMCall
    knowledge: tuple[str, ...] = ()


def _run_jobs(session: JudgeSession, jobs: Sequence[_Job], kind: str, desc: str) -> list[CallResult[BaseModel]]:
    """Run jobs grouped by statement count (one schema per count); results in job order."""
    results: list[CallResult[BaseModel] | None] = [None] * len(jobs)
    by_n: dict[int, list[int]] = {}
    for j, job in enumerate(jobs):
        by_n.setdefault(len(job.part), []).append(j)
    for n, idx in sorted(by_n.items()):
        model = keyed_model(kind, n)
        res = session.run(
            [jobs[j].call for j in idx], model, namespace=f"quality-{kind}", schema_name=model.__name__, desc=desc
        )
        for j, r in zip(idx, res, strict=True):
            results[j] = r
    return [r for r in results if r is not None]


def _collect(
    tasks_ids: Sequence[tuple[str, str, Sequence[Statement]]],
    jobs: Sequence[_Job],
    results: Sequence[CallResult[BaseModel]],
    field_name: str,
    scorer: Any,
) -> list[JudgedStatements]:
    out = [JudgedStatements(item_id, measure, [], None) for item_id, measure, _ in tasks_ids]
    errors: dict[int, list[str]] = {}
    for job, res in zip(jobs, results, strict=True):
        js = out[job.task]
        js.calls += 1
        js.cached += int(res.cached)
        js.knowledge.extend(k for k in job.knowledge if k not in js.knowledge)
        if res.parsed is None:
            errors.setdefault(job.task, []).append(res.error or "judge call failed")
            continue
        data = res.parsed.model_dump()
        assert js.verdicts is not None
        for s in job.part:
            js.verdicts.append({"text": s.text, "field": s.field, **data[s.id]})
    for k, (_, _, statements) in enumerate(tasks_ids):
        js = out[k]
        if k in errors:
            js.verdicts, js.error = None, "; ".join(errors[k])
        elif statements:
            assert js.verdicts is not None
            js.score = scorer([v[field_name] for v in js.verdicts])
        else:
            js.verdicts = []
    return out


@dataclass(frozen=True)
class EntailmentTask:
    """Hypothesis statements judged against a premise.

    Attributes:
        item_id: ``<encounter>/<condition>``.
        measure: completeness, conciseness or groundedness.
        source_kind: how the prompt names the premise (e.g. ``transcript of the consultation``).
        source: the premise's lines (sentences or statements), numbered in the prompt.
        hypotheses: the statements to label.
    """

    item_id: str
    measure: str
    source_kind: str
    source: tuple[str, ...]
    hypotheses: tuple[Statement, ...]


def judge_entailment(
    tasks: Sequence[EntailmentTask], session: JudgeSession, *, version: str = "v1", batch: int = DEFAULT_BATCH
) -> list[JudgedStatements]:
    """Label every hypothesis of every task; score each task by the entailment rule (percent)."""
    prompt = quality_prompt("entailment", version)
    jobs = []
    for t, task in enumerate(tasks):
        src = numbered(task.source) if task.source else "(empty)"
        for part in chunks(task.hypotheses, batch, "h"):
            hyp = "\n".join(f"{s.id}: {s.text}" for s in part)
            jobs.append(
                _Job(
                    t,
                    part,
                    LLMCall(
                        item_id=f"{task.item_id}:{task.measure}",
                        key_parts=(prompt.sha256, task.source_kind, hash_obj(src), hash_obj(hyp)),
                        messages=prompt.messages(source_kind=task.source_kind, source=src, statements=hyp),
                    ),
                )
            )
    results = _run_jobs(session, jobs, "entailment", "judge: entailment")
    return _collect([(t.item_id, t.measure, t.hypotheses) for t in tasks], jobs, results, "label", entailment_score)


@dataclass(frozen=True)
class HallucinationTask:
    """A record's statements checked against its transcript."""

    item_id: str
    transcript: tuple[str, ...]
    statements: tuple[Statement, ...]


def judge_hallucination(
    tasks: Sequence[HallucinationTask],
    session: JudgeSession,
    *,
    version: str = "v1",
    ontology_version: str = "v1",
    batch: int = DEFAULT_BATCH,
) -> tuple[list[JudgedStatements], list[JudgedStatements]]:
    """The literal and the inference-aware judge over the same statements: (lexical, inference) results.

    The inference-aware prompt carries the retrieved ontology lines of each call's statements
    (:func:`stresstest.metrics.ontology.grounding`); the literal one carries none.
    """
    lex_p = quality_prompt("halluc_lexical", version)
    inf_p = quality_prompt("halluc_inference", version)
    onto = ontology_hash(ontology_version)
    lex_jobs, inf_jobs = [], []
    for t, task in enumerate(tasks):
        text = " ".join(task.transcript)
        src = numbered(task.transcript) if task.transcript else "(empty)"
        for part in chunks(task.statements, batch, "c"):
            claims = "\n".join(f"{s.id}: {s.text}" for s in part)
            lex_jobs.append(
                _Job(
                    t,
                    part,
                    LLMCall(
                        item_id=f"{task.item_id}:halluc_lexical",
                        key_parts=(lex_p.sha256, hash_obj(src), hash_obj(claims)),
                        messages=lex_p.messages(transcript=src, claims=claims),
                    ),
                )
            )
            know = tuple(grounding(part, text, ontology_version))
            know_text = "\n".join(f"- {k}" for k in know) if know else "(none retrieved)"
            inf_jobs.append(
                _Job(
                    t,
                    part,
                    LLMCall(
                        item_id=f"{task.item_id}:halluc_inference",
                        key_parts=(inf_p.sha256, onto, hash_obj(src), hash_obj(claims), hash_obj(know_text)),
                        messages=inf_p.messages(transcript=src, knowledge=know_text, claims=claims),
                    ),
                    know,
                )
            )
    lex_res = _run_jobs(session, lex_jobs, "halluc_lexical", "judge: literal hallucination")
    inf_res = _run_jobs(session, inf_jobs, "halluc_inference", "judge: inference-aware hallucination")
    ids_lex = [(t.item_id, "halluc_lexical", t.statements) for t in tasks]
    ids_inf = [(t.item_id, "halluc_inference", t.statements) for t in tasks]
    return (
        _collect(ids_lex, lex_jobs, lex_res, "verdict", lexical_rate),
        _collect(ids_inf, inf_jobs, inf_res, "basis", inference_rate),
    )


@dataclass(frozen=True)
class PairTask:
    """Two notes of the same encounter, X (baseline) and Y (compared), with the source transcript."""

    item_id: str
    encounter_id: str
    transcript: tuple[str, ...]
    note_x: str
    note_y: str


@dataclass
class PairResult:
    """One adjudicated pair.

    Attributes:
        outcomes: ``{dimension: 'x'|'y'|'tie'}`` incl. ``overall``; None when a pass failed.
        first / second: raw positional verdicts of the pass with X as Note A / with Y as Note A.
        consistent: dimensions on which both passes named the same side.
        identical: the two notes were identical (tie everywhere, no call made).
    """

    item_id: str
    encounter_id: str
    outcomes: dict[str, str] | None
    first: dict[str, Any] | None = None
    second: dict[str, Any] | None = None
    consistent: int | None = None
    identical: bool = False
    error: str | None = None
    calls: int = 0
    cached: int = 0


def judge_pairs(tasks: Sequence[PairTask], session: JudgeSession, *, version: str = "v1") -> list[PairResult]:
    """Judge each pair in both orders and adjudicate (module docstring)."""
    prompt = quality_prompt("pairwise", version)
    calls: list[LLMCall] = []
    owner: list[int] = []
    out: list[PairResult] = []
    for k, task in enumerate(tasks):
        if task.note_x == task.note_y:
            ties = {d: "tie" for d in (*PAIRWISE_DIMENSIONS, "overall")}
            out.append(
                PairResult(task.item_id, task.encounter_id, ties, consistent=len(PAIRWISE_DIMENSIONS), identical=True)
            )
            continue
        out.append(PairResult(task.item_id, task.encounter_id, None))
        src = numbered(task.transcript) if task.transcript else "(empty)"
        for a, b, tag in ((task.note_x, task.note_y, "xy"), (task.note_y, task.note_x, "yx")):
            calls.append(
                LLMCall(
                    item_id=f"{task.item_id}:pairwise:{tag}",
                    key_parts=(prompt.sha256, hash_obj(src), hash_obj(a), hash_obj(b)),
                    messages=prompt.messages(transcript=src, note_a=a, note_b=b),
                )
            )
            owner.append(k)
    results = (
        session.run(calls, PairVerdict, namespace="quality-pairwise", schema_name="PairVerdict", desc="judge: pairwise")
        if calls
        else []
    )
    passes: dict[int, list[CallResult[PairVerdict]]] = {}
    for k, res in zip(owner, results, strict=True):
        passes.setdefault(k, []).append(res)
    for k, (first, second) in passes.items():
        pr = out[k]
        pr.calls, pr.cached = 2, int(first.cached) + int(second.cached)
        if first.parsed is None or second.parsed is None:
            pr.error = "; ".join(r.error or "judge call failed" for r in (first, second) if r.parsed is None)
            continue
        pr.first, pr.second = first.parsed.model_dump(), second.parsed.model_dump()
        adj = adjudicate_pair(pr.first, pr.second)
        pr.outcomes, pr.consistent = adj["outcomes"], adj["consistent"]
    return out
