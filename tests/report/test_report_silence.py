"""The report's silence-probe section: halluc_per_min with its CI, the traced fields, the summary.csv check."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from synthetic_run import make_run

from stresstest.report.rundir import load_run
from stresstest.report.silence import ProbeRow, probe_section, probes_html, probes_markdown, sentence


def _add_probes(run_dir: Path, condition: str, summary_value: str | None) -> None:
    """Give ``condition``'s items silence probes (60 s each, k words for the k-th encounter) and one traced field."""
    path = run_dir / "items.jsonl"
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    k = 0
    for r in rows:
        if r["condition"] == condition and not r.get("failed"):
            r.update(probe_s=60.0, probe_words=k)
            if k == 1:
                r["probe_fields"] = [
                    {"field_id": "c9", "kind": "claim", "name": "watching", "quote": "thank you for watching"}
                ]
            k += 1
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    if summary_value is not None:
        spath = run_dir / "summary.csv"
        with open(spath, encoding="utf-8", newline="") as fh:
            table = list(csv.reader(fh))
        table[0].append("halluc_per_min")
        for row in table[1:]:
            row.append(summary_value if row[0] == condition else "")
        with open(spath, "w", encoding="utf-8", newline="") as fh:
            csv.writer(fh, lineterminator="\n").writerows(table)


def test_no_probe_condition_no_section(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path / "r", n_encounters=4, mitigation=False))
    sec = probe_section(run, 200, 1)
    assert not sec.computed and probes_markdown(sec) == [] and probes_html(sec) == ""


def test_section_rates_cis_traced_fields_and_the_summary_check(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "r", n_encounters=4, mitigation=False, failed=())
    _add_probes(run_dir, "ambient_5db", "1.5")  # 0+1+2+3 words in 4 minutes
    sec = probe_section(load_run(run_dir), 200, 1)
    assert sec.computed and sec.problems == []
    (row,) = sec.rows
    assert (row.condition, row.n, row.words, row.seconds) == ("ambient_5db", 4, 6, 240.0)
    assert row.rate == pytest.approx(1.5)
    assert row.ci is not None and row.ci[0] <= 1.5 <= row.ci[1] and row.ci[0] < row.ci[1]
    assert [(t.condition, t.field.field_id) for t in sec.traced] == [("ambient_5db", "c9")]
    md = "\n".join(probes_markdown(sec))
    assert "| ambient_5db | 4 | 6 | 4.00 | 1.50 [" in md
    assert (
        "ambient_5db: 6 words written at the probed pauses (4.0 min of inserted non-speech) over 4 encounters: "
        "1.50 per minute, 95% CI ["
    ) in md
    assert "without the probe too; the same chain without its `silence` step (not in this grid) would be" in md
    assert "| – (no twin in the grid) |" in md
    assert "With 4 encounters the interval resamples only these encounters;" in md
    assert "No word in" not in md
    assert "| thank you for watching |" in md
    assert "Record fields traced to a silence probe" in probes_html(sec)


def test_a_summary_cell_that_disagrees_is_reported(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "r", n_encounters=4, mitigation=False, failed=())
    _add_probes(run_dir, "ambient_5db", "2.5")
    sec = probe_section(load_run(run_dir), 200, 1)
    assert sec.problems == ["ambient_5db/halluc_per_min: summary.csv has '2.5', items give 1.5"]


def test_no_word_written_gives_an_upper_bound_not_zero() -> None:
    row = ProbeRow(condition="p", n=3, words=0, seconds=180.0, rate=0.0, ci=(0.0, 0.0), n_traced=0)
    text = sentence(row)
    assert "p: 0 words written at the probed pauses (3.0 min of inserted non-speech) over 3 encounters: 0.00" in text
    assert "baseline" not in text
    assert "a Poisson count with none seen allows up to 1.00 per minute (95%)" in text  # -ln(0.05) / 3 min
    assert "With 3 encounters the interval resamples only these encounters" in text
    assert "No record field was traced to such words." in text


def test_the_twin_without_the_probe_is_the_stated_baseline() -> None:
    row = ProbeRow(
        condition="silence6_dry",
        n=4,
        words=3,
        seconds=150.0,
        rate=1.2,
        ci=(0.0, 2.5),
        n_traced=0,
        twin="dry",
        twin_words=1,
    )
    text = sentence(row)
    assert (
        "The same pauses in dry (the chain without its `silence` step, same encounters) got 1 word: what the "
        "ASR writes at a turn boundary anyway, counted in the rate too."
    ) in text
    assert "not in this grid" not in text
    assert (
        sentence(
            ProbeRow(
                condition="s",
                n=4,
                words=0,
                seconds=150.0,
                rate=0.0,
                ci=(0.0, 0.0),
                n_traced=0,
                twin="dry",
                twin_words=0,
            )
        ).count("got no word either.")
        == 1
    )
