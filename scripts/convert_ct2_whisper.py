"""Convert a CTranslate2 Whisper model (e.g. the bundled tiny.en) into an openai-whisper checkpoint.

    python scripts/convert_ct2_whisper.py                     # bundled tiny.en → the cache dir (printed)
    python scripts/convert_ct2_whisper.py MODEL_DIR --out x.pt

The pipeline does this by itself for ``asr.backend: openai-whisper`` with ``asr.model: tiny.en-bundled`` (or a
CTranslate2 model directory); the file is cached under ``<cache>/asr-models`` keyed by the source's digest.
See :mod:`stresstest.asr.convert` for the format and the name mapping.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stresstest.asr.backends import bundled_tiny_en_path  # noqa: E402
from stresstest.asr.convert import openai_checkpoint_for_ct2  # noqa: E402
from stresstest.cache import default_cache_dir  # noqa: E402
from stresstest.errors import StressTestError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", nargs="?", type=Path, help="CTranslate2 Whisper dir (default: bundled tiny.en)")
    ap.add_argument("--out", type=Path, help="also copy the checkpoint here")
    args = ap.parse_args(argv)
    try:
        src = args.model_dir or bundled_tiny_en_path()
        path = openai_checkpoint_for_ct2(src, default_cache_dir())
    except (StressTestError, OSError) as exc:
        print(f"convert_ct2_whisper: {exc}", file=sys.stderr)
        return 2
    if args.out:
        shutil.copyfile(path, args.out)
        path = args.out
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
