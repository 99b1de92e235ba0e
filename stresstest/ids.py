"""The one rule for identifiers that become file names (docs/spec.md §10).

Encounter ids and condition names come from user input (manifests, CSVs, file
names, configs) and end up as path components: ``records/<condition>/<id>.json``.
An identifier is accepted only if it is a *plain file name*:

* non-empty, at most :data:`MAX_ID_LENGTH` characters and :data:`MAX_ID_BYTES`
  bytes in UTF-8 (a file name holds 255 bytes; the rest is room for the
  writers' suffixes such as ``.c2.json``);
* no path separator (``/`` or ``\\``), not ``.`` or ``..``;
* no NUL or other control character (Unicode category ``Cc``), no leading or
  trailing whitespace.

Loaders call :func:`check_id` with the source location (``FILE:LINE``), so a
bad id is a user error that names where it came from. Writers build paths with
:func:`id_path`, which applies the same rule again and checks that the result
stays inside its root — a second line of defence for ids that did not come
through a loader. The writers check the id itself (not id + suffix), so an id
the loader accepted is never refused later, after hours of ASR.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from stresstest.errors import CorpusError, RunError

#: Longest accepted id: leaves room for a suffix within the usual 255-byte file-name limit.
MAX_ID_LENGTH = 200
#: Longest accepted id in UTF-8 bytes (255-byte file names minus the longest suffix a writer adds).
MAX_ID_BYTES = 240
#: Longest suffix a writer may add to an id (``.c2.json`` and the like).
MAX_SUFFIX_BYTES = 255 - MAX_ID_BYTES


class IdError(CorpusError):
    """An identifier from the input cannot be used as a file name."""


def id_problem(value: object) -> str | None:
    """Why ``value`` is not a plain file name, or ``None`` when it is one."""
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    if not value:
        return "it is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"it is {len(value)} characters long, longer than {MAX_ID_LENGTH} characters"
    n_bytes = len(value.encode("utf-8", "surrogatepass"))
    if n_bytes > MAX_ID_BYTES:
        return (
            f"it is {n_bytes} bytes in UTF-8, more than {MAX_ID_BYTES} (file names hold 255 bytes; "
            "non-ASCII characters take 2-4 bytes each)"
        )
    if value in (".", ".."):
        return f"{value!r} is a directory reference"
    if "/" in value or "\\" in value:
        return "it contains a path separator ('/' or '\\')"
    for ch in value:
        if ch == "\x00":
            return "it contains a NUL character"
        if unicodedata.category(ch) == "Cc":
            return f"it contains the control character U+{ord(ch):04X}"
    if value != value.strip():
        return "it has leading or trailing whitespace"
    return None


def check_id(value: object, *, what: str = "encounter id", where: str) -> str:
    """Return ``value`` if it is a plain file name; else raise naming ``where`` (``FILE:LINE``).

    Raises:
        IdError: ``<where>: <what> <value!r> cannot be used as a file name: <reason>``.
    """
    problem = id_problem(value)
    if problem is not None:
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise IdError(
            f"{where}: {what} {shown} cannot be used as a file name: {problem} (use letters, digits, '-', '_' or '.')"
        )
    assert isinstance(value, str)
    return value


def id_path(root: str | Path, *parts: str, suffix: str = "") -> Path:
    """``root/part1/.../partN<suffix>`` after checking every part with :func:`id_problem`.

    Raises:
        IdError: when a part is not a plain file name or the path would leave ``root``.
    """
    root = Path(root)
    if len(suffix.encode("utf-8")) > MAX_SUFFIX_BYTES or "/" in suffix:
        raise ValueError(f"id_path: suffix {suffix!r} is not a short file-name suffix")  # a bug, not input
    for part in parts:
        problem = id_problem(part)  # the loaders' rule, exactly: the suffix has its own room
        if problem is not None:
            raise IdError(f"refusing to write under {root}: path component {part!r}: {problem}")
    p = root.joinpath(*parts[:-1], parts[-1] + suffix) if parts else root
    try:
        p.resolve().relative_to(root.resolve())
    except ValueError as exc:  # a symlinked folder pointing elsewhere
        raise IdError(f"refusing to write {p}: it resolves outside {root}") from exc
    return p


def confined_path(root: str | Path, *parts: str) -> Path:
    """``root/part1/.../partN`` (fixed names such as ``report``, ``plots``), refused when it resolves outside ``root``.

    Every writer of a run directory goes through this or :func:`id_path`: a folder or file inside the run that
    is a symlink to somewhere else would make the writer write (or delete) outside the run.

    Raises:
        RunError: the path leads outside ``root``, or is a symlink loop.
    """
    root = Path(root)
    p = root.joinpath(*parts)
    try:
        target = p.resolve()
        target.relative_to(root.resolve())
    except ValueError as exc:
        raise RunError(
            f"refusing to write {p}: it is a symlink that leads outside {root} (to {target}); remove "
            "the link, a run writes only inside its run directory"
        ) from exc
    except (RuntimeError, OSError) as exc:  # Python 3.11: RuntimeError("Symlink loop from ...")
        raise RunError(f"refusing to write {p}: it cannot be resolved ({' '.join(str(exc).split())})") from exc
    return p
