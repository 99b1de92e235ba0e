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
