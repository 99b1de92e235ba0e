"""The failure ledger owns the max_failures policy."""

from __future__ import annotations

import pytest

from stresstest.errors import RunError
from stresstest.pipeline.failures import FailureLedger, ItemKey


def test_fraction_policy_and_queries() -> None:
    led = FailureLedger(0.25, total_items=8)  # 2 failures allowed
    assert led.allowed == 2
    led.record("speech", ("e1", "clean"), "tts crashed")
    led.record("mix", ItemKey("e2", "ambient_5db"), "noise segment: boom")
    assert not led.exceeded and len(led) == 2
    assert led.count_by_stage() == {"speech": 1, "mix": 1}
    assert led.failed_encounters() == ["e1", "e2"] and led.failed_encounters("mix") == ["e2"]
    assert led.failed(("e2", "ambient_5db")) == "mix: noise segment: boom"
    # a guard row fails with its base
    assert led.failed(("e2", "ambient_5db_guard"), base="ambient_5db") == "mix: noise segment: boom"
    assert led.failed(("e2", "clean")) is None
    assert led.failed_items() == [ItemKey("e1", "clean"), ItemKey("e2", "ambient_5db")]
    with pytest.raises(RunError, match=r"3 failed items exceed run.max_failures=0.25 \(last: e3/clean at asr: x\)"):
        led.record("asr", ("e3", "clean"), "x")
    assert led.exceeded and [r.stage for r in led.records()] == ["speech", "mix", "asr"]


def test_count_policy_and_deferred_check() -> None:
    led = FailureLedger(1, total_items=100)  # ≥ 1 is an absolute count
    led.record("asr", ("a", "clean"), "r1", enforce=False)
    led.record("asr", ("b", "clean"), "r2", enforce=False)
    assert led.exceeded
    with pytest.raises(RunError, match="2 failed items"):
        led.check()
    zero = FailureLedger(0, total_items=3)
    with pytest.raises(RunError):
        zero.record("speech", ("a", "clean"), "r")
