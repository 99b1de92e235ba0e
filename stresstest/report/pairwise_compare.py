"""``stresstest compare RUN_A RUN_B --pairwise``: which run's structured records the judge prefers.

For every (encounter, condition) whose record both runs have (not failed; the within-run pairing rule of
docs/spec.md §11 does not apply, each pair being complete in itself), A's record (X) and B's record (Y) are
compared by the pairwise judge on the PDSQI-9-derived dimensions, reading the encounter's human
reference transcript (the same in both runs; a pair whose reference texts differ is not compared and
is counted). Each pair is judged in both orders; a side wins a dimension only when both orders agree
(:mod:`stresstest.metrics.note_quality`). Win = B preferred. Results per condition and pooled over all
conditions, as win / tie / loss shares and the tie-adjusted preference score PS(B) with 95% CIs from a
cluster bootstrap over encounters (all pairs of one encounter resampled together).

The judge is the LLM of ``--config`` (default: RUN_B's ``config.resolved.yaml``), run through one
LLM session with the shared cache; the same calibration checks as in a run decide whether the output
is reported as a result or as a mechanics check only.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stresstest.cache import atomic_write_text, default_cache_dir
from stresstest.console import text_table
from stresstest.errors import ReportError, StressTestError
from stresstest.metrics.note_judges import PairTask, judge_pairs, quality_prompt
from stresstest.metrics.note_quality import PAIRWISE_DIMENSIONS, PairwiseStat, pairwise_summary
from stresstest.metrics.statements import note_text, transcript_sentences
from stresstest.report.rundir import RunData, load_run
from stresstest.report.tables import write_table
from stresstest.results import Calibration


@dataclass(frozen=True)
class SummaryRow:
    """Win / tie / loss of B against A on one dimension, over one condition (or ``all``)."""

    condition: str
    stat: PairwiseStat

    def to_row(self) -> dict[str, Any]:
        return {"condition": self.condition, **self.stat.to_row()}


@dataclass
class PairwiseCompareResult:
    """What :func:`pairwise_compare` judged and wrote."""

    pairs: list[dict[str, Any]]
    summary: list[SummaryRow]
    text: str
    out_dir: Path
    files: list[Path] = field(default_factory=list)
    adequate: bool = False
    adequacy: str = ""


def _pair_tasks(
    a: RunData, b: RunData, only: Sequence[str] | None = None
) -> tuple[list[PairTask], list[tuple[str, str]], list[str]]:
    conds_b = {c.id for c in b.conditions}
    if only is not None:
        common = [c.id for c in a.conditions if c.id in conds_b]
        unknown = [c for c in only if c not in common]
        if unknown:
            raise ReportError(
                f"compare --pairwise: condition(s) {unknown} are not in both runs; expected some of {common}"
            )
        conds_b = {c for c in conds_b if c in only}
    tasks: list[PairTask] = []
    keys: list[tuple[str, str]] = []
    skipped: list[str] = []
    for c in a.conditions:
        cond = c.id
        if cond not in conds_b:
            continue
        # The unit here is one (encounter, condition) pair, complete in itself: an item counts when both runs
        # have its record, even if the run's pairing rule dropped the encounter's other conditions.
        b_rows = {it.encounter_id: it for it in b.items if it.condition == cond and not it.failed}
        a_items = [it for it in a.items if it.condition == cond and not it.failed]
        for it_a in sorted(a_items, key=lambda it: it.encounter_id):
            eid = it_a.encounter_id
            if eid not in b_rows:
                continue
            it_b = b_rows[eid]
            rec_a, rec_b = a.record(it_a), b.record(it_b)
            if rec_a is None or rec_b is None:
                skipped.append(f"{eid}/{cond}: record missing in {'A' if rec_a is None else 'B'}")
                continue
            ref = it_a.reference_text or ""
            if ref != (it_b.reference_text or ""):
                skipped.append(f"{eid}/{cond}: the runs' reference transcripts differ")
                continue
            tasks.append(
                PairTask(f"{eid}/{cond}", eid, tuple(transcript_sentences(ref)), note_text(rec_a), note_text(rec_b))
            )
            keys.append((eid, cond))
    return tasks, keys, skipped


def _judge_config(run_b: Path, config: Path | None) -> Any:
    from stresstest.config import load_config

    path = config if config is not None else run_b / "config.resolved.yaml"
    if not path.is_file():
        raise ReportError(f"compare --pairwise: {path} not found; pass --config CONFIG.yaml naming the judge LLM")
    try:
        cfg = load_config(path)
    except (StressTestError, ValueError) as exc:
        raise ReportError(
            f"compare --pairwise: cannot read the judge config {path}: {str(exc).splitlines()[0]}"
        ) from exc
    if cfg.structure.backend == "rules":
        raise ReportError(
            f"compare --pairwise: {path} has structure.backend 'rules' (no LLM to judge with); pass --config "
            "CONFIG.yaml whose structure backend is 'openai' or 'vllm-offline'"
        )
    return cfg


def pairwise_compare(
    run_a: Path,
    run_b: Path,
    out: Path | None = None,
    *,
    config: Path | None = None,
    conditions: Sequence[str] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    session: Any = None,
) -> PairwiseCompareResult:
    """Judge B's records against A's (module docstring); writes pairwise.{md,html} and tables.

    Args:
        run_a: baseline run (X).
        run_b: compared run (Y; win = B preferred).
        out: output directory (default ``RUN_B/compare/vs_<A's name>``).
        config: run config naming the judge LLM (default RUN_B's resolved config).
        conditions: judge only these conditions (default: every condition both runs have).
        n_resamples: bootstrap resamples.
        seed: bootstrap seed.
        session: an open judge session to use instead of opening one from the config (tests).

    Raises:
        ReportError: a malformed run, no LLM to judge with, or no (encounter, condition) in common.
    """
    from stresstest.config import NoteQualityConfig
    from stresstest.llm.session import open_session
    from stresstest.metrics.quality_stage import adequacy, calibrate

    a, b = load_run(run_a), load_run(run_b)
    tasks, keys, skipped = _pair_tasks(a, b, conditions)
    if not tasks:
        raise ReportError(
            f"compare --pairwise: runs {run_a} and {run_b} have no (encounter, condition) with a record in both"
            + (f" ({len(skipped)} skipped: {skipped[0]})" if skipped else "")
        )
    out_dir = Path(out) if out is not None else Path(run_b) / "compare" / f"vs_{Path(run_a).resolve().name}"
    nq = NoteQualityConfig(pairwise=["noisy_vs_clean"])
    if session is None:
        cfg = _judge_config(Path(run_b), config)
        cache = Path(cfg.run.cache_dir) if cfg.run.cache_dir else default_cache_dir()
        with open_session(cfg.structure, cache_dir=cache, log_dir=out_dir / "logs") as s:
            cal = calibrate(s, nq)
            results = judge_pairs(tasks, s)
            model = s.model_id
    else:
        cal, results, model = calibrate(session, nq), judge_pairs(tasks, session), session.model_id
    ok, why = adequacy(model, cal)
    pairs: list[dict[str, Any]] = []
    for (eid, cond), pr in zip(keys, results, strict=True):
        row: dict[str, Any] = {
            "encounter_id": eid,
            "condition": cond,
            "identical": pr.identical,
            "consistent": pr.consistent,
            "error": pr.error,
        }
        for d in (*PAIRWISE_DIMENSIONS, "overall"):
            row[d] = None if pr.outcomes is None else {"y": "B", "x": "A", "tie": "tie"}[pr.outcomes[d]]
        row["_outcomes"] = pr.outcomes
        pairs.append(row)
    judged = [p for p in pairs if p["_outcomes"] is not None]
    summary: list[SummaryRow] = []
    conds = sorted({p["condition"] for p in judged}, key=[c.id for c in a.conditions].index)
    for label, subset in [("all", judged)] + [(c, [p for p in judged if p["condition"] == c]) for c in conds]:
        for r in pairwise_summary(
            [{"encounter_id": p["encounter_id"], "outcomes": p["_outcomes"]} for p in subset],
            n_resamples=n_resamples,
            seed=seed,
        ):
            summary.append(SummaryRow(label, r))
    for p in pairs:
        del p["_outcomes"]
    n_enc = len({p["encounter_id"] for p in pairs})
    failed = [p for p in pairs if p["error"]]
    prompt = quality_prompt("pairwise")
    head = (
        f"Pairwise comparison (judge: {model}, {prompt.id} sha256 {prompt.sha256[:12]}): A = {a.run_id} (X), "
        f"B = {b.run_id} (Y); win = B's record preferred. Compared {len(pairs)} (encounter, condition) pairs "
        f"over {n_enc} encounters and {len(conds) if conds else 0} conditions ({', '.join(conds)}), each "
        f"judged in both orders on the human reference transcript; {sum(p['identical'] for p in pairs)} "
        f"identical pairs (tie without a call); {len(failed)} failed; {len(skipped)} skipped."
    )
    verdict = (
        ("Judge adequate: " + why + ".")
        if ok
        else ("NOT INTERPRETABLE: " + why + "; the table shows only that the mechanics ran.")
    )
    text = "\n".join(
        [head, verdict, "", _text_table([r.stat for r in summary if r.condition == "all"])]
        + ([f"skipped: {s}" for s in skipped[:10]])
    )
    files = write_table(out_dir / "tables" / "pairwise_pairs", pairs)
    files += write_table(out_dir / "tables" / "pairwise_summary", [r.to_row() for r in summary])
    md = _markdown(head, verdict, summary, skipped, cal)
    files += [out_dir / "pairwise.md", out_dir / "pairwise.html"]
    atomic_write_text(out_dir / "pairwise.md", md)
    atomic_write_text(out_dir / "pairwise.html", _html(head, verdict, summary, skipped))
    return PairwiseCompareResult(pairs, summary, text, out_dir, files, ok, why)


def _fmt(v: Any) -> str:
    return "–" if not isinstance(v, (int, float)) else f"{v:.1f}"


def _ps(s: PairwiseStat) -> str:
    lo, hi = s.ps_lo, s.ps_hi
    return _fmt(s.ps) + (f" [{lo:.1f}, {hi:.1f}]" if isinstance(lo, float) and isinstance(hi, float) else "")


def _text_table(rows: list[PairwiseStat]) -> str:
    head = ["Dimension", "n", "Win%", "Tie%", "Loss%", "PS(B) [95% CI]"]
    return text_table(head, [[s.dimension, str(s.n), _fmt(s.win), _fmt(s.tie), _fmt(s.loss), _ps(s)] for s in rows])


def _markdown(head: str, verdict: str, summary: list[SummaryRow], skipped: list[str], cal: dict[str, Any]) -> str:
    lines = [
        "# Pairwise comparison: B vs A",
        "",
        head,
        "",
        f"> **{verdict}**",
        "",
        "| Condition | Dimension | n | Win % | Tie % | Loss % | PS(B) [95% CI] |",
        "| :-- | :-- | --: | --: | --: | --: | --: |",
    ]
    lines += [
        f"| `{r.condition}` | {s.dimension} | {s.n} | {_fmt(s.win)} | {_fmt(s.tie)} | {_fmt(s.loss)} | {_ps(s)} |"
        for r in summary
        for s in (r.stat,)
    ]
    lines += ["", "## Judge calibration checks", ""]
    checks = Calibration.model_validate(cal).checks
    lines += [
        f"- {'passed' if c.passed else 'FAILED'}: {c.check} (expected {', '.join(map(str, c.expected))}, got {c.got})"
        for c in checks
    ]
    if skipped:
        lines += ["", f"## Skipped ({len(skipped)})", ""] + [f"- {s}" for s in skipped]
    return "\n".join(lines) + "\n"


def _html(head: str, verdict: str, summary: list[SummaryRow], skipped: list[str]) -> str:
    from stresstest.report.render import CSS

    e = html.escape
    rows = "".join(
        f"<tr><td><code>{e(r.condition)}</code></td><td>{e(s.dimension)}</td><td>{s.n}</td>"
        f"<td>{_fmt(s.win)}</td><td>{_fmt(s.tie)}</td><td>{_fmt(s.loss)}</td>"
        f"<td>{e(_ps(s))}</td></tr>"
        for r in summary
        for s in (r.stat,)
    )
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Pairwise comparison</title>"
        f"<style>{CSS}</style></head><body><h1>Pairwise comparison: B vs A</h1><p class='sub'>{e(head)}</p>"
        f"<div class='warn'><b>{e(verdict)}</b></div><table class='main'><thead><tr><th>Condition</th>"
        "<th>Dimension</th><th>n</th><th>Win %</th><th>Tie %</th><th>Loss %</th><th>PS(B) [95% CI]</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
        + "".join(f"<p class='sub'>skipped: {e(s)}</p>" for s in skipped)
        + "</body></html>"
    )


def cli_pairwise(
    a: str | Path,
    b: str | Path,
    out: str | Path | None = None,
    *,
    config: str | Path | None = None,
    conditions: str | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> str:
    """Run :func:`pairwise_compare` and return the text the CLI prints (``conditions``: comma-separated)."""
    only = [c.strip() for c in conditions.split(",") if c.strip()] if conditions else None
    res = pairwise_compare(
        Path(a),
        Path(b),
        Path(out) if out is not None else None,
        config=Path(config) if config is not None else None,
        conditions=only,
        n_resamples=n_resamples,
        seed=seed,
    )
    return f"{res.text}\n\npairwise: {res.out_dir / 'pairwise.html'}\n          {res.out_dir / 'pairwise.md'}"
