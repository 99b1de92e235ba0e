"""Note-quality scoring of a run's items (docs/spec.md §8): what the score stage calls when ``judge.note_quality``
asks for it.

For every non-failed item with a record:

* ``completeness`` / ``conciseness`` (needs the encounter's gold) and ``groundedness`` (against the
  item's own ASR transcript x(c)) — :func:`stresstest.metrics.note_judges.judge_entailment`;
* ``halluc_lexical`` / ``halluc_inference`` — the record's statements against x(c);
* ``pairwise``: for the comparisons asked for, the item's record (Y) against its baseline's record (X)
  of the same encounter — ``noisy_vs_clean`` (X = the clean-ASR record) and ``guard_vs_unmitigated``
  (X = the unmitigated record of the same transcript). The judge reads the encounter's **human
  reference** transcript, the one account of what was said that does not depend on the condition.

Item rows get the five scores (percent; None = not computed), ``pairwise`` (``{"vs": baseline,
"outcomes": {dim: win|tie|loss}, ...}`` from the item's side) and ``quality_errors``; every verdict,
the retrieved ontology lines and both pairwise passes go to ``quality/<condition>/<encounter>.json``.

**Calibration.** Before the items, the same session judges a tiny built-in control whose answers are
not in doubt (an identical statement, a contradicted one, a fabricated allergy, a trade-name drug, a
faithful note against a corrupted one). The judge is called *adequate* only when it passes every
check; the report prints the note-quality numbers as results only for an adequate judge and says why
otherwise (the embedded 135M demo model is also never treated as a clinical judge).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stresstest.cache import atomic_write_json
from stresstest.grid import Condition
from stresstest.ids import id_path
from stresstest.metrics.note_judges import (
    EntailmentTask,
    HallucinationTask,
    JudgedStatements,
    JudgeSession,
    PairResult,
    PairTask,
    judge_entailment,
    judge_hallucination,
    judge_pairs,
    prompt_fingerprint,
)
from stresstest.metrics.note_quality import INFERENCE_BASES, UNSUPPORTED_BASES
from stresstest.metrics.statements import NoteLike, Statement, note_statements, note_text, transcript_sentences
from stresstest.results import ItemPairwise, NoteQualityScores, PairSide

EMBEDDED_MODEL_PREFIX = "SmolLM2-135M"
SOURCE_KINDS = {
    "completeness": "generated clinical note",
    "conciseness": "reference clinical note",
    "groundedness": "transcript of the consultation",
}
SIDE_TO_ITEM: dict[str, PairSide] = {"y": "win", "tie": "tie", "x": "loss"}


@dataclass(frozen=True)
class QualityItem:
    """What one item contributes: ids, its record, transcript, reference text and gold."""

    row: int
    encounter_id: str
    condition: str
    record: NoteLike
    transcript: str
    reference_text: str
    gold: NoteLike | None


# ------------------------------------------------------------------ calibration

CONTROL_TRANSCRIPT: tuple[str, ...] = (
    "I've had a dry cough for three days.",
    "I take Coumadin, five milligrams every evening.",
    "I have no allergies to any medicines.",
    "I have no chest pain at all.",
)
_S = Statement
CONTROL_ENTAILMENT = (
    (_S("h1", "Symptom: cough (3 days).", "c1"), {"entailed", "partially_entailed"}),
    (_S("h2", "Symptom: chest pain.", "c2"), {"not_entailed"}),
    (_S("h3", "Allergy: penicillin (rash).", "c3"), {"not_entailed"}),
)
_SUPPORTED = set(INFERENCE_BASES) - set(UNSUPPORTED_BASES)
CONTROL_HALLUCINATION = (
    (_S("c1", "Medication: warfarin (5 mg; every evening).", "c1"), None, _SUPPORTED),
    (_S("c2", "Allergy: penicillin (rash).", "c2"), {"unsupported"}, set(UNSUPPORTED_BASES)),
)
CONTROL_NOTE_GOOD = (
    '- Symptom: cough (dry; 3 days). [evidence: "I\'ve had a dry cough for three days"]\n'
    '- Medication: warfarin (5 mg; every evening). [evidence: "I take Coumadin, five milligrams every evening"]\n'
    '- Allergy: no drug allergy. [evidence: "I have no allergies to any medicines"]\n'
    '- Symptom: no chest pain. [evidence: "I have no chest pain at all"]'
)
CONTROL_NOTE_BAD = "- Symptom: chest pain (severe).\n- Allergy: penicillin (anaphylaxis).\n- Triage: emergency."


def calibrate(session: JudgeSession, cfg: Any) -> dict[str, Any]:
    """Judge the built-in control with the run's session; ``{"passed", "checks": [...]}``."""
    checks: list[dict[str, Any]] = []
    if cfg.entailment:
        (res,) = judge_entailment(
            [
                EntailmentTask(
                    "calibration",
                    "groundedness",
                    SOURCE_KINDS["groundedness"],
                    CONTROL_TRANSCRIPT,
                    tuple(s for s, _ in CONTROL_ENTAILMENT),
                )
            ],
            session,
            version=cfg.prompt_version,
            batch=cfg.batch_statements,
        )
        for k, (s, ok) in enumerate(CONTROL_ENTAILMENT):
            got = None if res.verdicts is None else res.verdicts[k]["label"]
            checks.append(
                {
                    "check": f"entailment: {s.text!r} against the control transcript",
                    "expected": sorted(ok),
                    "got": got if got else res.error,
                    "passed": got in ok,
                }
            )
    if cfg.hallucination:
        lex, inf = judge_hallucination(
            [HallucinationTask("calibration", CONTROL_TRANSCRIPT, tuple(s for s, _, _ in CONTROL_HALLUCINATION))],
            session,
            version=cfg.prompt_version,
            ontology_version=cfg.ontology_version,
            batch=cfg.batch_statements,
        )
        for k, (s, ok_lex, ok_inf) in enumerate(CONTROL_HALLUCINATION):
            if ok_lex is not None:
                got = None if lex[0].verdicts is None else lex[0].verdicts[k]["verdict"]
                checks.append(
                    {
                        "check": f"literal judge: {s.text!r}",
                        "expected": sorted(ok_lex),
                        "got": got if got else lex[0].error,
                        "passed": got in ok_lex,
                    }
                )
            got = None if inf[0].verdicts is None else inf[0].verdicts[k]["basis"]
            checks.append(
                {
                    "check": f"inference-aware judge: {s.text!r}",
                    "expected": sorted(ok_inf),
                    "got": got if got else inf[0].error,
                    "passed": got in ok_inf,
                }
            )
    if cfg.pairwise:
        (pr,) = judge_pairs(
            [PairTask("calibration", "calibration", CONTROL_TRANSCRIPT, CONTROL_NOTE_GOOD, CONTROL_NOTE_BAD)],
            session,
            version=cfg.prompt_version,
        )
        got = None if pr.outcomes is None else pr.outcomes["accurate"]
        checks.append(
            {
                "check": "pairwise 'accurate', faithful note (X) vs corrupted note (Y), both orders",
                "expected": ["x"],
                "got": got if got else pr.error,
                "passed": got == "x",
            }
        )
    return {"passed": bool(checks) and all(c["passed"] for c in checks), "checks": checks}


def adequacy(model_id: str, calibration: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether the judge's note-quality numbers may be read as results, and why (one sentence)."""
    failed = [c for c in calibration.get("checks", []) if not c.get("passed")]
    n = len(calibration.get("checks", []))
    if model_id.startswith(EMBEDDED_MODEL_PREFIX):
        why = (
            f"the judge is the embedded 135M demo model ({model_id}), which exists to prove the served "
            f"path and cannot judge clinical notes; it failed {len(failed)} of {n} calibration checks"
        )
        return False, why
    if failed:
        return False, f"the judge ({model_id}) failed {len(failed)} of {n} calibration checks"
    return True, f"the judge ({model_id}) passed all {n} calibration checks"


# ------------------------------------------------------------------ the stage


def _pair_plan(
    items: Sequence[QualityItem], conditions: Iterable[Condition], comparisons: Sequence[str]
) -> list[tuple[QualityItem, QualityItem]]:
    """(baseline X, compared Y) item pairs of the same encounter for the requested comparisons."""
    by_key = {(it.encounter_id, it.condition): it for it in items}
    plan = []
    for c in conditions:
        name = c.id
        if c.is_clean:
            continue
        if c.mitigated:
            base = c.base
            if "guard_vs_unmitigated" not in comparisons:
                continue
        else:
            base = "clean"
            if "noisy_vs_clean" not in comparisons:
                continue
        for it in items:
            if it.condition == name and (it.encounter_id, base) in by_key:
                plan.append((by_key[(it.encounter_id, base)], it))
    return plan


def score_note_quality(
    items: Sequence[QualityItem],
    conditions: Iterable[Condition],
    cfg: Any,
    session: JudgeSession,
    out_dir: Path,
) -> tuple[dict[int, NoteQualityScores], dict[str, Any]]:
    """Judge every item and write ``quality/`` details.

    Returns:
        ``{row: part}``, the note-quality part of each judged item (keyed by :attr:`QualityItem.row`; the caller
        revises its rows with them), and the manifest entry.

    Args:
        items: the items that have a record.
        conditions: the run's grid (a guard row is compared with its ``base``).
        cfg: :class:`stresstest.config.NoteQualityConfig`.
        session: the run's LLM session.
        out_dir: the run directory.
    """
    detail: dict[int, dict[str, Any]] = {
        it.row: {"encounter_id": it.encounter_id, "condition": it.condition} for it in items
    }
    updates: dict[int, dict[str, Any]] = {it.row: {} for it in items}
    errors: dict[int, list[str]] = {it.row: [] for it in items}
    failures: list[dict[str, Any]] = []
    n_calls = n_cached = 0

    def take(it: QualityItem, res: JudgedStatements) -> None:
        nonlocal n_calls, n_cached
        n_calls += res.calls
        n_cached += res.cached
        updates[it.row][res.measure] = None if res.score is None else round(res.score, 4)
        d: dict[str, Any] = {"score": res.score, "verdicts": res.verdicts}
        if res.knowledge:
            d["knowledge"] = res.knowledge
        if res.error:
            d["error"] = res.error
            errors[it.row].append(f"{res.measure}: {res.error}")
            failures.append(
                {"encounter_id": it.encounter_id, "condition": it.condition, "measure": res.measure, "error": res.error}
            )
        detail[it.row][res.measure] = d

    calibration = calibrate(session, cfg)
    stmts = {it.row: tuple(note_statements(it.record)) for it in items}
    if cfg.entailment:
        tasks, owners = [], []
        for it in items:
            sents = tuple(transcript_sentences(it.transcript))
            if it.gold is not None:
                gold_st = tuple(note_statements(it.gold))
                tasks.append(
                    EntailmentTask(
                        f"{it.encounter_id}/{it.condition}",
                        "completeness",
                        SOURCE_KINDS["completeness"],
                        tuple(s.text for s in stmts[it.row]),
                        gold_st,
                    )
                )
                tasks.append(
                    EntailmentTask(
                        f"{it.encounter_id}/{it.condition}",
                        "conciseness",
                        SOURCE_KINDS["conciseness"],
                        tuple(s.text for s in gold_st),
                        stmts[it.row],
                    )
                )
                owners += [it, it]
            tasks.append(
                EntailmentTask(
                    f"{it.encounter_id}/{it.condition}",
                    "groundedness",
                    SOURCE_KINDS["groundedness"],
                    sents,
                    stmts[it.row],
                )
            )
            owners.append(it)
        for it, res in zip(
            owners,
            judge_entailment(tasks, session, version=cfg.prompt_version, batch=cfg.batch_statements),
            strict=True,
        ):
            take(it, res)
    if cfg.hallucination:
        htasks = [
            HallucinationTask(
                f"{it.encounter_id}/{it.condition}", tuple(transcript_sentences(it.transcript)), stmts[it.row]
            )
            for it in items
        ]
        lex, inf = judge_hallucination(
            htasks,
            session,
            version=cfg.prompt_version,
            ontology_version=cfg.ontology_version,
            batch=cfg.batch_statements,
        )
        for it, a, b in zip(items, lex, inf, strict=True):
            take(it, a)
            take(it, b)
    comparisons: list[dict[str, Any]] = []
    if cfg.pairwise:
        plan = _pair_plan(items, conditions, cfg.pairwise)
        ptasks = [
            PairTask(
                f"{y.encounter_id}/{y.condition} vs {x.condition}",
                y.encounter_id,
                tuple(transcript_sentences(y.reference_text)),
                note_text(x.record),
                note_text(y.record),
            )
            for x, y in plan
        ]
        results = judge_pairs(ptasks, session, version=cfg.prompt_version)
        for (x, y), pr in zip(plan, results, strict=True):
            n_calls += pr.calls
            n_cached += pr.cached
            updates[y.row]["pairwise"] = _item_pairwise(x.condition, pr)
            detail[y.row]["pairwise"] = {
                "vs": x.condition,
                "outcomes": pr.outcomes,
                "first_pass": pr.first,
                "second_pass": pr.second,
                "identical": pr.identical,
                "error": pr.error,
            }
            if pr.error:
                errors[y.row].append(f"pairwise vs {x.condition}: {pr.error}")
                failures.append(
                    {
                        "encounter_id": y.encounter_id,
                        "condition": y.condition,
                        "measure": f"pairwise vs {x.condition}",
                        "error": pr.error,
                    }
                )
        comparisons = sorted({(y.condition, x.condition) for x, y in plan})  # type: ignore[assignment]
    for it in items:
        rel = f"quality/{it.condition}/{it.encounter_id}.json"
        atomic_write_json(id_path(out_dir, "quality", it.condition, it.encounter_id, suffix=".json"), detail[it.row])
        updates[it.row]["quality_path"] = rel
        updates[it.row]["quality_errors"] = errors[it.row]
    ok, why = adequacy(session.model_id, calibration)
    return {row: NoteQualityScores.model_validate(u) for row, u in updates.items()}, {
        "judge_model": session.model_id,
        "measures": {"entailment": cfg.entailment, "hallucination": cfg.hallucination, "pairwise": list(cfg.pairwise)},
        "prompts": prompt_fingerprint(cfg.prompt_version, cfg.ontology_version),
        "batch_statements": cfg.batch_statements,
        "pairwise_comparisons": [{"condition": a, "baseline": b} for a, b in comparisons],
        "calibration": calibration,
        "adequate": ok,
        "adequacy": why,
        "n_items": len(items),
        "n_calls": n_calls,
        "n_cached": n_cached,
        "failures": failures,
        "n_failures": len(failures),
    }


def _item_pairwise(baseline: str, pr: PairResult) -> ItemPairwise:
    return ItemPairwise(
        vs=baseline,
        outcomes=None if pr.outcomes is None else {d: SIDE_TO_ITEM[s] for d, s in pr.outcomes.items()},
        consistent=pr.consistent,
        identical=pr.identical,
        failed=pr.error is not None,
    )
