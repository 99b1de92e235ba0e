"""Build the device bundle: the wheels ``scripts/bench_gpu.py --random`` needs beyond a bare GPU machine's image.

The lent GPU machine (one GPU, CUDA 13, Python 3.12, x86-64, no network) has torch (CUDA build), transformers,
numpy, tqdm and triton. What the benchmark needs besides:

- ``openai-whisper==20250625``: published as a source archive only; built here into a ``py3-none-any`` wheel
  (its tokenizer vocabularies and mel filters ride inside it, so nothing is fetched at run time);
- ``more-itertools`` and ``tiktoken`` (cp312 wheel; its ``regex`` dependency comes with transformers): what
  openai-whisper imports. Its third import, ``numba``, serves only word timestamps, which the benchmark never
  computes: ``bench_gpu.py`` stands in a no-op ``numba.jit`` when numba is missing (numba + llvmlite are ~45 MiB);
- ``ctranslate2==4.8.5`` (the CUDA wheel, 40.8 MiB; ``--without-ctranslate2`` leaves it out): the engine of the
  fast path. It is a CUDA 12 build that opens ``libcublas.so.12`` / ``libcublasLt.so.12``; ``nvidia-cublas-cu12``
  is 581 MB, far over the 64 MiB a call may carry, so on a CUDA-13-only machine the benchmark's CTranslate2 row
  runs with pip's CUDA 13 cuBLAS (``nvidia/cu13/lib``) linked under the CUDA 12 names on its own process's
  ``LD_LIBRARY_PATH`` (``bench_gpu.py --cublas13-as-12 auto``, the default; BENCHMARKS.md). Whether CTranslate2
  runs on it is what that row finds out: if the loader refuses (symbol versions) or a kernel fails, the row says
  so and only that row is lost.

The whole working tree travels with every call too, so the check is bundle + tracked files ≤ 64 MiB.

Usage::

    python scripts/build_device_bundle.py                 # -> bundle/*.whl, sizes, total; exit 1 if over
    python scripts/build_device_bundle.py --without-ctranslate2
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_BYTES = 64 * 2**20
#: Built from source (no wheel on PyPI), pure Python.
SOURCE_ONLY = ["openai-whisper==20250625"]
#: Downloaded as wheels for the device (CPython 3.12, manylinux x86-64).
WHEELS = ["more-itertools==11.2.1", "tiktoken==0.14.0"]
CTRANSLATE2 = "ctranslate2==4.8.5"
PLATFORM = [
    "--only-binary=:all:",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    "--platform",
    "manylinux_2_28_x86_64",
    "--platform",
    "manylinux_2_27_x86_64",
    "--platform",
    "manylinux_2_17_x86_64",
    "--platform",
    "manylinux2014_x86_64",
]


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"build_device_bundle: `{' '.join(cmd)}` failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")


def tree_bytes(root: Path = ROOT) -> int:
    """Bytes of the files git tracks (they travel with every call beside the carried bundle)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return 0
    return sum((root / n).stat().st_size for n in out.decode().split("\0") if n and (root / n).is_file())


def summarise(dest: Path, tree: int, limit: int = LIMIT_BYTES) -> tuple[str, bool]:
    """The bundle's file list with sizes and the totals; True when bundle + tree fit ``limit``."""
    files = sorted(dest.glob("*.whl"))
    bad = [f.name for f in files if not _installable(f)]
    total = sum(f.stat().st_size for f in files)
    lines = [f"{f.stat().st_size / 2**20:8.2f} MiB  {f.name}" for f in files]
    lines.append(f"{total / 2**20:8.2f} MiB  bundle total ({len(files)} wheels in {dest})")
    lines.append(f"{tree / 2**20:8.2f} MiB  tracked working tree (travels with every call)")
    ok = total + tree <= limit and not bad and bool(files)
    lines.append(
        f"{(total + tree) / 2**20:8.2f} MiB  carried in all, limit {limit / 2**20:.0f} MiB: "
        + ("fits" if ok else "DOES NOT FIT" if total + tree > limit else "INVALID")
    )
    if bad:
        lines.append(f"not wheels for CPython 3.12 on x86-64 Linux: {', '.join(bad)}")
    return "\n".join(lines), ok


def _installable(f: Path) -> bool:
    """A readable wheel tagged for any Python, or CPython 3.12 on manylinux x86-64."""
    try:
        zipfile.ZipFile(f).testzip()
    except (zipfile.BadZipFile, OSError):
        return False
    tags = f.name[:-4].split("-")[-3:]
    return tags[2] == "any" or (tags[0] == "cp312" and "x86_64" in tags[2] and "manylinux" in tags[2])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", type=Path, default=ROOT / "bundle", help="output folder (git-ignored)")
    ap.add_argument("--without-ctranslate2", action="store_true", help=f"leave out {CTRANSLATE2} (40.8 MiB; see above)")
    args = ap.parse_args(argv)
    dest: Path = args.dest
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.whl"):  # one version of each package: two would stop the install on the device
        old.unlink()
    _pip(
        "download",
        "--no-deps",
        *PLATFORM,
        "-d",
        str(dest),
        *WHEELS,
        *([] if args.without_ctranslate2 else [CTRANSLATE2]),
    )
    _pip("wheel", "--no-deps", "-w", str(dest), *SOURCE_ONLY)
    text, ok = summarise(dest, tree_bytes())
    print(text)
    print(
        f"device: carry {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}, then "
        f"`python3 -m pip install -q --no-index --no-deps bundle/*.whl` (BENCHMARKS.md)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
