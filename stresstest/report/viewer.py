"""The item viewer: every (encounter, condition) of a run, to open, hear and compare.

``report/items/index.html`` lists every item (WER, trigger risk, triage change, Unsafe...), sortable and
filterable in the page; each row links to its encounter's page ``report/items/<encounter>.html``, which shows
per condition: the audio (and the clean speech), the reference and the hypothesis aligned word by word
(:mod:`stresstest.metrics.align`, S/D/I marked) with each trigger event's span highlighted with its type and
weight (the events the score stage stored for the item), the structured record with each field's evidence
quote highlighted in the transcript, the record's differences from the clean-ASR record, the judge's verdict
and, for a guard condition, what the Guard and the evidence filter removed.

Pages are static files (inline CSS and a few lines of script, no network); links are relative, so a copied
run directory still works. Audio lives in the stage cache: each file is hard-linked into
``report/items/audio/`` (no copy; the run directory then keeps it), or, where a link cannot be made
(another file system), referenced by a relative path to the cache. A page whose audio is not found says
the one command that renders it again. Every transcript and record string is escaped.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stresstest.metrics.align import AlignedPair, align
from stresstest.metrics.summary import aggregate
from stresstest.metrics.triggers import trigger_risk
from stresstest.report.examples import diff_records, quote_ranges
from stresstest.report.guard import item_removals
from stresstest.report.markup import esc
from stresstest.report.rundir import CLEAN, RunData
from stresstest.results import ItemScore, TriggerEvent
from stresstest.schema import ClinicalRecord

VIEWER_DIR = "items"
UNSAFE_MAX_SCORE = 2  # Unsafe: judge score <= 2 (stresstest.metrics.summary)

CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#1c2833;margin:16px auto;
max-width:1320px;padding:0 18px;line-height:1.5;font-size:14px}
h1{font-size:20px;margin:4px 0}h2{font-size:17px;border-bottom:2px solid #d5d8dc;margin-top:26px}
h3{font-size:14px;margin:10px 0 4px}nav a{margin-right:10px}
.sub{color:#566573;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{padding:3px 7px;text-align:left;vertical-align:top;border-bottom:1px solid #eaeded}
th{background:#f2f4f4;border-bottom:1px solid #aab7b8;font-weight:600}
#items th{cursor:pointer;white-space:nowrap}#items td:nth-child(n+3){text-align:right}
#items td:nth-child(7){text-align:left}
#items tr.hide{display:none}
.bad{color:#b03a2e;font-weight:600}.ok{color:#1e8449}
.filters label{margin-right:14px}
.tx{background:#fbfcfc;border:1px solid #eaeded;padding:8px 10px;border-radius:4px;max-height:340px;
overflow-y:auto;font-size:13.5px}
del.op{background:#fadbd8;text-decoration:line-through}ins.op{background:#d4efdf;text-decoration:none}
span.s{border-bottom:2px solid #e67e22}span.s del{background:#fdebd0;text-decoration:line-through}
span.s ins{background:#fdebd0;text-decoration:none;font-weight:600}
.ev{outline:2px solid #8e44ad;border-radius:2px}
sup.evn{color:#8e44ad;font-weight:700;font-size:10px}
mark.q{background:#fcf3cf}
ol.events li,ul.diff li{margin:2px 0}
code{font-size:12px;color:#566573}
.cond{border-top:3px solid #aab7b8;margin-top:22px;padding-top:4px}
.kv span{margin-right:16px}
audio{height:32px;vertical-align:middle}
.miss{background:#fdebd0;border:1px solid #e59866;padding:4px 8px;border-radius:4px;display:none}
.legend span{margin-right:12px}
"""

INDEX_PAGE = 200  # rows the index lays out at first (every row is in the page; "show all" lays out the rest)

INDEX_JS = """
(function(){
var PAGE=PAGE_ROWS;
var t=document.getElementById('items'),tb=t.tBodies[0],rows=[].slice.call(tb.rows),
    q=document.getElementById('q'),cond=document.getElementById('cond'),n=document.getElementById('shown'),
    boxes=[].slice.call(document.querySelectorAll('input[data-f]'));
var limit=PAGE,all=document.getElementById('all'),m=document.getElementById('match');
function apply(){
  var s=q.value.trim().toLowerCase(),c=cond.value,k=0,shown=0;
  rows.forEach(function(r){
    var ok=(!s||r.dataset.e.toLowerCase().indexOf(s)>=0)&&(!c||r.dataset.c===c);
    boxes.forEach(function(b){if(b.checked&&r.dataset[b.dataset.f]!=='1')ok=false;});
    if(ok)k++;
    var show=ok&&shown<limit;if(show)shown++;
    r.classList.toggle('hide',!show);});
  n.textContent=shown;m.textContent=k;all.style.display=shown<k?'':'none';
}
all.addEventListener('click',function(){limit=Infinity;apply();});
function sortBy(i,d){
  var key=function(r){var x=r.cells[i].textContent;return x===''||x==='\u2013'?null:x;};
  rows.sort(function(a,b){
    var x=key(a),y=key(b);
    if(x===null||y===null)return x===y?0:(x===null?1:-1);
    var nx=parseFloat(x),ny=parseFloat(y);
    var r=(isNaN(nx)||isNaN(ny))?(x<y?-1:x>y?1:0):nx-ny;return d==='asc'?r:-r;});
  rows.forEach(function(r){tb.appendChild(r);});
  apply();
}
[].slice.call(t.tHead.rows[0].cells).forEach(function(th,i){
  th.addEventListener('click',function(){
    var d=th.dataset.dir==='desc'?'asc':'desc';th.dataset.dir=d;sortBy(i,d);});});
[].slice.call(document.querySelectorAll('button[data-col]')).forEach(function(b){
  b.addEventListener('click',function(){sortBy(+b.dataset.col,b.dataset.dir);});});
q.addEventListener('input',apply);cond.addEventListener('change',apply);
boxes.forEach(function(b){b.addEventListener('change',apply);});
// A link can carry a view: #condition=babble_5db&nu=1&sort=4&dir=desc (filters, then a column to sort by).
var h=new URLSearchParams(location.hash.slice(1));
if(h.get('condition'))cond.value=h.get('condition');
if(h.get('encounter'))q.value=h.get('encounter');
boxes.forEach(function(b){if(h.get(b.dataset.f)==='1')b.checked=true;});
if(h.get('sort'))sortBy(+h.get('sort'),h.get('dir')==='asc'?'asc':'desc');
else if(cond.value||q.value||boxes.some(function(b){return b.checked;}))apply();
window.addEventListener('load',function(){void document.body.offsetHeight;
  document.body.dataset.readyMs=Math.round(performance.now());});
})();
""".replace("PAGE_ROWS", str(INDEX_PAGE))

PAGE_JS = """
(function(){
[].slice.call(document.querySelectorAll('audio')).forEach(function(a){
  function miss(){a.dataset.state='missing';var m=document.getElementById(a.dataset.miss);if(m)m.style.display='block';}
  a.addEventListener('loadedmetadata',function(){a.dataset.state='loaded';a.dataset.duration=a.duration.toFixed(2);});
  a.addEventListener('error',miss);
  var s=a.querySelector('source');if(s)s.addEventListener('error',miss);
});
})();
"""


@dataclass(frozen=True)
class ViewerPaths:
    """What :func:`write_viewer` wrote (absolute paths)."""

    index: Path
    pages: list[Path]
    audio_linked: int
    audio_referenced: int
    audio_missing: int


def item_page(encounter_id: str) -> str:
    """An encounter page's file name inside ``report/items/``."""
    return f"{encounter_id}.html"


def item_href(encounter_id: str, condition: str, from_report: bool = True) -> str:
    """The link to one item's section (from report.html by default, else from a viewer page)."""
    return (f"{VIEWER_DIR}/" if from_report else "") + f"{item_page(encounter_id)}#c-{condition}"


def index_href(condition: str | None = None) -> str:
    """The link to the item index from report.html, filtered to one condition when given."""
    return f"{VIEWER_DIR}/index.html" + (f"#condition={condition}" if condition else "")


def _unsafe(it: ItemScore | None) -> bool | None:
    if it is None or it.judge_score is None:
        return None
    return float(it.judge_score) <= UNSAFE_MAX_SCORE


def _f(v: float | None, nd: int = 1) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


RERUN_COMMAND = "stresstest run RUN/config.resolved.yaml --out RUN"  # RUN: the run directory (above report/)


class _Audio:
    """Audio files of the viewer: each cache file linked once into ``items/audio/``."""

    def __init__(self, items_dir: Path) -> None:
        self.dir = items_dir / "audio"
        self.done: dict[str, str | None] = {}
        self.linked = self.referenced = self.missing = 0

    def href(self, it: ItemScore | None, base: str) -> str | None:
        if it is None or not it.audio_path:
            return None
        if it.audio_path in self.done:
            return self.done[it.audio_path]
        src = Path(it.audio_path)
        href: str | None
        if not src.is_file():
            href = None
            self.missing += 1
        else:
            dst = self.dir / it.encounter_id / f"{base}{src.suffix or '.wav'}"
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
                href = dst.relative_to(self.dir.parent).as_posix()
                self.linked += 1
            except OSError:  # another file system (or no hard links): point at the cache file
                href = Path(os.path.relpath(src, self.dir.parent)).as_posix()
                self.referenced += 1
        self.done[it.audio_path] = href
        return href


def _read_detail(run: RunData, it: ItemScore) -> dict[str, Any]:
    p = run.run_dir / (it.scores_path or f"scores/{it.condition}/{it.encounter_id}.json")
    try:
        d = json.loads(p.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def _events(raw: Any) -> list[TriggerEvent]:
    out = []
    for e in raw or []:
        try:
            out.append(e if isinstance(e, TriggerEvent) else TriggerEvent.model_validate(e))
        except ValueError:
            continue
    return out


# ------------------------------------------------------------------ aligned transcript


def _members(tokens: Sequence[Any], events: Sequence[TriggerEvent], side: str) -> list[list[int]]:
    """For each token, the (1-based) numbers of the events whose span on ``side`` covers it."""
    out: list[list[int]] = [[] for _ in tokens]
    for k, ev in enumerate(events, start=1):
        a, b = (ev.ref_start, ev.ref_end) if side == "ref" else (ev.hyp_start, ev.hyp_end)
        for i, t in enumerate(tokens):
            if t.start < b and t.end > a:
                out[i].append(k)
    return out


def _word_texts(text: str, tokens: Sequence[Any]) -> list[str]:
    """Each token's original text up to the next token's (punctuation, and words the normalisation drops,
    stay with the token before them); '' for a token that shares its original word with the one before."""
    starts = [t.start for t in tokens]
    out = [""] * len(starts)
    nxt = len(text)  # the next greater start, walking backwards
    for i in range(len(starts) - 1, -1, -1):
        s = starts[i]
        if not (i > 0 and starts[i - 1] == s):
            out[i] = text[s:nxt].strip()
        if i == 0 or starts[i - 1] < s:
            nxt = s
    return out


def aligned_html(pair: AlignedPair, events: Sequence[TriggerEvent], view: str = "ref") -> str:
    """The hypothesis aligned with its reference: substitutions (reference struck, hypothesis after),
    deletions struck, insertions underlined, and every word of a trigger event's span outlined, numbered."""
    rt, ht = pair.ref.tokens, pair.hyp.tokens
    rtext, htext = _word_texts(pair.ref.original, rt), _word_texts(pair.hyp.original, ht)
    rmem, hmem = _members(rt, events, "ref"), _members(ht, events, "hyp")
    labelled: set[int] = set()
    types = {k: ev.type for k, ev in enumerate(events, start=1)}

    def mark(html: str, evs: list[int]) -> str:
        if not evs:
            return html
        new = [k for k in evs if k not in labelled]
        labelled.update(new)
        tag = "".join(f"<sup class='evn'>{k}</sup>" for k in new)
        title = "; ".join(f"{k}: {types[k]}" for k in evs)
        return (
            f"<span class='ev' data-view='{view}' data-ev='{' '.join(map(str, evs))}' title='{esc(title)}'>"
            f"{html}</span>{tag}"
        )

    def side(words: list[str], mem: list[list[int]], lo: int, hi: int) -> tuple[str, list[int]]:
        evs = sorted({k for i in range(lo, hi) for k in mem[i]})
        return " ".join(esc(w) for w in words[lo:hi] if w), evs

    parts: list[str] = []
    for o in pair.ops:
        if o.op == "equal":
            for i in range(o.hyp_start, o.hyp_end):
                w = htext[i]
                if not w:
                    continue
                r = o.ref_start + (i - o.hyp_start)
                evs = sorted(set(hmem[i]) | set(rmem[r] if r < len(rmem) else []))
                parts.append(mark(esc(w), evs))
        elif o.op == "sub":
            rw, re_ = side(rtext, rmem, o.ref_start, o.ref_end)
            hw, he = side(htext, hmem, o.hyp_start, o.hyp_end)
            parts.append(mark(f"<span class='op s'><del>{rw}</del> <ins>{hw}</ins></span>", sorted(set(re_) | set(he))))
        elif o.op == "del":
            rw, re_ = side(rtext, rmem, o.ref_start, o.ref_end)
            parts.append(mark(f"<del class='op d'>{rw}</del>", re_))
        else:
            hw, he = side(htext, hmem, o.hyp_start, o.hyp_end)
            parts.append(mark(f"<ins class='op i'>{hw}</ins>", he))
    return " ".join(parts)


def _events_html(events: Sequence[TriggerEvent], view: str) -> str:
    if not events:
        return "<p class='sub'>No trigger event.</p>"
    lis = []
    for ev in events:  # the list's numbers are the ones beside the highlighted spans
        lis.append(
            f"<li class='event' data-view='{view}' data-type='{esc(ev.type)}' data-weight='{ev.weight:g}' "
            f"data-ref-start='{ev.ref_start}' data-ref-end='{ev.ref_end}' data-hyp-start='{ev.hyp_start}' "
            f"data-hyp-end='{ev.hyp_end}'><b>{esc(ev.type)}</b> (weight {ev.weight:g}): "
            f"“{esc(ev.ref_span)}” → “{esc(ev.hyp_span)}”"
            + (f" <span class='sub'>— {esc(ev.explanation)}</span>" if ev.explanation else "")
            + "</li>"
        )
    return f"<ol class='events'>{''.join(lis)}</ol>"


# ------------------------------------------------------------------ record


def _evidence_html(text: str, rec: ClinicalRecord) -> str:
    """The transcript with every evidence quote of the record highlighted (field ids in the title)."""
    spans: list[tuple[int, int, str]] = []
    for fid, quotes in sorted(rec.field_evidence.items()):
        spans += [(a, b, fid) for a, b in quote_ranges(text, quotes)]
    if not spans:
        return esc(text)
    cuts = sorted({0, len(text), *(a for a, _, _ in spans), *(b for _, b, _ in spans)})
    out = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        fids = sorted({f for s, e, f in spans if s <= a and e >= b})
        seg = esc(text[a:b])
        out.append(
            f"<mark class='q' data-f='{esc(' '.join(fids))}' title='{esc(', '.join(fids))}'>{seg}</mark>"
            if fids
            else seg
        )
    return "".join(out)


def _record_html(rec: ClinicalRecord) -> str:
    ev = rec.field_evidence

    def quotes(fid: str) -> str:
        return "; ".join(f"“{esc(q)}”" for q in ev.get(fid, [])) or "<span class='sub'>no quote</span>"

    rows = [("triage", "triage", esc(rec.triage.level), esc(rec.triage.rationale), quotes("triage"))]
    if rec.chief_complaint:
        rows.append(("chief_complaint", "chief complaint", esc(rec.chief_complaint), "", quotes("chief_complaint")))
    for c in rec.claims:
        detail = " ".join(esc(x) for x in (c.value, c.unit, f"({c.time})" if c.time else None) if x)
        rows.append((c.id, f"claim · {c.category}", f"{esc(c.concept)} <i>{esc(c.status)}</i>", detail, quotes(c.id)))
    for fl in rec.safety_flags:
        rows.append((fl.id, f"flag · {fl.kind}", esc(fl.name), esc(fl.detail or ""), quotes(fl.id)))
    body = "".join(
        f"<tr><td><code>{esc(i)}</code></td><td>{k}</td><td>{w}</td><td>{d}</td><td>{q}</td></tr>"
        for i, k, w, d, q in rows
    )
    return (
        "<table class='rec'><thead><tr><th>id</th><th>field</th><th>what</th><th>detail</th>"
        f"<th>evidence quote</th></tr></thead><tbody>{body}</tbody></table>"
    )


# ------------------------------------------------------------------ pages


def _audio_html(href: str | None, label: str, miss_id: str) -> str:
    msg = (
        f"<div class='miss' id='{miss_id}'>Audio not found here. It lives in the stage cache; render it "
        f"again (and rebuild these pages) with one command, RUN being this run's directory (the folder above "
        f"report/): <code>{esc(RERUN_COMMAND)}</code></div>"
    )
    if href is None:
        return f"<div>{esc(label)}: </div>" + msg.replace("class='miss'", "class='miss' style='display:block'")
    return (
        f"<div>{esc(label)}: <audio controls preload='metadata' data-miss='{miss_id}'>"
        f"<source src='{esc(href)}'></audio></div>{msg}"
    )


def _section(
    run: RunData,
    it: ItemScore,
    clean_it: ItemScore | None,
    audio: _Audio,
    clean_href: str | None,
    clean_rec: ClinicalRecord | None,
) -> str:
    cond = it.condition
    c = next((x for x in run.conditions if x.id == cond), None)
    base = c.base if c is not None else cond
    wer = aggregate([it])["wer"] if not it.failed else None
    risk = trigger_risk(it.triggers_vs_clean) if it.triggers_vs_clean is not None and cond != CLEAN else None
    unsafe = _unsafe(it)
    head = (
        f"<section class='cond' id='c-{esc(cond)}' data-condition='{esc(cond)}'><h2>{esc(cond)}</h2>"
        "<div class='kv'>"
        f"<span>WER {_f(wer)}%</span>"
        + (
            f"<span>SNR measured {_f(it.measured_snr_db, 2)} dB (target {_f(it.target_snr_db, 1)})</span>"
            if it.measured_snr_db is not None
            else ""
        )
        + (f"<span>trigger risk vs clean ASR {_f(risk, 2)}</span>" if risk is not None else "")
        + f"<span>triage {esc(it.triage_clean or '–')} → {esc(it.triage or '–')}"
        + (f" (gold {esc(it.triage_gold)})" if it.triage_gold else "")
        + "</span>"
        + f"<span>judge score {esc(it.judge_score if it.judge_score is not None else '–')}"
        + (" <b class='bad'>UNSAFE</b>" if unsafe else "")
        + "</span></div>"
    )
    out = [head]
    if it.failed:
        out.append(f"<p class='bad'>Failed: {esc(it.error or 'failed')}</p>")
    href = audio.href(it, base)
    out.append(_audio_html(href, f"audio of {base}", f"m-{cond}"))
    if cond != CLEAN:
        out.append(_audio_html(clean_href, "clean speech", f"mc-{cond}"))
    if base != cond:
        out.append(
            f"<p class='sub'>The same audio and ASR transcript as <a href='#c-{esc(base)}'>{esc(base)}</a> "
            "(aligned there, with its trigger events); this condition differs in its record (the guard).</p>"
        )
    elif it.reference_text and it.hypothesis_text is not None:
        detail = _read_detail(run, it)
        ev_ref = _events(detail.get("triggers_vs_reference"))
        pair = align(it.reference_text, it.hypothesis_text)
        out.append(
            f"<h3>Human reference → ASR transcript ({it.asr_sub or 0} S, {it.asr_del or 0} D, "
            f"{it.asr_ins or 0} I of {it.ref_words or 0} words; trigger events vs the reference)</h3>"
            f"<div class='tx' data-view='ref'>{aligned_html(pair, ev_ref)}</div>" + _events_html(ev_ref, "ref")
        )
        if cond != CLEAN and clean_it is not None and clean_it.hypothesis_text is not None:
            ev_c = _events(it.triggers_vs_clean)
            pc = align(clean_it.hypothesis_text, it.hypothesis_text)
            out.append(
                "<details><summary><b>Clean ASR → this ASR transcript</b> (the trigger events behind the "
                f"report's examples and the trigger risk: {len(ev_c)} events, risk {_f(risk, 2)})</summary>"
                f"<div class='tx' data-view='clean'>{aligned_html(pc, ev_c, 'clean')}</div>"
                + _events_html(ev_c, "clean")
                + "</details>"
            )
    rec = run.record(it)
    if rec is not None:
        out.append(f"<h3>Structured record</h3>{_record_html(rec)}")
        if it.hypothesis_text:
            out.append(
                "<details><summary>The ASR transcript with the record's evidence quotes</summary>"
                f"<div class='tx'>{_evidence_html(it.hypothesis_text, rec)}</div></details>"
            )
        if cond != CLEAN:
            lines = diff_records(clean_rec, rec).describe(it.triage_gold)
            out.append(
                "<h3>Against the clean-ASR record</h3><ul class='diff'>"
                + "".join(f"<li>{esc(x)}</li>" for x in lines)
                + "</ul>"
            )
    elif not it.failed:
        out.append("<p class='sub'>No structured record for this item.</p>")
    if it.judge_score is not None:
        reasons = _read_detail(run, it).get("judge_reasons") or []
        out.append(
            f"<h3>Judge</h3><p>score {esc(it.judge_score)} ({esc(_judge_name(it))})"
            + (" — <b class='bad'>Unsafe</b>" if unsafe else "")
            + "</p>"
            + ("<ul>" + "".join(f"<li>{esc(r)}</li>" for r in reasons) + "</ul>" if reasons else "")
        )
    if it.mitigated:
        rem = item_removals(it)
        if rem is None:
            out.append("<h3>Guard</h3><p class='sub'>What the guard removed is not recorded for this item.</p>")
        else:
            body = "".join(
                f"<tr><td>{esc(r.what)}</td><td>{esc(r.removed_by)}</td><td>{esc(r.why)}</td></tr>" for r in rem
            )
            out.append(
                "<h3>What the Guard and the evidence filter removed</h3>"
                + (
                    f"<table><thead><tr><th>what</th><th>removed by</th><th>why</th></tr></thead>"
                    f"<tbody>{body}</tbody></table>"
                    if rem
                    else "<p>Nothing: the record equals its Draft.</p>"
                )
            )
    out.append("</section>")
    return "".join(out)


def _judge_name(it: ItemScore) -> str:
    j = it.judge
    if j is None:
        return "judge not named"
    return str(j if isinstance(j, str) else (j.model or "judge"))


def _page(title: str, body: str, js: str = "") -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{body}"
        + (f"<script>{js}</script>" if js else "")
        + "</body></html>\n"
    )


def _encounter_page(run: RunData, eid: str, items: list[ItemScore], audio: _Audio) -> str:
    by_cond = {it.condition: it for it in items}
    clean_it = by_cond.get(CLEAN)
    clean_href = audio.href(clean_it, CLEAN)
    clean_rec = run.record(clean_it)
    order = [c.id for c in run.conditions if c.id in by_cond]
    nav = " ".join(f"<a href='#c-{esc(c)}'>{esc(c)}</a>" for c in order)
    body = (
        f"<nav><a href='index.html'>← all items</a><a href='../report.html'>report</a></nav>"
        f"<h1>Encounter {esc(eid)}</h1><p class='sub'>Run {esc(run.run_id)} · conditions: {nav}</p>"
        "<p class='legend sub'><span><del class='op'>deleted</del></span><span><ins class='op'>inserted"
        "</ins></span><span><span class='op s'><del>substituted</del> <ins>as heard</ins></span></span>"
        "<span><span class='ev'>trigger event span</span><sup class='evn'>n</sup> (numbered as listed)</span>"
        "<span><mark class='q'>evidence quote</mark></span></p>"
        + "".join(_section(run, by_cond[c], clean_it, audio, clean_href, clean_rec) for c in order)
    )
    return _page(f"{eid} · {run.run_id}", body, PAGE_JS)


def _index_page(run: RunData, groups: dict[str, list[ItemScore]]) -> str:
    clean = {eid: next((i for i in its if i.condition == CLEAN), None) for eid, its in groups.items()}
    heads = [
        "encounter",
        "condition",
        "WER %",
        "ΔWER",
        "trigger risk",
        "events",
        "triage clean → here",
        "triage changed",
        "judge",
        "Unsafe",
        "Unsafe on clean",
        "failed",
    ]
    rows: list[str] = []
    order = {c.id: k for k, c in enumerate(run.conditions)}
    for eid in sorted(groups):
        ci = clean[eid]
        w0 = aggregate([ci])["wer"] if ci is not None and not ci.failed else None
        for it in sorted(groups[eid], key=lambda r: order.get(r.condition, 99)):
            wer = aggregate([it])["wer"] if not it.failed else None
            ev = it.triggers_vs_clean if it.condition != CLEAN else None
            risk = trigger_risk(ev) if ev is not None else None
            u, u0 = _unsafe(it), _unsafe(ci)
            changed = it.triage_match == 0
            cells = [
                f"<a href='{esc(item_page(eid))}#c-{esc(it.condition)}'>{esc(eid)}</a>",
                esc(it.condition),
                _f(wer),
                "–" if wer is None or w0 is None else f"{wer - w0:+.1f}",
                _f(risk, 2),
                "–" if ev is None else str(len(ev)),
                esc(f"{it.triage_clean or '–'} → {it.triage or '–'}"),
                "" if it.triage_match is None else ("<b class='bad'>yes</b>" if changed else "no"),
                esc(it.judge_score if it.judge_score is not None else "–"),
                "–" if u is None else ("<b class='bad'>yes</b>" if u else "no"),
                "–" if u0 is None else ("yes" if u0 else "no"),
                "<b class='bad'>failed</b>" if it.failed else "",
            ]
            flags = {"u": u is True, "nu": u is True and u0 is False, "t": changed, "f": bool(it.failed)}
            attrs = "".join(f" data-{k}=1" for k, v in flags.items() if v)
            # End tags of cells are implied (HTML): a row of the paper grid's 2448 stays ~200 bytes.
            hide = " class=hide" if len(rows) >= INDEX_PAGE else ""  # laid out on demand: the index opens fast
            rows.append(f"<tr{hide} data-e='{esc(eid)}' data-c='{esc(it.condition)}'{attrs}><td>" + "<td>".join(cells))
    opts = "".join(f"<option value='{esc(c.id)}'>{esc(c.id)}</option>" for c in run.conditions)
    n = len(rows)
    body = (
        "<nav><a href='../report.html'>← report</a></nav>"
        f"<h1>Items of run {esc(run.run_id)}</h1>"
        f"<p class='sub'>Every (encounter, condition): {n} items. Click a column to sort (again to reverse), "
        "an encounter to open its page (audio, aligned transcripts with trigger events, record, diff against "
        "clean, judge). Trigger risk: the summed weights of the trigger events against the clean ASR.</p>"
        "<p class='filters'><label>encounter <input id='q' size='10'></label>"
        f"<label>condition <select id='cond'><option value=''>all</option>{opts}</select></label>"
        "<label><input type='checkbox' data-f='nu'> unsafe here but safe on clean</label>"
        "<label><input type='checkbox' data-f='u'> unsafe</label>"
        "<label><input type='checkbox' data-f='t'> triage changed</label>"
        "<label><input type='checkbox' data-f='f'> failed</label>"
        f" showing <b id='shown'>{min(n, INDEX_PAGE)}</b> of <b id='match'>{n}</b> matching"
        f" <button id='all'{'' if n > INDEX_PAGE else ' style=display:none'}>show all</button></p>"
        "<p class='filters'>Worst first: <button data-col='4' data-dir='desc'>trigger risk</button> "
        "<button data-col='3' data-dir='desc'>ΔWER</button> <button data-col='8' data-dir='asc'>judge score"
        "</button> <button data-col='2' data-dir='desc'>WER</button></p>"
        "<table id='items'><thead><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in heads)
        + f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return _page(f"Items · {run.run_id}", body, INDEX_JS)


def write_viewer(run: RunData, report_dir: Path) -> ViewerPaths:
    """Write ``report_dir/items/`` (index and one page per encounter); a previous build's pages and audio
    links are replaced."""
    items_dir = report_dir / VIEWER_DIR
    if items_dir.is_dir():
        shutil.rmtree(items_dir)
    items_dir.mkdir(parents=True)
    groups: dict[str, list[ItemScore]] = {}
    for it in run.items:
        groups.setdefault(it.encounter_id, []).append(it)
    audio = _Audio(items_dir)
    pages = []
    for eid in sorted(groups):
        p = items_dir / item_page(eid)
        p.write_text(_encounter_page(run, eid, groups[eid], audio), "utf-8")
        pages.append(p)
    index = items_dir / "index.html"
    index.write_text(_index_page(run, groups), "utf-8")
    return ViewerPaths(index, pages, audio.linked, audio.referenced, audio.missing)
