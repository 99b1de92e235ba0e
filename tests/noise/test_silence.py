"""The ``silence`` chain step: inserted stretches, the shifted timeline, determinism and its config rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stresstest.audio import write_wav
from stresstest.config import load_config
from stresstest.errors import ConfigError, MixError
from stresstest.noise import NoiseSpec, make_noise_source
from stresstest.noise.chain import Step, build_chain, chain_key, check_chain, mask_runs, render_chain, shift_time
from stresstest.records import SpeechAudio

SR = 16000


def _dialogue(n_turns: int = 7, floor: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Turns of 1 s (a tone each) separated by 0.5-s pauses, on a noise floor of RMS ``floor``."""
    rng = np.random.default_rng(0)
    pieces, mask = [], []
    for k in range(n_turns):
        t = np.arange(SR) / SR
        pieces.append(0.3 * np.sin(2 * np.pi * (300 + 50 * k) * t))
        mask.append(np.ones(SR, bool))
        if k < n_turns - 1:
            pieces.append(np.zeros(SR // 2))
            mask.append(np.zeros(SR // 2, bool))
    x = np.concatenate(pieces) + floor * rng.standard_normal(sum(p.size for p in pieces))
    return x.astype(np.float32), np.concatenate(mask)


def _steps(*raw: dict) -> list[Step]:
    return [Step.model_validate(r) for r in raw]


def test_stretches_are_inserted_between_turns_and_recorded() -> None:
    x, mask = _dialogue()
    y, facts = render_chain(
        x,
        mask,
        _steps({"silence": {"pause_s": 2, "every": 1, "fill": "zeros"}}),
        seed=3,
        encounter_id="E",
        sources={},
        turn_ids=[0, 2, 3, 4, 5, 6, 8],
    )
    entry = facts["chain"][0]
    assert entry["kind"] == "silence" and entry["params"] == {"pause_s": 2.0, "every": 1, "fill": "zeros"}
    st = entry["stretches"]
    assert len(st) == 6 and entry["runs"] == 7 and entry["phase"] == 0
    assert [s["after_turn"] for s in st] == [0, 2, 3, 4, 5, 6] and [s["after_run"] for s in st] == list(range(6))
    assert y.size == x.size + 6 * 2 * SR and facts["inserted_s"] == 12.0
    # every stretch sits at the midpoint of its pause (input timeline), shifted by the stretches before it
    for k, s in enumerate(st):
        assert s["at_s"] == pytest.approx(1.0 + 1.5 * k + 0.25)
        assert s["start_s"] == pytest.approx(s["at_s"] + 2.0 * k) and s["end_s"] == pytest.approx(s["start_s"] + 2)
        assert not np.any(y[round(s["start_s"] * SR) : round(s["end_s"] * SR)])
    # the speech is untouched, only moved: cutting the stretches out gives the input back bit for bit
    keep = np.ones(y.size, bool)
    for s in st:
        keep[round(s["start_s"] * SR) : round(s["end_s"] * SR)] = False
    assert np.array_equal(y[keep], x)
    # shift_time maps every turn's start in the input to its start in the output
    for a, _ in mask_runs(mask):
        t_out = shift_time(a / SR, st)
        assert np.array_equal(y[round(t_out * SR) : round(t_out * SR) + 100], x[a : a + 100])


def test_every_and_the_seeded_phase() -> None:
    x, mask = _dialogue(n_turns=13)
    phases = set()
    for seed in range(12):
        _, f1 = render_chain(
            x, mask, _steps({"silence": {"pause_s": 1, "every": 4}}), seed=seed, encounter_id="E", sources={}
        )
        y1, f2 = render_chain(
            x, mask, _steps({"silence": {"pause_s": 1, "every": 4}}), seed=seed, encounter_id="E", sources={}
        )
        entry = f1["chain"][0]
        assert f1 == f2  # same seed, same stretches
        runs = [s["after_run"] for s in entry["stretches"]]
        assert runs == [k for k in range(12) if k % 4 == entry["phase"]]
        assert all(s["after_turn"] is None for s in entry["stretches"])  # no turn ids given: runs only
        phases.add(entry["phase"])
    assert len(phases) > 1  # the phase depends on the seed


def test_floor_fill_reuses_the_recordings_own_non_speech() -> None:
    x, mask = _dialogue(floor=0.01)
    steps = _steps({"silence": {"pause_s": 1}})
    y, facts = render_chain(x, mask, steps, seed=1, encounter_id="E", sources={})
    y2, _ = render_chain(x, mask, steps, seed=1, encounter_id="E", sources={})
    assert np.array_equal(y, y2)
    entry = facts["chain"][0]
    assert entry["fill_source"] == "floor"
    pool = set(x[~mask].tolist())
    first = entry["stretches"][0]  # the recorded offset says where in the floor the first stretch starts
    assert y[round(first["start_s"] * SR)] == x[~mask][entry["floor_offset"]]
    for s in entry["stretches"]:
        seg = y[round(s["start_s"] * SR) : round(s["end_s"] * SR)]
        assert seg.size == SR and set(seg.tolist()) <= pool and np.std(seg) == pytest.approx(0.01, rel=0.1)
    # a TTS rendering has digital silence between turns: the floor is zeros, and says so
    silent, m = _dialogue()
    _, f = render_chain(silent, m, steps, seed=1, encounter_id="E", sources={})
    assert f["chain"][0]["fill_source"] == "zeros" and f["chain"][0]["floor_offset"] is None


def test_later_steps_act_on_the_lengthened_timeline() -> None:
    x, mask = _dialogue()
    src = {"ambient": make_noise_source(NoiseSpec(family="ambient", kind="builtin"), encounters=[], cache_dir=None)}
    steps = _steps(
        {"silence": {"pause_s": 2, "every": 2}},
        {"room": {"rt60_s": 0.3}},
        {"noise": {"family": "ambient", "snr_db": 10}},
        {"telephone": {}},
    )
    y, facts = render_chain(x, mask, steps, seed=5, encounter_id="E", sources=src)
    assert y.size == x.size + round(facts["inserted_s"] * SR)
    # the SNR meets its target on the lengthened recording
    assert facts["measured_snr_db"] == pytest.approx(10.0, abs=0.1)
    # the stretches now hold the noise the rest of the recording has
    s = facts["chain"][0]["stretches"][-1]
    seg = y[round(s["start_s"] * SR) + SR // 2 : round(s["end_s"] * SR)]
    assert float(np.sqrt(np.mean(seg.astype(np.float64) ** 2))) > 1e-3


def test_the_speech_mask_moves_with_the_speech() -> None:
    # A later step sets its SNR on the speech where it now is: a mask left in the input timeline would cover
    # inserted silence and measure the speech far too quiet.
    x, mask = _dialogue()
    src = {"ambient": make_noise_source(NoiseSpec(family="ambient", kind="builtin"), encounters=[], cache_dir=None)}
    steps = _steps({"silence": {"pause_s": 3, "fill": "zeros"}}, {"noise": {"family": "ambient", "snr_db": 10}})
    _, facts = render_chain(x, mask, steps, seed=5, encounter_id="E", sources=src)
    assert facts["speech_rms"] == pytest.approx(float(np.sqrt(np.mean(x[mask].astype(np.float64) ** 2))), rel=1e-6)


def test_a_vad_mask_is_refused_per_item(tmp_path: Path) -> None:
    x, mask = _dialogue()
    write_wav(tmp_path / "s.wav", x)
    runs = [(a / SR, b / SR) for a, b in mask_runs(mask)]
    steps = [{"silence": {"pause_s": 2}}]

    def speech(source: str) -> SpeechAudio:
        return SpeechAudio(
            encounter_id="E",
            path=str(tmp_path / "s.wav"),
            duration_s=x.size / SR,
            segments_s=tuple(runs),
            segments_source=source,
        )  # type: ignore[arg-type]

    wav, _, err = build_chain("E", steps, speech("vad"), {}, {}, seed=1, cache_dir=tmp_path / "c")
    assert wav is None and err is not None and "comes from a VAD, not from turns" in err
    wav, info, err = build_chain("E", steps, speech("corpus_timings"), {}, {}, seed=1, cache_dir=tmp_path / "c")
    assert err is None and wav is not None and len(info.chain[0].stretches) == 6


def test_runs_and_turns_must_agree() -> None:
    x, mask = _dialogue()
    with pytest.raises(MixError, match="7 active-speech runs but 6 turns"):
        render_chain(
            x,
            mask,
            _steps({"silence": {"pause_s": 1}}),
            seed=1,
            encounter_id="E",
            sources={},
            turn_ids=[0, 1, 2, 3, 4, 5],
        )


def test_silence_must_come_first() -> None:
    with pytest.raises(ValueError, match="step 1: 'silence' must be the first step"):
        check_chain(_steps({"room": {"rt60_s": 0.3}}, {"silence": {"pause_s": 2}}))
    check_chain(_steps({"silence": {"pause_s": 2}}, {"room": {"rt60_s": 0.3}}))


_BASE = """run: {seed: 1}
corpus: {kind: osce, path: CORPUS}
"""


def _cfg(tmp_path: Path, chains: str) -> Path:
    corpus = Path(__file__).resolve().parents[2] / "data" / "osce" / "transcripts"
    p = tmp_path / "c.yaml"
    p.write_text(_BASE.replace("CORPUS", str(corpus)) + chains, encoding="utf-8")
    return p


@pytest.mark.parametrize(
    ("chains", "where"),
    [
        (
            "chains:\n  conditions:\n    x: [{room: {rt60_s: 0.3}}, {silence: {pause_s: 4}}]\n",
            r"c\.yaml:\d+: chains: .*'x'.*'silence' must be the first step",
        ),
        (
            "chains:\n  axes:\n    room:\n      rt: [{room: {rt60_s: 0.3}}]\n"
            "    probe:\n      s4: [{silence: {pause_s: 4}}]\n",
            r"'rt_s4'.*'silence' must be the first step",
        ),
        (
            "chains:\n  conditions:\n    x: [{silence: {pause_s: 0.1}}]\n",
            r"c\.yaml:5: chains\.conditions\.x\.0\.silence\.pause_s",
        ),
        (
            "chains:\n  conditions:\n    x: [{silence: {pause_s: 4, fill: pink}}]\n",
            r"chains\.conditions\.x\.0\.silence\.fill",
        ),
    ],
)
def test_bad_silence_steps_are_config_errors_naming_the_key(tmp_path: Path, chains: str, where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        load_config(_cfg(tmp_path, chains))


def test_the_demo_rooms_probe_condition_and_its_cache_key() -> None:
    root = Path(__file__).resolve().parents[2]
    cfg = load_config(root / "configs" / "demo-rooms.yaml")
    c = cfg.grid().get("silence6_rt0.3_ambient20")
    assert c.is_chain and next(iter((c.chain or [])[0])) == "silence"
    steps = _steps(*(c.chain or []))
    other = _steps({"silence": {"pause_s": 5, "every": 6}}, *(c.chain or [])[1:])
    # the step's parameters are part of the cache key
    assert chain_key("s", steps, {}, [], 1) != chain_key("s", other, {}, [], 1)
