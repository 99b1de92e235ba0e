"""Strict, bounded YAML → pydantic loading with errors that name the key path and line.

``yaml.safe_load`` semantics only, with three extra rules enforced before any
Python object is built (:func:`load_yaml_bounded`):

* the document may not expand to more than :data:`MAX_NODES` nodes once aliases
  are followed (a "billion laughs" alias bomb is a quick one-line error, not a
  memory blow-up), nor nest deeper than :data:`MAX_DEPTH`; a file larger than
  :data:`MAX_BYTES` is refused;
* a key repeated in one mapping is an error (YAML would silently keep the last);
* the file must be UTF-8 text.

Config files (:func:`read_yaml_mapping`) also read numbers the YAML 1.2 way: ``1e7``, ``1.0e7`` and ``1E-3`` are
numbers (YAML 1.1, PyYAML's default, reads them as strings, which a number field would refuse with a misleading
"expected a number"), and a NaN or infinite value (``.nan``, ``.inf``, ``1e999``) is refused with its key and line:
no config value means anything when it is not finite.

Validation is strict (:func:`load_yaml_model`): values are checked the way a
JSON document would be in pydantic's strict mode, so ``seed: true`` or
``n_resamples: "100"`` are errors instead of being coerced to ``1`` / ``100``.
Errors are reported as ``FILE:LINE: key.path: what was expected (got VALUE)``.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from stresstest.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

#: Largest YAML file read (bytes).
MAX_BYTES = 2_000_000
#: Most nodes a document may expand to once aliases are followed.
MAX_NODES = 200_000
#: Deepest nesting accepted.
MAX_DEPTH = 64

_MERGE_TAG = "tag:yaml.org,2002:merge"
_short_repr = reprlib.Repr()
_short_repr.maxstring = 60
_short_repr.maxother = 60
_short_repr.maxlist = _short_repr.maxtuple = _short_repr.maxdict = 6
_short_repr.maxlevel = 2


def short_repr(value: Any) -> str:
    """A bounded ``repr`` (≤ ~80 characters) for error messages."""
    return _short_repr.repr(value)


def _check_nodes(root: yaml.Node, source: str) -> None:
    """Bound the alias-expanded size and depth; reject duplicate keys and recursive aliases."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        nid = id(node)
        if nid in sizes:
            return sizes[nid]
        line = node.start_mark.line + 1
        if nid in active:
            raise ConfigError(f"{source}:{line}: a YAML alias refers to itself (recursive anchor)")
        if depth > MAX_DEPTH:
            raise ConfigError(f"{source}:{line}: YAML nested deeper than {MAX_DEPTH} levels")
        active.add(nid)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            for child in node.value:
                total += size(child, depth + 1)
                if total > MAX_NODES:
                    break
        elif isinstance(node, yaml.MappingNode):
            seen: dict[tuple[str, str], int] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE_TAG:
                    ident = (k.tag, k.value)
                    if ident in seen:
                        raise ConfigError(
                            f"{source}:{k.start_mark.line + 1}: duplicate key {short_repr(k.value)} "
                            f"(first on line {seen[ident]}); YAML would silently keep only the last one"
                        )
                    seen[ident] = k.start_mark.line + 1
                total += size(k, depth + 1) + size(v, depth + 1)
                if total > MAX_NODES:
                    break
        active.discard(nid)
        if total > MAX_NODES:
            raise ConfigError(
                f"{source}:{line}: YAML expands to more than {MAX_NODES} values once aliases are followed "
                "(an alias bomb?); write the values out or use fewer nested aliases"
            )
        sizes[nid] = total
        return total

    size(root, 0)


def read_text_file(path: str | Path, what: str = "config file") -> str:
    """Read a UTF-8 text file with one-line errors (missing, a folder, too large, binary)."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{p}: is a directory; expected a YAML {what}")
    if not p.exists():
        raise ConfigError(f"{p}: {what} not found")
    if not p.is_file():
        raise ConfigError(f"{p}: not a regular file; expected a YAML {what}")
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise ConfigError(f"{p}: {what} is {size} bytes; expected YAML text under {MAX_BYTES} bytes")
        data = p.read_bytes()
    except PermissionError as exc:
        raise ConfigError(f"{p}: cannot read the {what} (permission denied)") from exc
    if b"\x00" in data:
        raise ConfigError(f"{p}: expected a YAML text {what}, got binary data (NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: expected a UTF-8 YAML {what}, got undecodable bytes at offset {exc.start}") from exc


class _Yaml12NumbersLoader(yaml.SafeLoader):
    """``SafeLoader`` that also resolves YAML 1.2 floats without a dot or an exponent sign (``1e7``, ``1.0e7``)."""


_Yaml12NumbersLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def load_yaml_bounded(text: str, source: str, *, yaml12_numbers: bool = False) -> tuple[Any, yaml.Node | None]:
    """Parse one YAML document with ``SafeLoader`` under the rules of the module doc.

    Returns:
        (Python value, composed root node or ``None`` for an empty document).

    Raises:
        ConfigError: ``source:LINE: ...`` for invalid YAML, duplicates, alias bombs.
    """
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{source}: YAML text is larger than {MAX_BYTES} bytes")
    loader = (_Yaml12NumbersLoader if yaml12_numbers else yaml.SafeLoader)(text)
    try:
        try:
            root = loader.get_single_node()
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f":{mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ConfigError(f"{source}{at}: not valid YAML: {problem}".replace("\n", " ")) from exc
        if root is None:
            return None, None
        _check_nodes(root, source)
        try:
            return loader.construct_document(root), root
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f":{mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ConfigError(f"{source}{at}: not valid YAML: {problem}".replace("\n", " ")) from exc
    finally:
        loader.dispose()


def _has_top_key(root: yaml.Node | None, key: str) -> bool:
    """True when the YAML document ``root`` is a mapping with the key ``key``."""
    return isinstance(root, yaml.MappingNode) and any(k.value == key for k, _ in root.value)


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


#: Where a key path was written: (file name, its composed YAML root) — several files with ``extends:``.
Locate = Callable[[tuple[Any, ...]], tuple[str, "yaml.Node | None"]]


def format_validation_error(
    exc: ValidationError, source: str, root: yaml.Node | None = None, locate: Locate | None = None
) -> str:
    """One line per error: ``source:line: a.b.c: message (got value)``.

    ``locate`` (optional) picks, per key path, the file that set the key and its YAML root.
    """
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        key, sep, rest = msg.partition(": ")
        if not loc and sep:  # a whole-config check whose message starts with the top-level key it is about
            if _has_top_key(locate((key,))[1] if locate is not None else root, key):
                loc, msg = (key,), rest
        if locate is not None:
            source, root = locate(loc)
        path = ".".join(str(p) for p in loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not part of the config schema; check the spelling)"
        got = err.get("input")
        got_s = (
            ""
            if err["type"] in ("extra_forbidden", "missing") or isinstance(got, dict)
            else f" (got {short_repr(got)})"
        )
        line = _line_of(root, loc) if root is not None else None
        where = f"{source}:{line}" if line else source
        lines.append(f"{where}: {path}: {msg}{got_s}")
    return "; ".join(lines)


def _nul_problem(value: Any, loc: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """Key path of the first string (key or value) holding a NUL character, or ``None``."""
    if isinstance(value, str):
        return loc if "\x00" in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and "\x00" in k:
                return (*loc, k)
            found = _nul_problem(v, (*loc, k))
            if found is not None:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _nul_problem(v, (*loc, i))
            if found is not None:
                return found
    return None


def _non_finite(value: Any, loc: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], float] | None:
    """(key path, value) of the first NaN or infinite number in ``value``, or ``None``."""
    if isinstance(value, float) and not math.isfinite(value):
        return loc, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        found = _non_finite(v, (*loc, k))
        if found is not None:
            return found
    return None


def read_yaml_mapping(path: str | Path) -> tuple[dict[str, Any], yaml.Node | None]:
    """Read ``path`` with the bounded safe loader; the top level must be a mapping.

    Returns:
        (raw mapping, composed root node).

    Raises:
        ConfigError: file missing, not a file, binary, not YAML, not a mapping, or a NUL character in a value.
    """
    p = Path(path)
    text = read_text_file(p)
    raw, root = load_yaml_bounded(text, str(p), yaml12_numbers=True)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: expected a mapping of config keys at the top level, got {type(raw).__name__}")
    nul = _nul_problem(raw)
    if nul is not None:  # a path with NUL would fail deep inside the OS layer as an "internal error"
        line = _line_of(root, nul)
        key = ".".join(str(k) for k in nul) or "(top level)"
        raise ConfigError(
            f"{p}{f':{line}' if line else ''}: {key}: contains a NUL character (\\0), which no path or name may hold"
        )
    bad = _non_finite(raw)
    if bad is not None:  # NaN passes every range check (all comparisons are false); inf overflows the engines
        line = _line_of(root, bad[0])
        key = ".".join(str(k) for k in bad[0]) or "(top level)"
        raise ConfigError(
            f"{p}{f':{line}' if line else ''}: {key}: expected a finite number, got {bad[1]!r} "
            "(.nan and .inf are not values any setting can take)"
        )
    return raw, root


def validate_strict(
    model: type[M], raw: dict[str, Any], source: str, root: yaml.Node | None = None, locate: Locate | None = None
) -> M:
    """Validate ``raw`` into ``model`` JSON-strictly (see :func:`load_yaml_model`).

    Raises:
        ConfigError: naming ``FILE:LINE: key.path`` of every problem (``locate`` picks the file per key).
    """
    try:
        as_json = json.dumps(raw, default=str, allow_nan=True)
    except (TypeError, ValueError) as exc:  # e.g. a mapping used as a key
        raise ConfigError(f"{source}: expected plain YAML values (mappings, lists, strings, numbers): {exc}") from exc
    try:
        return model.model_validate_json(as_json, strict=True)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source, root, locate)) from exc


def load_yaml_model(path: str | Path, model: type[M]) -> tuple[M, dict[str, Any]]:
    """Read ``path`` with the bounded safe loader and validate it strictly into ``model``.

    Strict means JSON-strict (pydantic ``strict=True`` on the JSON form of the
    document): no bool → int, no str → number coercion; lists still fill tuples.

    Returns:
        (validated model, raw mapping).

    Raises:
        ConfigError: file missing, not a file, binary, not YAML, not a mapping, or invalid (key path + line).
    """
    raw, root = read_yaml_mapping(path)
    return validate_strict(model, raw, str(path), root), raw
