"""Stage progress on stderr: a tqdm bar on a terminal, plain lines a log file can hold elsewhere.

A batch run (``nohup``, a scheduler, CI) sends stderr to a file, where tqdm draws nothing. There each
stage prints a line ``stresstest: <stage> <done>/<total> <unit>s (<pct>%), <rate>, elapsed <t>, ETA <t>``
each time another tenth of its items is done or, failing that, when :data:`LINE_EVERY_S` seconds passed
(later in a long stage: a fifth of the time elapsed so far, so an hours-long stage still prints a few
dozen lines), and one end line with its time and failure count. On a terminal the bar is drawn as
before and no line is printed. ``enabled=False`` (``run.progress: false``) prints neither.

Progress is counted where ``update`` is called: the driver, as each result comes back (a Ray worker's
items count when the driver receives them). Lines carry counts and times only, never item text.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

TENTHS = 10  # a line each time another tenth of the items is done
LINE_EVERY_S = 30.0  # ... or after this long without one (whichever comes first)
LINE_EVERY_ELAPSED = 0.2  # ... the wait grows to this share of the elapsed time in a long stage


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``: a duration as a log line says it."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # a closed or odd stream: no terminal
        return False


class StageProgress:
    """Progress of one stage (see the module docstring); use as a context manager or call :meth:`close`.

    Args:
        stage: the stage's name, first word of every line.
        total: items the stage will handle.
        enabled: False prints nothing at all (``run.progress: false``).
        unit: what an item is called (``item``, ``call``).
        stream: where to write (default: ``sys.stderr`` at construction).
        clock: seconds, monotonic (tests pass a fake one).
        tty: force terminal (True: tqdm bar) or log (False: lines); None: ask ``stream``.
        bar: False draws no bar on a terminal (a stage whose calls have a bar of their own); lines stay.
    """

    def __init__(
        self,
        stage: str,
        total: int,
        *,
        enabled: bool = True,
        unit: str = "item",
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        tty: bool | None = None,
        bar: bool = True,
    ) -> None:
        self.stage, self.total, self.unit = stage, max(0, int(total)), unit
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.done = 0
        self.failed = 0
        self.t0 = clock()
        self._last_line = self.t0
        self._k = 1  # the next line due by count is at the k-th tenth
        self._closed = False
        on_tty = _is_tty(self.stream) if tty is None else tty
        self._bar: Any = None
        self._lines = enabled and not on_tty
        if enabled and on_tty and bar:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=stage, unit=unit, file=self.stream, dynamic_ncols=True, leave=False)

    def _threshold(self, k: int) -> int:
        """Items done at the k-th tenth (at least one more than the previous tenth)."""
        return max(k, -(-k * self.total // TENTHS))

    def _write(self, line: str) -> None:
        try:
            print(f"stresstest: {line}", file=self.stream, flush=True)
        except (OSError, ValueError):  # a closed stream must not stop the run
            pass

    def _rate(self, elapsed: float) -> str:
        if elapsed <= 0 or self.done == 0:
            return f"– {self.unit}s/s"
        r = self.done / elapsed
        return f"{r:.2f} {self.unit}s/s" if r >= 0.1 else f"{60 * r:.2f} {self.unit}s/min"

    def update(self, n: int = 1, failed: int = 0) -> None:
        """``n`` more items done, ``failed`` of them failed."""
        self.done += n
        self.failed += failed
        if self._bar is not None:
            self._bar.update(n)
            return
        if not self._lines or self.done >= self.total:
            return  # the end line says the rest
        now = self.clock()
        elapsed = now - self.t0
        wait = max(LINE_EVERY_S, LINE_EVERY_ELAPSED * elapsed)
        if self.done < self._threshold(self._k) and now - self._last_line < wait:
            return
        while self._threshold(self._k) <= self.done:
            self._k += 1
        self._last_line = now
        eta = elapsed / self.done * (self.total - self.done) if self.done else None
        pct = 100.0 * self.done / self.total if self.total else 100.0
        self._write(
            f"{self.stage} {self.done}/{self.total} {self.unit}s ({pct:.0f}%), {self._rate(elapsed)}, "
            f"elapsed {duration(elapsed)}, ETA {duration(eta) if eta is not None else '–'}"
            + (f", {self.failed} failed so far" if self.failed else "")
        )

    def close(self) -> None:
        """Close the bar (terminal) or print the end line (log); a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self._lines:
            elapsed = self.clock() - self.t0
            self._write(
                f"{self.stage} done: {self.done}/{self.total} {self.unit}s in {duration(elapsed)} "
                f"({self._rate(elapsed)}), {self.failed} failed"
            )

    def __enter__(self) -> StageProgress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        elif self._bar is not None:  # an error: clear the bar, print no end line for a stage that did not end
            self._closed = True
            self._bar.close()


def say(line: str, *, enabled: bool = True, stream: TextIO | None = None) -> None:
    """One ``stresstest: <line>`` on stderr (the run's start line), unless progress is off."""
    if enabled:
        print(f"stresstest: {line}", file=stream if stream is not None else sys.stderr, flush=True)
