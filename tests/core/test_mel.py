"""GPU log-Mel (``stresstest.asr.mel``): the torch path computes faster-whisper's numpy features."""

from __future__ import annotations

import numpy as np
import pytest

from stresstest.asr.mel import (
    features_storage,
    log_mel_device_batch,
    log_mel_numpy_batch,
    log_mel_torch,
    mel_filters,
    pad_or_trim_torch,
)

torch = pytest.importorskip("torch", reason="torch not installed (make install-whisper)")
fe = pytest.importorskip("faster_whisper.feature_extractor", reason="faster-whisper is not installed: make install")


def _audio(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 16000
    tone = 0.3 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 3 * t) > 0)
    return (tone + 0.01 * rng.standard_normal(n)).astype(np.float32)


@pytest.mark.parametrize("n_mels", [80, 128])
def test_filterbank_is_faster_whispers(n_mels):
    ref = fe.FeatureExtractor.get_mel_filters(16000, 400, n_mels=n_mels).astype(np.float32)
    np.testing.assert_array_equal(mel_filters(n_mels), ref)


@pytest.mark.parametrize("n_mels", [80, 128])
def test_torch_features_on_cpu_equal_the_numpy_path(n_mels):
    # Two full 30-s windows (one batched STFT), a short last window and a near-silent one (the max − 8 floor
    # is per window, not per batch).
    windows = [_audio(480_000, 0), _audio(480_000, 1), _audio(123_457, 2), 1e-4 * _audio(480_000, 3)]
    extractor = fe.FeatureExtractor(feature_size=n_mels)
    got = log_mel_torch(windows, n_mels, device="cpu")
    for w, g in zip(windows, got, strict=True):
        ref = extractor(w)
        assert tuple(g.shape) == ref.shape
        # Both are float32 FFTs with their own rounding; log10 magnifies relative error where the power is small
        # (measured: 99.9% of values within 3e-6, a few low-power cells of the lowest band up to 5e-5).
        diff = np.abs(g.numpy() - ref)
        assert np.quantile(diff, 0.999) <= 1e-5, np.quantile(diff, 0.999)
        assert diff.mean() <= 1e-6 and diff.max() <= 2e-4, (diff.mean(), diff.max())
    # the host-array helper returns the same values, in input order
    host = log_mel_numpy_batch(windows[::-1], n_mels, device="cpu")
    np.testing.assert_allclose(host[0], got[3].numpy(), rtol=0, atol=0)


def _devices() -> list[str]:
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", _devices())
def test_torch_features_stay_on_the_inputs_device(device):
    """Audio already on a device gives features on that device (no device -> host -> device round trip), equal to
    faster-whisper's numpy features; batches reach CTranslate2 from there (issue 39)."""
    import ctranslate2
    from faster_whisper.audio import pad_or_trim

    windows = [torch.from_numpy(_audio(480_000, 4)).to(device), torch.from_numpy(_audio(200_000, 5)).to(device)]
    got = log_mel_torch(windows, 80, device=None)
    chunked = log_mel_device_batch(windows, 80, device=device, chunk=1)
    extractor = fe.FeatureExtractor(feature_size=80)
    for w, g, c in zip(windows, got, chunked, strict=True):
        assert isinstance(g, torch.Tensor) and g.device == w.device and g.dtype == torch.float32
        assert c.device == w.device and torch.equal(c, g)
        ref = extractor(w.cpu().numpy())
        diff = np.abs(g.cpu().numpy() - ref)
        assert tuple(g.shape) == ref.shape and diff.mean() <= 1e-6 and diff.max() <= 2e-4, (diff.mean(), diff.max())
    # a decode's input: frames from a seek, padded or cut to the encoder's 3000 as faster-whisper's pad_or_trim
    parts = [got[0][:, 1000:], got[1], got[0]]
    batch = torch.stack([pad_or_trim_torch(p, 3000) for p in parts])
    assert batch.device == windows[0].device
    np.testing.assert_array_equal(batch.cpu().numpy(), np.stack([pad_or_trim(p.cpu().numpy()) for p in parts]))
    if device == "cpu":  # CTranslate2 reads the tensor's memory (a CUDA one through __cuda_array_interface__)
        storage = features_storage(batch)
        assert isinstance(storage, ctranslate2.StorageView) and storage.device == "cpu"
        np.testing.assert_array_equal(np.asarray(storage), batch.numpy())


@pytest.mark.integration
def test_batched_faster_whisper_on_torch_features_says_the_same(monkeypatch):
    """The batched path with its features from :func:`log_mel_torch` (the GPU route, here on the CPU): the
    features go to CTranslate2 from where they are and decode exactly as the same features copied through host
    numpy arrays; next to faster-whisper's own numpy features the text is nearly the same; the runtime (so the
    cache key) names the route."""
    import difflib

    import stresstest.asr.mel as mel
    from stresstest.asr.backends import FasterWhisperBackend
    from stresstest.asr.base import DecodingOptions
    from stresstest.speech import SpeakerVoice, synthesize

    speech = synthesize("The patient takes warfarin five milligrams daily and has chest pain.", SpeakerVoice())
    windows = [speech, np.concatenate([np.zeros(8000, np.float32), speech])]
    be, opts = FasterWhisperBackend(), DecodingOptions()
    assert be._log_mel_device() is None  # CPU model: numpy features, runtime as before
    assert "log_mel" not in be.runtime(4)
    numpy_texts = be.transcribe_windows_batched(windows, opts, batch_size=4)
    monkeypatch.setattr(FasterWhisperBackend, "_log_mel_device", lambda self: "cpu")
    assert be.runtime(4)["log_mel"] == "torch-cpu" and "log_mel" not in be.runtime(1)
    torch_texts = be.transcribe_windows_batched(windows, opts, batch_size=4)
    import ctranslate2

    # the former route: every batch copied into a new host array first
    monkeypatch.setattr(
        mel, "features_storage", lambda b: ctranslate2.StorageView.from_array(np.array(b.cpu().numpy(), copy=True))
    )
    assert be.transcribe_windows_batched(windows, opts, batch_size=4) == torch_texts
    assert "warfarin" in numpy_texts[0].lower(), numpy_texts
    # The two feature computations differ by float32 rounding (≤ 2e-4, above); on tiny.en that can flip a word
    # (torch 2.13.0 CPU: 'warfarin' -> 'war for in' in one window), which is why the route is in the cache key.
    for a, b in zip(numpy_texts, torch_texts, strict=True):
        assert difflib.SequenceMatcher(None, a, b).ratio() >= 0.9, (numpy_texts, torch_texts)


def test_gpu_features_are_chosen_only_for_a_cuda_model(monkeypatch):
    import stresstest.asr.mel as mel
    from stresstest.asr.backends import FasterWhisperBackend

    monkeypatch.setattr(mel, "torch_cuda_available", lambda: True)
    assert FasterWhisperBackend(device="cpu")._log_mel_device() is None
    gpu = FasterWhisperBackend(device="cuda")
    assert gpu._log_mel_device() == "cuda" and gpu.runtime(32)["log_mel"] == "torch-cuda"
    monkeypatch.setattr(mel, "torch_cuda_available", lambda: False)  # CUDA CTranslate2 but no CUDA torch
    assert gpu._log_mel_device() is None and "log_mel" not in gpu.runtime(32)
