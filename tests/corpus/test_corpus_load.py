"""load_corpus: kinds, selection by id, limit, deterministic order."""

from __future__ import annotations

from pathlib import Path

import pytest

from stresstest.corpus import CORPUS_KINDS, load_corpus
from stresstest.errors import CorpusError


@pytest.fixture()
def osce(tmp_path: Path) -> Path:
    folder = tmp_path / "osce" / "transcripts"
    folder.mkdir(parents=True)
    for name in ["RES0003", "CAR0001", "MSK0002", "RES0001", "GAS0001", "DER0001", "RES0002"]:
        (folder / f"{name}.txt").write_text(f"D: Hello from {name}.\n\nP: Hi.\n")
    return tmp_path / "osce"


def test_kinds() -> None:
    assert CORPUS_KINDS == ("osce", "primock57", "aci-bench", "manifest")
    with pytest.raises(CorpusError, match=r"unknown corpus kind 'aci_bench' \(expected one of: osce, primock57"):
        load_corpus("aci_bench", ".")


def test_sorted_ids_and_limit(osce: Path) -> None:
    ids = [e.encounter_id for e in load_corpus("osce", osce)]
    assert ids == sorted(ids) and len(ids) == 7
    assert [e.encounter_id for e in load_corpus("osce", osce, limit=2)] == ["CAR0001", "DER0001"]
    assert load_corpus("osce", osce, limit=0) == []
    picked = load_corpus("osce", osce, ids=["RES0002", "CAR0001", "RES0002"], limit=5)
    assert [e.encounter_id for e in picked] == ["CAR0001", "RES0002"]
    assert [e.encounter_id for e in load_corpus("osce", osce, ids=["RES0003", "MSK0002"], limit=1)] == ["MSK0002"]


def test_unknown_id_lists_known_ones(osce: Path) -> None:
    with pytest.raises(CorpusError) as info:
        load_corpus("osce", osce, ids=["CAR0001", "RES9999"])
    msg = str(info.value)
    assert "'RES9999'" in msg and "CAR0001, DER0001, GAS0001, MSK0002, RES0001" in msg and "7 in all" in msg


@pytest.mark.parametrize("limit", [-1, 1.5, True])
def test_bad_limit(osce: Path, limit: object) -> None:
    with pytest.raises(CorpusError, match="limit"):
        load_corpus("osce", osce, limit=limit)  # type: ignore[arg-type]
