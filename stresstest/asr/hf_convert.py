"""CTranslate2 Whisper → Hugging Face Whisper checkpoint folder (for vLLM and transformers).

vLLM loads Whisper only as a Hugging Face checkpoint (``WhisperForConditionalGeneration``), while the
bundled tiny.en is a CTranslate2 model. The conversion goes through the openai-whisper state dict that
:mod:`stresstest.asr.convert` already builds (so all three backends run the very same float32 weights) and
renames it to transformers' names (:func:`openai_to_hf_name`, a bijection on Whisper's parameters):

- ``encoder.blocks.N.attn.{query,key,value,out}`` → ``model.encoder.layers.N.self_attn.{q,k,v,out}_proj``,
  ``cross_attn`` → ``encoder_attn``, ``mlp.0``/``mlp.2`` → ``fc1``/``fc2``, the layer norms
  ``attn_ln``/``cross_attn_ln``/``mlp_ln`` → ``self_attn_layer_norm``/``encoder_attn_layer_norm``/
  ``final_layer_norm``, ``ln_post``/``decoder.ln`` → ``layer_norm``;
- the positional embeddings become the ``weight`` of ``embed_positions``; the output projection is tied to
  the token embedding (``tie_word_embeddings``), so no ``proj_out.weight`` is written.

Besides ``model.safetensors`` (float32) the folder holds ``config.json`` (a ``WhisperConfig`` read off the
weights' shapes and the CTranslate2 config's suppress lists), ``generation_config.json`` (special token ids,
suppress lists, alignment heads), ``preprocessor_config.json`` (``WhisperFeatureExtractor``: 80 or 128 mel
bins, 30-s chunks) and the tokenizer (``tokenizer.json`` from the CTranslate2 folder plus the timestamp
tokens, which it lacks, as special tokens so that any id the model emits decodes, and
``tokenizer_config.json``). Only ``json``, ``numpy`` and ``safetensors`` are needed, so the conversion runs
where neither torch, openai-whisper nor transformers is installed.

The folder lives in ``<cache dir>/asr-models/hf-whisper-from-ct2-<sha256 of model.bin, 16 hex>-<converter
version>/``, is written into a temporary sibling and renamed into place (a crash never leaves half a
checkpoint) and carries ``conversion.json`` (source digest, converter version, size and sha256 of every
file); a folder that does not match it is rebuilt.

``python -m stresstest.asr.hf_convert [--cache DIR] [--model CT2_DIR]`` converts and prints the folder.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from stresstest.asr.convert import CONVERTER_VERSION as OPENAI_CONVERTER_VERSION
from stresstest.asr.convert import ct2_whisper_openai_arrays
from stresstest.cache import build_folder, default_cache_dir, folder_is_sound, sha256_file
from stresstest.console import print_made_path
from stresstest.errors import ASRError

HF_CONVERTER_VERSION = f"ct2-hf-1+{OPENAI_CONVERTER_VERSION}"
WEIGHTS = "model.safetensors"
MANIFEST = "conversion.json"
_TIME_PRECISION_S = 0.02

# Per-block renames (openai-whisper → transformers), applied to ``<side>.blocks.N.<rest>``.
_BLOCK = {
    "attn.query": "self_attn.q_proj",
    "attn.key": "self_attn.k_proj",
    "attn.value": "self_attn.v_proj",
    "attn.out": "self_attn.out_proj",
    "attn_ln": "self_attn_layer_norm",
    "cross_attn.query": "encoder_attn.q_proj",
    "cross_attn.key": "encoder_attn.k_proj",
    "cross_attn.value": "encoder_attn.v_proj",
    "cross_attn.out": "encoder_attn.out_proj",
    "cross_attn_ln": "encoder_attn_layer_norm",
    "mlp.0": "fc1",
    "mlp.2": "fc2",
    "mlp_ln": "final_layer_norm",
}
# Whole-name renames outside the blocks (the parameter suffix .weight/.bias is kept unless mapped here).
_GLOBAL = {
    "encoder.conv1": "model.encoder.conv1",
    "encoder.conv2": "model.encoder.conv2",
    "encoder.ln_post": "model.encoder.layer_norm",
    "decoder.ln": "model.decoder.layer_norm",
    "decoder.token_embedding": "model.decoder.embed_tokens",
}
_POSITIONS = {
    "encoder.positional_embedding": "model.encoder.embed_positions.weight",
    "decoder.positional_embedding": "model.decoder.embed_positions.weight",
}
_BLOCK_RE = re.compile(r"^(encoder|decoder)\.blocks\.(\d+)\.(.+)\.(weight|bias)$")
_HF_BLOCK_RE = re.compile(r"^model\.(encoder|decoder)\.layers\.(\d+)\.(.+)\.(weight|bias)$")


def openai_to_hf_name(name: str) -> str:
    """transformers' name for an openai-whisper parameter name.

    Raises:
        ASRError: the name is not a Whisper parameter this mapping knows.
    """
    if name in _POSITIONS:
        return _POSITIONS[name]
    m = _BLOCK_RE.match(name)
    if m and m.group(3) in _BLOCK:
        side, i, rest, kind = m.groups()
        return f"model.{side}.layers.{i}.{_BLOCK[rest]}.{kind}"
    stem, _, kind = name.rpartition(".")
    if stem in _GLOBAL and kind in ("weight", "bias"):
        return f"{_GLOBAL[stem]}.{kind}"
    raise ASRError(f"openai-whisper parameter {name!r}: no Hugging Face name for it (not a Whisper parameter?)")


def hf_to_openai_name(name: str) -> str:
    """The inverse of :func:`openai_to_hf_name`.

    Raises:
        ASRError: the name is not one :func:`openai_to_hf_name` produces.
    """
    for src, dst in _POSITIONS.items():
        if name == dst:
            return src
    m = _HF_BLOCK_RE.match(name)
    if m:
        side, i, rest, kind = m.groups()
        for src, dst in _BLOCK.items():
            if dst == rest:
                return f"{side}.blocks.{i}.{src}.{kind}"
    stem, _, kind = name.rpartition(".")
    for src, dst in _GLOBAL.items():
        if dst == stem and kind in ("weight", "bias"):
            return f"{src}.{kind}"
    raise ASRError(f"Hugging Face Whisper parameter {name!r}: no openai-whisper name for it")


def _vocabulary(model_dir: Path) -> list[str]:
    vocab_file = model_dir / "vocabulary.txt"
    if vocab_file.is_file():
        return vocab_file.read_text(encoding="utf-8").split("\n")
    json_file = model_dir / "vocabulary.json"
    if json_file.is_file():
        return list(json.loads(json_file.read_text(encoding="utf-8")))
    raise ASRError(f"{model_dir}: expected vocabulary.txt or vocabulary.json beside model.bin")


def _special_ids(tokens: list[str], n_vocab: int, where: Path) -> dict[str, int]:
    """Ids of Whisper's special tokens, read off the model's own vocabulary (English-only and multilingual
    vocabularies put them in different places)."""
    index = {t: i for i, t in enumerate(tokens[:n_vocab])}
    names = {
        "eot": "<|endoftext|>",
        "sot": "<|startoftranscript|>",
        "translate": "<|translate|>",
        "transcribe": "<|transcribe|>",
        "sot_lm": "<|startoflm|>",
        "sot_prev": "<|startofprev|>",
        "no_timestamps": "<|notimestamps|>",
        "timestamp_begin": "<|0.00|>",
    }
    out: dict[str, int] = {}
    for key, tok in names.items():
        if tok not in index:
            raise ASRError(f"{where}: the vocabulary has no {tok}; not a Whisper vocabulary")
        out[key] = index[tok]
    no_speech = "<|nospeech|>" if "<|nospeech|>" in index else "<|nocaptions|>"
    if no_speech not in index:
        raise ASRError(f"{where}: the vocabulary has neither <|nospeech|> nor <|nocaptions|>")
    out["no_speech"] = index[no_speech]
    if out["timestamp_begin"] != out["no_timestamps"] + 1:
        raise ASRError(f"{where}: <|0.00|> is not right after <|notimestamps|>; not a Whisper vocabulary")
    return out


def hf_config(dims: dict[str, int], ct2_config: dict[str, Any], special: dict[str, int]) -> dict[str, Any]:
    """``config.json`` of ``WhisperForConditionalGeneration`` for these dimensions."""
    ffn = 4 * dims["n_audio_state"]
    return {
        "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper",
        "vocab_size": dims["n_vocab"],
        "num_mel_bins": dims["n_mels"],
        "d_model": dims["n_audio_state"],
        "encoder_layers": dims["n_audio_layer"],
        "encoder_attention_heads": dims["n_audio_head"],
        "decoder_layers": dims["n_text_layer"],
        "decoder_attention_heads": dims["n_text_head"],
        "encoder_ffn_dim": ffn,
        "decoder_ffn_dim": ffn,
        "max_source_positions": dims["n_audio_ctx"],
        "max_target_positions": dims["n_text_ctx"],
        "activation_function": "gelu",
        "scale_embedding": False,
        "tie_word_embeddings": True,
        "is_encoder_decoder": True,
        "use_cache": True,
        "bos_token_id": special["eot"],
        "eos_token_id": special["eot"],
        "pad_token_id": special["eot"],
        "decoder_start_token_id": special["sot"],
        "suppress_tokens": list(ct2_config.get("suppress_ids") or []),
        "begin_suppress_tokens": list(ct2_config.get("suppress_ids_begin") or [220, special["eot"]]),
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "torch_dtype": "float32",
    }


def hf_generation_config(
    dims: dict[str, int],
    ct2_config: dict[str, Any],
    special: dict[str, int],
    tokens: list[str],
    heads: list[list[int]],
) -> dict[str, Any]:
    """``generation_config.json``: what transformers' Whisper ``generate`` reads (special ids, suppress lists)."""
    multilingual = dims["n_vocab"] >= 51865  # openai-whisper's own rule (English-only models have 51864)
    gen: dict[str, Any] = {
        "decoder_start_token_id": special["sot"],
        "bos_token_id": special["eot"],
        "eos_token_id": special["eot"],
        "pad_token_id": special["eot"],
        "max_length": dims["n_text_ctx"],
        "no_timestamps_token_id": special["no_timestamps"],
        "prev_sot_token_id": special["sot_prev"],
        "is_multilingual": multilingual,
        "max_initial_timestamp_index": 50,
        "return_timestamps": False,
        "suppress_tokens": list(ct2_config.get("suppress_ids") or []),
        "begin_suppress_tokens": list(ct2_config.get("suppress_ids_begin") or [220, special["eot"]]),
        "alignment_heads": heads,
    }
    if multilingual:
        gen["lang_to_id"] = {tokens[i]: i for i in ct2_config.get("lang_ids") or []}
        gen["task_to_id"] = {"transcribe": special["transcribe"], "translate": special["translate"]}
    return gen


def preprocessor_config(n_mels: int) -> dict[str, Any]:
    """``WhisperFeatureExtractor`` settings: Whisper's log-Mel front end (16 kHz, 25 ms / 10 ms, 30-s chunks)."""
    return {
        "feature_extractor_type": "WhisperFeatureExtractor",
        "processor_class": "WhisperProcessor",
        "feature_size": n_mels,
        "sampling_rate": 16000,
        "hop_length": 160,
        "n_fft": 400,
        "chunk_length": 30,
        "n_samples": 480000,
        "nb_max_frames": 3000,
        "padding_side": "right",
        "padding_value": 0.0,
        "return_attention_mask": False,
    }


def _tokenizer_files(model_dir: Path, out_dir: Path, tokens: list[str], n_vocab: int, special: dict[str, int]) -> None:
    """``tokenizer.json`` (the CTranslate2 folder's, completed with every special/timestamp id of the model)
    and ``tokenizer_config.json``."""
    src = model_dir / "tokenizer.json"
    if not src.is_file():
        raise ASRError(f"{model_dir}: expected tokenizer.json (a Hugging Face tokenizer) beside model.bin")
    tok = json.loads(src.read_text(encoding="utf-8"))
    added = list(tok.get("added_tokens") or [])
    have = {int(a["id"]) for a in added}
    base = len(tok.get("model", {}).get("vocab") or {})
    for i in range(base, n_vocab):
        if i in have:
            continue
        if tokens[i] == "":
            raise ASRError(f"{model_dir}: vocabulary entry {i} is empty; cannot complete the tokenizer")
        # Timestamp tokens are special: ``decode(skip_special_tokens=True)`` drops them, as openai-whisper's
        # tokenizer.decode does.
        added.append(
            {
                "id": i,
                "content": tokens[i],
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        )
    tok["added_tokens"] = sorted(added, key=lambda a: int(a["id"]))
    (out_dir / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    eot = tokens[special["eot"]]
    cfg = {
        "tokenizer_class": "WhisperTokenizer",
        "processor_class": "WhisperProcessor",
        "bos_token": eot,
        "eos_token": eot,
        "unk_token": eot,
        "pad_token": eot,
        "add_prefix_space": False,
        "errors": "replace",
        "model_max_length": 1024,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")


def convert(model_dir: str | Path, out_dir: str | Path) -> dict[str, Any]:
    """Write the Hugging Face checkpoint of a CTranslate2 Whisper folder into ``out_dir`` (no manifest).

    Returns:
        ``{"dims": ..., "n_tensors": ...}`` for the manifest.
    """
    return write_hf_checkpoint(ct2_whisper_openai_arrays(model_dir), model_dir, out_dir)


def write_hf_checkpoint(ckpt: dict[str, Any], model_dir: str | Path, out_dir: str | Path) -> dict[str, Any]:
    """Write an openai-whisper checkpoint with numpy arrays (``dims``, ``model_state_dict``, ``alignment_heads``)
    as a Hugging Face folder; ``model_dir`` is a CTranslate2 Whisper folder with the same vocabulary (its
    tokenizer, vocabulary and suppress lists are used). Arrays keep their dtype (the bundled model: float32)."""
    from safetensors.numpy import save_file

    model_dir, out = Path(model_dir), Path(out_dir)
    dims: dict[str, int] = ckpt["dims"]
    tokens = _vocabulary(model_dir)
    if len(tokens) < dims["n_vocab"]:
        raise ASRError(f"{model_dir}: the vocabulary has {len(tokens)} entries, the model {dims['n_vocab']}")
    special = _special_ids(tokens, dims["n_vocab"], model_dir)
    cfg_file = model_dir / "config.json"
    ct2_config = json.loads(cfg_file.read_text()) if cfg_file.is_file() else {}
    weights = {openai_to_hf_name(k): np.ascontiguousarray(v) for k, v in ckpt["model_state_dict"].items()}
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / WEIGHTS), metadata={"format": "pt"})
    files = {
        "config.json": hf_config(dims, ct2_config, special),
        "generation_config.json": hf_generation_config(dims, ct2_config, special, tokens, ckpt["alignment_heads"]),
        "preprocessor_config.json": preprocessor_config(dims["n_mels"]),
    }
    for name, obj in files.items():
        (out / name).write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    _tokenizer_files(model_dir, out, tokens, dims["n_vocab"], special)
    return {"dims": dims, "n_tensors": len(weights)}


def checkpoint_dir(cache_dir: str | Path, model_bin_sha256: str) -> Path:
    """Where the converted folder of a ``model.bin`` with this digest lives."""
    return Path(cache_dir) / "asr-models" / f"hf-whisper-from-ct2-{model_bin_sha256[:16]}-{HF_CONVERTER_VERSION}"


def _verified(target: Path, digest: str) -> bool:
    """True when ``target`` is a finished conversion of this source by this converter, its files intact."""
    expect = {"source_sha256": digest, "converter_version": HF_CONVERTER_VERSION}
    return folder_is_sound(target, MANIFEST, expect, WEIGHTS)


def hf_checkpoint_for_ct2(model_dir: str | Path, cache_dir: str | Path | None = None) -> Path:
    """The Hugging Face checkpoint folder of a CTranslate2 Whisper folder, converted once (atomic, cached).

    Args:
        model_dir: a CTranslate2 Whisper folder (``model.bin``, ``config.json``, ``tokenizer.json``,
            ``vocabulary.txt``), e.g. :func:`~stresstest.asr.backends.bundled_tiny_en_path`.
        cache_dir: stresstest cache root (default ``$STRESSTEST_CACHE`` or ``~/.cache/stresstest``).
    """
    src = Path(model_dir)
    if not (src / "model.bin").is_file():
        raise ASRError(f"{src}: expected a CTranslate2 Whisper model (model.bin) here")
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    digest = sha256_file(src / "model.bin")
    target = checkpoint_dir(cache, digest)
    if _verified(target, digest):
        return target

    def build(tmp: Path) -> dict[str, Any]:
        meta = convert(src, tmp)
        return {
            "converter_version": HF_CONVERTER_VERSION,
            "source": str(src),
            "source_sha256": digest,
            "dtype": "float32",
            "dims": meta["dims"],
        }

    build_folder(target, MANIFEST, build, lambda t: _verified(t, digest))
    return target


def main(argv: list[str] | None = None) -> int:
    """Convert a CTranslate2 Whisper folder (default: the bundled tiny.en) and print the checkpoint folder."""
    parser = argparse.ArgumentParser(prog="python -m stresstest.asr.hf_convert", description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="cache root (default $STRESSTEST_CACHE)")
    parser.add_argument("--model", type=Path, default=None, help="CTranslate2 Whisper folder (default: bundled)")
    args = parser.parse_args(argv)

    def make() -> Path:
        if args.model is None:
            from stresstest.asr.backends import bundled_tiny_en_path

            args.model = bundled_tiny_en_path()
        return hf_checkpoint_for_ct2(args.model, args.cache)

    return print_made_path("stresstest.asr.hf_convert", make, ASRError)


if __name__ == "__main__":
    raise SystemExit(main())
