"""CUDA libraries CTranslate2 opens by name, found where pip installs them.

The CTranslate2 4.8.5 wheel (faster-whisper on CUDA) is a CUDA 12 build: at its first GPU encode it
``dlopen``s ``libcublas.so.12`` by name and searches only the loader path and its own folder. The
``nvidia-cublas-cu12`` wheel puts that library in ``site-packages/nvidia/cublas/lib``, which is on neither;
torch's CUDA 13 wheels do not ship it at all. Loading it here first, with ``RTLD_GLOBAL``, makes the later
by-name open find the already-loaded library (the loader matches its soname), and a missing library becomes
one clear error before any audio is decoded instead of a failure of every item at its first encode.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterable
from pathlib import Path

from stresstest.errors import ASRError

#: (soname, folder under site-packages, pip requirement that provides it), in load order (cuBLASLt first:
#: libcublas.so.12 depends on it).
CUBLAS12 = (
    ("libcublasLt.so.12", "nvidia/cublas/lib", "nvidia-cublas-cu12==12.9.3.13"),
    ("libcublas.so.12", "nvidia/cublas/lib", "nvidia-cublas-cu12==12.9.3.13"),
)

_loaded: dict[str, str] = {}


def _candidates(subdir: str, search_path: Iterable[str]) -> list[Path]:
    return [Path(p) / subdir for p in search_path if p and (Path(p) / subdir).is_dir()]


def preload_cuda_libraries(
    libs: tuple[tuple[str, str, str], ...] = CUBLAS12,
    *,
    search_path: Iterable[str] | None = None,
) -> dict[str, str]:
    """Load each library globally: from the loader path if it is there, else from pip's ``nvidia/…/lib``.

    Returns ``{soname: where it was loaded from}``. Raises :class:`ASRError` naming the package to install
    when a library is found nowhere, or the file and the loader's reason when it is found but cannot load.
    """
    if not sys.platform.startswith("linux"):  # pragma: no cover - the CUDA wheels are Linux wheels
        return {}
    path = list(sys.path if search_path is None else search_path)
    out: dict[str, str] = {}
    for soname, subdir, requirement in libs:
        if soname in _loaded:
            out[soname] = _loaded[soname]
            continue
        where = ""
        for d in _candidates(subdir, path):
            f = d / soname
            if f.is_file():
                try:
                    ctypes.CDLL(str(f), mode=ctypes.RTLD_GLOBAL)
                except OSError as exc:
                    raise ASRError(f"{f}: found but cannot be loaded ({exc}); reinstall {requirement}") from exc
                where = str(f)
                break
        if not where:
            try:  # already on the loader path (LD_LIBRARY_PATH, ldconfig: the Docker image)
                ctypes.CDLL(soname, mode=ctypes.RTLD_GLOBAL)
                where = "loader path"
            except OSError:
                raise ASRError(
                    f"faster-whisper on CUDA needs {soname} (CUDA 12), which CTranslate2 opens by name and which "
                    f"is neither on the loader path nor in a pip {subdir} folder: pip install '{requirement}' "
                    f"(or put the folder holding {soname} on LD_LIBRARY_PATH)"
                ) from None
        _loaded[soname] = out[soname] = where
    return out
