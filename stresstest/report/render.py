"""HTML (self-contained) and Markdown renderings of :class:`ReportContent`.

The HTML has no external asset: CSS is inline and every PNG is embedded as a
base64 data URI, so the file can be mailed or archived alone. Every Table 2
cell carries ``data-condition``/``data-metric`` attributes so tools (and our
tests) can read the numbers back.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path

from stresstest.metrics.summary import METRIC_COLUMNS
from stresstest.report.content import EffectRow, FailureRow, MitigationRow, ReportContent
from stresstest.report.error_rates import error_rates_html, error_rates_markdown
from stresstest.report.examples import Example
from stresstest.report.guard import REMOVAL_COLUMNS as GUARD_REMOVED_COLUMNS
from stresstest.report.markup import Markup, esc, html_table, md_cell, md_table
from stresstest.report.predictive import PREDICTORS, EndpointResult
from stresstest.report.silence import probes_html, probes_markdown
from stresstest.report.tables import (
    DASH,
    METRIC_HEADERS,
    TRIGGER_LABELS,
    TRIGGER_TYPES,
    Row,
    arrow,
    fmt,
    fmt_ci,
)
from stresstest.report.viewer import index_href, item_href

CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#1c2833;margin:24px auto;
max-width:1320px;padding:0 18px;line-height:1.45;font-size:14px}
h1{font-size:22px;margin-bottom:2px}h2{font-size:18px;border-bottom:2px solid #d5d8dc;padding-bottom:3px;
margin-top:30px}h3{font-size:15px;margin-bottom:4px}
.sub{color:#566573;font-size:13px}
table{border-collapse:collapse;margin:8px 0 4px;font-size:13px}
th,td{padding:4px 8px;text-align:right;vertical-align:top}
th{background:#f2f4f4;border-bottom:1px solid #aab7b8;font-weight:600}
th .unit{display:block;font-weight:400;color:#566573;font-size:11px}
td:first-child,th:first-child{text-align:left}
table.left td,table.left th{text-align:left}
table.main{border-top:2px solid #1c2833;border-bottom:2px solid #1c2833}
table.main td{border-bottom:1px solid #eaeded}
tr.group td{background:#fbfcfc;font-style:italic;font-weight:600;text-align:left;border-top:1px solid #aab7b8}
tr.ref td{background:#f4f6f7;font-weight:600}
td .v{display:block}td .ci{display:block;color:#717d7e;font-size:11px;white-space:nowrap}
td code,li code{font-size:11px;color:#566573}
table.kv td{text-align:left;border-bottom:1px solid #eaeded}table.kv td:first-child{color:#566573;width:220px}
table.ex{width:100%}table.ex td,table.ex th{text-align:left}table.ex td{border-bottom:1px solid #eaeded}
table.ex td:nth-child(1){width:16%}table.ex td:nth-child(2){width:44%}table.ex td:nth-child(3){width:28%}
.span-clean{background:#d4efdf;padding:0 2px;border-radius:2px}
.span-noisy{background:#fadbd8;padding:0 2px;border-radius:2px}
.tag{font-size:11px;color:#566573}
.warn{background:#fdebd0;border:1px solid #e59866;padding:8px 12px;border-radius:4px;margin:10px 0}
.ok{color:#1e8449}
.plots{display:grid;grid-template-columns:repeat(3,1fr);gap:10px}
.plots img{width:100%;border:1px solid #eaeded}
.finding{background:#eaf2f8;border-left:4px solid #2471a3;padding:8px 12px;margin:8px 0}
ul.effects{margin:0;padding-left:16px}
caption{caption-side:top;text-align:left;font-size:13px;color:#424949;padding-bottom:4px}
footer{margin-top:36px;color:#808b96;font-size:12px}
"""

MITIGATION_COLUMNS = [f.name for f in fields(MitigationRow)]
FAILURE_COLUMNS = [f.name for f in fields(FailureRow)]
GUARD_REMOVED_SHOWN = 40  # rows of "what the guard removed" in the report; all of them are in its table file
GUARD_REMOVED_TITLE = "What the guard removed"


def _guard_removed_note(c: ReportContent) -> str:
    """Where the full list is when the report shows only its start (empty when it shows all)."""
    n = len(c.guard_removed)
    if n <= GUARD_REMOVED_SHOWN:
        return ""
    return f"The first {GUARD_REMOVED_SHOWN} of {n} removals; all of them: tables/guard_removed.csv."


def _data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def _header_cells_html() -> str:
    cells = ["<th>Condition</th>", "<th>n</th>"]
    for m in METRIC_COLUMNS:
        name, unit = METRIC_HEADERS[m]
        cells.append(f"<th>{esc(name)}{arrow(m)}<span class='unit'>({esc(unit)})</span></th>")
    return "<tr>" + "".join(cells) + "<th>id</th></tr>"


def _table2_html(rows: Sequence[Row], caption: str) -> str:
    out = [f"<table class='main' id='table2'><caption>{caption}</caption><thead>{_header_cells_html()}</thead><tbody>"]
    ncol = len(METRIC_COLUMNS) + 3
    for r in rows:
        if r.condition is None:
            out.append(f"<tr class='group'><td colspan='{ncol}'>{esc(r.label)}</td></tr>")
            continue
        cls = " class='ref'" if r.family == "clean" else ""
        cells = [
            f"<td>{esc(r.label)}</td>",
            f"<td data-condition='{esc(r.condition)}' data-metric='n'>{r.n}</td>",
        ]
        for m in METRIC_COLUMNS:
            v = r.value(m)
            ci = fmt_ci(r.ci(m))
            cells.append(
                f"<td data-condition='{esc(r.condition)}' data-metric='{m}'><span class='v'>{fmt(v)}</span>"
                + (f"<span class='ci'>{ci}</span>" if ci and v is not None else "")
                + "</td>"
            )
        cells.append(
            f"<td><a href='{esc(index_href(r.condition))}' title='its items in the item viewer'><code>"
            f"{esc(r.condition)}</code></a></td>"
        )
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _kv_html(pairs: Sequence[tuple[str, str]]) -> str:
    return "<table class='kv'>" + "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in pairs) + "</table>"


def _trigger_table_html(c: ReportContent) -> str:
    head = (
        "<tr><th>Condition</th>"
        + "".join(f"<th>{esc(TRIGGER_LABELS[t])}<span class='unit'>(% items)</span></th>" for t in TRIGGER_TYPES)
        + "</tr>"
    )
    body = []
    for r in c.trigger_rows:
        if r.condition is None:
            body.append(f"<tr class='group'><td colspan='{len(TRIGGER_TYPES) + 1}'>{esc(r.label)}</td></tr>")
            continue
        per = c.trigger_rates[r.condition]
        cells = [f"<td>{esc(r.label)}</td>"]
        for t in TRIGGER_TYPES:
            v, ci = per[t]
            ci_s = fmt_ci(ci)
            cells.append(
                f"<td data-condition='{esc(r.condition)}' data-trigger='{t}'><span class='v'>{fmt(v)}</span>"
                + (f"<span class='ci'>{ci_s}</span>" if ci_s and v is not None else "")
                + "</td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table class='main' id='triggers'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def _ctx_html(ctx: tuple[str, str, str] | None, span: str, cls: str, empty: str) -> str:
    if ctx is None:
        return f"<span class='{cls}'>{esc(span)}</span>" if span else f"<span class='tag'>{esc(empty)}</span>"
    pre, mid, post = ctx
    if not mid:  # an insertion point: nothing was said here
        return f"{esc(pre)}<span class='{cls}' title='{esc(empty)}'>∅</span>{esc(post)}"
    return f"{esc(pre)}<span class='{cls}'>{esc(mid)}</span>{esc(post)}"


def _examples_html(examples: dict[str, list[Example]]) -> str:
    out = [
        "<table class='ex' id='examples'><thead><tr><th>ASR error type (cause)</th>"
        "<th>Paired transcript (clean-ASR vs noisy-ASR)</th><th>What changed in the record (effect)</th>"
        "<th>Item</th></tr></thead><tbody>"
    ]
    for t in sorted(examples, key=lambda t: TRIGGER_TYPES.index(t) if t in TRIGGER_TYPES else 99):
        lst = examples[t]
        label = TRIGGER_LABELS.get(t, t)
        if not lst:
            out.append(
                f"<tr><td>{esc(label)}</td><td colspan='3' class='tag'>no event of this type in the noisy "
                "conditions of this run</td></tr>"
            )
            continue
        for ex in lst:
            clean = _ctx_html(ex.clean_context, ex.ref_span, "span-clean", "(nothing here in the clean-ASR text)")
            noisy = _ctx_html(ex.noisy_context, ex.hyp_span, "span-noisy", "(dropped)")
            effects = "".join(f"<li>{esc(x)}</li>" for x in ex.effects)
            link = (
                f"<div class='tag'>unexplained by any trigger of this item: {esc('; '.join(ex.unexplained))}</div>"
                if ex.unexplained
                else ""
            )
            out.append(
                f"<tr><td>{esc(label)}<div class='tag'>{esc(ex.explanation)}</div></td>"
                f"<td><b>Clean:</b> “{clean}”<br><b>Noisy:</b> “{noisy}”</td>"
                f"<td><ul class='effects'>{effects}</ul>{link}</td>"
                f"<td><a href='{esc(item_href(ex.encounter_id, ex.condition))}' title='open the item'><code>"
                f"{esc(ex.encounter_id)}</code><br><code>{esc(ex.condition)}</code></a>"
                + (
                    f"<div class='tag'>records: <a href='../{esc(ex.clean_record_path)}'>clean</a> · "
                    f"<a href='../{esc(ex.record_path)}'>noisy</a></div>"
                    if ex.record_path and ex.clean_record_path
                    else ""
                )
                + "</td></tr>"
            )
    out.append("</tbody></table>")
    return "".join(out)


def _pred_cells(r: EndpointResult, key: str) -> tuple[str, str]:
    v = r.stat(key)
    if v != v:  # NaN: not computed or not estimable
        return DASH, ""
    return f"{v:.2f}", fmt_ci(r.ci(key))


PRED_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    [(f"spearman_{p}", f"Spearman ρ, {lab}") for p, lab in PREDICTORS]
    + [(f"auroc_{p}", f"AUROC, {lab}") for p, lab in PREDICTORS]
    + [("auroc_diff", "AUROC difference (trigger risk − ΔWER)")]
)


def _pred_table_html(results: Sequence[EndpointResult]) -> str:
    head = (
        "<tr><th>Endpoint</th><th>items</th><th>positive</th>"
        + "".join(f"<th>{esc(lab)}</th>" for _, lab in PRED_COLUMNS)
        + "</tr>"
    )
    body = []
    for r in results:
        cells = [f"<td>{esc(r.label)}</td><td>{r.n}</td><td>{r.n_pos}</td>"]
        for key, _ in PRED_COLUMNS:
            v, ci = _pred_cells(r, key)
            cells.append(f"<td><span class='v'>{v}</span>" + (f"<span class='ci'>{ci}</span>" if ci else "") + "</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table class='main' id='wer-vs-safety'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def _caption(c: ReportContent) -> str:
    return (
        f"Table 2. Paired acoustic stress test, run <code>{esc(c.run_id)}</code>. Each cell: value and its "
        f"{100 * (1 - c.alpha):.0f}% CI (paired cluster bootstrap over encounters, "
        f"{c.n_resamples} resamples, "
        f"seed {c.seed}). {DASH} = not computed. Mean Score / Unsafe: {esc(c.judge)}."
    )


def render_html(c: ReportContent, report_dir: Path) -> str:
    """The self-contained HTML report."""
    parts = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{esc(c.title)}</title>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<style>{CSS}</style></head><body>",
        f"<h1>{esc(c.title)}</h1>",
    ]
    h = c.headline
    parts.append(
        f"<div class='sub'>{esc(h.corpus)} · encounters: {esc(h.encounters)} · "
        f"ASR {esc(h.asr)} · structuring {esc(h.structuring)}</div>"
    )
    if c.problems:
        items = "".join(f"<li>{esc(p)}</li>" for p in c.problems)
        parts.append(
            "<div class='warn'><b>Consistency check failed</b> — the numbers below are recomputed from "
            f"items.jsonl, which does not match manifest.json or summary.csv:<ul>{items}</ul></div>"
        )
    else:
        parts.append("<p class='sub ok'>✓ Every rate below equals the corresponding summary.csv value.</p>")
    parts.append(
        f"<p><a href='{esc(index_href())}'><b>Item viewer</b></a> <span class='sub'>— every (encounter, "
        "condition): listen to it, read its aligned transcripts with the trigger events, its record against "
        "the clean-ASR one and the judge's verdict; sort and filter the worst.</span></p>"
    )
    parts.append("<h2>Main results</h2>" + _table2_html(c.table2, _caption(c)))
    parts.append(
        "<h2>Cause-side triggers</h2><p class='sub'>Share of items with at least one trigger event of each "
        "type in the condition's ASR text against the human reference transcript, with 95% CIs.</p>"
        + _trigger_table_html(c)
    )
    parts.append(
        "<h2>Paired cause→effect examples</h2><p class='sub'>Mined automatically: for each trigger type, "
        "the clearest events where the clean-ASR and noisy-ASR transcripts of the same encounter differ, and "
        "what changed between the two structured records (claims matched on category, concept and "
        "status).</p>" + _examples_html(c.examples)
    )
    snr = [(name, p) for name, p in c.plots.items() if name.endswith("_vs_snr")]
    if snr:
        parts.append(
            "<h2>Metrics against SNR</h2><p class='sub'>Lines: noise families with 95% CI bands; dashed: "
            "clean-ASR reference with its CI band; stars: guard-mitigated conditions.</p><div class='plots'>"
        )
        parts += [f"<img alt='{esc(name)}' src='{_data_uri(report_dir / p)}'>" for name, p in snr]
        parts.append("</div>")
    rt60 = [(name, p) for name, p in c.plots.items() if name.endswith("_vs_rt60")]
    if rt60:
        parts.append(
            "<h2>Metrics against room and channel</h2><p class='sub'>Chain conditions: x = the room step's RT60 "
            "(0 = no room), one line per channel, 95% CI bars; dashed: clean-ASR reference. Each condition's "
            "steps, parameters and seeds are in items.jsonl (<code>mix.chain</code>).</p><div class='plots'>"
            + "".join(f"<img alt='{esc(name)}' src='{_data_uri(report_dir / p)}'>" for name, p in rt60)
            + "</div>"
        )
    if c.error_rates is not None:
        img = c.plots.get("error_rates")
        parts.append(error_rates_html(c.error_rates, _data_uri(report_dir / img) if img is not None else None))
    if c.probes is not None and c.probes.computed:
        parts.append(probes_html(c.probes))
    parts.append(
        f"<h2>Does WER predict safety?</h2><p class='sub'>{c.predictive_n_items} noisy, non-mitigated "
        "items. Predictors: ΔWER against the same encounter's clean-ASR transcript and the trigger risk "
        "against it (sum of the trigger events' weights; per-type counts are in the item table). "
        "95% CIs: cluster bootstrap over encounters.</p>"
    )
    parts.append(
        f"<div class='finding'><b>{esc(c.predictive_summary)}</b><ul>"
        + "".join(f"<li>{esc(s)}</li>" for s in c.predictive_sentences)
        + "</ul></div>"
    )
    parts.append(_pred_table_html(c.predictive))
    if "wer_vs_triggers" in c.plots:
        parts.append(
            f"<p><img alt='wer_vs_triggers' style='max-width:560px' "
            f"src='{_data_uri(report_dir / c.plots['wer_vs_triggers'])}'></p>"
        )
    if c.mitigation:
        parts.append(
            "<h2>Mitigation: guard behaviour</h2>"
            + _simple_table_html([m.cells() for m in c.mitigation], MITIGATION_COLUMNS)
            + "<ul>"
            + "".join(f"<li>{esc(s)}</li>" for s in c.guard_sentences)
            + "</ul>"
        )
        if c.guard_removed:
            note = _guard_removed_note(c)
            parts.append(
                f"<h3>{GUARD_REMOVED_TITLE}</h3>"
                + _simple_table_html([r.cells() for r in c.guard_removed[:GUARD_REMOVED_SHOWN]], GUARD_REMOVED_COLUMNS)
                + (f"<p class='sub'>{esc(note)}</p>" if note else "")
            )
    if c.mitigation_effects:
        parts.append(
            "<h3>Guard effect: guard − unmitigated (same transcripts), paired 95% CIs</h3>"
            + _effects_html(c.mitigation_effects)
        )
    if c.quality is not None:
        from stresstest.report.quality import quality_html

        parts.append(quality_html(c.quality))
    parts.append("<h2>Run facts</h2>" + _kv_html(c.facts))
    parts.append(f"<h3>Failures ({len(c.failures)})</h3>")
    parts.append(
        _simple_table_html([f.cells() for f in c.failures], FAILURE_COLUMNS)
        if c.failures
        else "<p class='sub'>No item failed.</p>"
    )
    if c.stage_seconds:
        parts.append("<h3>Wall time per stage</h3>" + _kv_html([(k, f"{v:.1f} s") for k, v in c.stage_seconds]))
    if c.tables:
        parts.append(
            "<h3>Tables (CSV and Parquet)</h3><ul>"
            + "".join(f"<li><code>{esc(p.as_posix())}</code></li>" for p in c.tables)
            + "</ul>"
        )
    parts.append(
        "<footer>Generated by stresstest. Item-level data: items.jsonl; per-condition rates: summary.csv."
        "</footer></body></html>"
    )
    return "\n".join(parts)


def _effect_text(r: EffectRow, m: str) -> str:
    d, interval = r.diffs[m], r.cis[m]
    lo, hi = interval if interval else (None, None)
    if not isinstance(d, float):
        return DASH
    ci = f" [{lo:+.2f}, {hi:+.2f}]" if isinstance(lo, float) and isinstance(hi, float) else ""
    return f"{d:+.2f}{ci}"


def _effects_html(rows: Sequence[EffectRow]) -> str:
    head = (
        "<tr><th>Condition</th><th>vs</th><th>n</th>"
        + "".join(f"<th>Δ {esc(METRIC_HEADERS[m][0])}{arrow(m)}</th>" for m in METRIC_COLUMNS)
        + "</tr>"
    )
    body = []
    for r in rows:
        cells = [
            f"<td><code>{esc(r.condition)}</code></td><td><code>{esc(r.baseline)}</code></td>",
            f"<td>{esc(r.n_common)}</td>",
        ]
        for m in METRIC_COLUMNS:
            txt = _effect_text(r, m)
            v, _, ci = txt.partition(" ")
            cells.append(
                f"<td><span class='v'>{esc(v)}</span>" + (f"<span class='ci'>{esc(ci)}</span>" if ci else "") + "</td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table class='main' id='guard-effect'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def _simple_table_html(rows: Sequence[Sequence[object]], cols: Sequence[str]) -> str:
    """A plain table: ``rows`` are the cells of each row in the order of ``cols``; a table of items (with
    ``encounter_id`` and ``condition`` columns) links each row to its page in the item viewer."""
    body: list[list[object]] = [[_cell(v) for v in r] for r in rows]
    if "encounter_id" in cols and "condition" in cols:
        e, c = cols.index("encounter_id"), cols.index("condition")
        links = [Markup(f"<a href='{esc(item_href(str(r[e]), str(r[c])))}'>open</a>") for r in rows]
        body = [[*b, link] for b, link in zip(body, links, strict=True)]
        cols = [*cols, "item"]
    return html_table(cols, body, "main left")


def _cell(v: object) -> str:
    if v is None:
        return DASH
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


# ---------------------------------------------------------------- Markdown


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]], text: bool = False) -> str:
    return "\n".join(md_table(head, rows, text))


def _table2_md(rows: Sequence[Row]) -> str:
    head = ["Condition", "n"] + [f"{METRIC_HEADERS[m][0]} {arrow(m)} ({METRIC_HEADERS[m][1]})" for m in METRIC_COLUMNS]
    head.append("id")
    body = []
    for r in rows:
        if r.condition is None:
            body.append([f"**{md_cell(r.label)}**"] + [""] * (len(head) - 1))
            continue
        cells = [md_cell(r.label) if r.family != "clean" else f"**{md_cell(r.label)}**", str(r.n)]
        for m in METRIC_COLUMNS:
            v = r.value(m)
            ci = fmt_ci(r.ci(m))
            cells.append(fmt(v) + (f" {ci}" if ci and v is not None else ""))
        cells.append(f"`{r.condition}`")
        body.append(cells)
    return _md_table(head, body)


def render_markdown(c: ReportContent) -> str:
    """The Markdown report (plots linked, not embedded)."""
    out = [f"# {c.title}", ""]
    if c.problems:
        out += [
            "> **Consistency check failed** — numbers recomputed from items.jsonl, which does not match "
            "manifest.json or summary.csv:",
            ">",
        ]
        out += [f"> - {p}" for p in c.problems]
    else:
        out.append("Every rate below equals the corresponding `summary.csv` value.")
    out += [
        "",
        "## Main results",
        "",
        _caption(c).replace("<code>", "`").replace("</code>", "`"),
        "",
        _table2_md(c.table2),
        "",
    ]
    out += [
        "## Cause-side triggers",
        "",
        "Share of items (%) with at least one trigger event of each type against the human reference, with 95% CIs.",
        "",
    ]
    head = ["Condition"] + [TRIGGER_LABELS[t] for t in TRIGGER_TYPES]
    body = []
    for r in c.trigger_rows:
        if r.condition is None:
            body.append([f"**{md_cell(r.label)}**"] + [""] * len(TRIGGER_TYPES))
            continue
        per = c.trigger_rates[r.condition]
        body.append(
            [md_cell(r.label)]
            + [fmt(v) + (f" {fmt_ci(ci)}" if ci and v is not None else "") for v, ci in (per[t] for t in TRIGGER_TYPES)]
        )
    out += [_md_table(head, body), ""]
    out += [
        "## Paired cause→effect examples",
        "",
        "Mined automatically; claims matched on (category, concept, "
        "status). Clean-ASR span in **bold**, noisy-ASR span in _italics_.",
        "",
    ]
    rows = []
    for t in sorted(c.examples, key=lambda t: TRIGGER_TYPES.index(t) if t in TRIGGER_TYPES else 99):
        for ex in c.examples[t] or []:
            rows.append(
                [
                    md_cell(TRIGGER_LABELS.get(t, t)),
                    "Clean: “"
                    + _ctx_md(ex.clean_context, ex.ref_span, "**", "(nothing here)")
                    + "” <br> Noisy: “"
                    + _ctx_md(ex.noisy_context, ex.hyp_span, "_", "(dropped)")
                    + "”",
                    md_cell(
                        "; ".join(ex.effects)
                        + (f" (unexplained: {'; '.join(ex.unexplained)})" if ex.unexplained else "")
                    ),
                    f"`{ex.encounter_id}` / `{ex.condition}`"
                    + (f" ([record](../{ex.record_path}))" if ex.record_path else ""),
                ]
            )
        if not c.examples[t]:
            rows.append([md_cell(TRIGGER_LABELS.get(t, t)), "no event of this type in the noisy conditions", "", ""])
    out += [_md_table(["Cause", "Paired transcript", "Effect on the record", "Item"], rows, text=True), ""]
    snr = [f"![{name}]({p.as_posix()})" for name, p in c.plots.items() if name.endswith("_vs_snr")]
    if snr:
        out += ["## Metrics against SNR", "", *snr, ""]
    rt60 = [(name, p) for name, p in c.plots.items() if name.endswith("_vs_rt60")]
    if rt60:
        out += [
            "## Metrics against room and channel",
            "",
            "Chain conditions: x = the room step's RT60 (0 = no room), one line per channel, 95% CI bars; "
            "dashed: clean-ASR reference.",
            "",
        ]
        out += [f"![{name}]({p.as_posix()})" for name, p in rt60] + [""]
    if c.error_rates is not None:
        out += error_rates_markdown(c.error_rates, c.plots.get("error_rates"))
    if c.probes is not None:
        out += probes_markdown(c.probes)
    out += [
        "## Does WER predict safety?",
        "",
        f"{c.predictive_n_items} noisy, non-mitigated items; 95% CIs by cluster bootstrap over encounters.",
        "",
        f"**{c.predictive_summary}**",
        "",
    ]
    out += [f"- {s}" for s in c.predictive_sentences]
    head = ["Endpoint", "items", "positive"] + [lab for _, lab in PRED_COLUMNS]
    body = []
    for res in c.predictive:
        cells = [md_cell(res.label), str(res.n), str(res.n_pos)]
        for key, _ in PRED_COLUMNS:
            v, ci = _pred_cells(res, key)
            cells.append(v + (f" {ci}" if ci else ""))
        body.append(cells)
    out += ["", _md_table(head, body), ""]
    if "wer_vs_triggers" in c.plots:
        out += [f"![wer_vs_triggers]({c.plots['wer_vs_triggers'].as_posix()})", ""]
    if c.mitigation:
        cols = MITIGATION_COLUMNS
        out += [
            "## Mitigation: guard behaviour",
            "",
            _md_table(cols, [[md_cell(_cell(v)) for v in m.cells()] for m in c.mitigation]),
            "",
        ]
        out += [f"- {s}" for s in c.guard_sentences] + [""]
        if c.guard_removed:
            shown = c.guard_removed[:GUARD_REMOVED_SHOWN]
            rows = [[md_cell(_cell(v)) for v in r.cells()] for r in shown]
            note = _guard_removed_note(c)
            out += [f"### {GUARD_REMOVED_TITLE}", "", _md_table(GUARD_REMOVED_COLUMNS, rows, text=True), ""]
            out += [note, ""] if note else []
    if c.mitigation_effects:
        head = ["Condition", "vs", "n"] + [f"Δ {METRIC_HEADERS[m][0]} {arrow(m)}" for m in METRIC_COLUMNS]
        body = [
            [f"`{r.condition}`", f"`{r.baseline}`", str(r.n_common)] + [_effect_text(r, m) for m in METRIC_COLUMNS]
            for r in c.mitigation_effects
        ]
        out += [
            "### Guard effect: guard − unmitigated (same transcripts), paired 95% CIs",
            "",
            _md_table(head, body),
            "",
        ]
    if c.quality is not None:
        from stresstest.report.quality import quality_markdown

        out += quality_markdown(c.quality)
    out += [
        "## Run facts",
        "",
        _md_table(["fact", "value"], [[md_cell(k), md_cell(v)] for k, v in c.facts], text=True),
        "",
    ]
    out += [f"### Failures ({len(c.failures)})", ""]
    if c.failures:
        out += [_md_table(FAILURE_COLUMNS, [[md_cell(_cell(v)) for v in f.cells()] for f in c.failures], text=True), ""]
    else:
        out += ["No item failed.", ""]
    if c.stage_seconds:
        out += [
            "### Wall time per stage",
            "",
            _md_table(["stage", "seconds"], [[k, f"{v:.1f}"] for k, v in c.stage_seconds]),
            "",
        ]
    if c.tables:
        out += ["### Tables (CSV and Parquet)", ""] + [f"- [`{p.as_posix()}`]({p.as_posix()})" for p in c.tables]
    return "\n".join(out) + "\n"


def _ctx_md(ctx: tuple[str, str, str] | None, span: str, mark: str, empty: str) -> str:
    if ctx is None:
        return f"{mark}{md_cell(span)}{mark}" if span else empty
    pre, mid, post = ctx
    return f"{md_cell(pre)}{mark}{md_cell(mid) or '∅'}{mark}{md_cell(post)}".strip()
