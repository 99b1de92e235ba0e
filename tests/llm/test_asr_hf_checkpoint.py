"""The bundled tiny.en as a Hugging Face checkpoint, loaded by transformers itself (integration).

transformers is installed in the vLLM CPU venv (``make install-vllm``), not in the test venv, so a driver runs
with that interpreter: :func:`~stresstest.asr.hf_convert.hf_checkpoint_for_ct2` converts the bundled CTranslate2
tiny.en (into a temporary cache), ``WhisperProcessor`` and ``WhisperForConditionalGeneration`` load the folder
with no missing or unexpected weights (the names the converter writes are exactly transformers' own), and a
sentence rendered by the project's piper voice decodes (greedy, no timestamps) to the same words as
faster-whisper gives with the same float32 weights and prompt.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from vllm_cpu import ROOT, require_vllm_python

from stresstest.metrics.wer import normalise

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VLLM_PY = require_vllm_python()

DRIVER = r"""
import json, sys
from pathlib import Path

import numpy as np
import torch
import transformers

from stresstest.asr.backends import FasterWhisperBackend, bundled_tiny_en_path
from stresstest.asr.base import DecodingOptions
from stresstest.asr.convert import ct2_whisper_openai_arrays
from stresstest.asr.hf_convert import hf_checkpoint_for_ct2, openai_to_hf_name
from stresstest.speech import SpeakerVoice, synthesize

SENTENCE = "The patient has had chest pain for two hours and takes warfarin five milligrams daily."


def main() -> None:
    torch.set_num_threads(1)
    folder = hf_checkpoint_for_ct2(bundled_tiny_en_path(), Path(sys.argv[1]))
    processor = transformers.WhisperProcessor.from_pretrained(folder)
    model, info = transformers.WhisperForConditionalGeneration.from_pretrained(
        folder, dtype=torch.float32, output_loading_info=True)
    model.eval()
    names = {openai_to_hf_name(k) for k in ct2_whisper_openai_arrays(bundled_tiny_en_path())["model_state_dict"]}
    audio = synthesize(SENTENCE, SpeakerVoice()).astype(np.float32)
    feats = processor(audio, sampling_rate=16000, return_tensors="pt").input_features
    with torch.inference_mode():
        ids = model.generate(input_features=feats, do_sample=False, num_beams=1, return_timestamps=False,
                             max_new_tokens=100)
    hf_text = processor.batch_decode(ids, skip_special_tokens=True)[0].strip()
    fw = FasterWhisperBackend(None, device="cpu", compute_type="float32", cpu_threads=1)
    (fw_text,) = fw.transcribe_windows([audio], DecodingOptions(without_timestamps=True))
    print("STRESSTEST-HF " + json.dumps({
        "missing": sorted(info["missing_keys"]), "unexpected": sorted(info["unexpected_keys"]),
        "model_keys": sorted(k for k in model.state_dict() if k != "proj_out.weight"), "names": sorted(names),
        "tied": bool(model.proj_out.weight.data_ptr() == model.model.decoder.embed_tokens.weight.data_ptr()),
        "hf": hf_text, "fw": fw_text, "special_ids": processor.tokenizer.convert_tokens_to_ids(
            ["<|endoftext|>", "<|startoftranscript|>", "<|nocaptions|>", "<|notimestamps|>", "<|0.00|>",
             "<|30.00|>"]),
        "tokenizer_roundtrip": processor.tokenizer.decode(processor.tokenizer(" warfarin five").input_ids,
                                                          skip_special_tokens=True)}))


if __name__ == "__main__":
    main()
"""


def test_transformers_loads_and_decodes_the_converted_folder(tmp_path: Path) -> None:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    done = subprocess.run(  # noqa: S603 - fixed argument list
        [str(VLLM_PY), str(script), str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        check=False,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("STRESSTEST-HF ")), None)
    assert done.returncode == 0 and line, done.stderr[-3000:]
    out = json.loads(line.split(" ", 1)[1])
    assert out["missing"] == [] and out["unexpected"] == []
    assert out["model_keys"] == out["names"] and out["tied"]
    # The ids vLLM's prompt and the silence rule rely on, timestamps included (absent from the CTranslate2 file).
    assert out["special_ids"] == [50256, 50257, 50361, 50362, 50363, 51863]
    assert out["tokenizer_roundtrip"].strip() == "warfarin five"
    assert out["hf"] and normalise(out["hf"]) == normalise(out["fw"]), (out["hf"], out["fw"])
