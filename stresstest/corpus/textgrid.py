"""A small Praat TextGrid reader (long and short text formats).

Praat's two text formats carry the same values in the same order; the long one
adds ``key =`` labels and ``[n]`` indices around them. So both are read the same
way: the file is cut into a stream of values (quoted strings, numbers and the
``<exists>``/``<absent>`` flag), labels and indices are skipped, and the stream
is read in the order Praat writes it. Every value remembers its line, so a
malformed file gives an error naming file and line. The binary format is not
supported (a clear error says so).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

from stresstest.corpus._text import decode_text
from stresstest.errors import CorpusError

# One alternation, tried left to right at each position: a string (Praat escapes a
# quote by doubling it), a flag, an index in brackets (skipped), a number, a bare
# word such as a label (skipped). Anything else (=, :, whitespace) is skipped too.
_TOKEN = re.compile(
    r"""
      "(?P<str>(?:[^"]|"")*)"
    | <(?P<flag>exists|absent)>
    | (?P<index>\[\s*\d*\s*\])
    | (?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![\w.])
    | (?P<word>[A-Za-z_][\w?]*)
    | (?P<comment>![^\n]*)
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Interval:
    """One interval of an interval tier (times in seconds, text as written)."""

    start_s: float
    end_s: float
    text: str
    line: int


@dataclass(frozen=True)
class Tier:
    """A tier: its class (``IntervalTier`` or ``TextTier``), name and items.

    For a ``TextTier`` (points) each item is an :class:`Interval` whose start and
    end are the point's time.
    """

    tier_class: str
    name: str
    items: tuple[Interval, ...]


@dataclass(frozen=True)
class _Value:
    kind: str  # "str", "num" or "flag"
    value: str
    line: int


class _Stream:
    """Values of a TextGrid in file order, with typed reads that report file and line."""

    def __init__(self, text: str, path: Path) -> None:
        self.path = path
        line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
        self.values: list[_Value] = []
        for m in _TOKEN.finditer(text):
            kind = m.lastgroup
            if kind in ("str", "num", "flag"):
                line = bisect.bisect_right(line_starts, m.start())
                value = m.group(kind)
                if kind == "str":
                    value = value.replace('""', '"')
                self.values.append(_Value(kind, value, line))
        self.pos = 0
        self.last_line = max(1, len(line_starts))

    def _next(self, what: str) -> _Value:
        if self.pos >= len(self.values):
            raise CorpusError(f"{self.path}:{self.last_line}: expected {what}, got the end of the file")
        value = self.values[self.pos]
        self.pos += 1
        return value

    def string(self, what: str) -> tuple[str, int]:
        v = self._next(f"{what} (a quoted string)")
        if v.kind != "str":
            raise CorpusError(f"{self.path}:{v.line}: expected {what} (a quoted string), got {v.value!r}")
        return v.value, v.line

    def number(self, what: str) -> tuple[float, int]:
        v = self._next(f"{what} (a number)")
        if v.kind != "num":
            raise CorpusError(f"{self.path}:{v.line}: expected {what} (a number), got {v.value!r}")
        return float(v.value), v.line

    def count(self, what: str) -> tuple[int, int]:
        value, line = self.number(what)
        if value < 0 or value != int(value):
            raise CorpusError(f"{self.path}:{line}: expected {what} (a count >= 0), got {value:g}")
        return int(value), line

    def flag(self, what: str) -> tuple[bool, int]:
        v = self._next(f"{what} (<exists> or <absent>)")
        if v.kind != "flag":
            raise CorpusError(f"{self.path}:{v.line}: expected {what} (<exists> or <absent>), got {v.value!r}")
        return v.value == "exists", v.line


def read_textgrid(path: str | Path) -> list[Tier]:
    """Read a Praat TextGrid file (long or short text format, UTF-8 or UTF-16).

    Args:
        path: the ``.TextGrid`` file.

    Returns:
        Its tiers in file order.

    Raises:
        CorpusError: when the file is missing, binary, or malformed; the message
            names the file and the line and says what was expected.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{p}: cannot read TextGrid ({exc.strerror or exc})") from exc
    if data.startswith(b"ooBinaryFile"):
        raise CorpusError(f"{p}:1: expected a text TextGrid, got Praat's binary format (save it as text)")
    return parse_textgrid(decode_text(data, p), p)


def parse_textgrid(text: str, path: str | Path = "<textgrid>") -> list[Tier]:
    """Parse TextGrid text (see :func:`read_textgrid`); ``path`` is used in messages."""
    s = _Stream(text, Path(path))
    file_type, line = s.string("the header 'File type = \"ooTextFile\"'")
    if file_type != "ooTextFile":
        raise CorpusError(f'{s.path}:{line}: expected File type "ooTextFile", got {file_type!r}')
    object_class, line = s.string("the header 'Object class = \"TextGrid\"'")
    if object_class != "TextGrid":
        raise CorpusError(f'{s.path}:{line}: expected Object class "TextGrid", got {object_class!r}')
    s.number("the TextGrid xmin")
    s.number("the TextGrid xmax")
    has_tiers, _ = s.flag("the tiers flag")
    n_tiers = s.count("the number of tiers")[0] if has_tiers else 0
    tiers = [_read_tier(s, k + 1) for k in range(n_tiers)]
    if s.pos < len(s.values):
        extra = s.values[s.pos]
        raise CorpusError(
            f"{s.path}:{extra.line}: expected the end of the file after {n_tiers} tier(s), got {extra.value!r}"
        )
    return tiers


def _read_tier(s: _Stream, k: int) -> Tier:
    tier_class, line = s.string(f"the class of tier {k}")
    name, _ = s.string(f"the name of tier {k}")
    s.number(f"the xmin of tier {k}")
    s.number(f"the xmax of tier {k}")
    n, _ = s.count(f"the number of items in tier {k}")
    items: list[Interval] = []
    if tier_class == "IntervalTier":
        for i in range(1, n + 1):
            start, line = s.number(f"the xmin of interval {i} of tier {k}")
            end, _ = s.number(f"the xmax of interval {i} of tier {k}")
            label, _ = s.string(f"the text of interval {i} of tier {k}")
            if end < start:
                raise CorpusError(
                    f"{s.path}:{line}: expected interval {i} of tier {k} to end after it starts, "
                    f"got xmin={start:g} > xmax={end:g}"
                )
            items.append(Interval(start, end, label, line))
    elif tier_class == "TextTier":
        for i in range(1, n + 1):
            time, line = s.number(f"the time of point {i} of tier {k}")
            label, _ = s.string(f"the mark of point {i} of tier {k}")
            items.append(Interval(time, time, label, line))
    else:
        raise CorpusError(f"{s.path}:{line}: expected tier class IntervalTier or TextTier, got {tier_class!r}")
    return Tier(tier_class=tier_class, name=name, items=tuple(items))
