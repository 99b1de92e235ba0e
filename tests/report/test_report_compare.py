"""compare_runs: paired B − A differences over common encounters."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    man["conditions"] = [
        dict(c, condition=c["condition"] + "_x", base=c["base"] and c["base"] + "_x") for c in man["conditions"]
    ]
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


def _with_manifest(src: Path, dst: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("report", "compare"))
    man = json.loads((dst / "manifest.json").read_text("utf-8"))
    edit(man)
    (dst / "manifest.json").write_text(json.dumps(man), "utf-8")
    return dst


def _chain(rt60: float) -> Callable[[dict[str, Any]], None]:
    def edit(man: dict[str, Any]) -> None:
        man["conditions"].append(
            {
                "condition": "rt",
                "family": "chain",
                "snr_db": None,
                "mitigated": False,
                "chain": [{"room": {"rt60_s": rt60, "distance_m": 1.0}}],
            }
        )

    return edit


def _items_for_rt(run: Path) -> None:
    """Give the run a chain condition ``rt`` whose items are the clean ones (so the two runs' rt rows equal)."""
    lines = (run / "items.jsonl").read_text("utf-8").splitlines()
    extra = [
        json.dumps({**json.loads(ln), "condition": "rt"}) for ln in lines if json.loads(ln)["condition"] == "clean"
    ]
    (run / "items.jsonl").write_text("\n".join(lines + extra) + "\n", "utf-8")


def test_a_condition_of_one_name_with_other_steps_is_not_paired(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37: RT60 0.3 vs 1.5 s under one chain name showed a "paired" difference, only run_id differing."""
    a = _with_manifest(run_dir, tmp_path / "a", _chain(0.3))
    b = _with_manifest(run_dir, tmp_path / "b", _chain(1.5))
    _items_for_rt(a)
    _items_for_rt(b)
    res = compare_runs(a, b, tmp_path / "cmp", n_resamples=100, seed=0)
    assert "rt" not in [r["condition"] for r in res.rows]
    lines = [w for w in res.warnings if w.startswith("condition rt is defined differently")]
    assert len(lines) == 1 and "1.5" in lines[0] and "0.3" in lines[0] and "\n" not in lines[0]
    assert lines[0] in res.markdown.read_text("utf-8")
    cli_compare(a, b, tmp_path / "cmp2", n_resamples=100)
    assert "stresstest: warning: compare: condition rt is defined differently" in capsys.readouterr().err
    with pytest.raises(ReportError, match="not paired: condition rt is defined differently"):
        compare_runs(a, b, tmp_path / "cmp3", n_resamples=100, strict=True)


def test_other_max_turns_references_and_encounters_are_named(run_dir: Path, tmp_path: Path) -> None:
    a = _with_manifest(run_dir, tmp_path / "a", lambda m: None)
    b = _with_manifest(run_dir, tmp_path / "b", lambda m: None)
    (a / "config.resolved.yaml").write_text("corpus: {kind: osce, path: x, max_turns: 4}\n", "utf-8")
    (b / "config.resolved.yaml").write_text("corpus: {kind: osce, path: x, max_turns: 8}\n", "utf-8")
    rows = [json.loads(ln) for ln in (b / "items.jsonl").read_text("utf-8").splitlines()]
    first = rows[0]["encounter_id"]
    rows = [r for r in rows if r["encounter_id"] != first]  # B lacks one encounter
    (b / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    res = compare_runs(a, b, tmp_path / "cmp", n_resamples=100, seed=0)
    assert any(w.startswith("corpus.max_turns differs (A: 4, B: 8)") for w in res.warnings), res.warnings
    assert any(w.startswith("only the ") and f"only in A: {first}" in w for w in res.warnings), res.warnings
    # the same max_turns but another reference text: named as well
    (b / "config.resolved.yaml").write_text("corpus: {kind: osce, path: x, max_turns: 4}\n", "utf-8")
    second = rows[0]["encounter_id"]
    rows = [{**r, "reference_text": "another dialogue"} if r["encounter_id"] == second else r for r in rows]
    (b / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    res = compare_runs(a, b, tmp_path / "cmp2", n_resamples=100, seed=0)
    assert any(
        w.startswith("the reference text differs for 1 shared encounter(s)") and second in w for w in res.warnings
    ), res.warnings


def test_different_environments_are_one_warning_line(tmp_path: Path) -> None:
    """Two runs made with different engine versions or CPUs: compare says so in one line naming each entry."""
    import json

    from stresstest.provenance import environment

    env = environment()
    a = make_run(tmp_path / "a", n_encounters=3, seed=1, failed=())
    b = make_run(tmp_path / "b", n_encounters=3, seed=1, failed=())
    for run, ct2, cpu in ((a, "4.8.5", "CPU A"), (b, "4.7.1", "CPU B")):
        man = json.loads((run / "manifest.json").read_text())
        man["environment"] = {
            **env,
            "cpu": {**env["cpu"], "model": cpu},
            "packages": {**env["packages"], "ctranslate2": ct2},
        }
        (run / "manifest.json").write_text(json.dumps(man))
    res = compare_runs(a, b, tmp_path / "o", n_resamples=10)
    (line,) = [w for w in res.warnings if "engine versions" in w]
    assert "packages.ctranslate2 (A: 4.8.5, B: 4.7.1)" in line and "cpu.model (A: CPU A, B: CPU B)" in line
    assert "\n" not in line and f"WARNING: {line}" in res.text
    same = compare_runs(a, a, tmp_path / "s", n_resamples=10)
    assert not [w for w in same.warnings if "engine versions" in w]
