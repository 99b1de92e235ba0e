"""Conditions as chains of transforms: each step's arithmetic, determinism, and the config grammar."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stresstest.audio import write_wav
from stresstest.config import load_config
from stresstest.errors import ConfigError
from stresstest.grid import Condition, ConditionGrid
from stresstest.noise import NoiseSpec, make_noise_source
from stresstest.noise.chain import Step, check_chain, mulaw_decode, mulaw_encode, render_chain
from stresstest.noise.stage import mix_jobs

SR = 16000


def _speech(seconds: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(int(seconds * SR)) / SR
    on = (t % 2.0) < 1.5
    x = (0.3 * np.sin(2 * np.pi * 440 * t) * on + 0.1 * np.sin(2 * np.pi * 1500 * t) * on).astype(np.float32)
    return x, on


def _steps(*raw: dict) -> list[Step]:
    return [Step.model_validate(r) for r in raw]


def test_g711_mulaw_matches_the_reference_tables() -> None:
    # Values of the ITU-T G.711 reference encoder (as in the former stdlib audioop.lin2ulaw / ulaw2lin).
    lin = np.array([0, 1, -1, 100, -100, 1000, -1000, 8000, -8000, 32767, -32768])
    codes = mulaw_encode(lin)
    assert codes.tolist() == [255, 255, 126, 242, 114, 206, 78, 160, 32, 128, 0]
    assert mulaw_decode(codes).tolist() == [0, 0, -8, 104, -104, 988, -988, 7932, -7932, 32124, -32124]
    # every code decodes and re-encodes to itself (except the two zero codes, which both mean 0)
    allc = np.arange(256)
    back = mulaw_encode(mulaw_decode(allc))
    assert np.array_equal(back[allc != 127], allc[allc != 127])


def test_g711_mulaw_equals_audioop_on_every_16_bit_value() -> None:
    audioop = pytest.importorskip("audioop", reason="audioop is in the standard library up to Python 3.12 only")
    lin = np.arange(-32768, 32768)
    ref = np.frombuffer(audioop.lin2ulaw(lin.astype("<i2").tobytes(), 2), dtype=np.uint8)
    assert np.array_equal(mulaw_encode(lin), ref)
    codes = np.arange(256)
    assert np.array_equal(
        mulaw_decode(codes), np.frombuffer(audioop.ulaw2lin(codes.astype(np.uint8).tobytes(), 2), dtype="<i2")
    )


def test_same_seed_same_audio_and_every_step_recorded() -> None:
    x, mask = _speech()
    src = {"ambient": make_noise_source(NoiseSpec(family="ambient", kind="builtin"), encounters=[], cache_dir=None)}
    steps = _steps(
        {"room": {"rt60_s": 0.3}},
        {"noise": {"family": "ambient", "snr_db": 5}},
        {"telephone": {}},
        {"mulaw": {}},
        {"packet_loss": {"rate": 0.1}},
        {"level": {"gain_db": 6, "clip": 0.5}},
    )
    y1, f1 = render_chain(x, mask, steps, seed=7, encounter_id="E1", sources=src)
    y2, f2 = render_chain(x, mask, steps, seed=7, encounter_id="E1", sources=src)
    assert y1.dtype == np.float32 and y1.shape == x.shape
    assert np.array_equal(y1, y2) and f1["chain"] == f2["chain"]
    assert [e["kind"] for e in f1["chain"]] == ["room", "noise", "telephone", "mulaw", "packet_loss", "level"]
    assert f1["target_snr_db"] == 5.0 and abs(f1["measured_snr_db"] - 5.0) <= 0.1
    room = f1["chain"][0]
    assert room["params"]["rt60_s"] == 0.3 and 0.2 < room["measured_rt60_s"] < 0.6
    assert f1["chain"][5]["clipped_fraction"] > 0.0  # +6 dB into a 0.5 limit clips (at 8 kHz, then resampled)
    y4, f4 = render_chain(
        x, mask, _steps({"level": {"gain_db": 6, "clip": 0.5}}), seed=7, encounter_id="E1", sources=src
    )
    assert float(np.max(np.abs(y4))) == pytest.approx(0.5) and f4["chain"][0]["clipped_fraction"] > 0.2
    y3, _ = render_chain(x, mask, steps, seed=8, encounter_id="E1", sources=src)
    assert not np.array_equal(y1, y3)  # another seed: another noise segment and loss pattern


def test_telephone_band_removes_what_lies_outside_300_3400_hz() -> None:
    t = np.arange(4 * SR) / SR
    mask = np.ones(t.size, bool)

    def band_power(f: float) -> float:
        y, facts = render_chain(
            (0.3 * np.sin(2 * np.pi * f * t)).astype(np.float32),
            mask,
            _steps({"telephone": {}}),
            seed=0,
            encounter_id="E",
            sources={},
        )
        assert facts["chain"][0]["sample_rate_hz"] == 8000
        return float(np.sqrt(np.mean(y[SR:] ** 2)))

    assert band_power(1000.0) > 0.15  # in band: about 0.3 / sqrt(2)
    assert band_power(100.0) < 0.03  # below 300 Hz
    assert band_power(6000.0) < 0.01  # above 4 kHz: gone with the 8-kHz resampling


def test_packet_loss_patterns_are_nested_across_rates() -> None:
    x = np.full(2 * SR, 0.5, np.float32)
    mask = np.ones(x.size, bool)
    y5, f5 = render_chain(x, mask, _steps({"packet_loss": {"rate": 0.05}}), seed=3, encounter_id="E", sources={})
    y20, f20 = render_chain(x, mask, _steps({"packet_loss": {"rate": 0.2}}), seed=3, encounter_id="E", sources={})
    lost5, lost20 = y5.reshape(-1, 320)[:, 0] == 0, y20.reshape(-1, 320)[:, 0] == 0
    assert lost5.sum() == f5["chain"][0]["n_lost"] and lost20.sum() == f20["chain"][0]["n_lost"]
    assert np.all(lost20[lost5]) and lost20.sum() > lost5.sum()


def test_opus_runs_offline_near_its_bitrate() -> None:
    x, mask = _speech(6.0)
    y, f = render_chain(x, mask, _steps({"opus": {"bitrate_kbps": 16}}), seed=0, encounter_id="E", sources={})
    step = f["chain"][0]
    assert 8.0 < step["achieved_kbps"] < 32.0
    assert y.shape == x.shape and float(np.corrcoef(x[SR:-SR], y[SR:-SR])[0, 1]) > 0.5


def test_measured_impulse_response_from_a_folder(tmp_path: Path) -> None:
    for k, decay in enumerate((0.05, 0.2)):
        t = np.arange(int(0.4 * SR)) / SR
        h = np.exp(-t / decay) * np.random.default_rng(k).standard_normal(t.size)
        h[0] = 4.0
        write_wav(tmp_path / f"ir{k}.wav", (h / np.max(np.abs(h)) * 0.9).astype(np.float32))
    x, mask = _speech()
    steps = _steps({"room": {"ir": str(tmp_path)}})
    y, f = render_chain(x, mask, steps, seed=1, encounter_id="E", sources={})
    room = f["chain"][0]
    assert room["ir_choices"] == 2 and room["ir_file"].endswith(f"ir{room['ir_index']}.wav")
    # rescaled to the dry speech's level on active speech
    assert np.sqrt(np.mean(y[mask].astype(np.float64) ** 2)) == pytest.approx(
        np.sqrt(np.mean(x[mask].astype(np.float64) ** 2)), rel=1e-3
    )


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([], "at least one step"),
        ([{"telephone": {}}, {"room": {"rt60_s": 0.3}}], "before the channel steps"),
        ([{"mulaw": {}}], "needs a 'telephone' step"),
        ([{"level": {}}, {"level": {}}], "appears twice"),
        ([{"noise": {"family": "babble", "snr_db": 5}}], "not configured"),
    ],
)
def test_chain_order_rules(steps: list[dict], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_chain(_steps(*steps), ["ambient"])


_BASE = """run: {seed: 1}
corpus: {kind: osce, path: CORPUS}
noise:
  ambient: {family: ambient, kind: builtin}
snr_db: [10, 5]
"""


def _cfg(tmp_path: Path, chains: str) -> Path:
    corpus = Path(__file__).resolve().parents[2] / "data" / "osce" / "transcripts"
    p = tmp_path / "c.yaml"
    p.write_text(_BASE.replace("CORPUS", str(corpus)) + chains, encoding="utf-8")
    return p


def test_axes_expand_to_named_conditions_and_the_plain_grid_is_unchanged(tmp_path: Path) -> None:
    cfg = load_config(
        _cfg(
            tmp_path,
            """chains:
  axes:
    room:
      rt0.3: [{room: {rt60_s: 0.3}}]
      rt0.8: [{room: {rt60_s: 0.8, distance_m: 2}}]
    channel:
      wideband: []
      g711: [{telephone: {}}, {mulaw: {}}]
  conditions:
    loud: [{level: {gain_db: 12}}]
""",
        )
    )
    grid = cfg.grid()
    assert grid.ids == [
        "clean",
        "ambient_10db",
        "ambient_5db",
        "rt0.3_wideband",
        "rt0.3_g711",
        "rt0.8_wideband",
        "rt0.8_g711",
        "loud",
    ]
    c = grid.get("rt0.8_g711")
    assert c.family == "chain" and c.snr_db is None and c.axes == {"room": "rt0.8", "channel": "g711"}
    assert [next(iter(s)) for s in c.chain or []] == ["room", "telephone", "mulaw"]
    assert (c.chain or [])[0]["room"]["distance_m"] == 2.0
    # the family × SNR conditions are exactly what they were without chains (mixing jobs, manifest form)
    plain = ConditionGrid.build(["ambient"], [10.0, 5.0])
    assert [x.to_json() for x in grid if not x.is_chain] == plain.to_json()
    assert [(j.family, j.conditions) for j in mix_jobs(["E"], grid)] == [("ambient", ("ambient_10db", "ambient_5db"))]
    assert ConditionGrid.from_json(grid.to_json()) == grid
    assert Condition.model_validate(c.to_json()).chain == c.chain


@pytest.mark.parametrize(
    ("chains", "where"),
    [
        (
            "chains:\n  conditions:\n    x: [{room: {rt60_s: 0.3, distnce_m: 1}}]\n",
            r"c\.yaml:8: chains\.conditions\.x\.0",
        ),
        (
            "chains:\n  conditions:\n    x: [{room: {rt60_s: 9}}]\n",
            r"c\.yaml:8: chains\.conditions\.x\.0\.room\.rt60_s",
        ),
        ("chains:\n  conditions:\n    x: [{telephone: {}}, {room: {rt60_s: 0.3}}]\n", r"c\.yaml:7: chains: .*'x'"),
        ("chains:\n  conditions:\n    ambient_5db: [{level: {}}]\n", "reserved"),
        ("chains:\n  conditions:\n    x: [{noise: {family: babble, snr_db: 5}}]\n", "not configured"),
        ("chains:\n  axes:\n    room:\n      a_b: [{level: {}}]\n", "joined with '_'"),
    ],
)
def test_bad_chains_are_config_errors_with_file_and_line(tmp_path: Path, chains: str, where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        load_config(_cfg(tmp_path, chains))


def test_a_plain_mixture_record_is_serialised_as_before_chains() -> None:
    from stresstest.records import MixInfo, revise
    from stresstest.steps import MulawFacts

    info = MixInfo(
        family="ambient",
        noise_source="builtin:ambient/x",
        noise_offset_s=0.0,
        target_snr_db=5.0,
        measured_snr_db=5.01,
        speech_rms=0.1,
        noise_gain=0.2,
        clip_scale=1.0,
    )
    assert list(info.model_dump(mode="json")) == [
        "family",
        "noise_source",
        "noise_offset_s",
        "noise_recipe",
        "target_snr_db",
        "measured_snr_db",
        "speech_rms",
        "noise_gain",
        "clip_scale",
    ]
    chained = revise(info, family="chain", chain=[{"kind": "mulaw", "params": {}}])
    assert isinstance(chained.chain[0], MulawFacts)  # typed when made, and written back with the keys it was given
    assert chained.model_dump(mode="json")["chain"] == [{"kind": "mulaw", "params": {}}]
    assert MixInfo.model_validate(chained.model_dump(mode="json")) == chained
