"""Process groups this process started and must not leave behind (managed LLM servers).

:class:`~stresstest.llm.served.ManagedServer` registers its server's process group while it runs, so that
the SIGTERM watchdog (:func:`stresstest.cli._arm_sigterm_watchdog`), which ends the process without
unwinding when a long native call keeps the main thread busy, can still stop them.
"""

from __future__ import annotations

import os
import signal
import threading

_LOCK = threading.Lock()
_LIVE: set[int] = set()


def register(pgid: int) -> None:
    """Remember a process group to stop if this process is ended abruptly."""
    with _LOCK:
        _LIVE.add(pgid)


def unregister(pgid: int) -> None:
    """Forget a process group (it was stopped the orderly way)."""
    with _LOCK:
        _LIVE.discard(pgid)


def kill_all() -> None:
    """SIGKILL every registered process group (best effort; never raises)."""
    with _LOCK:
        groups = sorted(_LIVE)
        _LIVE.clear()
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
