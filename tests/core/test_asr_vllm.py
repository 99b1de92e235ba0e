"""``asr.backend: vllm`` without vLLM: the Hugging Face conversion, the strict config, the decoding rules.

The real engine runs in tests/llm/test_vllm_asr_cpu.py (the vLLM CPU venv); transformers' own loading of the
converted folder in tests/llm/test_asr_hf_checkpoint.py. Here: the name mapping (a bijection on every
openai-whisper parameter), the converted folder (files, config, weights equal to the openai-whisper
conversion's, cached by digest, atomic, rebuilt when damaged), config validation, and the window rules of
:meth:`VLLMWhisperBackend.decode_windows` against a stand-in engine (no-speech skipping, average log-prob,
token-limit hits, one ``generate`` call for all windows).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from stresstest.asr import hf_convert
from stresstest.asr.backends import bundled_tiny_en_path
from stresstest.asr.base import DecodingOptions
from stresstest.asr.convert import ct2_whisper_openai_arrays
from stresstest.asr.hf_convert import hf_checkpoint_for_ct2, hf_to_openai_name, openai_to_hf_name
from stresstest.asr.stage import ASRConfig, make_backend
from stresstest.asr.vllm_backend import NO_SPEECH_TOP_K, VLLMASROptions, VLLMWhisperBackend, _no_speech_prob
from stresstest.config import load_config
from stresstest.errors import ASRError, ConfigError

safetensors_numpy = pytest.importorskip(
    "safetensors.numpy", reason="safetensors is not installed (pip install 'stresstest[dev]')"
)


@pytest.fixture(scope="module")
def openai_arrays() -> dict[str, Any]:
    return ct2_whisper_openai_arrays(bundled_tiny_en_path())


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hf_checkpoint_for_ct2(bundled_tiny_en_path(), tmp_path_factory.mktemp("cache"))


# ------------------------------------------------------------------------------------------- names


def test_name_mapping_round_trips_on_every_parameter(openai_arrays: dict[str, Any]) -> None:
    names = list(openai_arrays["model_state_dict"])
    hf = [openai_to_hf_name(n) for n in names]
    assert len(set(hf)) == len(names)  # injective
    assert [hf_to_openai_name(h) for h in hf] == names
    assert all(h.startswith("model.encoder.") or h.startswith("model.decoder.") for h in hf)
    assert (
        openai_to_hf_name("decoder.blocks.3.cross_attn.value.bias") == "model.decoder.layers.3.encoder_attn.v_proj.bias"
    )
    assert openai_to_hf_name("encoder.positional_embedding") == "model.encoder.embed_positions.weight"
    assert openai_to_hf_name("encoder.blocks.0.mlp.2.weight") == "model.encoder.layers.0.fc2.weight"


@pytest.mark.parametrize("bad", ["encoder.blocks.0.attn.rotary.weight", "decoder.proj.weight", "nonsense"])
def test_unknown_names_are_refused(bad: str) -> None:
    with pytest.raises(ASRError, match="no Hugging Face name"):
        openai_to_hf_name(bad)
    with pytest.raises(ASRError, match="no openai-whisper name"):
        hf_to_openai_name("model." + bad)


# ------------------------------------------------------------------------------------------ folder


def test_converted_folder_has_config_weights_and_tokenizer(converted: Path, openai_arrays: dict[str, Any]) -> None:
    assert {p.name for p in converted.iterdir()} == {
        "config.json",
        "generation_config.json",
        "preprocessor_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "model.safetensors",
        "conversion.json",
    }
    cfg = json.loads((converted / "config.json").read_text())
    assert cfg["architectures"] == ["WhisperForConditionalGeneration"]
    # tiny.en: 4+4 layers, 6 heads, width 384, English vocabulary, 80 mel bins, 1500 frames, 448 tokens.
    assert (cfg["vocab_size"], cfg["d_model"], cfg["encoder_layers"], cfg["decoder_layers"]) == (51864, 384, 4, 4)
    assert (cfg["encoder_attention_heads"], cfg["num_mel_bins"], cfg["max_source_positions"]) == (6, 80, 1500)
    assert cfg["max_target_positions"] == 448 and cfg["decoder_start_token_id"] == 50257
    assert cfg["eos_token_id"] == 50256 and cfg["tie_word_embeddings"] is True and len(cfg["suppress_tokens"]) > 50
    gen = json.loads((converted / "generation_config.json").read_text())
    assert gen["is_multilingual"] is False and gen["no_timestamps_token_id"] == 50362 and "lang_to_id" not in gen
    assert json.loads((converted / "preprocessor_config.json").read_text())["feature_size"] == 80
    weights = safetensors_numpy.load_file(str(converted / "model.safetensors"))
    sd = openai_arrays["model_state_dict"]
    assert set(weights) == {openai_to_hf_name(k) for k in sd}
    for name, arr in sd.items():
        got = weights[openai_to_hf_name(name)]
        assert got.dtype == np.float32 and np.array_equal(got, arr), name
    tok = json.loads((converted / "tokenizer.json").read_text())
    by_id = {a["id"]: a for a in tok["added_tokens"]}
    # Every id the model can emit decodes: the timestamps the CTranslate2 tokenizer lacks are added, special.
    assert max(by_id) == 51863 and by_id[50363]["content"] == "<|0.00|>" and by_id[51863]["content"] == "<|30.00|>"
    assert all(by_id[i]["special"] for i in range(50256, 51864))
    manifest = json.loads((converted / "conversion.json").read_text())
    assert manifest["converter_version"] == hf_convert.HF_CONVERTER_VERSION
    assert manifest["files"]["model.safetensors"]["size"] == (converted / "model.safetensors").stat().st_size


def test_cached_by_digest_and_rebuilt_when_damaged(tmp_path: Path) -> None:
    first = hf_checkpoint_for_ct2(bundled_tiny_en_path(), tmp_path)
    assert first.parent == tmp_path / "asr-models" and hf_convert.HF_CONVERTER_VERSION in first.name
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert hf_checkpoint_for_ct2(bundled_tiny_en_path(), tmp_path) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not rewritten
    (first / "tokenizer_config.json").write_text("{}")  # damaged: content no longer matches the manifest
    again = hf_checkpoint_for_ct2(bundled_tiny_en_path(), tmp_path)
    assert again == first and json.loads((again / "tokenizer_config.json").read_text())["tokenizer_class"]
    assert [p.name for p in (tmp_path / "asr-models").iterdir()] == [first.name]  # no temp or stale folders


def test_failed_conversion_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(hf_convert, "_tokenizer_files", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        hf_checkpoint_for_ct2(bundled_tiny_en_path(), tmp_path)
    assert list((tmp_path / "asr-models").iterdir()) == []


def test_a_folder_without_model_bin_is_named(tmp_path: Path) -> None:
    with pytest.raises(ASRError, match=r"expected a CTranslate2 Whisper model \(model.bin\)"):
        hf_checkpoint_for_ct2(tmp_path, tmp_path)


# ------------------------------------------------------------------------------------------ config


def test_config_requires_no_timestamps_and_a_vllm_dtype() -> None:
    with pytest.raises(ValueError, match="asr.decoding.without_timestamps must be true"):
        ASRConfig.model_validate({"backend": "vllm"})
    with pytest.raises(ValueError, match="asr.compute_type 'int8' is not a vLLM dtype"):
        ASRConfig.model_validate({"backend": "vllm", "compute_type": "int8", "decoding": {"without_timestamps": True}})
    with pytest.raises(ValueError, match="greedily only"):
        ASRConfig.model_validate({"backend": "vllm", "decoding": {"without_timestamps": True, "beam_size": 5}})
    with pytest.raises(ValueError, match="no_speech_threshold 0.01"):
        ASRConfig.model_validate(
            {"backend": "vllm", "decoding": {"without_timestamps": True, "no_speech_threshold": 0.01}}
        )
    cfg = ASRConfig.model_validate(
        {"backend": "vllm", "decoding": {"without_timestamps": True}, "vllm": {"max_num_seqs": 4}}
    )
    assert cfg.vllm.max_num_seqs == 4 and cfg.vllm.resolved("cpu")["enforce_eager"] is True
    # The other backends keep their defaults (timestamps on) and never see these rules.
    assert ASRConfig.model_validate({"compute_type": "int8"}).decoding.without_timestamps is False


def test_yaml_errors_name_the_key_path(tmp_path: Path) -> None:
    base = "corpus:\n  kind: osce\n  path: corpus\nasr:\n  backend: vllm\n  decoding:\n    without_timestamps: true\n"
    p = tmp_path / "c.yaml"
    p.write_text(base + "  vllm:\n    max_num_seq: 4\n")
    with pytest.raises(ConfigError, match=r"asr\.vllm\.max_num_seq: unknown key"):
        load_config(p)
    p.write_text(base.replace("without_timestamps: true", "without_timestamps: false"))
    with pytest.raises(ConfigError, match="without_timestamps must be true"):
        load_config(p)
    p.write_text(base)
    assert load_config(p).asr.backend == "vllm"


def test_backend_without_vllm_names_the_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError, whatever is installed
    cfg = ASRConfig.model_validate({"backend": "vllm", "decoding": {"without_timestamps": True}})
    backend = make_backend(cfg, tmp_path)
    assert isinstance(backend, VLLMWhisperBackend) and backend.model_id == "vllm:tiny.en-bundled"
    with pytest.raises(ASRError, match="needs vLLM, which is not installed: pip install vllm"):
        backend.runtime(1)


def test_a_model_name_missing_from_the_hf_cache_names_the_download(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    constants = pytest.importorskip(
        "huggingface_hub.constants", reason="huggingface_hub (a faster-whisper dependency) is missing: make install"
    )
    # An empty cache instead of the user's (read at call time; nothing is written there).
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    from stresstest.asr.vllm_backend import resolve_model

    with pytest.raises(ASRError, match=r"huggingface-cli download openai/whisper-large-v3"):
        resolve_model("large-v3", tmp_path)
    assert not (tmp_path / "empty-hf-cache").exists() or not any((tmp_path / "empty-hf-cache").rglob("*.safetensors"))


# ---------------------------------------------------------------------------- rules, stand-in engine


def _lp(x: float) -> SimpleNamespace:
    return SimpleNamespace(logprob=x)


class _FakeLLM:
    """What decode_windows reads from ``vllm.LLM``: one scripted output per window, in order."""

    def __init__(self, outputs: list[tuple[str, list[int], list[float], float | None, str]]) -> None:
        self.outputs, self.calls = outputs, 0
        self.model_config = SimpleNamespace(hf_config=SimpleNamespace(eos_token_id=50256))

    def get_tokenizer(self) -> Any:
        return SimpleNamespace(get_vocab=lambda: {"<|nocaptions|>": 50361})

    def generate(self, requests: list[dict], params: Any, use_tqdm: bool) -> list[Any]:
        self.calls += 1
        self.requests = requests
        assert len(requests) == len(self.outputs)
        res = []
        for text, ids, lps, p_ns, finish in self.outputs:
            dist = {50362: _lp(-0.1), 50363: _lp(-3.0)}
            if p_ns is not None:
                dist[50361] = _lp(math.log(p_ns))
            res.append(
                SimpleNamespace(
                    prompt_logprobs=[None, dist],
                    outputs=[
                        SimpleNamespace(
                            text=text,
                            token_ids=ids,
                            finish_reason=finish,
                            logprobs=[{t: _lp(lp)} for t, lp in zip(ids, lps, strict=True)],
                        )
                    ],
                )
            )
        return res


def test_decode_windows_applies_whispers_silence_rule_in_one_call(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 51864}))
    backend = VLLMWhisperBackend(None, device="cpu")
    backend._resolved = ("tiny.en-bundled", str(tmp_path), None)
    fake = _FakeLLM(
        [
            (" hello there", [1, 2, 50256], [-0.1, -0.1, -0.1], 0.1, "stop"),  # speech: kept
            (" um", [3, 50256], [-3.0, -3.0], 0.9, "stop"),  # no speech and unsure: dropped
            (" sure", [4, 50256], [-0.2, -0.2], 0.9, "stop"),  # no speech but confident (avg > -1): kept
            (" la la", [5] * 224, [-0.01] * 224, None, "length"),  # no-speech token outside the top-k: kept
        ]
    )
    backend._llm = lambda: fake  # type: ignore[method-assign]
    backend._sampling = lambda llm, options: None  # type: ignore[method-assign]
    windows = [np.zeros(16000, np.float32) for _ in range(4)]
    res = backend.decode_windows(windows, DecodingOptions(without_timestamps=True))
    assert (
        fake.calls == 1
        and [r["decoder_prompt"] for r in fake.requests] == ["<|startoftranscript|><|notimestamps|>"] * 4
    )
    assert [r.text for r in res] == ["hello there", "", "sure", "la la"]
    assert [r.n_tokens for r in res] == [2, 1, 1, 224] and [r.token_limit_hits for r in res] == [0, 0, 0, 1]
    # Without a threshold nothing is dropped.
    fake.calls = 0
    res = backend.decode_windows(windows, DecodingOptions(without_timestamps=True, no_speech_threshold=None))
    assert [r.text for r in res][1] == "um"
    with pytest.raises(ASRError, match="without_timestamps must be true"):
        backend.decode_windows(windows, DecodingOptions())


def test_multilingual_models_get_the_language_and_task_tokens(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 51866}))
    assert VLLMWhisperBackend.prompt(str(tmp_path)) == "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>"
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 51864}))
    assert VLLMWhisperBackend.prompt(str(tmp_path)) == "<|startoftranscript|><|notimestamps|>"


def test_no_speech_probability_from_prompt_logprobs() -> None:
    dist = {50362: _lp(math.log(0.5)), 50361: _lp(math.log(0.3))}
    assert _no_speech_prob([None, dist], 50361) == pytest.approx(0.3)
    # Outside the top-k: bounded by the smallest probability returned (≤ 1/k, below any accepted threshold).
    top = {i: _lp(math.log(0.04)) for i in range(NO_SPEECH_TOP_K)}
    assert _no_speech_prob([None, top], 50361) == pytest.approx(0.04)
    with pytest.raises(ASRError, match="no prompt log-probs"):
        _no_speech_prob(None, 50361)


def test_vllm_asr_engine_defaults_follow_the_device() -> None:
    """Unset engine options are CPU-oriented on the CPU build and GPU-appropriate on CUDA; set ones win."""
    opts = VLLMASROptions()
    assert opts.resolved("cpu") == {"max_num_seqs": 16, "enforce_eager": True, "gpu_memory_utilization": 0.85}
    assert opts.resolved("cuda") == {"max_num_seqs": 256, "enforce_eager": False, "gpu_memory_utilization": 0.85}
    mine = VLLMASROptions(max_num_seqs=8, enforce_eager=True, gpu_memory_utilization=0.4).resolved("cuda")
    assert mine == {"max_num_seqs": 8, "enforce_eager": True, "gpu_memory_utilization": 0.4}
