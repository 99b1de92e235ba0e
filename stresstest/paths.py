"""What is wrong with an input path, in one line: a symlink loop, a FIFO or device, a missing file.

``Path.exists()`` is False for a symlink loop and ``is_file()`` is False for a FIFO, so checks built on them
called both "not found"; :func:`input_problem` names them.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def input_problem(path: str | Path, expected: str = "a regular file") -> str | None:
    """Why ``path`` cannot be read as ``expected`` (a regular file), or ``None`` when it is one.

    The message starts with the path and names what was found: not found, a symlink loop (or a link to nothing),
    a directory, a FIFO, socket or device.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{p}: is a symlink loop; expected {expected}"
        if p.is_symlink():
            return f"{p}: is a symlink to {os.readlink(p)}, which does not exist; expected {expected}"
        if exc.errno == errno.EACCES:
            return f"{p}: permission denied; expected {expected} you can read"
        return f"{p}: file not found; expected {expected}"
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISDIR(st.st_mode):
        return f"{p}: is a directory; expected {expected}"
    kind = (
        "a FIFO (named pipe)"
        if stat.S_ISFIFO(st.st_mode)
        else "a socket"
        if stat.S_ISSOCK(st.st_mode)
        else "a device"
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
        else "not a regular file"
    )
    return f"{p}: is {kind}; expected {expected}"
