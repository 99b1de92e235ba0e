"""scripts/bench_rules.py: agreement with the shipped gold, per split and per dev set."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_rules", REPO / "scripts" / "bench_rules.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_rules", mod)  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


def test_splits_and_dev_sets_are_reported() -> None:
    bench = _bench()
    splits, sets = bench.gold_splits(), bench.gold_sets()
    assert sum(v == "test" for v in splits.values()) >= 10
    assert not {e for e, v in splits.items() if v == "test"} & set(sets)  # sets label dev files only
    lines = bench.gold_agreement(REPO / "data" / "osce" / "transcripts")
    assert lines is not None
    got = {m.group(1): int(m.group(2)) for line in lines if (m := re.match(r"\s*(\S+)\s+n=\s*(\d+)", line))}
    assert got["test"] == 10
    assert got["dev"] == sum(got[f"dev:{s}"] for s in ("demo", "blind-1", "blind-2", "blind-3", "blind-4", "older"))
    assert got["dev:demo"] == 8 and got["dev:blind-1"] == 11 and got["dev:blind-2"] == 12
    assert got["dev:blind-3"] == got["dev:blind-4"] == 24


def test_writer_agreement_scores_a_second_writer_like_the_structurer(tmp_path: Path) -> None:
    import yaml

    bench = _bench()
    src = REPO / "stresstest" / "gold" / "data" / "RES0019.yaml"
    doc = yaml.safe_load(src.read_text(encoding="utf-8"))
    n = len(doc["claims"])
    dropped = doc["claims"].pop()  # writer B leaves one claim out and triages one level lower
    doc["field_evidence"].pop(dropped["id"], None)
    doc["triage"]["level"] = "routine"
    (tmp_path / "RES0019.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    lines = bench.writer_agreement(tmp_path, REPO / "data" / "osce" / "transcripts")
    assert lines is not None and lines[0].startswith("1 dev encounters written twice")
    b_vs_a = next(line for line in lines if "writer B vs writer A" in line)
    assert "triage 0/1" in b_vs_a and "(under-triage 1)" in b_vs_a
    assert f"P 1.00 R {(n - 1) / n:.2f}" in b_vs_a
    assert any("rules vs writer A" in line for line in lines) and any("rules vs writer B" in line for line in lines)


def test_a_second_writer_folder_holds_one_split_only(tmp_path: Path) -> None:
    """The dev folder (read while tuning) refuses a test-split file; the test folder refuses a dev file."""
    import shutil

    import pytest

    from stresstest.errors import StressTestError

    bench = _bench()
    corpus = REPO / "data" / "osce" / "transcripts"
    test_id = next(e for e, v in bench.gold_splits().items() if v == "test")
    dev_folder, test_folder = tmp_path / "dev", tmp_path / "test"
    dev_folder.mkdir()
    test_folder.mkdir()
    shutil.copy(REPO / "stresstest" / "gold" / "data" / f"{test_id}.yaml", dev_folder)
    shutil.copy(REPO / "stresstest" / "gold" / "data" / "RES0019.yaml", test_folder)
    with pytest.raises(StressTestError, match=rf"\['{test_id}'\] are not dev-split encounters"):
        bench.writer_agreement(dev_folder, corpus)
    with pytest.raises(StressTestError, match=r"\['RES0019'\] are not test-split encounters"):
        bench.writer_agreement(test_folder, corpus, "test")
    shutil.copy(REPO / "stresstest" / "gold" / "data" / f"{test_id}.yaml", test_folder)
    (test_folder / "RES0019.yaml").unlink()
    lines = bench.writer_agreement(test_folder, corpus, "test")
    assert lines is not None and lines[0].startswith("1 test encounters written twice")
    assert "test: writer B vs writer A n= 1  triage 1/1" in lines[1] and "F1 1.00" in lines[1]


def test_an_adjudicated_folder_scores_both_writers_and_the_rules(tmp_path: Path) -> None:
    import shutil

    import pytest

    from stresstest.errors import StressTestError

    bench = _bench()
    corpus = REPO / "data" / "osce" / "transcripts"
    second, adjudicated = tmp_path / "second", tmp_path / "adjudicated"
    second.mkdir()
    adjudicated.mkdir()
    shutil.copy(REPO / "data" / "gold_second_writer" / "MSK0026.yaml", second)
    shutil.copy(REPO / "stresstest" / "gold" / "data" / "MSK0026.yaml", adjudicated)  # adjudicated = writer A
    lines = bench.writer_agreement(second, corpus, "dev", adjudicated)
    assert lines is not None and lines[0].endswith(f"adjudicated: {adjudicated}")
    rows = {line.split(" n=")[0].strip(): line for line in lines[1:]}
    assert "F1 1.00" in rows["dev: writer A vs adjudicated"] and "recall" in rows["dev: rules vs adjudicated"]
    # writer B against a copy of A is writer B against A, measure for measure
    assert rows["dev: writer B vs adjudicated"].split(" n=")[1] == rows["dev: writer B vs writer A"].split(" n=")[1]
    assert rows["dev: rules vs adjudicated"].split(" n=")[1] == rows["dev: rules vs writer A"].split(" n=")[1]
    shutil.copy(REPO / "stresstest" / "gold" / "data" / "MSK0031.yaml", adjudicated)
    with pytest.raises(StressTestError, match="expected the encounters written twice"):
        bench.writer_agreement(second, corpus, "dev", adjudicated)
