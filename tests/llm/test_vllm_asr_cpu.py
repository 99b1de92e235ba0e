"""``asr.backend: vllm`` for real on the vLLM CPU build, against faster-whisper on the same windows (integration).

vLLM is importable only in ``make install-vllm``'s venv, so a driver script runs with that interpreter (the
``__main__`` guard is for vLLM's spawned workers): the bundled tiny.en is converted to a Hugging Face checkpoint
(:mod:`stresstest.asr.hf_convert`, into the stresstest cache), the first turns of an OSCE encounter are rendered
by the project's piper TTS (cached there too), cut into the pipeline's 30-s windows, and decoded by
:class:`~stresstest.asr.vllm_backend.VLLMWhisperBackend` (one ``generate`` call for all windows) and by
faster-whisper with the same weights in float32 and the same prompt (``without_timestamps``). A few seconds of
silence are decoded too: Whisper's no-speech rule must drop them in both.

The texts are not byte-equal (different kernels, log-Mel front ends and no lone-blank suppression in vLLM), so
the test bounds the word error rate between them; measured on these windows: see ``BOUND_WER``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from vllm_cpu import ROOT, require_vllm_python

from stresstest.metrics.wer import asr_errors

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VLLM_PY = require_vllm_python()

#: Largest word error rate of vLLM's text against faster-whisper's, pooled over the speech windows. Measured
#: 0.0 on these windows (see the commit); a wrong prompt (a language token for tiny.en, timestamps left on,
#: no start-of-transcript) gives far more.
BOUND_WER = 0.05

DRIVER = r'''
import json, sys
from pathlib import Path

import numpy as np

from stresstest.asr.backends import FasterWhisperBackend
from stresstest.asr.base import DecodingOptions, split_windows
from stresstest.asr.vllm_backend import VLLMWhisperBackend
from stresstest.audio import read_wav_exact
from stresstest.cache import default_cache_dir
from stresstest.corpus import load_corpus
from stresstest.speech import speech_for


def main() -> None:
    osce, n_turns, n_windows = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    cache = default_cache_dir()
    (enc,) = load_corpus("osce", osce, ids=["CAR0001"])
    audio = read_wav_exact(speech_for(enc.truncated(n_turns), cache).path)
    windows = split_windows(audio)[:n_windows]
    windows.append(np.zeros(16000 * 5, dtype=np.float32))  # silence: dropped by the no-speech rule
    opts = DecodingOptions(without_timestamps=True)
    vb = VLLMWhisperBackend(None, device="cpu", cache_dir=cache)
    runtime = vb.runtime(1)
    got = vb.decode_windows(windows, opts)
    fw = FasterWhisperBackend(None, device="cpu", compute_type="float32", cpu_threads=1)
    ref = fw.transcribe_windows(windows, opts)
    print("STRESSTEST-VLLM-ASR " + json.dumps({
        "runtime": runtime, "model_id": vb.model_id, "vllm": [r.text for r in got],
        "tokens": [r.n_tokens for r in got], "limit_hits": [r.token_limit_hits for r in got],
        "faster_whisper": ref, "seconds": [round(w.size / 16000, 2) for w in windows]}))


if __name__ == "__main__":
    main()
'''


def test_vllm_backend_matches_faster_whisper_on_cpu(tmp_path: Path) -> None:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = dict(os.environ)
    done = subprocess.run(  # noqa: S603 - fixed argument list
        [str(VLLM_PY), str(script), str(ROOT / "data" / "osce" / "transcripts"), "14", "2"],
        capture_output=True, text=True, timeout=1500, cwd=ROOT, check=False, env=env,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("STRESSTEST-VLLM-ASR ")), None)
    assert done.returncode == 0 and line, done.stderr[-3000:]
    out = json.loads(line.split(" ", 1)[1])
    rt = out["runtime"]
    # English-only tiny.en: no language/task token, no timestamps; the deterministic CPU engine options.
    assert rt["prompt"] == "<|startoftranscript|><|notimestamps|>"
    assert rt["device"] == "cpu" and rt["precision"] == "float32" and rt["engine"]["enforce_eager"] is True
    assert rt["converter"] and out["model_id"] == "vllm:tiny.en-bundled"
    *speech_v, silence_v = out["vllm"]
    *speech_f, silence_f = out["faster_whisper"]
    assert silence_v == "" and silence_f == "", (silence_v, silence_f)
    assert all(speech_v) and not any(out["limit_hits"])
    e = asr_errors(" ".join(speech_f), " ".join(speech_v))
    wer = e.errors / max(1, e.ref_words)
    print(f"vLLM vs faster-whisper WER on {len(speech_v)} windows: {wer:.4f}")
    assert wer <= BOUND_WER, (wer, speech_f, speech_v)
