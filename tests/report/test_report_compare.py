"""compare_runs: paired B − A differences over common encounters."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_run import make_run

from stresstest.errors import ReportError
from stresstest.metrics.summary import METRIC_COLUMNS, aggregate
from stresstest.report import cli_compare, compare_runs
from stresstest.report.rundir import load_run


def test_run_against_itself_is_zero(run_dir: Path, tmp_path: Path) -> None:
    res = compare_runs(run_dir, run_dir, tmp_path / "self", n_resamples=100, seed=0)
    assert res.html.is_file() and res.markdown.is_file()
    for r in res.rows:
        for m in METRIC_COLUMNS:
            if r[f"{m}_diff"] is None:
                continue
            assert r[f"{m}_diff"] == 0.0
            assert (r[f"{m}_diff_lo"], r[f"{m}_diff_hi"]) == (0.0, 0.0)
            assert r[f"{m}_verdict"] == "n.s."


def test_two_runs_paired_on_common_encounters(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", n_encounters=10, seed=7, asr_model="whisper-small.en", failed=())
    b = make_run(
        tmp_path / "b",
        n_encounters=12,
        seed=8,
        asr_model="whisper-large-v3",
        mitigation=False,
        failed=(("enc001", "ambient_5db"),),
    )
    res = compare_runs(a, b, None, n_resamples=100, seed=0)
    assert res.out_dir == b / "compare" / "vs_a"
    conds = [r["condition"] for r in res.rows]
    assert conds == [
        "clean",
        "babble_15db",
        "babble_10db",
        "babble_5db",
        "ambient_15db",
        "ambient_10db",
        "ambient_5db",
    ]  # guard conditions exist only in A
    ra, rb = load_run(a), load_run(b)
    for r in res.rows:
        cond = r["condition"]
        eb = {it.encounter_id for it in rb.ok_items(cond)}
        common = [it for it in ra.ok_items(cond) if it.encounter_id in eb]
        assert r["n_common"] == (9 if cond == "ambient_5db" else 10)
        want_a = aggregate(common, is_clean=cond == "clean")["wer"]
        assert r["wer_a"] == pytest.approx(want_a)
        assert r["wer_diff"] == pytest.approx(r["wer_b"] - r["wer_a"])
        assert r["wer_diff_lo"] <= r["wer_diff"] <= r["wer_diff_hi"]
    facts = {k: (va, vb) for k, va, vb in res.facts}
    assert facts["asr.model"] == ("whisper-small.en", "whisper-large-v3")
    md = res.markdown.read_text("utf-8")
    assert "| asr.model | whisper-small.en | whisper-large-v3 | differs |" in md
    text = cli_compare(a, b, tmp_path / "out")
    assert "B − A" in text and "ambient_5db" in text and "compare.html" in text
    assert (tmp_path / "out" / "tables" / "compare.parquet").is_file()


def test_no_common_condition(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", n_encounters=3, seed=1, failed=())
    b = make_run(tmp_path / "b", n_encounters=3, seed=1, failed=())
    import json

    man = json.loads((b / "manifest.json").read_text())
    man["conditions"] = [dict(c, condition=c["condition"] + "_x") for c in man["conditions"]]
    (b / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ReportError, match="share no condition"):
        compare_runs(a, b, tmp_path / "o", n_resamples=10)


def test_different_corpora_warn(tmp_path: Path) -> None:
    import json

    a = make_run(tmp_path / "a", n_encounters=3, seed=1, failed=())
    b = make_run(tmp_path / "b", n_encounters=3, seed=2, failed=())
    man = json.loads((b / "manifest.json").read_text())
    man["corpus"]["path"] = "corpora/other"
    (b / "manifest.json").write_text(json.dumps(man))
    res = compare_runs(a, b, tmp_path / "o", n_resamples=10)
    assert res.warnings and "corpus.path differs" in res.warnings[0]
    assert "WARNING: corpus.path differs" in res.text
    assert "corpus.path differs" in res.markdown.read_text("utf-8")
    assert "corpus.path differs" in res.html.read_text("utf-8")


def test_different_environments_are_one_warning_line(tmp_path: Path) -> None:
    """Two runs made with different engine versions or CPUs: compare says so in one line naming each entry."""
    import json

    from stresstest.provenance import environment

    env = environment()
    a = make_run(tmp_path / "a", n_encounters=3, seed=1, failed=())
    b = make_run(tmp_path / "b", n_encounters=3, seed=1, failed=())
    for run, ct2, cpu in ((a, "4.8.5", "CPU A"), (b, "4.7.1", "CPU B")):
        man = json.loads((run / "manifest.json").read_text())
        man["environment"] = {**env, "cpu": {**env["cpu"], "model": cpu},
                              "packages": {**env["packages"], "ctranslate2": ct2}}
        (run / "manifest.json").write_text(json.dumps(man))
    res = compare_runs(a, b, tmp_path / "o", n_resamples=10)
    (line,) = [w for w in res.warnings if "engine versions" in w]
    assert "packages.ctranslate2 (A: 4.8.5, B: 4.7.1)" in line and "cpu.model (A: CPU A, B: CPU B)" in line
    assert "\n" not in line and f"WARNING: {line}" in res.text
    same = compare_runs(a, a, tmp_path / "s", n_resamples=10)
    assert not [w for w in same.warnings if "engine versions" in w]
