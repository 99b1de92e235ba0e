"""The condition grid: typed conditions, base-of, round trip through the manifest form."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from stresstest.grid import Condition, ConditionGrid


def test_build_order_and_questions() -> None:
    g = ConditionGrid.build(["ambient", "babble"], [15.0, 5.0], ["babble_5db"])
    assert g.ids == ["clean", "ambient_15db", "ambient_5db", "babble_15db", "babble_5db", "babble_5db_guard"]
    assert [c.id for c in g.noisy()] == ["ambient_15db", "ambient_5db", "babble_15db", "babble_5db"]
    assert [c.id for c in g.mitigated()] == ["babble_5db_guard"]
    assert g.base_of("babble_5db_guard") == "babble_5db"
    assert g.base_of("ambient_15db") == "ambient_15db"
    assert [c.id for c in g.dependents("babble_5db")] == ["babble_5db", "babble_5db_guard"]
    assert g.families() == ["ambient", "babble"]
    guard = g.get("babble_5db_guard")
    assert (guard.family, guard.snr_db, guard.mitigated, guard.has_audio) == ("babble", 5.0, True, False)
    assert g[0].is_clean and "clean" in g and "nope" not in g


def test_manifest_round_trip_and_old_manifests() -> None:
    g = ConditionGrid.build(["ambient"], [7.5], ["ambient_7.5db"])
    rows = g.to_json()
    assert rows[1] == {
        "condition": "ambient_7.5db",
        "family": "ambient",
        "snr_db": 7.5,
        "mitigated": False,
        "base": "ambient_7.5db",
    }
    assert ConditionGrid.from_json(rows) == g
    # manifests written before `base` existed derive it from the documented id rule
    old = [{k: v for k, v in r.items() if k != "base"} for r in rows]
    assert ConditionGrid.from_json(old) == g


def test_bad_grids_are_refused() -> None:
    with pytest.raises(ValueError, match="not in the grid"):
        ConditionGrid.build(["ambient"], [5.0], ["babble_5db"])
    with pytest.raises(ValueError, match="unique"):
        ConditionGrid.build(["ambient"], [5.0, 5.0])
    with pytest.raises(ValidationError, match="clean condition has no SNR"):
        Condition(id="clean", family="clean", snr_db=3.0)
    with pytest.raises(ValidationError, match="only a mitigated condition"):
        Condition(id="ambient_5db", family="ambient", snr_db=5.0, base="clean")
    with pytest.raises(ValueError, match="base 'ambient_5db' is not in the grid"):
        ConditionGrid([Condition.clean(), Condition.noisy("ambient", 5.0).guarded()])
    c = Condition.clean()
    with pytest.raises(ValidationError):
        c.id = "x"  # type: ignore[misc]  # frozen
