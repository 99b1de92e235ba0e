"""CTranslate2 Whisper → openai-whisper checkpoint (so both backends can run the same weights).

A CTranslate2 ``model.bin`` (binary version 6, the format ``ctranslate2.specs.ModelSpec``
writes) is a little-endian stream::

    u32 binary_version, str spec_name, u32 spec_revision, u32 n_variables,
    n_variables × (str name, u8 rank, rank × u32 dim, u8 dtype, u32 n_bytes, bytes),
    u32 n_aliases, n_aliases × (str alias, str target)

where ``str`` is ``u16 length-with-NUL, utf-8 bytes, NUL`` and ``dtype`` indexes
(float32, int8, int16, int32, float16, bfloat16). Quantised weights carry a
``<name>_scale`` variable: int8 rows were multiplied by ``scale[row]`` (so
``w = q / scale[:, None]``), int16 tensors by one scalar scale. Every tensor is
read back to float32.

The name mapping is the inverse of CTranslate2's Whisper converter: the fused
self-attention projection ``linear_0`` is ``[query; key; value]`` (the key has no
bias in Whisper; CTranslate2 stores zeros there, which must be zero), the cross
attention has ``linear_0`` = query and ``linear_1`` = ``[key; value]``, layer
norms are ``gamma``/``beta``. openai-whisper's own tokenizer and mel filters (shipped
in the package) are used; the converter checks that the model's vocabulary puts
the special tokens where that tokenizer expects them. Alignment heads come from
the model's ``config.json`` and are stored in the checkpoint.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from stresstest.cache import atomic_write_bytes, sha256_file
from stresstest.errors import ASRError

CONVERTER_VERSION = "ct2-openai-1"
_DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")


class _Reader:
    def __init__(self, data: bytes, path: Path) -> None:
        self.data, self.pos, self.path = data, 0, path

    def take(self, fmt: str) -> Any:
        try:
            (v,) = struct.unpack_from("<" + fmt, self.data, self.pos)
        except struct.error as exc:
            raise ASRError(f"{self.path}: truncated CTranslate2 model.bin at byte {self.pos}") from exc
        self.pos += struct.calcsize(fmt)
        return v

    def string(self) -> str:
        n = self.take("H")
        raw = self.data[self.pos : self.pos + n - 1]
        self.pos += n
        return raw.decode("utf-8")


def read_ct2_variables(model_bin: str | Path) -> dict[str, np.ndarray]:
    """All variables of a CTranslate2 ``model.bin`` as float32 arrays (quantised weights dequantised).

    Scalars (flags such as ``decoder/pre_norm``, head counts) are returned as
    0-d arrays of their stored integer type; aliases point at their target array.
    """
    path = Path(model_bin)
    r = _Reader(path.read_bytes(), path)
    version = r.take("I")
    if version != 6:
        raise ASRError(f"{path}: CTranslate2 binary version {version}, expected 6")
    spec = r.string()
    r.take("I")  # spec revision
    if spec != "WhisperSpec":
        raise ASRError(f"{path}: a {spec!r} model, expected a CTranslate2 WhisperSpec")
    raw: dict[str, np.ndarray] = {}
    for _ in range(r.take("I")):
        name = r.string()
        shape = tuple(r.take("I") for _ in range(r.take("B")))
        dtype = _DTYPES[r.take("B")]
        nbytes = r.take("I")
        buf = r.data[r.pos : r.pos + nbytes]
        r.pos += nbytes
        if dtype == "bfloat16":
            arr = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(buf, np.dtype(dtype))
        raw[name] = arr.reshape(shape)
    for _ in range(r.take("I")):
        alias, target = r.string(), r.string()
        raw[alias] = raw[target]
    out: dict[str, np.ndarray] = {}
    for name, arr in raw.items():
        if name.endswith("_scale"):
            continue
        scale = raw.get(name + "_scale")
        if arr.ndim == 0:
            out[name] = arr.copy()
        elif scale is not None and arr.dtype == np.int8:
            flat = arr.reshape(arr.shape[0], -1).astype(np.float32) / scale.astype(np.float32)[:, None]
            out[name] = flat.reshape(arr.shape)
        elif scale is not None and arr.dtype == np.int16:
            out[name] = arr.astype(np.float32) / np.float32(scale)
        else:
            out[name] = arr.astype(np.float32)
    return out


def _n_layers(v: dict[str, np.ndarray], side: str) -> int:
    n = 0
    while f"{side}/layer_{n}/ffn/linear_0/weight" in v:
        n += 1
    return n


def _check_vocabulary(model_dir: Path, n_vocab: int) -> None:
    """The openai-whisper tokenizer must agree with the model's vocabulary on the special tokens."""
    import whisper.tokenizer

    vocab_file = model_dir / "vocabulary.txt"
    if not vocab_file.is_file():
        vocab_file = model_dir / "vocabulary.json"
    if vocab_file.suffix == ".json":
        tokens = json.loads(vocab_file.read_text(encoding="utf-8"))
    else:
        tokens = vocab_file.read_text(encoding="utf-8").split("\n")
    multilingual = n_vocab >= 51865
    tok = whisper.tokenizer.get_tokenizer(multilingual, num_languages=n_vocab - 51765 - int(multilingual))
    for tid, expected in (
        (tok.eot, "<|endoftext|>"),
        (tok.sot, "<|startoftranscript|>"),
        (tok.no_timestamps, "<|notimestamps|>"),
        (tok.timestamp_begin, "<|0.00|>"),
    ):
        if tid >= len(tokens) or tokens[tid] != expected:
            raise ASRError(f"{vocab_file}: token {tid} is not {expected}; the openai-whisper tokenizer would not fit")


def ct2_whisper_to_openai(model_dir: str | Path) -> dict[str, Any]:
    """Build an openai-whisper checkpoint dict (``dims``, ``model_state_dict``, ``alignment_heads``)."""
    import torch

    ckpt = ct2_whisper_openai_arrays(model_dir)
    _check_vocabulary(Path(model_dir), ckpt["dims"]["n_vocab"])
    ckpt["model_state_dict"] = {
        k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in ckpt["model_state_dict"].items()
    }
    return ckpt


def ct2_whisper_openai_arrays(model_dir: str | Path) -> dict[str, Any]:
    """The openai-whisper checkpoint of a CTranslate2 Whisper dir with numpy float32 arrays as the state dict.

    Needs neither torch nor openai-whisper (the Hugging Face conversion in
    :mod:`stresstest.asr.hf_convert` builds on it where openai-whisper is absent);
    the vocabulary is not checked against openai-whisper's tokenizer here.
    """
    model_dir = Path(model_dir)
    v = read_ct2_variables(model_dir / "model.bin")
    n_enc, n_dec = _n_layers(v, "encoder"), _n_layers(v, "decoder")
    emb = v["decoder/embeddings/weight"]
    dims = dict(
        n_mels=int(v["encoder/conv1/weight"].shape[1]),
        n_audio_ctx=int(v["encoder/position_encodings/encodings"].shape[0]),
        n_audio_state=int(v["encoder/position_encodings/encodings"].shape[1]),
        n_audio_head=int(v["encoder/num_heads"]),
        n_audio_layer=n_enc,
        n_vocab=int(emb.shape[0]),
        n_text_ctx=int(v["decoder/position_encodings/encodings"].shape[0]),
        n_text_state=int(emb.shape[1]),
        n_text_head=int(v["decoder/num_heads"]),
        n_text_layer=n_dec,
    )
    d = dims["n_audio_state"]
    sd: dict[str, np.ndarray] = {}

    def linear(dst: str, src: str, *, bias: bool = True) -> None:
        sd[f"{dst}.weight"] = v[f"{src}/weight"]
        if bias:
            sd[f"{dst}.bias"] = v[f"{src}/bias"]

    def norm(dst: str, src: str) -> None:
        sd[f"{dst}.weight"], sd[f"{dst}.bias"] = v[f"{src}/gamma"], v[f"{src}/beta"]

    def split(dst_names: list[str], src: str, key_index: int | None) -> None:
        w, b = v[f"{src}/weight"], v[f"{src}/bias"]
        n = len(dst_names)
        if w.shape[0] != n * w.shape[1]:
            raise ASRError(f"{src}: fused projection of shape {w.shape}, expected ({n}×{w.shape[1]}, {w.shape[1]})")
        for k, dst in enumerate(dst_names):
            sd[f"{dst}.weight"] = w[k * d : (k + 1) * d]
            bk = b[k * d : (k + 1) * d]
            if k == key_index:
                if np.any(bk != 0):
                    raise ASRError(f"{src}: non-zero key bias; not a Whisper model")
            else:
                sd[f"{dst}.bias"] = bk

    def block(dst: str, src: str, cross: bool) -> None:
        split([f"{dst}.attn.query", f"{dst}.attn.key", f"{dst}.attn.value"], f"{src}/self_attention/linear_0", 1)
        linear(f"{dst}.attn.out", f"{src}/self_attention/linear_1")
        norm(f"{dst}.attn_ln", f"{src}/self_attention/layer_norm")
        if cross:
            linear(f"{dst}.cross_attn.query", f"{src}/attention/linear_0")
            split([f"{dst}.cross_attn.key", f"{dst}.cross_attn.value"], f"{src}/attention/linear_1", 0)
            linear(f"{dst}.cross_attn.out", f"{src}/attention/linear_2")
            norm(f"{dst}.cross_attn_ln", f"{src}/attention/layer_norm")
        linear(f"{dst}.mlp.0", f"{src}/ffn/linear_0")
        linear(f"{dst}.mlp.2", f"{src}/ffn/linear_1")
        norm(f"{dst}.mlp_ln", f"{src}/ffn/layer_norm")

    linear("encoder.conv1", "encoder/conv1")
    linear("encoder.conv2", "encoder/conv2")
    sd["encoder.positional_embedding"] = v["encoder/position_encodings/encodings"]
    for i in range(n_enc):
        block(f"encoder.blocks.{i}", f"encoder/layer_{i}", cross=False)
    norm("encoder.ln_post", "encoder/layer_norm")
    sd["decoder.token_embedding.weight"] = emb
    sd["decoder.positional_embedding"] = v["decoder/position_encodings/encodings"]
    for i in range(n_dec):
        block(f"decoder.blocks.{i}", f"decoder/layer_{i}", cross=True)
    norm("decoder.ln", "decoder/layer_norm")
    heads: list[list[int]] = []
    cfg = model_dir / "config.json"
    if cfg.is_file():
        heads = [[int(a), int(b)] for a, b in json.loads(cfg.read_text()).get("alignment_heads") or []]
    return {
        "dims": dims,
        "model_state_dict": sd,
        "alignment_heads": heads,
    }


def openai_checkpoint_for_ct2(model_dir: str | Path, cache_dir: str | Path) -> Path:
    """The converted checkpoint for a CTranslate2 Whisper dir, built once and cached under ``cache_dir``.

    The file name carries the source ``model.bin`` digest and the converter
    version, so a different source or converter never reuses a stale file.
    """
    import io

    import torch

    model_dir = Path(model_dir)
    digest = sha256_file(model_dir / "model.bin")
    out = Path(cache_dir) / "asr-models" / f"openai-whisper-from-ct2-{digest[:16]}-{CONVERTER_VERSION}.pt"
    if out.is_file():
        return out
    ckpt = ct2_whisper_to_openai(model_dir)
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    atomic_write_bytes(out, buf.getvalue())
    return out


def load_openai_checkpoint(path: str | Path, device: str) -> Any:
    """Load an openai-whisper checkpoint file exactly as ``whisper.load_model`` does for a path,
    plus the alignment heads a converted checkpoint carries (``load_model`` only knows them by name)."""
    import torch
    import whisper

    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    model = whisper.model.Whisper(whisper.model.ModelDimensions(**ckpt["dims"]))
    model.load_state_dict(ckpt["model_state_dict"])
    heads = ckpt.get("alignment_heads") or []
    if heads:
        mask = torch.zeros(model.dims.n_text_layer, model.dims.n_text_head, dtype=torch.bool)
        for layer, head in heads:
            mask[layer, head] = True
        model.register_buffer("alignment_heads", mask.to_sparse(), persistent=False)
    return model.to(device)


def openai_to_ct2(
    checkpoint: dict[str, Any], out_dir: str | Path, *, template_dir: str | Path, quantization: str = "float16"
) -> Path:
    """Write an openai-whisper checkpoint as a CTranslate2 Whisper model with CTranslate2's own writer.

    The inverse of :func:`ct2_whisper_to_openai` (used to test that mapping in
    both directions and to build same-weights models for the benchmark).
    ``template_dir`` supplies the tokenizer/vocabulary and the suppress-token
    config (an English model dir such as the bundled tiny.en, for an English
    vocabulary); ``quantization`` is CTranslate2's (float16, float32, int8, ...).
    """
    import shutil

    from ctranslate2.specs import whisper_spec

    dims = checkpoint["dims"]
    # Copies: CTranslate2 quantises in place, and the caller's tensors must stay as they are.
    sd = {k: np.array(v.detach().float().cpu().numpy(), copy=True) for k, v in checkpoint["model_state_dict"].items()}
    spec = whisper_spec.WhisperSpec(
        dims["n_audio_layer"], dims["n_audio_head"], dims["n_text_layer"], dims["n_text_head"]
    )

    def lin(dst: Any, src: str) -> None:
        dst.weight = sd[f"{src}.weight"]
        if f"{src}.bias" in sd:
            dst.bias = sd[f"{src}.bias"]

    def fused(dst: Any, srcs: list[str]) -> None:
        dst.weight = np.concatenate([sd[f"{s}.weight"] for s in srcs])
        dst.bias = np.concatenate([sd.get(f"{s}.bias", np.zeros(sd[f"{s}.weight"].shape[0], np.float32)) for s in srcs])

    def ln(dst: Any, src: str) -> None:
        dst.gamma, dst.beta = sd[f"{src}.weight"], sd[f"{src}.bias"]

    def layer(dst: Any, src: str, cross: bool) -> None:
        fused(dst.self_attention.linear[0], [f"{src}.attn.query", f"{src}.attn.key", f"{src}.attn.value"])
        lin(dst.self_attention.linear[1], f"{src}.attn.out")
        ln(dst.self_attention.layer_norm, f"{src}.attn_ln")
        if cross:
            lin(dst.attention.linear[0], f"{src}.cross_attn.query")
            fused(dst.attention.linear[1], [f"{src}.cross_attn.key", f"{src}.cross_attn.value"])
            lin(dst.attention.linear[2], f"{src}.cross_attn.out")
            ln(dst.attention.layer_norm, f"{src}.cross_attn_ln")
        lin(dst.ffn.linear_0, f"{src}.mlp.0")
        lin(dst.ffn.linear_1, f"{src}.mlp.2")
        ln(dst.ffn.layer_norm, f"{src}.mlp_ln")

    enc, dec = spec.encoder, spec.decoder
    lin(enc.conv1, "encoder.conv1")
    lin(enc.conv2, "encoder.conv2")
    enc.position_encodings.encodings = sd["encoder.positional_embedding"]
    for i, ls in enumerate(enc.layer):
        layer(ls, f"encoder.blocks.{i}", cross=False)
    ln(enc.layer_norm, "encoder.ln_post")
    dec.embeddings.weight = sd["decoder.token_embedding.weight"]
    dec.position_encodings.encodings = sd["decoder.positional_embedding"]
    for i, ls in enumerate(dec.layer):
        layer(ls, f"decoder.blocks.{i}", cross=True)
    ln(dec.layer_norm, "decoder.ln")
    dec.projection.weight = sd["decoder.token_embedding.weight"]

    template = Path(template_dir)
    cfg = json.loads((template / "config.json").read_text())
    heads = checkpoint.get("alignment_heads") or [
        [layer_i, h]
        for layer_i in range(dims["n_text_layer"] // 2, dims["n_text_layer"])
        for h in range(dims["n_text_head"])
    ]
    spec.config.suppress_ids = cfg.get("suppress_ids")
    spec.config.suppress_ids_begin = cfg.get("suppress_ids_begin")
    spec.config.lang_ids = cfg.get("lang_ids") or []
    spec.config.alignment_heads = [tuple(h) for h in heads]
    vocab_file = template / "vocabulary.txt"
    tokens = (
        json.loads((template / "vocabulary.json").read_text())
        if not vocab_file.is_file()
        else vocab_file.read_text(encoding="utf-8").split("\n")
    )
    spec.register_vocabulary(tokens[: dims["n_vocab"]])
    spec.validate()
    spec.optimize(quantization=quantization)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec.save(str(out))
    if (template / "tokenizer.json").is_file():
        shutil.copyfile(template / "tokenizer.json", out / "tokenizer.json")
    (out / "preprocessor_config.json").write_text(json.dumps({"feature_size": dims["n_mels"]}))
    return out
