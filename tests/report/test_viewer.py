"""The item viewer's pages: every item listed and linked, untrusted text escaped, missing audio explained."""

from __future__ import annotations

import re
from pathlib import Path

from stresstest.metrics.align import align
from stresstest.metrics.triggers import detect_triggers
from stresstest.report import ReportPaths
from stresstest.report.rundir import load_run
from stresstest.report.viewer import aligned_html


def test_index_lists_and_links_every_item(report: ReportPaths, run_dir: Path) -> None:
    run = load_run(run_dir)
    items_dir = report.report_dir / "items"
    index = (items_dir / "index.html").read_text("utf-8")
    rows = re.findall(r"<tr(?: class=hide)? data-e='([^']+)' data-c='([^']+)'", index)
    assert sorted(rows) == sorted(it.key for it in run.items)
    for href in set(re.findall(r"<a href='([^'#]+)#c-", index)):
        assert (items_dir / href).is_file(), href
    html = report.html.read_text("utf-8")
    # every Table 2 condition and every mined example leads into the viewer
    for c in run.conditions:
        assert f"href='items/index.html#condition={c.id}'" in html
    examples = _examples(report)
    assert examples
    for eid, cond in examples:
        assert f"href='items/{eid}.html#c-{cond}'" in html
        assert f"id='c-{cond}'" in (items_dir / f"{eid}.html").read_text("utf-8")


def _examples(report: ReportPaths) -> list[tuple[str, str]]:
    import csv

    with open(report.report_dir / "tables" / "examples.csv", encoding="utf-8") as fh:
        return [(r["encounter_id"], r["condition"]) for r in csv.DictReader(fh)]


def test_missing_audio_says_the_one_command_that_renders_it(report: ReportPaths, run_dir: Path) -> None:
    page = next((report.report_dir / "items").glob("*.html"))
    text = page.read_text("utf-8")
    assert "Audio not found here" in text
    assert "stresstest run RUN/config.resolved.yaml --out RUN" in text and str(run_dir) not in text  # copy-proof


def test_transcripts_are_escaped_and_events_marked() -> None:
    ref = "She takes <b>warfarin</b> 5 mg daily & has no chest pain."
    hyp = "She takes <script>alert('x')</script> 50 mg daily & has chest pain."
    events = detect_triggers(ref, hyp)
    html = aligned_html(align(ref, hyp), events)
    assert "<script" not in html and "<b>" not in html and "&lt;" in html and "script&gt;" in html
    assert {t for t in re.findall(r"data-ev='([\d ]+)'", html) for t in t.split()} == {
        str(k) for k in range(1, len(events) + 1)
    }
    assert "<del class='op d'>" in html or "<span class='op s'>" in html
