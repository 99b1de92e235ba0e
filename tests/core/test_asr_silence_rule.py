"""The fast path's no-speech rule and token-limit count, against faster-whisper's own sequential loop.

The decoder is the real bundled tiny.en (CTranslate2) whose ``generate`` is scripted at the boundary: the
encoder runs for real, the decode returns tokens, a no-speech probability and a score chosen to meet (or miss)
Whisper's silence rule. The same scripted decoder runs under faster-whisper's ``WhisperModel.transcribe`` (the
reference loop, which skips a no-speech decode whole) and under the project's batched seek loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from stresstest.asr.backends import FasterWhisperBackend, bundled_tiny_en_path
from stresstest.asr.base import DecodingOptions
from stresstest.asr.fw_batched import ct2_token_cap
from stresstest.audio import SAMPLE_RATE_HZ as SR


@dataclass
class _Result:
    sequences_ids: list[list[int]]
    scores: list[float]
    no_speech_prob: float


@dataclass
class _ScriptedDecoder:
    """CTranslate2's Whisper model with ``generate`` replaced: decode ``k`` of a window returns ``script[k]``."""

    real: Any
    script: list[tuple[list[int], float, float]]  # (tokens, no_speech_prob, avg_logprob)
    calls: int = 0
    decoded: list[int] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def generate(self, encoded: Any, prompts: list[list[int]], **kwargs: Any) -> list[_Result]:
        tokens, nsp, avg = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        self.decoded.append(len(prompts))
        score = avg * (len(tokens) + 1) / len(tokens)  # faster-whisper: avg = score * len / (len + 1)
        return [_Result([list(tokens)], [score], nsp) for _ in prompts]


@pytest.fixture(scope="module")
def whisper_model() -> Any:
    from faster_whisper import WhisperModel

    return WhisperModel(str(bundled_tiny_en_path()), device="cpu", compute_type="int8", cpu_threads=1)


def _script(model: Any, nsp: float, avg: float) -> list[tuple[list[int], float, float]]:
    """Decode 1: a segment 0-5 s, then an unfinished one (the loop would resume at 5 s); decode 2: speech."""
    from faster_whisper.tokenizer import Tokenizer

    tok = Tokenizer(model.hf_tokenizer, False, task="transcribe", language="en")
    tb = tok.timestamp_begin

    def ts(s: float) -> int:
        return tb + int(round(s / 0.02))

    first = [ts(0), *tok.encode(" Thank you."), ts(5), ts(5), *tok.encode(" Bye")]
    second = [ts(0), *tok.encode(" The chest pain started today."), ts(25)]
    return [(first, nsp, avg), (second, 0.01, -0.2)]


def _backend(model: Any, decoder: _ScriptedDecoder) -> FasterWhisperBackend:
    be = FasterWhisperBackend(device="cpu", compute_type="int8")
    model.model = decoder
    be._model = lambda: model  # type: ignore[method-assign]
    return be


@pytest.mark.parametrize(
    ("nsp", "avg", "skipped"),
    [
        (0.9, -1.5, True),  # no-speech probability above 0.6 and log-prob below -1: the decode is skipped whole
        (0.9, -1.0, True),  # at the log-prob threshold exactly: still skipped (only "above" keeps it)
        (0.9, -0.5, False),  # confident text despite the no-speech probability: kept
        (0.3, -1.5, False),  # low no-speech probability: kept
    ],
)
def test_batched_path_follows_faster_whispers_no_speech_rule(whisper_model, nsp, avg, skipped):
    real = whisper_model.model
    window = [np.random.default_rng(0).normal(0, 0.01, 30 * SR).astype(np.float32)]
    opts = DecodingOptions()
    try:
        ref_dec = _ScriptedDecoder(real, _script(whisper_model, nsp, avg))
        ref = _backend(whisper_model, ref_dec).transcribe_windows(window, opts)  # faster-whisper's own loop
        bat_dec = _ScriptedDecoder(real, _script(whisper_model, nsp, avg))
        (got,) = _backend(whisper_model, bat_dec).decode_windows_batched(window, opts, batch_size=2)
    finally:
        whisper_model.model = real
    assert [got.text] == ref, (got.text, ref)
    assert got.n_decodes == ref_dec.calls == bat_dec.calls
    if skipped:  # the reference never decodes the audio after the skipped decode's last timestamp
        assert got.text == "" and got.n_decodes == 1
    else:
        assert got.text == "Thank you. The chest pain started today." and got.n_decodes == 2


def test_ct2_caps_a_decode_at_224_tokens_and_the_fast_path_counts_those_hits(whisper_model):
    """End-of-text suppressed: every decode runs until CTranslate2's own limit (half of max_length 448), and
    each is counted as a limit hit; a shorter forced limit is halved the same way."""
    from faster_whisper.tokenizer import Tokenizer

    eot = Tokenizer(whisper_model.hf_tokenizer, False, task="transcribe", language="en").eot
    assert ct2_token_cap(448, 1) == ct2_token_cap(448, 3) == 224 and ct2_token_cap(1 + 60, 1) == 30
    be = FasterWhisperBackend(device="cpu", compute_type="int8")
    be._model = lambda: whisper_model  # type: ignore[method-assign]
    window = np.random.default_rng(1).normal(0, 0.05, 8 * SR).astype(np.float32)
    be.decode_overrides = {"suppress_tokens": [-1, eot], "max_new_tokens": 60}
    (short,) = be.decode_windows_batched([window], DecodingOptions(no_speech_threshold=None), batch_size=2)
    assert short.n_decodes >= 1 and short.n_tokens == 30 * short.n_decodes
    assert short.token_limit_hits == short.n_decodes and short.decode_tokens == (30,) * short.n_decodes
    be.decode_overrides = {"suppress_tokens": [-1, eot]}
    (full,) = be.decode_windows_batched([window], DecodingOptions(no_speech_threshold=None), batch_size=2)
    assert full.n_tokens == 224 * full.n_decodes and full.token_limit_hits == full.n_decodes >= 1
