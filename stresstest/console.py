"""Messages on stderr that coexist with progress bars.

Every warning or notice the tool prints goes through :func:`warn` /
:func:`notice`, which write through ``tqdm.write`` so a line is never glued to
an unfinished progress bar, and :func:`one_line`, which makes any message a
single printable line (no ANSI escapes, no control characters, no newlines).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def one_line(msg: object) -> str:
    """``msg`` as one printable line: ANSI escapes and control characters removed, lines joined by ' | '."""
    text = _ANSI.sub("", str(msg))
    parts = [_CTRL.sub("", p).strip() for p in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return " | ".join(p for p in parts if p)


def _write(line: str) -> None:
    try:
        from tqdm import tqdm

        tqdm.write(line, file=sys.stderr)
    except Exception:  # tqdm missing or stderr odd: plain print is still one line
        print(line, file=sys.stderr)


def warn(msg: object) -> None:
    """``stresstest: warning: <msg>`` on stderr, one line."""
    _write(f"stresstest: warning: {one_line(msg)}")


def notice(msg: object) -> None:
    """``stresstest: <msg>`` on stderr, one line."""
    _write(f"stresstest: {one_line(msg)}")


def print_made_path(prog: str, make: Callable[[], object], errors: type[Exception]) -> int:
    """The end of a ``python -m`` tool's ``main`` that makes (or finds) something and prints where it is.

    Returns:
        0 after printing ``make()``'s result on stdout; 1 after printing ``<prog>: <error>`` on stderr when it
        raises one of ``errors`` (any other exception propagates).
    """
    try:
        made = make()
    except errors as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    print(made)
    return 0


def text_table(head: list[str], body: list[list[str]]) -> str:
    """The one plain-text table layout of the tool (run and report output).

    The first column is left-aligned, the others right-aligned, under a rule as wide as the header; a body
    row of one cell is a heading, printed as it is and left out of the column widths.
    """
    rows = [b for b in body if len(b) > 1]
    widths = [max(len(h), *(len(b[i]) for b in rows)) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return "  ".join(v.ljust(widths[0]) if i == 0 else v.rjust(widths[i]) for i, v in enumerate(cells))

    first = line(head)
    return "\n".join([first, "-" * len(first), *(b[0] if len(b) == 1 else line(b) for b in body)])
