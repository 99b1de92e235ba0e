"""``build_report``: a run directory → report/ (HTML, Markdown, PNG plots, CSV/Parquet tables)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stresstest.cache import atomic_write_text
from stresstest.metrics.bootstrap import bootstrap_cis, paired_differences
from stresstest.metrics.summary import METRIC_COLUMNS, QUALITY_COLUMNS, aggregate
from stresstest.report import examples as ex_mod
from stresstest.report import guard as guard_mod
from stresstest.report import plots as plot_mod
from stresstest.report import predictive as pred_mod
from stresstest.report.content import ReportContent
from stresstest.report.render import render_html, render_markdown
from stresstest.report.rundir import CLEAN, RunData, load_run
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


def judge_description(run: RunData) -> str:
    """Which judge produced Mean Score / Unsafe (or that none did)."""
    scored = [it for it in run.items if it.get("judge_score") is not None]
    if not scored:
        return "not computed in this run (no judge scores)"
    j = run.manifest.get("judge")
    # Items name their judge either as a string or as an object with a model.
    models = sorted(
        {str(it["judge"]) for it in scored if isinstance(it.get("judge"), str) and it["judge"]}
        | {
            str(it["judge"].get("model"))
            for it in scored
            if isinstance(it.get("judge"), dict) and it["judge"].get("model")
        }
    )
    desc = _s(j) if j else "judge not named in the manifest"
    if models:
        desc += f" (items name: {', '.join(models)})"
    return f"judge {desc}"


def run_facts(run: RunData, n_resamples: int, seed: int) -> list[tuple[str, str]]:
    """Key/value run facts (corpus, models, decoding, hashes, seeds, failures, time)."""
    m = run.manifest
    corpus = m.get("corpus") or {}
    asr = m.get("asr") or {}
    st = m.get("structure") or {}
    eids = {str(it["encounter_id"]) for it in run.items}
    fails = m.get("failures") if isinstance(m.get("failures"), list) else None
    n_failed_items = sum(1 for it in run.items if it.get("failed"))
    stage = m.get("stage_seconds") or {}
    facts = [
        ("Run", run.run_id),
        ("Created", _s(m.get("created"))),
        ("stresstest version", _s(m.get("stresstest_version"))),
        ("Corpus", f"{_s(corpus.get('kind'))} ({_s(corpus.get('path'))})"),
        (
            "Encounters",
            f"{_s(corpus.get('n_encounters', len(eids)))} in the manifest, {len(eids)} in items.jsonl",
        ),
        ("Conditions", ", ".join(c.id for c in run.conditions)),
        ("ASR", f"{_s(asr.get('backend'))} / {_s(asr.get('model') or asr.get('models_used'))}"),
        ("ASR decoding", _s(asr.get("decoding"))),
        ("Structuring LLM", f"{_s(st.get('backend'))} / {_s(st.get('model'))}"),
        ("Structuring decoding", _s(st.get("decoding"))),
        ("Prompt hash", _s(st.get("prompt_hash"))),
        ("Schema hash", _s(st.get("schema_hash"))),
        ("Judge", judge_description(run)),
        ("Run seed", _s(m.get("seed"))),
        (
            "Bootstrap",
            f"{n_resamples} paired resamples of encounters, seed {seed}, {100 * (1 - ALPHA):.0f}% percentile CIs",
        ),
    ]
    # One entry per mixture: a guard condition reuses its unmitigated twin's audio.
    mixtures = {
        (str(it["encounter_id"]), str(it.get("family")), float(it["target_snr_db"])): float(it["measured_snr_db"])
        for it in run.items
        if isinstance(it.get("measured_snr_db"), (int, float)) and isinstance(it.get("target_snr_db"), (int, float))
    }
    snr_dev = [abs(measured - key[2]) for key, measured in mixtures.items()]
    if snr_dev:
        # SPEC §2: measured and target SNR must agree to ±0.1 dB; say so when they do not.
        worst = max(snr_dev)
        facts.append(
            (
                "SNR check",
                f"max |measured − target| = {worst:.3f} dB over {len(snr_dev)} mixtures"
                + ("" if worst <= 0.1 else " — EXCEEDS the ±0.1 dB tolerance"),
            )
        )
    for fam in sorted({c.family for c in run.conditions if not c.is_clean}):
        facts.append((f"Noise ({fam})", noise_source(m, fam) or "–"))
    speech: dict[str, Any] = m["speech"] if isinstance(m.get("speech"), dict) else {}
    # Inputs checked against each other (turn timings vs the recording, turn limits): what the speech stage noted.
    notes = [f"{eid}: {w}" for eid, sp in sorted(speech.items()) if isinstance(sp, dict)
             for w in ((sp.get("recipe") or {}).get("warnings") or [])]
    if notes:
        more = " ..." if len(notes) > 10 else ""
        facts.append(("Input warnings", f"{len(notes)}: " + "; ".join(notes[:10]) + more))
    facts.append(
        (
            "Failures",
            f"{len(fails) if fails is not None else n_failed_items} recorded in the manifest; "
            f"{n_failed_items} failed item rows",
        )
    )
    pairing = m.get("pairing")
    if isinstance(pairing, dict) and "n_paired" in pairing:
        # SPEC §11: how many encounters every row covers, and which were dropped.
        dropped = pairing.get("dropped") or {}
        facts.append(
            (
                "Pairing",
                f"every row covers the same {pairing['n_paired']} of {pairing.get('n_encounters')} encounters"
                + (
                    "; dropped from every row (an item failed): "
                    + "; ".join(f"{e} ({why[0] if why else 'failed'})" for e, why in list(dropped.items())[:20])
                    + (" ..." if len(dropped) > 20 else "")
                    if dropped
                    else "; none dropped"
                ),
            )
        )
    if isinstance(stage, dict) and stage:
        total = stage.get("total")
        facts.append(
            (
                "Wall time",
                f"{float(total):.1f} s total"
                if isinstance(total, (int, float))
                else f"{sum(float(v) for v in stage.values() if isinstance(v, (int, float))):.1f} s (sum of stages)",
            )
        )
    return facts


def _failures(run: RunData) -> list[dict[str, Any]]:
    raw = run.manifest.get("failures")
    if isinstance(raw, list) and raw:
        return [dict(f) for f in raw if isinstance(f, dict)]
    return [
        {
            "encounter_id": it["encounter_id"],
            "condition": it["condition"],
            "stage": it.get("failed_stage"),
            "error": it.get("error"),
        }
        for it in run.items
        if it.get("failed")
    ]


def _mitigation(run: RunData) -> list[dict[str, Any]]:
    out = []
    for c in run.conditions:
        if not c.mitigated:
            continue
        its = run.ok_items(c.id)
        extras = [it.get("extra") or {} for it in its]
        total = sum(int(e.get("fields_total") or 0) for e in extras)
        nulled = sum(int(e.get("fields_nulled") or 0) for e in extras)
        qd = [int(it["quotes_discarded"]) for it in its if it.get("quotes_discarded") is not None]
        # How the guard ran (e.g. "none (rules backend: deterministic filter only)"), so a reader knows why a
        # rules-backend guard row can equal its unmitigated twin.
        modes = sorted({str(e["guard"]) for e in extras if e.get("guard")})
        out.append(
            {
                "condition": c.id,
                "n": len(its),
                # Pooled over the condition (Σ nulled / Σ fields), the same as summary.csv's abstention_rate.
                "abstention_rate_pct": 100.0 * nulled / total if total else (0.0 if its else None),
                "fields_nulled": nulled,
                "fields_total": total,
                "quotes_discarded": sum(qd) if qd else None,
                "guard": "; ".join(modes) if modes else "LLM Guard + evidence filter",
            }
        )
    return out


def mitigation_effects(run: RunData, n_resamples: int, seed: int) -> list[dict[str, Any]]:
    """Guard − unmitigated, per metric, paired over the encounters both conditions completed.

    The unmitigated twin of a guard row is its grid ``base``; both see the same
    transcript, so the difference isolates the guard.
    """
    out = []
    for c in run.conditions.mitigated():
        name, base = c.id, c.base
        d = paired_differences(run.ok_items(base), run.ok_items(name), n_resamples=n_resamples, seed=seed, alpha=ALPHA)
        row: dict[str, Any] = {"condition": name, "baseline": base, "n_common": d["wer"]["n"]}
        for m in METRIC_COLUMNS:
            ci = d[m]["ci"]
            row[m] = d[m]["diff"]
            row[f"{m}_lo"] = ci[0] if ci else None
            row[f"{m}_hi"] = ci[1] if ci else None
        out.append(row)
    return out


def item_table(run: RunData, pred: pred_mod.PredictiveItems) -> list[dict[str, Any]]:
    """The per-item table (one row per item; predictors and endpoints joined in)."""
    extra = {(r["encounter_id"], r["condition"]): r for r in pred.rows()}
    rows = []
    for it in run.items:
        key = (str(it["encounter_id"]), str(it["condition"]))
        tc = it.get("trigger_counts") if isinstance(it.get("trigger_counts"), dict) else {}
        ev = it.get("triggers_vs_clean") if isinstance(it.get("triggers_vs_clean"), list) else None
        row: dict[str, Any] = {
            "encounter_id": key[0],
            "condition": key[1],
            "family": it.get("family"),
            "snr_db": it.get("snr_db"),
            "mitigated": bool(it.get("mitigated")),
            "failed": bool(it.get("failed")),
            "error": it.get("error"),
            "target_snr_db": it.get("target_snr_db"),
            "measured_snr_db": it.get("measured_snr_db"),
            "item_wer": aggregate([it])["wer"],
            "delta_wer": extra.get(key, {}).get("delta_wer"),
        }
        for f in (
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
        ):
            row[f] = it.get(f)
        for t in TRIGGER_TYPES:
            row[f"ref_{t}"] = tc.get(t) if tc else None
            row[f"vs_clean_{t}"] = (
                None if ev is None else sum(1 for e in ev if isinstance(e, dict) and e.get("type") == t)
            )
        row["vs_clean_total"] = None if ev is None else len(ev)
        row["vs_clean_risk"] = None if ev is None else pred_mod.event_risk(ev)
        ncf = it.get("new_critical_flags")
        row["new_critical_flags"] = "; ".join(map(str, ncf)) if isinstance(ncf, list) else None
        row["record_path"] = it.get("record_path")
        rows.append(row)
    return rows


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
            ci = fmt_ci(r.cis.get(m), 1)
            cells.append(fmt(r.values.get(m)) + (f" {ci}" if ci and r.values.get(m) is not None else ""))
        body.append(cells)
    widths = [max(len(h), *(len(b[i]) for b in body if len(b) > 1)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(widths[i]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(head))]
    lines.append("-" * len(lines[0]))
    for b in body:
        lines.append(
            b[0]
            if len(b) == 1
            else "  ".join(v.ljust(widths[i]) if i == 0 else v.rjust(widths[i]) for i, v in enumerate(b))
        )
    return "\n".join(lines)


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
        s = run.manifest.get("seed")
        seed = int(s) if isinstance(s, int) and not isinstance(s, bool) else 0
    rdir = Path(run_dir) / "report"
    plot_dir, table_dir = rdir / "plots", rdir / "tables"
    # A rebuilt report must not keep a previous build's plot or table that this build does not write.
    for d, suffixes in ((plot_dir, {".png"}), (table_dir, {".csv", ".parquet"})):
        if d.is_dir():
            for p in d.iterdir():
                if p.is_file() and p.suffix in suffixes:
                    p.unlink()
    cis = _cis(run, n_resamples, seed)
    rows = table2_rows(run, cis)
    problems = check_against_summary(run, rows)
    trig = trigger_rates(run, n_resamples, seed, ALPHA)
    problems += check_trigger_rates(run, trig)
    examples = ex_mod.mine_examples(run)
    pred_items = pred_mod.collect(run)
    pred = pred_mod.analyse(pred_items, n_resamples, seed, ALPHA)

    plots = {f"{m}_vs_snr": p for m, p in plot_mod.all_metric_plots(rows, plot_dir).items()}
    plots["wer_vs_triggers"] = plot_mod.predictive_plot(pred_items, plot_dir / "wer_vs_triggers.png")
    from stresstest.report.chains import chain_plots

    plots.update(chain_plots(rows, list(run.conditions), plot_dir))

    tables: list[Path] = []
    tables += write_table(table_dir / "table2", table2_records(rows))
    trig_rows = []
    for cond, per in trig.items():
        for t, (v, ci) in per.items():
            trig_rows.append(
                {
                    "condition": cond,
                    "trigger_type": t,
                    "rate": v,
                    "rate_lo": ci[0] if ci else None,
                    "rate_hi": ci[1] if ci else None,
                }
            )
    tables += write_table(table_dir / "trigger_rates", trig_rows)
    tables += write_table(table_dir / "items", item_table(run, pred_items))
    tables += write_table(
        table_dir / "trigger_events",
        ex_mod.trigger_event_rows(run.items),
        [
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
        ],
    )
    tables += write_table(
        table_dir / "examples",
        [e.as_row() for lst in examples.values() for e in lst],
        [
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
        ],
    )
    tables += write_table(table_dir / "wer_vs_safety", [r.as_row() for r in pred])
    from stresstest.report.quality import quality_section, write_quality_tables

    quality = quality_section(run, n_resamples, seed)
    problems += quality.problems
    tables += write_quality_tables(quality, table_dir)
    from stresstest.report.error_rates import error_rate_plot, error_rate_section

    error_rates = error_rate_section(run, n_resamples, seed)
    problems += error_rates.problems
    if error_rates.computed:
        plots["error_rates"] = error_rate_plot(error_rates, plot_dir / "error_rates.png")
        tables += write_table(table_dir / "error_rates", error_rates.rows)
    effects = mitigation_effects(run, n_resamples, seed)
    if effects:
        tables += write_table(table_dir / "mitigation_effect", effects)
    removed = guard_mod.removals(run)
    if run.conditions.mitigated():
        tables += write_table(table_dir / "guard_removed", removed, guard_mod.REMOVAL_COLUMNS)
    tables += write_table(
        table_dir / "wer_vs_safety_items",
        pred_items.rows(),
        ["encounter_id", "condition", "delta_wer", "trigger_risk", "trigger_count"]
        + [n for n, _ in pred_mod.ENDPOINTS],
    )

    stage = run.manifest.get("stage_seconds") or {}
    content = ReportContent(
        run_id=run.run_id,
        title=f"Paired acoustic stress test — {run.run_id}",
        facts=run_facts(run, n_resamples, seed),
        table2=rows,
        judge=judge_description(run),
        n_resamples=n_resamples,
        seed=seed,
        alpha=ALPHA,
        problems=problems,
        trigger_rates=trig,
        trigger_rows=rows,
        examples=examples,
        predictive=pred,
        predictive_sentences=[pred_mod.sentence(r) for r in pred],
        predictive_summary=pred_mod.summary_sentence(pred),
        predictive_n_items=len(pred_items.encounter_ids),
        mitigation=_mitigation(run),
        mitigation_effects=effects,
        failures=_failures(run),
        stage_seconds=[(str(k), float(v)) for k, v in stage.items() if isinstance(v, (int, float))]
        if isinstance(stage, dict)
        else [],
        plots={k: p.relative_to(rdir) for k, p in plots.items()},
        tables=[p.relative_to(rdir) for p in tables],
        quality=quality,
        guard_sentences=guard_mod.guard_sentences(run),
        guard_removed=removed,
        error_rates=error_rates,
    )
    html_path, md_path = rdir / "report.html", rdir / "report.md"
    atomic_write_text(html_path, render_html(content, rdir))
    atomic_write_text(md_path, render_markdown(content))
    atomic_write_text(
        rdir / "report.json",
        json.dumps(
            {
                "run_id": run.run_id,
                "n_resamples": n_resamples,
                "seed": seed,
                "alpha": ALPHA,
                "problems": problems,
                "table2": table2_records(rows),
                "wer_vs_safety": [r.as_row() for r in pred],
                "wer_vs_safety_summary": content.predictive_summary,
            },
            indent=2,
            ensure_ascii=False,
            default=str,
        )
        + "\n",
    )
    return ReportPaths(
        report_dir=rdir,
        html=html_path,
        markdown=md_path,
        plots=list(plots.values()),
        tables=tables,
        problems=problems,
        summary_sentence=content.predictive_summary,
        text_table=format_text_table(rows),
    )


def cli_report(run_dir: str | Path, *, n_resamples: int = 1000, seed: int | None = None) -> str:
    """Build the report and return the text the CLI prints (table, finding, paths)."""
    paths = build_report(Path(run_dir), n_resamples=n_resamples, seed=seed)
    lines = [paths.text_table, "", f"Does WER predict safety? {paths.summary_sentence}"]
    if paths.problems:
        lines += ["", f"WARNING: {len(paths.problems)} disagreement(s) with summary.csv:"]
        lines += [f"  - {p}" for p in paths.problems[:20]]
    lines += ["", f"report: {paths.html}", f"        {paths.markdown}"]
    return "\n".join(lines)
