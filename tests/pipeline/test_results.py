"""ItemScore / RunManifest: rows written back byte for byte; readers refuse what they do not know."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from stresstest.grid import ConditionGrid
from stresstest.results import ItemScore, RunManifest


def test_item_row_round_trip_keeps_set_fields_and_number_types() -> None:
    row = {
        "encounter_id": "e1",
        "condition": "ambient_5db",
        "snr_db": 5.0,
        "judge_score": 3,
        "item_wer": 10.0,
        "abstention_rate": 0,
        "asr_delta_e": None,
        "failed": False,
        "mix": {
            "family": "ambient",
            "noise_source": "builtin:ambient",
            "noise_offset_s": 0.0,
            "target_snr_db": 5.0,
            "measured_snr_db": 5.0,
            "speech_rms": 0.1,
            "noise_gain": 0.25,
            "clip_scale": 1.0,
        },
    }
    out = ItemScore.model_validate(row).to_row()
    assert json.dumps(out, sort_keys=True) == json.dumps(row, sort_keys=True)  # 3 stays 3, 10.0 stays 10.0
    with pytest.raises(ValidationError, match="trigger_risk"):
        ItemScore.model_validate({**row, "trigger_risk": 1.0})  # a new field must be declared
    with pytest.raises(ValidationError, match="asr_sub"):
        ItemScore.model_validate({**row, "asr_sub": "three"})
    with pytest.raises(ValidationError, match="speech_rms"):  # the mixture's facts are a MixInfo, not any dict
        ItemScore.model_validate({**row, "mix": {"clip_scale": 1.0}})


def test_manifest_reads_old_and_partial_manifests() -> None:
    assert RunManifest.model_validate({}).schema_version == 1
    grid = ConditionGrid.build(["ambient"], [5.0], ["ambient_5db"])
    m = RunManifest(schema_version=2, conditions=list(grid), failures=[])
    back = RunManifest.model_validate(json.loads(json.dumps(m.to_json())))
    assert ConditionGrid(back.conditions) == grid
    assert m.to_json()["conditions"][2]["base"] == "ambient_5db"
    with pytest.raises(ValidationError, match="surprise"):
        RunManifest.model_validate({"surprise": 1})
