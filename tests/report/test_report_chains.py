"""Report pieces for chain conditions and the clinician-read error rates, on a hand-made run."""

from __future__ import annotations

from pathlib import Path

import pytest

from stresstest.grid import Condition, ConditionGrid
from stresstest.report.chains import chain_plots, channel_of, rt60_of
from stresstest.report.error_rates import error_rate_plot, error_rate_section, error_rates_markdown
from stresstest.report.plots import all_metric_plots
from stresstest.report.rundir import RunData
from stresstest.report.tables import table2_rows
from stresstest.results import ItemScore, RunDir, RunManifest, SummaryLine

ROOM = {"room": {"rt60_s": 0.8, "distance_m": 2.0, "room_dim_m": [6.0, 5.0, 3.0], "ir": None}}
TEL = [{"telephone": {"low_hz": 300.0, "high_hz": 3400.0}}, {"mulaw": {}}]


def _item(eid: str, cond: str, errs: int, clin_err: int, **extra: object) -> ItemScore:
    return ItemScore.model_validate(
        {
            "encounter_id": eid,
            "condition": cond,
            "asr_sub": errs,
            "asr_del": 0,
            "asr_ins": 0,
            "ref_words": 20,
            "clin_words": 4,
            "clin_errors": clin_err,
            "ref_words_clinician": 12,
            "errors_clinician": errs,
            "ref_words_patient": 8,
            "errors_patient": 0,
            "clin_words_clinician": 2,
            "clin_errors_clinician": clin_err,
            "clin_words_patient": 2,
            "clin_errors_patient": 0,
            "judge_score": 4,
            **extra,
        }
    )


def _run(tmp_path: Path, summary_clinical_wer: str = "25") -> RunData:
    grid = ConditionGrid(
        [
            Condition.clean(),
            Condition.chained("rt0.8_g711", [ROOM, *TEL], {"room": "rt0.8", "channel": "g711"}),
            Condition.chained("loud", [{"level": {"gain_db": 6.0, "clip": 1.0}}]),
        ]
    )
    items = [
        _item(e, c, errs, ce)
        for e in ("A", "B")
        for c, errs, ce in (("clean", 0, 0), ("rt0.8_g711", 2, 1), ("loud", 1, 0))
    ]
    summary = {
        "clean": {"clinical_wer": "0"},
        "rt0.8_g711": {"clinical_wer": summary_clinical_wer},
        "loud": {"clinical_wer": "0"},
    }
    lines = [SummaryLine(condition=c, cells=cells) for c, cells in summary.items()]
    return RunData(
        RunDir(
            path=tmp_path,
            manifest=RunManifest(),
            items=items,
            conditions=grid,
            summary=lines,
            summary_columns=["condition", "clinical_wer"],
        )
    )


def test_rt60_and_channel_of_a_condition() -> None:
    c = Condition.chained("x", [ROOM, *TEL])
    assert (rt60_of(c), channel_of(c)) == (0.8, "telephone+mulaw")
    assert channel_of(Condition.chained("y", [ROOM, *TEL], {"room": "r", "channel": "g711"})) == "g711"
    assert (rt60_of(Condition.chained("z", TEL)), channel_of(Condition.chained("w", [ROOM]))) == (0.0, "wideband")


def test_error_rate_section_agrees_with_summary_and_renders(tmp_path: Path) -> None:
    run = _run(tmp_path)
    sec = error_rate_section(run, n_resamples=200, seed=0)
    assert sec.computed and sec.problems == []
    row = {r.condition: r.to_row() for r in sec.rows}["rt0.8_g711"]
    assert row["clinical_wer"] == pytest.approx(25.0)  # 2 of 8 clinical words
    assert row["wer_clinician"] == pytest.approx(100 * 4 / 24) and row["wer_patient"] == 0.0
    md = "\n".join(error_rates_markdown(sec, Path("plots/error_rates.png")))
    assert "| rt0.8_g711 | 2 | 10.0 [10.0, 10.0] | 25.0 [25.0, 25.0] |" in md
    assert error_rate_plot(sec, tmp_path / "e.png").stat().st_size > 0
    # a summary.csv that disagrees with the items is reported, not hidden
    assert error_rate_section(_run(tmp_path, "30"), n_resamples=200, seed=0).problems


def test_chain_rows_and_plots(tmp_path: Path) -> None:
    run = _run(tmp_path)
    rows = table2_rows(run, {})
    assert [r.condition for r in rows if r.condition] == ["clean", "rt0.8_g711", "loud"]
    plots = chain_plots(rows, list(run.conditions), tmp_path)
    assert sorted(plots) == ["unsafe_vs_rt60", "wer_vs_rt60"] and all(p.stat().st_size > 0 for p in plots.values())
    assert chain_plots(rows, [Condition.clean()], tmp_path) == {}
    assert all_metric_plots(rows, tmp_path) == {}  # no condition has an SNR: no empty "against SNR" figures


def test_named_chains_get_their_own_line_and_ties_in_rt60_do_not_crash(tmp_path: Path) -> None:
    noise = {"noise": {"family": "ambient", "snr_db": 20.0}}
    probe = {"silence": {"pause_s": 6.0, "every": 6}}
    axes = Condition.chained("rt0.8_wideband", [ROOM], {"room": "rt0.8", "channel": "wideband"})
    twin = Condition.chained("rt0.8_ambient20", [ROOM, noise])
    probed = Condition.chained("silence6_rt0.8_ambient20", [probe, ROOM, noise])
    assert [channel_of(c) for c in (axes, twin, probed)] == [
        "wideband",
        "ambient 20 dB",
        "silence probes+ambient 20 dB",
    ]
    grid = ConditionGrid([Condition.clean(), axes, twin, probed, Condition.chained("rt0.8_again", [ROOM])])
    items = [_item(e, c.id, 1, 0) for e in ("A", "B") for c in grid]
    run = RunData(
        RunDir(
            path=tmp_path,
            manifest=RunManifest(),
            items=items,
            conditions=grid,
            summary=[],
            summary_columns=["condition"],
        )
    )
    # rt0.8_again shares RT60 and line with rt0.8_wideband: the points sort by RT60 only (Rows do not compare)
    plots = chain_plots(table2_rows(run, {}), list(grid), tmp_path)
    assert sorted(plots) == ["unsafe_vs_rt60", "wer_vs_rt60"]
