"""Whisper log-Mel features on the GPU: faster-whisper's numpy computation, the same steps in torch.

faster-whisper (and so CTranslate2, and Hugging Face's ``WhisperFeatureExtractor``) computes a window's
features in numpy on the CPU (``faster_whisper.feature_extractor.FeatureExtractor``): 160 zero samples appended,
a periodic Hann window of 400 samples, a centred STFT (n_fft 400, hop 160, reflect padding), the last frame
dropped, power spectrum, the Slaney mel filterbank below, ``log10(max(·, 1e-10))``, floored at the window's
maximum − 8, then ``(x + 4) / 4``. About 10 ms per 30-s window on one core: for the paper's grid that is minutes
of CPU time in front of a GPU that decodes a window in a few milliseconds. :func:`log_mel_torch` does the same
steps with ``torch.stft`` on any device (one STFT per group of equal-length windows); on the CPU it equals the
numpy path to ~1e-6 (``tests/core/test_mel.py``), on a GPU it differs only in float32 rounding.

openai-whisper's backend needs none of this: ``whisper.log_mel_spectrogram`` already runs in torch on the model's
device (with its own filterbank file, which is why the two backends keep their own feature code).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

SAMPLE_RATE_HZ = 16_000
N_FFT = 400
HOP_LENGTH = 160
#: faster-whisper appends this many zero samples before the STFT (``FeatureExtractor.__call__(padding=160)``).
PADDING = 160


@functools.lru_cache(maxsize=4)
def mel_filters(n_mels: int, sr: int = SAMPLE_RATE_HZ, n_fft: int = N_FFT) -> np.ndarray:
    """The Slaney-style mel filterbank of ``FeatureExtractor.get_mel_filters`` (float32, ``n_mels × n_fft/2+1``).

    Written out here (not imported) so the GPU path needs no faster-whisper; the test checks it is the same
    matrix.
    """
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    mels = np.linspace(0.0, 45.245640471924965, n_mels + 2)  # mel(0 Hz) .. mel(8 kHz), Slaney scale
    f_sp = 200.0 / 3
    freqs = f_sp * mels
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    log_t = mels >= min_log_mel
    freqs[log_t] = min_log_hz * np.exp(logstep * (mels[log_t] - min_log_mel))
    fdiff = np.diff(freqs)
    ramps = freqs.reshape(-1, 1) - fftfreqs.reshape(1, -1)
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (freqs[2 : n_mels + 2] - freqs[:n_mels]))[:, None]  # constant energy per channel
    return weights.astype(np.float32)


def torch_cuda_available() -> bool:
    """True when torch is importable and sees a CUDA device (the condition for GPU features)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def log_mel_torch(windows: Sequence[Any], n_mels: int, device: str | None = "cuda") -> list[Any]:
    """Each window's log-Mel features as faster-whisper computes them, with ``torch.stft`` on ``device``.

    Args:
        windows: 16 kHz mono float audio, any lengths (each window is normalised against its own maximum):
            numpy arrays or torch tensors.
        n_mels: 80 (Whisper v1/v2) or 128 (large-v3).
        device: a torch device; the features stay there. None: the device the windows are on (the first
            window's; the CPU for numpy arrays).

    Returns:
        One float32 tensor ``n_mels × (len // 160 + 1)`` per window, in input order (the same shape as
        ``FeatureExtractor()(w)``).
    """
    import torch
    import torch.nn.functional as F

    out: list[Any] = [None] * len(windows)
    if not windows:
        return out
    if device is None:
        device = str(windows[0].device) if isinstance(windows[0], torch.Tensor) else "cpu"
    by_len: dict[int, list[int]] = {}
    for i, w in enumerate(windows):
        by_len.setdefault(int(w.shape[-1]), []).append(i)
    window = torch.hann_window(N_FFT, periodic=True, device=device)  # == np.hanning(401)[:-1]
    filters = torch.from_numpy(mel_filters(n_mels)).to(device)
    for idx in by_len.values():  # one batched STFT per length (a grid's windows are nearly all 30 s)
        x = torch.stack([_as_tensor(windows[i], device) for i in idx])
        x = F.pad(x, (0, PADDING))
        stft = torch.stft(x, N_FFT, HOP_LENGTH, window=window, center=True, pad_mode="reflect", return_complex=True)
        power = stft[..., :-1].abs() ** 2
        log_spec = torch.clamp(filters @ power, min=1e-10).log10()
        floor = log_spec.amax(dim=(-2, -1), keepdim=True) - 8.0  # per window, as the numpy path
        log_spec = (torch.maximum(log_spec, floor) + 4.0) / 4.0
        for j, i in enumerate(idx):
            out[i] = log_spec[j]
    return out


def _as_tensor(window: Any, device: str) -> Any:
    import torch

    if isinstance(window, torch.Tensor):
        return window.to(device=device, dtype=torch.float32)
    return torch.from_numpy(np.asarray(window, dtype=np.float32)).to(device)


def log_mel_device_batch(windows: Sequence[Any], n_mels: int, device: str = "cuda", chunk: int = 64) -> list[Any]:
    """:func:`log_mel_torch` ``chunk`` windows at a time, the features left on ``device`` (no device → host copy:
    the batched decoder hands them to CTranslate2 where they are, :func:`features_storage`).

    A 30-s window's STFT takes ~5 MB of device memory and a group of the ASR stage can hold hundreds of windows;
    the features themselves are 1.5 MB a window at 128 mels.
    """
    out: list[Any] = []
    for i in range(0, len(windows), chunk):
        out += log_mel_torch(windows[i : i + chunk], n_mels, device)
    return out


def pad_or_trim_torch(features: Any, frames: int) -> Any:
    """faster-whisper's ``pad_or_trim`` of a ``n_mels × T`` tensor: zero-padded or cut to ``frames`` frames."""
    import torch.nn.functional as F

    if features.shape[-1] > frames:
        return features[..., :frames]
    return F.pad(features, (0, frames - features.shape[-1])) if features.shape[-1] < frames else features


def features_storage(batch: Any) -> Any:
    """A ``batch × n_mels × frames`` float32 tensor as the input of CTranslate2's ``encode``, without a copy
    between devices: a CUDA tensor is shared through ``__cuda_array_interface__`` (after torch's queued work on
    it has finished: CTranslate2 reads it on its own stream), a CPU tensor as the numpy array viewing it."""
    import ctranslate2

    batch = batch.contiguous()
    if batch.device.type == "cuda":
        import torch

        torch.cuda.current_stream(batch.device).synchronize()
        return ctranslate2.StorageView.from_array(batch)
    return ctranslate2.StorageView.from_array(batch.numpy())


def log_mel_numpy_batch(
    windows: Sequence[np.ndarray], n_mels: int, device: str = "cuda", chunk: int = 64
) -> list[np.ndarray]:
    """:func:`log_mel_torch` on ``device``, returned as host numpy arrays (what CTranslate2's ``encode`` takes).

    ``chunk`` windows at a time: a 30-s window's STFT takes ~5 MB of device memory, and a group of the ASR stage
    can hold hundreds of windows.
    """
    return [t.float().cpu().numpy() for t in log_mel_device_batch(windows, n_mels, device, chunk)]
