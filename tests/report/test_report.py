"""build_report on a synthetic run: files, numbers vs summary.csv, CIs, examples, determinism."""

from __future__ import annotations

import base64
import csv
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from synthetic_run import REPORT_RESAMPLES as N_RESAMPLES
from synthetic_run import REPORT_SEED as SEED
from synthetic_run import make_run

from stresstest.errors import ReportError
from stresstest.metrics.bootstrap import bootstrap_cis
from stresstest.metrics.summary import METRIC_COLUMNS, SUMMARY_COLUMNS, aggregate
from stresstest.report import ReportPaths, build_report, cli_report
from stresstest.report.rundir import load_run

NUM = re.compile(r"^(-?\d+\.\d+)(?: \[(-?\d+\.\d+), (-?\d+\.\d+)\])?$")


def _summary(run_dir: Path) -> dict[str, dict[str, str]]:
    with open(run_dir / "summary.csv", encoding="utf-8") as fh:
        return {r["condition"]: r for r in csv.DictReader(fh)}


def _md_table2(md: str) -> tuple[list[str], dict[str, list[str]]]:
    """Header and {condition id: cells} of the Markdown Table 2."""
    section = md.split("## Main results", 1)[1].split("## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    split = [[c.strip() for c in ln.strip().strip("|").split(" | ")] for ln in lines]
    header = split[0]
    rows = {}
    for cells in split[2:]:
        m = re.fullmatch(r"`([^`]+)`", cells[-1])
        if m:
            rows[m.group(1)] = cells
    return header, rows


class _CellParser(HTMLParser):
    """Collects Table 2 cells (value text and CI text) keyed by (condition, metric)."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, str], list[str]] = {}
        self._key: tuple[str, str] | None = None
        self._in_table2 = False
        self.imgs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._in_table2 = a.get("id") == "table2"
        if tag == "img":
            self.imgs.append(a.get("src") or "")
        if tag == "td" and self._in_table2 and a.get("data-metric"):
            self._key = (str(a["data-condition"]), str(a["data-metric"]))
            self.cells[self._key] = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._key = None
        if tag == "table":
            self._in_table2 = False

    def handle_data(self, data: str) -> None:
        if self._key is not None and data.strip():
            self.cells[self._key].append(data.strip())


def _close(shown: str, csv_cell: str) -> None:
    # summary.csv holds 4 decimals, the report 2: equal to display precision.
    assert abs(float(shown) - float(csv_cell)) <= 0.005 + 1e-4, (shown, csv_cell)


def test_files_written(report: ReportPaths) -> None:
    assert report.html.is_file() and report.markdown.is_file()
    names = {p.name for p in report.plots}
    assert {f"{m}_vs_snr.png" for m in METRIC_COLUMNS} <= names
    for p in report.plots:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    stems = {p.with_suffix("").name for p in report.tables}
    assert {"table2", "items", "trigger_events", "trigger_rates", "examples", "wer_vs_safety"} <= stems
    for p in report.tables:
        if p.suffix == ".parquet":
            t = pq.read_table(p)
            with open(p.with_suffix(".csv"), encoding="utf-8") as fh:
                rows = list(csv.reader(fh))
            assert t.num_rows == len(rows) - 1
            assert t.column_names == rows[0]
    t2 = pq.read_table(report.report_dir / "tables" / "table2.parquet").to_pylist()
    assert [r["condition"] for r in t2][0] == "clean"
    assert {"wer", "wer_lo", "wer_hi"} <= set(t2[0])


def test_markdown_numbers_equal_summary_csv(run_dir: Path, report: ReportPaths) -> None:
    summary = _summary(run_dir)
    header, rows = _md_table2(report.markdown.read_text("utf-8"))
    assert set(rows) == set(summary)
    metric_col = {m: 2 + k for k, m in enumerate(METRIC_COLUMNS)}
    assert header[1] == "n"
    run = load_run(run_dir)
    checked = 0
    for cond, cells in rows.items():
        assert cells[1] == summary[cond]["n"]
        point = aggregate(run.ok_items(cond), is_clean=cond == "clean")
        for m, col in metric_col.items():
            shown = cells[col]
            if summary[cond][m] == "":
                assert shown == "–", (cond, m, shown)
                assert point[m] is None
                continue
            mt = NUM.match(shown)
            assert mt, (cond, m, shown)
            _close(mt.group(1), summary[cond][m])
            assert mt.group(1) == f"{point[m]:.2f}"
            checked += 1
    assert checked >= 70  # 9 conditions × 9 metrics minus the clean ErrProp


def test_markdown_headers_have_arrows_and_units(report: ReportPaths) -> None:
    header, _ = _md_table2(report.markdown.read_text("utf-8"))
    assert "WER ↓ (%)" in header and "TriageMatch ↑ (%)" in header and "Mean Score ↑ (1–5 scale)" in header
    md = report.markdown.read_text("utf-8")
    assert "**Non-Stationary Semantic Interference (babble" in md
    assert "**Stationary Ambient Interference (ambient" in md
    assert "**Mitigation Study" in md
    assert "judge backend=openai, model=synthetic-judge" in md


def test_html_numbers_and_cis(run_dir: Path, report: ReportPaths) -> None:
    summary = _summary(run_dir)
    p = _CellParser()
    p.feed(report.html.read_text("utf-8"))
    run = load_run(run_dir)
    conds = run.conditions.ids
    cis = bootstrap_cis(run.items_by_condition(), conds, n_resamples=N_RESAMPLES, seed=SEED)
    for cond in conds:
        assert p.cells[(cond, "n")] == [summary[cond]["n"]]
        for m in METRIC_COLUMNS:
            cell = p.cells[(cond, m)]
            if summary[cond][m] == "":
                assert cell == ["–"]
                continue
            _close(cell[0], summary[cond][m])
            lo, hi = cis[cond][m]
            assert cell[1] == f"[{lo:.2f}, {hi:.2f}]", (cond, m, cell)


def test_trigger_rates_equal_summary(run_dir: Path, report: ReportPaths) -> None:
    summary = _summary(run_dir)
    rows = pq.read_table(report.report_dir / "tables" / "trigger_rates.parquet").to_pylist()
    assert rows
    for r in rows:
        _close(f"{r['rate']:.2f}", summary[r["condition"]][f"trig_{r['trigger_type']}"])
        assert r["rate_lo"] <= r["rate"] <= r["rate_hi"]
    assert not report.problems


def test_html_is_self_contained(report: ReportPaths) -> None:
    text = report.html.read_text("utf-8")
    p = _CellParser()
    p.feed(text)
    assert len(p.imgs) >= len(METRIC_COLUMNS) + 1
    assert all(src.startswith("data:image/png;base64,") for src in p.imgs)
    for src in p.imgs:
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:|//)""", text)
    assert "<script" not in text and "<link" not in text
    # user text is escaped: the fixture transcripts contain '<' and '&'
    assert "<92%" not in text


def test_examples_cover_trigger_types(report: ReportPaths) -> None:
    rows = pq.read_table(report.report_dir / "tables" / "examples.parquet").to_pylist()
    types = {r["trigger_type"] for r in rows}
    assert types == {
        "negation_flip",
        "number_unit_conflict",
        "temporal_distortion",
        "nonspeech_pollution",
        "entity_substitution",
    }
    for r in rows:
        assert r["condition"] != "clean" and not r["condition"].endswith("_guard")
        assert r["effects"]
    neg = [r for r in rows if r["trigger_type"] == "negation_flip"]
    assert any("status flipped" in r["effects"] for r in neg)
    md = report.markdown.read_text("utf-8")
    assert "## Paired cause→effect examples" in md


def test_run_facts_and_failures(report: ReportPaths) -> None:
    md = report.markdown.read_text("utf-8")
    for needle in (
        "whisper-small.en",
        "synthetic-structurer",
        "p" * 64,
        "s" * 64,
        "| Run seed | 7 |",
        "### Failures (1)",
        "enc003",
        "babble_10db",
        "not valid JSON",
        "### Wall time per stage",
        "| asr | 140.0 |",
        "| SNR check | max \\|measured − target\\| = 0.0",
    ):
        assert needle in md, needle


def test_wer_vs_safety_section(report: ReportPaths) -> None:
    md = report.markdown.read_text("utf-8")
    sec = md.split("## Does WER predict safety?", 1)[1].split("\n## ", 1)[0]
    assert "AUROC" in sec and "Spearman" in sec
    rows = pq.read_table(report.report_dir / "tables" / "wer_vs_safety.parquet").to_pylist()
    assert [r["endpoint"] for r in rows] == ["scer_new", "under_triage_new", "unsafe"]
    for r in rows:
        assert 0 < r["n_positive"] < r["n_items"]
        for k in ("auroc_dwer", "auroc_triggers"):
            assert 0.0 <= r[f"{k}_lo"] <= r[k] <= r[f"{k}_hi"] <= 1.0
            assert f"{r[k]:.2f}" in sec


def test_report_is_deterministic(tmp_path: Path, run_dir: Path, report: ReportPaths) -> None:
    copy = shutil.copytree(run_dir, tmp_path / "copy", ignore=shutil.ignore_patterns("report"))
    again = build_report(copy, n_resamples=N_RESAMPLES, seed=SEED)
    assert again.markdown.read_text("utf-8") == report.markdown.read_text("utf-8")
    other = build_report(copy, n_resamples=N_RESAMPLES, seed=SEED + 1)
    assert other.markdown.read_text("utf-8") != report.markdown.read_text("utf-8")


def test_no_judge_shows_dash(tmp_path: Path) -> None:
    rd = make_run(tmp_path / "nojudge", n_encounters=6, seed=3, with_judge=False, mitigation=False, failed=())
    rp = build_report(rd, n_resamples=50, seed=0)
    _, rows = _md_table2(rp.markdown.read_text("utf-8"))
    score_col = 2 + METRIC_COLUMNS.index("mean_score")
    assert all(cells[score_col] == "–" and cells[score_col + 1] == "–" for cells in rows.values())
    md = rp.markdown.read_text("utf-8")
    assert "not computed in this run (no judge scores)" in md
    assert "Unsafe judge score (≤ 2): not estimable" in md
    assert "Mitigation Study" not in md
    assert "No item failed." in md


def test_summary_disagreement_is_reported(tmp_path: Path) -> None:
    rd = make_run(tmp_path / "tampered", n_encounters=6, seed=4)
    text = (rd / "summary.csv").read_text("utf-8").splitlines()
    cols = text[0].split(",")
    cells = text[2].split(",")
    cells[cols.index("wer")] = "99.5"
    text[2] = ",".join(cells)
    (rd / "summary.csv").write_text("\n".join(text) + "\n", "utf-8")
    rp = build_report(rd, n_resamples=30, seed=0)
    assert any(".wer:" in p and "99.5" in p for p in rp.problems)
    assert "Consistency check failed" in rp.markdown.read_text("utf-8")
    assert "WARNING" in cli_report(rd, n_resamples=30)


def test_cli_report_text(run_dir: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(run_dir, tmp_path / "c", ignore=shutil.ignore_patterns("report"))
    out = cli_report(copy, n_resamples=30, seed=1)
    assert "Reference (clean-ASR)" in out and "report.html" in out and "Does WER predict safety?" in out
    assert out.splitlines()[0].split()[:3] == ["Condition", "n", "WER"]


def test_summary_columns_in_fixture(run_dir: Path) -> None:
    # the fixture mirrors the runner's layout: docs/spec.md §10 columns first, then trig_*
    header = (run_dir / "summary.csv").read_text("utf-8").splitlines()[0].split(",")
    assert tuple(header[: len(SUMMARY_COLUMNS)]) == SUMMARY_COLUMNS


def test_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="does not exist"):
        build_report(tmp_path / "nope")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "manifest.json").write_text("{}", "utf-8")
    with pytest.raises(ReportError, match="items.jsonl is missing"):
        build_report(tmp_path / "half")
    (tmp_path / "half" / "items.jsonl").write_text('{"encounter_id": "a", "condition": "clean"}\n{bad\n', "utf-8")
    with pytest.raises(ReportError, match=r"items.jsonl:2"):
        build_report(tmp_path / "half")
    (tmp_path / "half" / "items.jsonl").write_text('{"condition": "clean"}\n', "utf-8")
    with pytest.raises(ReportError, match="no 'encounter_id'"):
        build_report(tmp_path / "half")


def test_minimal_run_dir_still_reports(tmp_path: Path) -> None:
    # Only the docs/spec.md §10 item fields, no summary.csv, no records, no triggers, no judge.
    import json

    rd = tmp_path / "minimal"
    rd.mkdir()
    rows = []
    for e in range(4):
        for cond, fam, snr in (("clean", "clean", None), ("ambient_5db", "ambient", 5.0)):
            rows.append(
                {
                    "encounter_id": f"e{e}",
                    "condition": cond,
                    "family": fam,
                    "snr_db": snr,
                    "target_snr_db": snr,
                    "measured_snr_db": snr,
                    "reference_text": "no chest pain",
                    "hypothesis_text": "no chest pain" if cond == "clean" else "chest pain",
                    "asr_sub": 0,
                    "asr_del": 0 if cond == "clean" else 1,
                    "asr_ins": 0,
                    "ref_words": 3,
                }
            )
    (rd / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    (rd / "manifest.json").write_text(json.dumps({"run_id": "minimal"}), "utf-8")
    rp = build_report(rd, n_resamples=20, seed=0)
    md = rp.markdown.read_text("utf-8")
    assert "summary.csv is missing" in md
    _, t2 = _md_table2(md)
    assert t2["ambient_5db"][2].startswith("33.33")
    assert "not estimable" in md
    assert rp.html.is_file()


def test_default_seed_is_the_runs_seed(tmp_path: Path, run_dir: Path) -> None:
    copy = shutil.copytree(run_dir, tmp_path / "s", ignore=shutil.ignore_patterns("report"))
    default = build_report(copy, n_resamples=40).markdown.read_text("utf-8")
    explicit = build_report(copy, n_resamples=40, seed=7).markdown.read_text("utf-8")  # the fixture's run seed
    assert default == explicit
    assert "40 paired resamples of encounters, seed 7" in default


def test_guard_effect_is_paired_difference(run_dir: Path, report: ReportPaths) -> None:
    rows = pq.read_table(report.report_dir / "tables" / "mitigation_effect.parquet").to_pylist()
    assert [r["condition"] for r in rows] == ["babble_5db_guard", "ambient_5db_guard"]
    run = load_run(run_dir)
    for r in rows:
        base, guard = run.ok_items(r["baseline"]), run.ok_items(r["condition"])
        both = {it.encounter_id for it in base} & {it.encounter_id for it in guard}
        want = (
            aggregate([it for it in guard if it.encounter_id in both])["scer"]
            - aggregate([it for it in base if it.encounter_id in both])["scer"]
        )
        assert r["scer"] == pytest.approx(want)
        assert r["scer_lo"] <= r["scer"] <= r["scer_hi"]
        assert r["wer"] == 0.0  # same transcripts: the guard cannot change WER
    md = report.markdown.read_text("utf-8")
    assert "### Guard effect: guard − unmitigated" in md


def test_rebuild_drops_stale_outputs(tmp_path: Path, run_dir: Path) -> None:
    copy = shutil.copytree(run_dir, tmp_path / "r", ignore=shutil.ignore_patterns("report"))
    build_report(copy, n_resamples=20)
    stale = copy / "report" / "tables" / "old_table.csv"
    stale.write_text("x\n", "utf-8")
    keep = copy / "report" / "notes.txt"
    keep.write_text("mine", "utf-8")
    build_report(copy, n_resamples=20)
    assert not stale.exists() and keep.exists()


@pytest.mark.parametrize("link", [("report",), ("report", "plots"), ("report", "tables"), ("report", "items")])
def test_report_never_writes_through_a_symlink_leaving_the_run(
    tmp_path: Path, run_dir: Path, link: tuple[str, ...]
) -> None:
    """Issue 37: ``RUN/report -> elsewhere`` (or its plots/tables folder) is refused, by ``report`` and by a
    re-run's ``--out`` check, before anything is written or cleared there."""
    from stresstest.errors import RunError
    from stresstest.pipeline.ownership import out_problem

    copy = shutil.copytree(run_dir, tmp_path / "r", ignore=shutil.ignore_patterns("report"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "old.png").write_bytes(b"not ours")  # what _clear_outputs would have deleted
    target = copy.joinpath(*link)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(outside, target_is_directory=True)
    with pytest.raises(RunError, match="symlink that leads outside"):
        build_report(copy, n_resamples=20)
    assert sorted(p.name for p in outside.iterdir()) == ["old.png"]
    problem = out_problem(copy, tmp_path / "cache", {}, {})
    assert problem is not None and "/".join(link) in problem and "leads outside" in problem


@pytest.mark.parametrize("damage", ["lost_line", "another_runs_items"])
def test_report_on_items_that_disagree_with_the_manifest_warns(
    tmp_path: Path, run_dir: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37: a report rebuilt from an items.jsonl that lost a line, or holds another run's items, exited 0
    with nothing on stderr."""
    copy = shutil.copytree(run_dir, tmp_path / "r", ignore=shutil.ignore_patterns("report"))
    lines = (copy / "items.jsonl").read_text("utf-8").splitlines()
    if damage == "lost_line":
        lines = lines[:-1]
    else:
        lines = [ln.replace('"enc0', '"other0') for ln in lines]  # same shape, another corpus's encounters
    (copy / "items.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    cli_report(copy, n_resamples=20)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("stresstest: warning: report: items")]
    assert len(err) >= 1, err
    want = "lacks 1 of the" if damage == "lost_line" else "manifest.json does not list"
    assert any(want in ln for ln in err), err
    assert want in (copy / "report" / "report.md").read_text("utf-8")
