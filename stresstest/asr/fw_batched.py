"""faster-whisper's sequential decoding loop, run for many windows at once (the batched fast path).

faster-whisper's own ``BatchedInferencePipeline`` is not the sequential decoder: it decodes each clip once,
computes each clip's log-Mel on its own (the log-Mel floor is relative to the clip's maximum, so a remainder's
features differ from the same frames of the whole window), and has no seek loop. Here every window follows
``WhisperModel.generate_segments`` with this project's pinned options (greedy, temperature 0, no prompt, no
fallback): the window's log-Mel is computed once; a decode covers the 30 s from the current seek; when its output
does not end with a single timestamp the unfinished segment is dropped and decoding resumes from the last
timestamp (``WhisperModel._split_segments_by_timestamps`` decides, the same function the sequential loop calls);
a decode that meets the no-speech rule is skipped whole: none of its text is kept and the window moves on by the
full segment, as ``generate_segments`` (and ``whisper.transcribe``) do.
The difference is only in scheduling: a queue of (window, seek) decodes is served ``batch_size`` at a time, so
remainders share batches with other windows' first decodes. Pinned to faster-whisper 1.2.1 (private helpers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stresstest.asr.base import DecodingOptions
from stresstest.asr.seek import SeekWindow, seek_batches
from stresstest.errors import ASRError

#: The release whose decoding loop this mirrors; 1.1.1 takes clip timestamps in samples and 1.2.0 merged
#: remainders of different windows in its batched pipeline.
FASTER_WHISPER_VERSION = "1.2.1"


def ct2_token_cap(max_length: int, prompt_length: int) -> int:
    """The most tokens CTranslate2's Whisper ``generate`` samples in one decode.

    ``src/models/whisper.cc`` (CTranslate2 4.x) decodes at most ``min(max_length / 2, max_length - start_step)``
    steps, ``start_step`` being the prompt tokens fed before the first sampled one (all but the last of a prompt
    without previous text): 224 for faster-whisper's ``max_length`` of 448, whatever the prompt. A decode that
    samples this many tokens was cut by the limit (end-of-text is not counted in the sequence).
    """
    return min(max_length // 2, max_length - max(prompt_length - 1, 0))


@dataclass
class _Window(SeekWindow):
    features: Any  # n_mels x frames: a numpy array, or a torch tensor on the feature device
    texts: list[str] = field(default_factory=list)


def decode_batched(
    model: Any,
    windows: list[np.ndarray],
    options: DecodingOptions,
    batch_size: int,
    skip: Callable[[float, float, DecodingOptions], bool],
    overrides: dict[str, Any] | None = None,
    mel_device: str | None = None,
) -> list[tuple[str, int, int, int, tuple[int, ...]]]:
    """Decode ``windows`` with the sequential seek rule, ``batch_size`` decodes per model call.

    Args:
        model: a loaded ``faster_whisper.WhisperModel``.
        windows: 16 kHz float32 windows (≤ 30 s each).
        options: the pinned decoding options.
        batch_size: decodes per encoder/decoder call.
        skip: the silence rule ``(no_speech_prob, avg_logprob, options) → skip this decode``: its text is
            dropped and the window seeks past the whole decoded segment.
        overrides: benchmark hooks only (``max_new_tokens``, ``suppress_tokens``: forced decode lengths of
            random-init models), as faster-whisper's ``transcribe`` arguments of the same names.
        mel_device: compute the log-Mel features with torch on this device (:mod:`stresstest.asr.mel`, the same
            computation as faster-whisper's numpy extractor) and encode them from there; None = faster-whisper's
            own numpy path on the CPU.

    Returns:
        Per window: (text, decodes, sampled tokens, decodes that hit the token limit, tokens of each decode).
    """
    from faster_whisper.audio import pad_or_trim
    from faster_whisper.tokenizer import Tokenizer
    from faster_whisper.transcribe import get_suppressed_tokens

    if options.temperature != 0 or options.beam_size != 1 or options.condition_on_previous_text:
        raise ASRError("the batched faster-whisper path decodes greedily at temperature 0 without conditioning")
    tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=options.language)
    over = dict(overrides or {})
    unknown = set(over) - {"max_new_tokens", "suppress_tokens"}
    if unknown:
        raise ASRError(f"batched faster-whisper: unsupported decode overrides {sorted(unknown)}")
    prompt = model.get_prompt(tokenizer, [], without_timestamps=options.without_timestamps)
    suppress = get_suppressed_tokens(tokenizer, over.get("suppress_tokens", [-1]))
    max_length = len(prompt) + over["max_new_tokens"] if "max_new_tokens" in over else model.max_length
    token_cap = ct2_token_cap(max_length, len(prompt))
    max_initial = int(round(1.0 / model.time_precision))  # faster-whisper's default max_initial_timestamp
    n_frames = model.feature_extractor.nb_max_frames
    fps = model.frames_per_second
    encode: Callable[[list[tuple[_Window, int]]], Any]
    all_feats: list[Any]
    if mel_device is not None:
        # Features computed and kept on the device, each batch handed to CTranslate2 where it is (no
        # device -> host -> device round trip).
        import torch

        from stresstest.asr.mel import features_storage, log_mel_device_batch, pad_or_trim_torch

        all_feats = log_mel_device_batch(windows, model.feature_extractor.mel_filters.shape[0], mel_device)
        to_cpu = model.model.device == "cuda" and len(model.model.device_index) > 1  # as WhisperModel.encode

        def encode(batch: list[tuple[_Window, int]]) -> Any:
            mel = torch.stack([pad_or_trim_torch(st.features[:, st.seek : st.seek + n], n_frames) for st, n in batch])
            return model.model.encode(features_storage(mel), to_cpu=to_cpu)
    else:  # as transcribe(): the whole window, numpy on the CPU
        all_feats = [model.feature_extractor(np.asarray(w, dtype=np.float32)) for w in windows]

        def encode(batch: list[tuple[_Window, int]]) -> Any:
            return model.encode(np.stack([pad_or_trim(st.features[:, st.seek : st.seek + n]) for st, n in batch]))

    states = [_Window(features=feats, content_frames=feats.shape[-1] - 1) for feats in all_feats]
    for batch in seek_batches(states, batch_size, n_frames):
        encoded = encode(batch)
        results = model.model.generate(
            encoded,
            [list(prompt) for _ in batch],
            length_penalty=1,
            repetition_penalty=1,
            no_repeat_ngram_size=0,
            max_length=max_length,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=options.suppress_blank,
            suppress_tokens=suppress,
            max_initial_timestamp_index=max_initial,
            beam_size=1,
            patience=1,
        )
        for (st, size), res in zip(batch, results, strict=True):
            tokens = list(res.sequences_ids[0])
            avg_logprob = res.scores[0] * len(tokens) / (len(tokens) + 1)
            st.count_decode(len(tokens), token_cap)
            if skip(res.no_speech_prob, avg_logprob, options):
                st.advance(st.seek + size, size)  # generate_segments: "fast-forward to the next segment boundary"
                continue
            segments, seek, _ = model._split_segments_by_timestamps(
                tokenizer=tokenizer,
                tokens=tokens,
                time_offset=st.seek / fps,
                segment_size=size,
                segment_duration=size / fps,
                seek=st.seek,
            )
            for seg in segments:
                text = tokenizer.decode(seg["tokens"])
                # generate_segments yields no empty or zero-length segment
                if seg["start"] != seg["end"] and text.strip():
                    st.texts.append(text.strip())
            st.advance(seek, size)  # a pair of timestamps at 0.00 s would seek by zero (faster-whisper loops)
    return [(" ".join(st.texts), st.decodes, st.sampled, st.limit_hits, tuple(st.decode_tokens)) for st in states]
