"""The report's one table layout in Markdown and HTML (the plain-text one is :func:`stresstest.console.text_table`).

Markdown cells are written as given (escape them with :func:`md_cell`); HTML cells are escaped here.
"""

from __future__ import annotations

import html
from collections.abc import Sequence


def md_cell(x: object) -> str:
    """A value as one Markdown table cell: ``|`` escaped, line breaks flattened."""
    return str(x).replace("|", "\\|").replace("\n", " ")


def md_table(head: Sequence[str], rows: Sequence[Sequence[str]], text: bool = False) -> list[str]:
    """A Markdown table as lines: first column left, the others right; ``text`` aligns every column left."""
    sep = [":--" if (i == 0 or text) else "--:" for i in range(len(head))]
    return ["| " + " | ".join(head) + " |", "| " + " | ".join(sep) + " |", *("| " + " | ".join(r) + " |" for r in rows)]


class Markup(str):
    """HTML built (and escaped) by the caller: :func:`esc` passes it through as it is."""


def esc(x: object) -> str:
    """A value as HTML text (quotes escaped too); a :class:`Markup` value is already HTML."""
    return x if isinstance(x, Markup) else html.escape(str(x), quote=True)


def html_table(head: Sequence[str], rows: Sequence[Sequence[object]], cls: str = "main") -> str:
    """An HTML table of escaped cells with a header row, in the stylesheet's class ``cls``."""
    h = "".join(f"<th>{esc(x)}</th>" for x in head)
    b = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='{cls}'><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>"
