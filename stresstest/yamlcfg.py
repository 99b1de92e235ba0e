"""Strict YAML → pydantic loading with errors that name the key path and line.

``yaml.safe_load`` only. Validation errors are reported as
``FILE:LINE: key.path: what was expected (got VALUE)`` — one line per problem.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from stresstest.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML node at ``loc`` (deepest existing ancestor)."""
    line = None
    for key in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if k.value == str(key):
                    nxt = k if v is None else v
                    line = k.start_mark.line + 1
                    break
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line


def format_validation_error(exc: ValidationError, source: str, root: yaml.Node | None = None) -> str:
    """One line per error: ``source:line: a.b.c: message (got value)``."""
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        path = ".".join(str(p) for p in loc) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not part of the config schema; check the spelling)"
        got = err.get("input")
        got_s = "" if err["type"] in ("extra_forbidden", "missing") or isinstance(got, dict) else f" (got {got!r})"
        line = _line_of(root, loc) if root is not None else None
        where = f"{source}:{line}" if line else source
        lines.append(f"{where}: {path}: {msg}{got_s}")
    return "; ".join(lines)


def load_yaml_model(path: str | Path, model: type[M]) -> tuple[M, dict[str, Any]]:
    """Read ``path`` with ``yaml.safe_load`` and validate it strictly into ``model``.

    Returns:
        (validated model, raw mapping).

    Raises:
        ConfigError: file missing, not YAML, not a mapping, or invalid (key path + line).
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: config file not found")
    text = p.read_text("utf-8")
    try:
        raw = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}".replace("\n", " ")) from exc
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: expected a mapping of config keys at the top level, got {type(raw).__name__}")
    try:
        return model.model_validate(raw), raw
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, str(p), root)) from exc
