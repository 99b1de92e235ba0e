"""cuBLAS 12 for CTranslate2: loaded from pip's nvidia/cublas/lib, or one clear error before any decode."""

from __future__ import annotations

import ctypes.util
from pathlib import Path

import pytest

from stresstest.asr.backends import FasterWhisperBackend
from stresstest.asr.cudalibs import preload_cuda_libraries
from stresstest.errors import ASRError

ABSENT = ctypes.util.find_library("cublas") is None


@pytest.mark.skipif(not ABSENT, reason="this machine has a cuBLAS on its loader path")
def test_absent_cublas_is_one_line_naming_the_package(tmp_path: Path) -> None:
    with pytest.raises(ASRError) as err:
        preload_cuda_libraries(search_path=[str(tmp_path)])
    msg = str(err.value)
    assert "\n" not in msg and "libcublasLt.so.12" in msg and "pip install 'nvidia-cublas-cu12==12.9.3.13'" in msg


def test_the_pip_folder_is_searched_and_a_broken_library_is_named(tmp_path: Path) -> None:
    lib = tmp_path / "nvidia" / "cublas" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcublasLt.so.12").write_bytes(b"not an ELF file")
    with pytest.raises(ASRError, match=r"libcublasLt\.so\.12: found but cannot be loaded .*reinstall nvidia-cublas"):
        preload_cuda_libraries(search_path=[str(tmp_path)])


@pytest.mark.skipif(not ABSENT, reason="this machine has a cuBLAS on its loader path")
def test_faster_whisper_on_cuda_fails_before_loading_the_model_when_cublas_is_absent() -> None:
    be = FasterWhisperBackend(device="cuda")
    with pytest.raises(ASRError, match="libcublas"):
        be._model()
