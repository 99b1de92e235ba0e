"""configs/paper*.yaml read only what a user's clone holds or is told to download, and say so when it is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from stresstest.config import load_config
from stresstest.corpus import load_corpus
from stresstest.errors import CorpusError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["paper.yaml", "paper-4gpu.yaml", "paper-ray-cluster.yaml"])
def test_paper_configs_read_corpora_inside_the_clone(name: str) -> None:
    cfg = load_config(REPO / "configs" / name)
    roots = [cfg.corpus.path] + [getattr(n, "root", None) for n in cfg.noise.values()]
    for root in filter(None, roots):
        assert Path(root).resolve().is_relative_to(REPO), f"{name} reads {root}, outside the clone"
    assert "shared" not in (REPO / "configs" / name).read_text().split("#")[0]


def test_a_missing_osce_corpus_is_one_line_saying_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(CorpusError) as err:
        load_corpus("osce", tmp_path / "corpora" / "osce")
    msg = str(err.value)
    assert "\n" not in msg and "OSCE folder not found" in msg and "download" in msg and "corpus.path" in msg
