"""``build_report``: a run directory → report/ (HTML, Markdown, PNG plots, CSV/Parquet tables)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stresstest.cache import atomic_write_text
from stresstest.console import text_table
from stresstest.ids import confined_path
from stresstest.metrics.bootstrap import bootstrap_cis, paired_differences
from stresstest.metrics.summary import METRIC_COLUMNS, QUALITY_COLUMNS, abstention, aggregate
from stresstest.metrics.triggers import trigger_risk
from stresstest.report import examples as ex_mod
from stresstest.report import guard as guard_mod
from stresstest.report import plots as plot_mod
from stresstest.report import predictive as pred_mod
from stresstest.report.chains import chain_plots
from stresstest.report.content import EffectRow, FailureRow, Headline, MitigationRow, ReportContent
from stresstest.report.error_rates import ErrorRateSection, error_rate_plot, error_rate_section
from stresstest.report.quality import QualitySection, quality_section, write_quality_tables
from stresstest.report.render import render_html, render_markdown
from stresstest.report.rundir import CLEAN, RunData, items_vs_manifest, load_run
from stresstest.report.silence import ProbeSection, probe_section
from stresstest.report.tables import (
    METRIC_HEADERS,
    TRIGGER_TYPES,
    Row,
    check_against_summary,
    check_trigger_rates,
    fmt,
    fmt_ci,
    noise_source,
    table2_records,
    table2_rows,
    trigger_rates,
    write_table,
)
from stresstest.report.viewer import write_viewer
from stresstest.results import REPORT_DIRS, JudgeInfo

ALPHA = 0.05


@dataclass
class ReportPaths:
    """Files written by :func:`build_report` (absolute paths)."""

    report_dir: Path
    html: Path
    markdown: Path
    plots: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    summary_sentence: str = ""
    text_table: str = ""


def _s(v: Any) -> str:
    if v is None or v == "":
        return "–"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_s(x)}" for k, x in v.items()) or "–"
    if isinstance(v, (list, tuple)):
        return ", ".join(_s(x) for x in v) or "–"
    return str(v)


def _judge_model(judge: str | JudgeInfo | None) -> str | None:
    # Items name their judge either as a string or as an object with a model.
    if isinstance(judge, JudgeInfo):
        return judge.model or None
    return judge or None


def judge_description(run: RunData) -> str:
    """Which judge produced Mean Score / Unsafe (or that none did)."""
    scored = [it for it in run.items if it.judge_score is not None]
    if not scored:
        return "not computed in this run (no judge scores)"
    j = run.manifest.judge
    models = sorted({m for it in scored if (m := _judge_model(it.judge)) is not None})
    desc = _s(j) if j else "judge not named in the manifest"
    if models:
        desc += f" (items name: {', '.join(models)})"
    return f"judge {desc}"


def run_facts(run: RunData, n_resamples: int, seed: int) -> list[tuple[str, str]]:
    """Key/value run facts (corpus, models, decoding, hashes, seeds, failures, time)."""
    facts = _setup_facts(run, n_resamples, seed)
    facts += _snr_facts(run)
    facts += [
        (f"Noise ({fam})", noise_source(run.manifest, fam) or "–")
        for fam in sorted({c.family for c in run.conditions if not c.is_clean})
    ]
    facts += _input_facts(run)
    facts += _outcome_facts(run)
    return facts


def headline(run: RunData) -> Headline:
    """Corpus, encounters, ASR and structuring LLM of the run, as the report's subtitle and run facts say them."""
    corpus, asr, st = run.manifest.corpus, run.manifest.asr, run.manifest.structure
    eids = {it.encounter_id for it in run.items}
    n_manifest = corpus.n_encounters if "n_encounters" in corpus.model_fields_set else len(eids)
    return Headline(
        corpus=f"{_s(corpus.kind)} ({_s(corpus.path)})",
        encounters=f"{_s(n_manifest)} in the manifest, {len(eids)} in items.jsonl",
        asr=f"{_s(asr.backend)} / {_s(asr.model or asr.models_used)}",
        structuring=f"{_s(st.backend)} / {_s(st.model)}",
    )


def _setup_facts(run: RunData, n_resamples: int, seed: int) -> list[tuple[str, str]]:
    """How the run was made: corpus, grid, models, decoding, hashes, judge, seeds."""
    m = run.manifest
    asr, st = m.asr, m.structure
    head = headline(run)
    return [
        ("Run", run.run_id),
        ("Created", _s(m.created)),
        ("stresstest version", _s(m.stresstest_version)),
        ("Corpus", head.corpus),
        ("Encounters", head.encounters),
        ("Conditions", ", ".join(c.id for c in run.conditions)),
        ("ASR", head.asr),
        ("ASR decoding", _s(asr.decoding)),
        ("Structuring LLM", head.structuring),
        ("Structuring decoding", _s(st.decoding)),
        ("Prompt hash", _s(st.prompt_hash)),
        ("Schema hash", _s(st.schema_hash)),
        ("Judge", judge_description(run)),
        ("Run seed", _s(m.seed)),
        (
            "Bootstrap",
            f"{n_resamples} paired resamples of encounters, seed {seed}, {100 * (1 - ALPHA):.0f}% percentile CIs",
        ),
    ]


def _snr_facts(run: RunData) -> list[tuple[str, str]]:
    """docs/spec.md §2: measured and target SNR must agree to ±0.1 dB; say so when they do not."""
    # One entry per mixture: a guard condition reuses its unmitigated twin's audio.
    mixtures = {
        (it.encounter_id, str(it.family), float(it.target_snr_db)): float(it.measured_snr_db)
        for it in run.items
        if it.measured_snr_db is not None and it.target_snr_db is not None
    }
    snr_dev = [abs(measured - key[2]) for key, measured in mixtures.items()]
    if not snr_dev:
        return []
    worst = max(snr_dev)
    return [
        (
            "SNR check",
            f"max |measured − target| = {worst:.3f} dB over {len(snr_dev)} mixtures"
            + ("" if worst <= 0.1 else " — EXCEEDS the ±0.1 dB tolerance"),
        )
    ]


def _input_facts(run: RunData) -> list[tuple[str, str]]:
    """Inputs checked against each other (turn timings vs the recording, turn limits): what the speech stage noted;
    and what reading the run directory had to do (a migrated manifest)."""
    facts = [("Read", note) for note in run.notes]
    notes = [
        f"{eid}: {w}"
        for eid, sp in sorted(run.manifest.speech.items())
        if sp.recipe is not None
        for w in sp.recipe.warnings
    ]
    if notes:
        more = " ..." if len(notes) > 10 else ""
        facts.append(("Input warnings", f"{len(notes)}: " + "; ".join(notes[:10]) + more))
    return facts


def _outcome_facts(run: RunData) -> list[tuple[str, str]]:
    """Failures, the pairing coverage (docs/spec.md §11) and the wall time."""
    m = run.manifest
    n_failed_items = sum(1 for it in run.items if it.failed)
    n_failures = len(m.failures) if "failures" in m.model_fields_set else n_failed_items
    facts = [("Failures", f"{n_failures} recorded in the manifest; {n_failed_items} failed item rows")]
    pairing = m.pairing
    if pairing is not None and pairing.n_paired is not None:
        dropped = pairing.dropped
        facts.append(
            (
                "Pairing",
                f"every row covers the same {pairing.n_paired} of {pairing.n_encounters} encounters"
                + (
                    "; dropped from every row (an item failed): "
                    + "; ".join(f"{e} ({why[0] if why else 'failed'})" for e, why in list(dropped.items())[:20])
                    + (" ..." if len(dropped) > 20 else "")
                    if dropped
                    else "; none dropped"
                ),
            )
        )
    stage = m.stage_seconds
    if stage:
        facts.append(
            (
                "Wall time",
                f"{float(stage['total']):.1f} s total"
                if "total" in stage
                else f"{sum(float(v) for v in stage.values()):.1f} s (sum of stages)",
            )
        )
    return facts


def _failures(run: RunData) -> list[FailureRow]:
    if run.manifest.failures:
        return [FailureRow(f.encounter_id, f.condition, f.stage, f.error) for f in run.manifest.failures]
    return [FailureRow(it.encounter_id, it.condition, it.failed_stage, it.error) for it in run.items if it.failed]


def _mitigation(run: RunData) -> list[MitigationRow]:
    out = []
    for c in run.conditions:
        if not c.mitigated:
            continue
        its = run.ok_items(c.id)
        ab = abstention(its)
        qd = [it.quotes_discarded for it in its if it.quotes_discarded is not None]
        # How the guard ran (e.g. "none (rules backend: deterministic filter only)"), so a reader knows why a
        # rules-backend guard row can equal its unmitigated twin.
        modes = sorted({it.extra.guard for it in its if it.extra is not None and it.extra.guard})
        out.append(
            MitigationRow(
                condition=c.id,
                n=len(its),
                # Pooled over the condition (Σ nulled / Σ fields), the same as summary.csv's abstention_rate.
                abstention_rate_pct=ab.rate_pct,
                fields_nulled=ab.fields_nulled,
                fields_total=ab.fields_total,
                quotes_discarded=sum(qd) if qd else None,
                guard="; ".join(modes) if modes else "LLM Guard + evidence filter",
            )
        )
    return out


def mitigation_effects(run: RunData, n_resamples: int, seed: int) -> list[EffectRow]:
    """Guard − unmitigated, per metric, paired over the encounters both conditions completed.

    The unmitigated twin of a guard row is its grid ``base``; both see the same
    transcript, so the difference isolates the guard.
    """
    out = []
    for c in run.conditions.mitigated():
        name, base = c.id, c.base
        d = paired_differences(run.ok_items(base), run.ok_items(name), n_resamples=n_resamples, seed=seed, alpha=ALPHA)
        out.append(
            EffectRow(
                name,
                base,
                d["wer"]["n"],
                {m: d[m]["diff"] for m in METRIC_COLUMNS},
                {m: d[m]["ci"] for m in METRIC_COLUMNS},
            )
        )
    return out


def item_table(run: RunData, pred: pred_mod.PredictiveItems) -> list[dict[str, Any]]:
    """The per-item table (one row per item; predictors and endpoints joined in)."""
    extra = {(r["encounter_id"], r["condition"]): r for r in pred.rows()}
    rows = []
    for it in run.items:
        key = it.key
        tc = it.trigger_counts
        ev = it.triggers_vs_clean
        row: dict[str, Any] = {
            "encounter_id": key[0],
            "condition": key[1],
            "family": it.family,
            "snr_db": it.snr_db,
            "mitigated": bool(it.mitigated),
            "failed": bool(it.failed),
            "error": it.error,
            "target_snr_db": it.target_snr_db,
            "measured_snr_db": it.measured_snr_db,
            "item_wer": aggregate([it])["wer"],
            "delta_wer": extra[key]["delta_wer"] if key in extra else None,
        }
        for f in ITEM_TABLE_FIELDS:
            row[f] = getattr(it, f)
        for t in TRIGGER_TYPES:
            row[f"ref_{t}"] = tc.count(t) if tc else None
            row[f"vs_clean_{t}"] = None if ev is None else sum(1 for e in ev if e.type == t)
        row["vs_clean_total"] = None if ev is None else len(ev)
        row["vs_clean_risk"] = None if ev is None else float(trigger_risk(ev))  # 0.0, not 0, without events
        ncf = it.new_critical_flags
        row["new_critical_flags"] = "; ".join(map(str, ncf)) if ncf is not None else None
        row["record_path"] = it.record_path
        rows.append(row)
    return rows


#: Item fields copied as they are into the per-item table (after the identity and SNR columns).
ITEM_TABLE_FIELDS: tuple[str, ...] = (
    "asr_sub",
    "asr_del",
    "asr_ins",
    "ref_words",
    "neg_err",
    "triage_match",
    "under_triage_new",
    "scer_new",
    "err_new",
    "asr_delta_e",
    "judge_score",
    "triage",
    "triage_clean",
    "triage_gold",
    "abstention_rate",
    "quotes_discarded",
    *QUALITY_COLUMNS,
)


def format_text_table(rows: Sequence[Row]) -> str:
    """Plain-text Table 2 with CIs (what the CLI prints)."""
    head = ["Condition", "n"] + [METRIC_HEADERS[m][0] for m in METRIC_COLUMNS]
    body: list[list[str]] = []
    for r in rows:
        if r.condition is None:
            body.append([r.label])
            continue
        cells = [r.label, str(r.n)]
        for m in METRIC_COLUMNS:
            v = r.value(m)
            ci = fmt_ci(r.ci(m), 1)
            cells.append(fmt(v) + (f" {ci}" if ci and v is not None else ""))
        body.append(cells)
    return text_table(head, body)


def _cis(run: RunData, n_resamples: int, seed: int) -> Mapping[str, Mapping[str, Any]]:
    by_cond = run.items_by_condition()
    return bootstrap_cis(
        by_cond,
        run.conditions.ids,
        n_resamples=n_resamples,
        seed=seed,
        alpha=ALPHA,
        clean_condition=CLEAN,
    )


@dataclass
class _Analysis:
    """What one report build computes from a run before anything is written."""

    rows: list[Row]
    problems: list[str]
    trig: dict[str, dict[str, tuple[float | None, Any]]]
    examples: dict[str, list[ex_mod.Example]]
    pred_items: pred_mod.PredictiveItems
    pred: list[pred_mod.EndpointResult]
    quality: QualitySection
    effects: list[EffectRow]
    removed: list[guard_mod.Removal]
    error_rates: ErrorRateSection
    probes: ProbeSection


def build_report(run_dir: Path, *, n_resamples: int = 1000, seed: int | None = None) -> ReportPaths:
    """Write ``RUN_DIR/report/`` and return its paths.

    Args:
        run_dir: a run directory written by the runner.
        n_resamples: bootstrap resamples for every CI.
        seed: bootstrap seed (the same seed gives the same report); default:
            the run's own seed from the manifest (0 if it has none), so
            ``stresstest report`` reproduces the report written at the end of the run.

    Raises:
        ReportError: the run directory is missing or malformed.
    """
    run = load_run(run_dir)
    if seed is None:
        s = run.manifest.seed
        seed = int(s) if isinstance(s, int) and not isinstance(s, bool) else 0
    for sub in REPORT_DIRS:  # a symlinked report/, plots/ or tables/ would take every file out of the run
        confined_path(run_dir, *sub)
    rdir = Path(run_dir) / "report"
    _clear_outputs(rdir)
    an = _analyse(run, n_resamples, seed)
    plots = {f"{m}_vs_snr": p for m, p in plot_mod.all_metric_plots(an.rows, rdir / "plots").items()}
    plots["wer_vs_triggers"] = plot_mod.predictive_plot(an.pred_items, rdir / "plots" / "wer_vs_triggers.png")
    plots.update(chain_plots(an.rows, list(run.conditions), rdir / "plots"))
    if an.error_rates.computed:
        plots["error_rates"] = error_rate_plot(an.error_rates, rdir / "plots" / "error_rates.png")
    tables = _write_tables(run, an, rdir / "tables")
    content = _content(
        run,
        an,
        n_resamples,
        seed,
        plots={k: p.relative_to(rdir) for k, p in plots.items()},
        tables=[p.relative_to(rdir) for p in tables],
    )
    html_path, md_path = rdir / "report.html", rdir / "report.md"
    atomic_write_text(html_path, render_html(content, rdir))
    atomic_write_text(md_path, render_markdown(content))
    _write_report_json(rdir / "report.json", run, an, content, n_resamples, seed)
    write_viewer(run, rdir)
    return ReportPaths(
        report_dir=rdir,
        html=html_path,
        markdown=md_path,
        plots=list(plots.values()),
        tables=tables,
        problems=an.problems,
        summary_sentence=content.predictive_summary,
        text_table=format_text_table(an.rows),
    )


def _clear_outputs(rdir: Path) -> None:
    """A rebuilt report must not keep a previous build's plot or table that this build does not write."""
    for d, suffixes in ((rdir / "plots", {".png"}), (rdir / "tables", {".csv", ".parquet"})):
        if d.is_dir():
            for p in d.iterdir():
                # A link is removed too: matplotlib writes through a (dangling) symlink to wherever it points.
                if (p.is_file() and p.suffix in suffixes) or p.is_symlink():
                    p.unlink()


def _analyse(run: RunData, n_resamples: int, seed: int) -> _Analysis:
    """Every number of the report, each checked against summary.csv where that has it."""
    rows = table2_rows(run, _cis(run, n_resamples, seed))
    problems = items_vs_manifest(run) + check_against_summary(run, rows)
    trig = trigger_rates(run, n_resamples, seed, ALPHA)
    problems += check_trigger_rates(run, trig)
    examples = ex_mod.mine_examples(run)
    pred_items = pred_mod.collect(run)
    pred = pred_mod.analyse(pred_items, n_resamples, seed, ALPHA)
    quality = quality_section(run, n_resamples, seed)
    problems += quality.problems
    error_rates = error_rate_section(run, n_resamples, seed)
    problems += error_rates.problems
    probes = probe_section(run, n_resamples, seed)
    problems += probes.problems
    return _Analysis(
        rows=rows,
        problems=problems,
        trig=trig,
        examples=examples,
        pred_items=pred_items,
        pred=pred,
        quality=quality,
        effects=mitigation_effects(run, n_resamples, seed),
        removed=guard_mod.removals(run),
        error_rates=error_rates,
        probes=probes,
    )


def _trigger_rate_rows(trig: Mapping[str, Mapping[str, tuple[float | None, Any]]]) -> list[dict[str, Any]]:
    return [
        {
            "condition": cond,
            "trigger_type": t,
            "rate": v,
            "rate_lo": ci[0] if ci else None,
            "rate_hi": ci[1] if ci else None,
        }
        for cond, per in trig.items()
        for t, (v, ci) in per.items()
    ]


TRIGGER_EVENT_COLUMNS = [
    "encounter_id",
    "condition",
    "family",
    "snr_db",
    "mitigated",
    "event",
    "type",
    "ref_span",
    "hyp_span",
    "concept",
    "explanation",
]
EXAMPLE_COLUMNS = [
    "trigger_type",
    "encounter_id",
    "condition",
    "ref_span",
    "hyp_span",
    "concept",
    "clean_context",
    "noisy_context",
    "effects",
    "linked_to_record_change",
    "unexplained_changes",
    "weight",
    "other_events_in_item",
    "record_path",
]


def _write_tables(run: RunData, an: _Analysis, table_dir: Path) -> list[Path]:
    """Every table of the report, as CSV (and Parquet where pyarrow is installed)."""
    tables: list[Path] = []
    tables += write_table(table_dir / "table2", table2_records(an.rows))
    tables += write_table(table_dir / "trigger_rates", _trigger_rate_rows(an.trig))
    tables += write_table(table_dir / "items", item_table(run, an.pred_items))
    tables += write_table(table_dir / "trigger_events", ex_mod.trigger_event_rows(run.items), TRIGGER_EVENT_COLUMNS)
    tables += write_table(
        table_dir / "examples", [e.as_row() for lst in an.examples.values() for e in lst], EXAMPLE_COLUMNS
    )
    tables += write_table(table_dir / "wer_vs_safety", [r.as_row() for r in an.pred])
    tables += write_quality_tables(an.quality, table_dir)
    if an.error_rates.computed:
        tables += write_table(table_dir / "error_rates", [r.to_row() for r in an.error_rates.rows])
    if an.probes.computed:
        tables += write_table(table_dir / "silence_probes", [r.to_row() for r in an.probes.rows])
        tables += write_table(
            table_dir / "silence_probe_fields",
            [t.to_row() for t in an.probes.traced],
            ["encounter_id", "condition", "field_id", "kind", "name", "quote"],
        )
    if an.effects:
        tables += write_table(table_dir / "mitigation_effect", [r.to_row() for r in an.effects])
    if run.conditions.mitigated():
        tables += write_table(table_dir / "guard_removed", [r.to_row() for r in an.removed], guard_mod.REMOVAL_COLUMNS)
    tables += write_table(
        table_dir / "wer_vs_safety_items",
        an.pred_items.rows(),
        ["encounter_id", "condition", "delta_wer", "trigger_risk", "trigger_count"]
        + [n for n, _ in pred_mod.ENDPOINTS],
    )
    return tables


def _content(
    run: RunData, an: _Analysis, n_resamples: int, seed: int, *, plots: dict[str, Path], tables: list[Path]
) -> ReportContent:
    """What the HTML and Markdown renderers show."""
    return ReportContent(
        run_id=run.run_id,
        title=f"Paired acoustic stress test — {run.run_id}",
        facts=run_facts(run, n_resamples, seed),
        table2=an.rows,
        judge=judge_description(run),
        n_resamples=n_resamples,
        seed=seed,
        alpha=ALPHA,
        problems=an.problems,
        trigger_rates=an.trig,
        trigger_rows=an.rows,
        examples=an.examples,
        predictive=an.pred,
        predictive_sentences=[pred_mod.sentence(r) for r in an.pred],
        predictive_summary=pred_mod.summary_sentence(an.pred),
        predictive_n_items=len(an.pred_items.encounter_ids),
        mitigation=_mitigation(run),
        mitigation_effects=an.effects,
        failures=_failures(run),
        stage_seconds=[(k, float(v)) for k, v in run.manifest.stage_seconds.items()],
        plots=plots,
        tables=tables,
        quality=an.quality,
        guard_sentences=guard_mod.guard_sentences(run),
        guard_removed=an.removed,
        error_rates=an.error_rates,
        probes=an.probes,
        headline=headline(run),
    )


def _write_report_json(
    path: Path, run: RunData, an: _Analysis, content: ReportContent, n_resamples: int, seed: int
) -> None:
    doc = {
        "run_id": run.run_id,
        "n_resamples": n_resamples,
        "seed": seed,
        "alpha": ALPHA,
        "problems": an.problems,
        "table2": table2_records(an.rows),
        "wer_vs_safety": [r.as_row() for r in an.pred],
        "wer_vs_safety_summary": content.predictive_summary,
    }
    atomic_write_text(path, json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")


def cli_report(run_dir: str | Path, *, n_resamples: int = 1000, seed: int | None = None) -> str:
    """Build the report and return the text the CLI prints (table, finding, paths)."""
    from stresstest.console import warn

    paths = build_report(Path(run_dir), n_resamples=n_resamples, seed=seed)
    for p in paths.problems:  # also on stderr, one line each: a report built on inconsistent files is not silent
        warn(f"report: {p}")
    lines = [paths.text_table, "", f"Does WER predict safety? {paths.summary_sentence}"]
    if paths.problems:
        lines += [
            "",
            f"WARNING: {len(paths.problems)} disagreement(s) between items.jsonl, manifest.json and summary.csv:",
        ]
        lines += [f"  - {p}" for p in paths.problems[:20]]
    lines += ["", f"report: {paths.html}", f"        {paths.markdown}"]
    return "\n".join(lines)
