"""ASR stage: pinned decoding, fixed windows, caching, and the three backends."""

from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from stresstest.asr.backends import FasterWhisperBackend, OpenAICompatibleASR
from stresstest.asr.base import DecodingOptions, join_windows, split_windows
from stresstest.asr.stage import ASRConfig, ASRItem, transcribe_items
from stresstest.audio import SAMPLE_RATE_HZ as SR
from stresstest.audio import write_wav
from stresstest.metrics.wer import asr_errors

SENTENCE = "The patient has had chest pain for two hours and takes warfarin five milligrams daily."


@pytest.fixture(scope="module")
def sentence_audio() -> np.ndarray:
    from stresstest.speech import SpeakerVoice, synthesize

    x = synthesize(SENTENCE, SpeakerVoice())
    return np.concatenate([np.zeros(SR // 4, np.float32), x, np.zeros(SR // 4, np.float32)])


def test_split_and_join_windows():
    x = np.arange(int(SR * 65), dtype=np.float32)
    ws = split_windows(x, 30.0)
    assert [w.size for w in ws] == [30 * SR, 30 * SR, 5 * SR]
    assert np.array_equal(np.concatenate(ws), x)
    assert split_windows(np.zeros(0, np.float32)) == []
    assert join_windows([" a  b", "", "c "]) == "a b c"


def test_decoding_options_are_pinned_and_strict():
    d = DecodingOptions()
    assert (d.temperature, d.beam_size, d.best_of, d.condition_on_previous_text, d.window_s) == (0.0, 1, 1, False, 30.0)
    with pytest.raises(Exception, match="extra"):
        DecodingOptions(patience=2)  # type: ignore[call-arg]


@pytest.mark.integration
def test_faster_whisper_sequential_and_batched_agree(sentence_audio):
    be = FasterWhisperBackend()
    opts = DecodingOptions()
    windows = [sentence_audio, sentence_audio[: SR * 2], np.zeros(SR * 3, np.float32)]
    seq = be.transcribe_windows(windows, opts)
    bat = be.transcribe_windows_batched(windows, opts, batch_size=4)
    assert asr_errors(SENTENCE, seq[0]).ref_words > 0
    e = asr_errors(SENTENCE, seq[0])
    assert (e.sub + e.dele + e.ins) / e.ref_words < 0.2, seq[0]
    # Same windows, same greedy decoding: the batched path must say the same thing.
    diffs = [asr_errors(s, b) for s, b in zip(seq[:2], bat[:2], strict=True)]
    assert [d.sub + d.dele + d.ins for d in diffs] == [0, 0]
    assert seq[2] == "" or len(seq[2].split()) <= 3  # silence: nothing (or Whisper's usual one-word artefact)


@pytest.mark.integration
def test_batched_recovers_the_unfinished_tail_of_full_windows(sentence_audio):
    """A full 30-s window: one batched pass alone drops the last segment; the remainder pass restores it."""
    gap = np.zeros(SR // 3, np.float32)
    reps = int(30 * SR // (sentence_audio.size + gap.size)) + 1
    long = np.concatenate([np.concatenate([sentence_audio, gap]) for _ in range(reps)])
    windows = split_windows(long)[:1]
    be, opts = FasterWhisperBackend(), DecodingOptions()
    seq = be.transcribe_windows(windows, opts)[0]
    bat = be.transcribe_windows_batched(windows, opts, batch_size=4)[0]
    d = asr_errors(seq, bat)
    assert d.ref_words > 60
    assert (d.sub + d.dele + d.ins) / d.ref_words <= 0.05, (seq, bat)


@pytest.mark.integration
def test_transcribe_items_caches_and_records_decoding(tmp_path, sentence_audio):
    wav = tmp_path / "a.wav"
    write_wav(wav, sentence_audio)
    got: list = []
    cfg = ASRConfig()
    transcribe_items(
        [ASRItem("E1", "clean", wav)],
        cfg,
        cache_dir=tmp_path / "cache",
        on_done=lambda it, t, err: got.append((t, err)),
    )
    ((t1, err1),) = got
    assert err1 is None and t1.decoding.temperature == 0.0 and t1.decoding.beam_size == 1
    assert t1.model.startswith("faster-whisper:tiny.en-bundled")

    class Boom:
        name, model_id = "faster-whisper", FasterWhisperBackend().model_id
        runtime = FasterWhisperBackend().runtime  # same device/compute type/versions → same cache key

        def transcribe_windows(self, *a, **k):
            raise AssertionError("cache miss: the backend must not be called again")

    got.clear()
    transcribe_items(
        [ASRItem("E1", "ambient_5db", wav)],
        cfg,
        cache_dir=tmp_path / "cache",
        on_done=lambda it, t, err: got.append((t, err)),
        backend=Boom(),
    )
    ((t2, err2),) = got
    assert err2 is None and t2.text == t1.text and t2.condition == "ambient_5db"


def test_unreadable_audio_is_a_recorded_failure_not_a_crash(tmp_path):
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"not a wav at all")
    got: list = []

    class Never:
        name, model_id = "x", "x"

        def transcribe_windows(self, *a, **k):
            raise AssertionError("must not be called")

    transcribe_items(
        [ASRItem("E1", "clean", bad), ASRItem("E2", "clean", tmp_path / "missing.wav")],
        ASRConfig(),
        cache_dir=tmp_path / "c",
        on_done=lambda it, t, err: got.append((it.encounter_id, t, err)),
        backend=Never(),
    )
    got.sort(key=lambda g: g[0])
    assert [(e, t) for e, t, _ in got] == [("E1", None), ("E2", None)]
    assert "bad.wav" in got[0][2] and "missing.wav" in got[1][2]


class _TranscriptionHandler(BaseHTTPRequestHandler):
    """A loopback /v1/audio/transcriptions server backed by the real faster-whisper model."""

    backend: FasterWhisperBackend
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802
        import soundfile as sf

        length = int(self.headers["Content-Length"])
        body = self.rfile.read(length)
        ctype = self.headers["Content-Type"]
        boundary = ctype.split("boundary=")[1].encode()
        fields, audio = {}, None
        for part in body.split(b"--" + boundary):
            if b"\r\n\r\n" not in part:
                continue
            head, data = part.split(b"\r\n\r\n", 1)
            data = data.rstrip(b"\r\n")
            name = head.split(b'name="')[1].split(b'"')[0].decode()
            if name == "file":
                audio, _ = sf.read(io.BytesIO(data), dtype="float32")
            else:
                fields[name] = data.decode()
        self.seen.append(fields)
        text = self.backend.transcribe_windows([audio], DecodingOptions())[0]
        out = json.dumps({"text": text}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


@pytest.mark.integration
def test_openai_compatible_backend_against_loopback_server(sentence_audio):
    _TranscriptionHandler.backend = FasterWhisperBackend()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _TranscriptionHandler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        be = OpenAICompatibleASR(f"http://127.0.0.1:{srv.server_address[1]}/v1", "whisper-tiny.en")
        texts = be.transcribe_windows([sentence_audio, sentence_audio], DecodingOptions())
    finally:
        srv.shutdown()
    e = asr_errors(SENTENCE, texts[0])
    assert (e.sub + e.dele + e.ins) / e.ref_words < 0.2
    assert texts[0] == texts[1]
    assert _TranscriptionHandler.seen[0]["temperature"] == "0.0" and _TranscriptionHandler.seen[0]["language"] == "en"


def test_openai_compatible_backend_names_missing_key(monkeypatch):
    from stresstest.errors import ASRError

    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    be = OpenAICompatibleASR("http://127.0.0.1:9/v1", "m", api_key_env="NO_SUCH_KEY_VAR")
    with pytest.raises(ASRError, match="NO_SUCH_KEY_VAR"):
        be.transcribe_windows([np.zeros(SR, np.float32)], DecodingOptions())


def _tiny_whisper_checkpoint(path: Path) -> Path:
    """A randomly initialised, tiny openai-whisper checkpoint (real code path, meaningless text)."""
    import torch
    import whisper
    from whisper.model import ModelDimensions

    dims = ModelDimensions(
        n_mels=80,
        n_audio_ctx=1500,
        n_audio_state=64,
        n_audio_head=2,
        n_audio_layer=1,
        n_vocab=51864,
        n_text_ctx=448,
        n_text_state=64,
        n_text_head=2,
        n_text_layer=1,
    )
    torch.manual_seed(0)
    model = whisper.model.Whisper(dims)
    torch.save({"dims": dims.__dict__, "model_state_dict": model.state_dict()}, path)
    return path


@pytest.mark.integration
def test_openai_whisper_backend_runs_on_a_tiny_checkpoint(tmp_path):
    pytest.importorskip("whisper", reason="openai-whisper not installed (make install-whisper)")
    from stresstest.asr.backends import OpenAIWhisperBackend

    ckpt = _tiny_whisper_checkpoint(tmp_path / "tiny-random.pt")
    be = OpenAIWhisperBackend(str(ckpt), device="cpu", batch_size=2)
    # Random weights never say end-of-text: bound each decode, and one decode per window (no timestamps),
    # or the seek loop would decode 224-token garbage many times per window. Real weights:
    # tests/core/test_asr_reference.py.
    be.decode_overrides = {"sample_len": 24}
    x = np.random.default_rng(0).standard_normal(SR * 3).astype(np.float32) * 0.1
    opts = DecodingOptions(no_speech_threshold=None, without_timestamps=True)
    a = be.transcribe_windows([x, x[:SR], x], opts)
    b = be.transcribe_windows([x, x[:SR], x], opts)
    assert len(a) == 3 and all(isinstance(t, str) for t in a)
    assert a == b  # greedy, temperature 0: deterministic
    assert a[0] == a[2]  # batch position does not change a window's text


class _FixedTextHandler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers["Content-Length"]))
        out = b'{"text": "hello"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


def test_openai_compatible_backend_on_loopback_ignores_a_dead_proxy(monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # nothing listens there: a proxied request fails
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _FixedTextHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        be = OpenAICompatibleASR(f"http://127.0.0.1:{srv.server_address[1]}/v1", "m", max_retries=0)
        assert be.transcribe_windows([np.zeros(SR, np.float32)], DecodingOptions()) == ["hello"]
    finally:
        srv.shutdown()


def test_openai_api_concurrency_is_configurable():
    from stresstest.asr.stage import make_backend

    be = make_backend(ASRConfig(backend="openai-api", base_url="http://127.0.0.1:1/v1", model="m", concurrency=64))
    assert isinstance(be, OpenAICompatibleASR) and be.concurrency == 64


@pytest.mark.slow
@pytest.mark.integration
def test_batched_text_equals_sequential_on_demo_audio(demo_speech):
    """16 windows of the demo's audio (two OSCE encounters, their first 40 turns, clean and at 5 dB of built-in
    ambient noise): the batched fast path says what the sequential decoder says in at least 15."""
    import soundfile as sf

    from stresstest.cache import default_cache_dir
    from stresstest.noise.factory import NoiseSpec, make_noise_source
    from stresstest.noise.mix import active_mask, item_rng, mix

    cache = default_cache_dir()  # renders are cached by content hash, shared with the demo
    encs = [enc for enc, _ in demo_speech]  # the session's rendered demo audio (tests/conftest.py)
    noise = make_noise_source(NoiseSpec(family="ambient"), encounters=encs, cache_dir=cache)
    windows: list[np.ndarray] = []
    for enc, sp in demo_speech:
        clean, _ = sf.read(sp.path, dtype="float32")
        seg = noise.for_encounter(enc.encounter_id).segment(sp.duration_s, item_rng(1234, enc.encounter_id, "amb"))
        noisy = mix(clean, seg.audio, active_mask(clean.size, sp.segments_s), 5.0)[0]
        windows += split_windows(clean)[:4] + split_windows(noisy)[:4]
    assert len(windows) == 16
    be, opts = FasterWhisperBackend(), DecodingOptions()
    seq = be.transcribe_windows(windows, opts)
    bat = be.transcribe_windows_batched(windows, opts, batch_size=8)
    same = [s == b for s, b in zip(seq, bat, strict=True)]
    assert sum(same) >= 15, [(s, b) for s, b, ok in zip(seq, bat, same, strict=True) if not ok]


class _SilentBackend:
    """Returns an empty text per window: the stage's own memory is what is measured."""

    name = "silent"
    model_id = "silent"

    def transcribe_windows(self, windows, options):
        return ["" for _ in windows]

    def transcribe_windows_batched(self, windows, options, batch_size):
        return ["" for _ in windows]


def _asr_peak_bytes(tmp_path: Path, n_items: int) -> int:
    import tracemalloc

    audio = np.random.default_rng(0).uniform(-0.1, 0.1, 40 * SR).astype(np.float32)  # 2 windows per item
    items = []
    for i in range(n_items):
        p = tmp_path / f"a{n_items}_{i}.wav"
        write_wav(p, audio + np.float32(i * 1e-4))  # distinct content: no transcript is a cache hit
        items.append(ASRItem(f"E{i}", "clean", p))
    done: list[str | None] = []
    tracemalloc.start()
    try:
        transcribe_items(
            items,
            ASRConfig(batch_size=2),
            cache_dir=tmp_path / f"cache{n_items}",
            on_done=lambda it, t, err: done.append(err),
            backend=_SilentBackend(),
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert done == [None] * n_items
    return peak


def test_asr_stage_memory_does_not_grow_with_the_number_of_items(tmp_path):
    """Windows are read group by group (the paper grid would be ~84 GB of float32 read at once)."""
    small, large = _asr_peak_bytes(tmp_path, 8), _asr_peak_bytes(tmp_path, 40)
    one_item = 40 * SR * 4
    assert large < small + 4 * one_item, (small / 1e6, large / 1e6)


class _RecordingBackend:
    """Records, at each call, the windows it was given and how many files the stage had hashed by then."""

    name = "recording"
    model_id = "recording"

    def __init__(self, hashed: list[str]) -> None:
        self.hashed = hashed
        self.calls: list[tuple[int, int]] = []  # (windows in the call, files hashed before it)

    def transcribe_windows(self, windows, options):
        self.calls.append((len(windows), len(self.hashed)))
        return [f"w{len(self.calls)}" for _ in windows]

    def transcribe_windows_batched(self, windows, options, batch_size):
        return self.transcribe_windows(windows, options)


def _streamed(tmp_path: Path, monkeypatch, n_items: int, batch_size: int, cached: set[int]):
    import stresstest.asr.stage as stage
    from stresstest.cache import KeyValueCache, sha256_file

    hashed: list[str] = []

    def counting(path):
        hashed.append(str(path))
        return sha256_file(path)

    monkeypatch.setattr(stage, "sha256_file", counting)
    rng = np.random.default_rng(1)
    items, sizes = [], []
    for i in range(n_items):
        seconds = 20 + 25 * (i % 3)  # 1, 2 or 3 windows
        p = tmp_path / f"s{i}.wav"
        write_wav(p, rng.uniform(-0.1, 0.1, seconds * SR).astype(np.float32))
        items.append(ASRItem(f"E{i}", "clean", p))
        sizes.append(-(-seconds // 30))
    cfg, cache_dir = ASRConfig(batch_size=batch_size), tmp_path / "cache"
    keys = {}
    for i in cached:  # a transcript computed earlier (by a stage that hashed every file first: same key)
        be = _RecordingBackend([])
        transcribe_items([items[i]], cfg, cache_dir=cache_dir, on_done=lambda it, t, err: None, backend=be)
        keys[i] = stage.transcript_key(sha256_file(items[i].audio_path), be.model_id, cfg.decoding, {})
        assert KeyValueCache(cache_dir, "transcripts").path(keys[i]).is_file()
    hashed.clear()
    be = _RecordingBackend(hashed)
    got: dict[str, object] = {}
    transcribe_items(
        items, cfg, cache_dir=cache_dir, on_done=lambda it, t, err: got.setdefault(it.encounter_id, t), backend=be
    )
    assert sorted(got) == sorted(it.encounter_id for it in items) and all(got.values())
    for i, it in enumerate(items):  # every transcript under the key of its audio, model and decoding
        key = stage.transcript_key(sha256_file(it.audio_path), be.model_id, cfg.decoding, {})
        assert KeyValueCache(cache_dir, "transcripts").path(key).is_file()
        assert i not in keys or keys[i] == key
    return be.calls, sizes


def test_asr_stage_hashes_audio_group_by_group(tmp_path, monkeypatch):
    """The first decode does not wait for every file to be hashed (issue 39): sequentially, the first item's
    group (and at most the next one, read ahead) is hashed when the backend is first called."""
    calls, _ = _streamed(tmp_path, monkeypatch, n_items=8, batch_size=1, cached=set())
    assert len(calls) == 8
    assert calls[0][1] <= 2, calls


def test_streamed_groups_are_the_groups_over_the_items_still_to_decode(tmp_path, monkeypatch):
    """Batched: with some items cached, each backend call holds the windows of :func:`_groups` over the items
    not cached, as when every file was hashed first, and the first call came before the last file was hashed."""
    from stresstest.asr.stage import _groups

    calls, sizes = _streamed(tmp_path, monkeypatch, n_items=12, batch_size=2, cached={1, 4, 5})
    todo = [k for i, k in enumerate(sizes) if i not in {1, 4, 5}]
    assert [n for n, _ in calls] == [sum(todo[i] for i in g) for g in _groups(todo, 2)]
    assert len(calls) >= 2 and calls[0][1] < 12, calls
