"""openai-whisper reference on real weights (the bundled tiny.en converted from CTranslate2), the converter,
cache keys with the runtime, and the model release after the ASR stage."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import numpy as np
import pytest

from stresstest.asr import backends
from stresstest.asr.backends import (
    BUNDLED_TINY_EN,
    FasterWhisperBackend,
    OpenAIWhisperBackend,
    bundled_tiny_en_path,
    release_asr_models,
    resolve_compute_type,
)
from stresstest.asr.base import DecodingOptions, split_windows
from stresstest.asr.stage import ASRConfig, ASRItem, backend_runtime, transcribe_items, transcript_key
from stresstest.audio import SAMPLE_RATE_HZ as SR
from stresstest.audio import write_wav
from stresstest.metrics.wer import asr_errors

pytest.importorskip("whisper", reason="openai-whisper not installed (make install-whisper)")

SENTENCE = "The patient has had chest pain for two hours and takes warfarin five milligrams daily."
DENSE = (
    "Take one tablet of metoprolol twenty five milligrams twice a day, one of aspirin eighty one milligrams "
    "each morning, and call us if the chest pain comes back."
)


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    """One intra-op thread: on a shared 2-core machine torch's spinning OpenMP threads slow decoding ~6×."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("asr-cache")


@pytest.fixture(scope="module")
def ref_backend(cache_dir) -> OpenAIWhisperBackend:
    return OpenAIWhisperBackend(BUNDLED_TINY_EN, device="cpu", batch_size=4, cache_dir=cache_dir)


@pytest.fixture(scope="module")
def sentence_audio() -> np.ndarray:
    from stresstest.speech import SpeakerVoice, synthesize

    x = synthesize(SENTENCE, SpeakerVoice())
    return np.concatenate([np.zeros(SR // 4, np.float32), x, np.zeros(SR // 4, np.float32)])


def _fill_30s(x: np.ndarray, gap_s: float = 0.0) -> np.ndarray:
    piece = np.concatenate([x, np.zeros(int(gap_s * SR), np.float32)])
    return split_windows(np.concatenate([piece] * (int(30 * SR / piece.size) + 1)))[0]


def test_compute_type_auto_is_float16_on_cuda_int8_on_cpu():
    assert resolve_compute_type("auto", "cuda") == "float16"
    assert resolve_compute_type("auto", "cpu") == "int8"
    assert resolve_compute_type("float32", "cuda") == "float32"
    assert FasterWhisperBackend(device="cpu").compute_type == "int8"
    assert ASRConfig().compute_type == "auto"


def test_cache_key_changes_with_device_precision_batch_and_versions(cache_dir):
    opts = DecodingOptions()
    fw = backend_runtime(FasterWhisperBackend(device="cpu", compute_type="int8"), 1)
    assert {"device", "compute_type", "batch_size", "faster-whisper", "ctranslate2"} <= set(fw)
    ow = backend_runtime(OpenAIWhisperBackend(BUNDLED_TINY_EN, device="cpu", cache_dir=cache_dir), 1)
    assert {"device", "precision", "batch_size", "openai-whisper", "torch", "converter"} <= set(ow)
    assert ow["precision"] == "float32" and ow["converter"]
    base = transcript_key("a" * 64, "m", opts, fw)
    for change in (
        {"device": "cuda"},
        {"compute_type": "float16"},
        {"batch_size": 32},
        {"ctranslate2": "0.0.0"},
        {"faster-whisper": "0.0.0"},
    ):
        assert transcript_key("a" * 64, "m", opts, {**fw, **change}) != base, change
    assert transcript_key("a" * 64, "m", opts, dict(fw)) == base


@pytest.mark.integration
def test_read_ct2_variables_dequantises_int8_written_by_ctranslate2(tmp_path):
    """Round trip through CTranslate2's own writer: float32 exact, float16 exact (fp16 source), int8 ≤ ½ step."""
    from stresstest.asr.convert import ct2_whisper_to_openai, openai_to_ct2

    src = bundled_tiny_en_path()
    ck = ct2_whisper_to_openai(src)
    assert ck["dims"]["n_text_layer"] == 4 and ck["dims"]["n_vocab"] == 51864 and ck["alignment_heads"]
    for q, tol in (("float32", 0.0), ("float16", 0.0), ("int8", 0.5 / 127 + 1e-6)):
        back = ct2_whisper_to_openai(openai_to_ct2(ck, tmp_path / q, template_dir=src, quantization=q))
        assert back["dims"] == ck["dims"] and set(back["model_state_dict"]) == set(ck["model_state_dict"])
        for k, v in ck["model_state_dict"].items():
            w = back["model_state_dict"][k]
            rows = v.reshape(v.shape[0], -1).abs().amax(dim=1).clamp_min(1e-12)
            rel = ((w - v).reshape(v.shape[0], -1).abs().amax(dim=1) / rows).max().item()
            assert rel <= tol, (q, k, rel)


def test_converter_rejects_a_non_whisper_file(tmp_path):
    from stresstest.asr.convert import read_ct2_variables
    from stresstest.errors import ASRError

    bad = tmp_path / "model.bin"
    bad.write_bytes(b"\x06\x00\x00\x00\x05\x00abcd\x00")
    with pytest.raises(ASRError, match="model.bin"):
        read_ct2_variables(bad)


@pytest.mark.integration
def test_converted_checkpoint_is_cached_and_transcribes(ref_backend, cache_dir, sentence_audio):
    ckpt = ref_backend._checkpoint()
    assert Path(ckpt).parent == cache_dir / "asr-models" and Path(ckpt).is_file()
    assert ref_backend._checkpoint() == ckpt  # built once
    text = ref_backend.transcribe_windows([sentence_audio], DecodingOptions())[0]
    e = asr_errors(SENTENCE, text)
    assert (e.sub + e.dele + e.ins) / e.ref_words < 0.15, text


@pytest.mark.integration
def test_batched_reference_equals_whisper_transcribe(ref_backend, sentence_audio):
    """The batched seek loop says exactly what ``whisper.transcribe`` says, window by window, including the
    re-decoded remainder of a full window (two decodes) and a silent window (skipped)."""
    windows = [_fill_30s(sentence_audio, 1 / 3), sentence_audio, sentence_audio[: 2 * SR], np.zeros(3 * SR, np.float32)]
    opts = DecodingOptions()
    got = ref_backend.decode_windows(windows, opts)
    ref = ref_backend.transcribe_windows_reference(windows, opts)
    assert [g.text for g in got] == ref
    assert got[0].n_decodes >= 2 and len(got[0].text.split()) > 60  # the tail after the last timestamp
    assert got[1].n_decodes == 1 and got[1].token_limit_hits == 0
    # Batch composition does not change a window's text.
    alone = OpenAIWhisperBackend(BUNDLED_TINY_EN, device="cpu", batch_size=1, cache_dir=ref_backend.cache_dir)
    assert [r.text for r in alone.decode_windows(windows[:2], opts)] == ref[:2]


@pytest.mark.integration
def test_dense_window_past_the_token_limit_continues_and_is_counted(ref_backend, cache_dir, tmp_path):
    from stresstest.speech import SpeakerVoice, synthesize

    fast = synthesize(DENSE, SpeakerVoice(length_scale=0.4))  # ~5 s for 27 words: > 224 tokens per 30 s
    window = _fill_30s(fast)
    opts = DecodingOptions()
    wav = tmp_path / "dense.wav"
    write_wav(wav, window)
    out: list = []
    cfg = ASRConfig(backend="openai-whisper", model=BUNDLED_TINY_EN, device="cpu", batch_size=2)
    transcribe_items(
        [ASRItem("E1", "clean", wav)], cfg, cache_dir=cache_dir, on_done=lambda it, t, err: out.append((t, err))
    )
    ((t, err),) = out
    assert err is None and t.token_limit_hits is not None and t.token_limit_hits >= 1, (t, err)
    assert t.runtime["device"] == "cpu" and t.runtime["precision"] == "float32" and t.runtime["batch_size"] == 2
    # The stage's text (batched seek loop) is whisper.transcribe's, continuation after the limit included.
    assert [t.text] == ref_backend.transcribe_windows_reference([window], opts)
    # Words from the whole window survive, not just the first 224 tokens' worth.
    assert len(t.text.split()) > 120, t.text


@pytest.mark.integration
def test_fp16_weights_are_converted_once_not_cast_per_call(ref_backend):
    import torch

    model = backends._load_openai_whisper(ref_backend._checkpoint(), "cpu", True)
    try:
        linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
        norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
        assert linear and all(m.weight.dtype == torch.float16 for m in linear)
        assert model.encoder.conv1.weight.dtype == torch.float16
        assert norms and all(m.weight.dtype == torch.float32 for m in norms)
    finally:
        release_asr_models()


@pytest.mark.integration
def test_asr_stage_releases_the_model(tmp_path, sentence_audio, cache_dir):
    """After the stage: loader caches empty, the model object collected (so its GPU memory is free)."""
    wav = tmp_path / "a.wav"
    write_wav(wav, sentence_audio)
    refs: list = []
    for cfg in (ASRConfig(), ASRConfig(backend="openai-whisper", model=BUNDLED_TINY_EN, device="cpu")):
        refs.clear()
        if cfg.backend == "faster-whisper":
            be = FasterWhisperBackend()
            refs.append(weakref.ref(be._model()))
        else:
            be = OpenAIWhisperBackend(BUNDLED_TINY_EN, device="cpu", cache_dir=cache_dir)
            refs.append(weakref.ref(backends._load_openai_whisper(be._checkpoint(), "cpu", False)))
        assert refs[0]() is not None
        got: list = []
        transcribe_items(
            [ASRItem("E1", cfg.backend, wav)],
            cfg,
            cache_dir=tmp_path / cfg.backend,
            on_done=lambda it, t, err, got=got: got.append(err),
            backend=be,
        )
        assert got == [None]
        gc.collect()
        assert backends._load_faster_whisper.cache_info().currsize == 0
        assert backends._load_openai_whisper.cache_info().currsize == 0
        assert refs[0]() is None, f"{cfg.backend} model still alive after the ASR stage"


@pytest.mark.integration
def test_pipeline_asr_worker_keeps_the_model_across_shards_until_the_stage_releases_it(tmp_path, sentence_audio):
    from stresstest.pipeline.tasks import ASRWorker

    wav = tmp_path / "a.wav"
    write_wav(wav, sentence_audio)
    worker = ASRWorker((ASRConfig(), tmp_path / "c"))
    for cond in ("clean", "babble_5db"):  # two shards
        (out,) = worker.run([ASRItem("E1", cond, wav)])
        assert out.transcript is not None
        assert backends._load_faster_whisper.cache_info().currsize == 1  # not reloaded per shard
    release_asr_models()  # what the runner does after the ASR stage (_release_asr)
    assert backends._load_faster_whisper.cache_info().currsize == 0


DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"


@pytest.mark.integration
@pytest.mark.slow
def test_reference_wer_within_one_point_of_faster_whisper_on_demo_audio(tmp_path, cache_dir):
    """Same weights (tiny.en, float32) through both implementations: pooled WER within 1 point on a demo
    encounter, clean and ambient 5 dB."""
    from stresstest.asr.base import join_windows
    from stresstest.audio import read_wav_exact
    from stresstest.config import load_config
    from stresstest.corpus import load_corpus
    from stresstest.noise import NoiseSpec, make_noise_source
    from stresstest.noise.stage import MixJob, build_mixtures
    from stresstest.speech import speech_for

    cfg = load_config(DEMO)
    # The demo corpus ships with the project (data/osce): a load error here is a failure, not a skip.
    enc = load_corpus(cfg.corpus.kind, cfg.corpus.path, ids=cfg.corpus.ids)[0].truncated(cfg.corpus.max_turns)
    speech = speech_for(enc, tmp_path)
    spec = NoiseSpec(family="ambient", kind="builtin")
    got: dict = {}
    build_mixtures(
        MixJob(enc.encounter_id, "ambient", (5.0,), ("ambient_5db",)),
        speech,
        make_noise_source(spec, encounters=[enc], cache_dir=tmp_path),
        spec.model_dump(mode="json"),
        seed=1234,
        cache_dir=tmp_path,
        on_done=lambda c, p, i, e: got.__setitem__(c, p),
    )
    fw = FasterWhisperBackend(compute_type="float32")
    ow = OpenAIWhisperBackend(BUNDLED_TINY_EN, device="cpu", batch_size=8, cache_dir=cache_dir)
    errs = {"fw": [0, 0], "ow": [0, 0]}
    ref = enc.reference_text()
    for path in (Path(speech.path), got["ambient_5db"]):
        ws = split_windows(read_wav_exact(path))
        for name, be in (("fw", fw), ("ow", ow)):
            e = asr_errors(ref, join_windows(be.transcribe_windows(ws, DecodingOptions())))
            errs[name][0] += e.sub + e.dele + e.ins
            errs[name][1] += e.ref_words
    wer = {k: v[0] / v[1] for k, v in errs.items()}
    assert wer["fw"] < 0.4 and abs(wer["ow"] - wer["fw"]) <= 0.01, wer


def test_release_reports_what_ctranslate2_really_unloaded():
    """The release says how many CTranslate2 models were unloaded, returned still loaded, or stay referenced."""
    release_asr_models()  # models an earlier test of this worker process loaded are not this test's
    gc.collect()
    assert backends.live_asr_models() == 0
    be = FasterWhisperBackend()
    held = be._model()  # a reference that outlives the release: its object stays alive
    report = release_asr_models()
    assert report["unloaded"] == 1 and report["still_loaded"] == 0 and report["alive"] == 1, report
    assert not held.model.model_is_loaded  # unload_model really freed the weights
    del held
    gc.collect()
    assert backends.live_asr_models() == 0 and release_asr_models() == {"unloaded": 0, "still_loaded": 0, "alive": 0}
