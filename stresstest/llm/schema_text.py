"""A compact rendering of a JSON Schema for an instruction (the output schema S shown to the model).

Grammar-constrained decoding enforces S but never shows it: a model that has not seen S writes its own shape
and the grammar then bends it token by token into one it did not plan (without the grammar, a 1.5B model wrote
``"c1": {...}`` and ``"triage": ["routine"]``). :func:`render_schema` turns the very schema the engine enforces
into a TypeScript-like outline — property names in order, ``?`` on keys that may be left out, enums, unions,
and every bound (list lengths, string lengths) — a third of the size of the JSON, so it fits a small model's
context next to a transcript. Being generated, it cannot drift from what the engine enforces.

Supported: ``$ref`` into ``$defs``, ``anyOf``/``oneOf``, ``enum``, ``const``, objects, arrays, strings,
numbers, booleans, null, and ``description`` (as a ``//`` comment). Anything else is shown by its ``type``.
"""

from __future__ import annotations

import json
from typing import Any

_INDENT = "  "


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return node
    name = ref.rsplit("/", 1)[-1]
    if name not in defs:
        raise ValueError(f"render_schema: $ref {ref!r} names no entry of $defs (have {sorted(defs)})")
    return {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}


def _bounds(lo: int | None, hi: int | None, unit: str) -> str:
    if lo and hi is not None:
        return f" {lo}–{hi} {unit}"
    if hi is not None:
        return f" ≤{hi} {unit}"
    if lo:
        return f" ≥{lo} {unit}"
    return ""


def _inline(node: dict[str, Any], defs: dict[str, Any]) -> str | None:
    """One-line rendering of a scalar / enum / union of scalars; None when the node needs several lines."""
    node = _resolve(node, defs)
    if "enum" in node:
        return " | ".join(json.dumps(v) for v in node["enum"])
    if "const" in node:
        return json.dumps(node["const"])
    alts = node.get("anyOf") or node.get("oneOf")
    if alts:
        parts = [_inline(a, defs) for a in alts]
        return None if any(p is None for p in parts) else " | ".join(p for p in parts if p is not None)
    kind = node.get("type")
    if kind == "string":
        return "string" + _bounds(node.get("minLength"), node.get("maxLength"), "chars")
    if kind == "array":
        item = _inline(node.get("items", {}), defs)
        if item is None:
            return None
        return f"[{item}, ...]" + _bounds(node.get("minItems"), node.get("maxItems"), "items")
    if kind == "object":
        return None if node.get("properties") else "object"
    return str(kind) if kind else "any"


class _Renderer:
    """Multi-line rendering; a property's description is shown once (a union repeats its branches' fields)."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.shown: set[tuple[str, str]] = set()

    def comment(self, key: str, node: dict[str, Any]) -> str:
        doc = " ".join(str(node.get("description") or "").split())
        if not doc or (key, doc) in self.shown:
            return ""
        self.shown.add((key, doc))
        return f"  // {doc}"

    def value(self, node: dict[str, Any], depth: int) -> list[str]:
        one = _inline(node, self.defs)
        return [one] if one is not None else self.block(node, depth)

    def block(self, node: dict[str, Any], depth: int) -> list[str]:
        """Lines of an object, or an array / union of objects; the first line continues its key's line."""
        node = _resolve(node, self.defs)
        pad = _INDENT * depth
        alts = node.get("anyOf") or node.get("oneOf")
        if alts:
            lines = ["one of:"]
            for alt in alts:
                sub = self.value(alt, depth + 1)
                lines.append(f"{pad}{_INDENT}{sub[0]}{self.comment('', _resolve(alt, self.defs))}")
                lines.extend(sub[1:])
            return lines
        if node.get("type") == "array":
            sub = self.value(node.get("items", {}), depth)
            return [f"list of{_bounds(node.get('minItems'), node.get('maxItems'), 'items')}, each {sub[0]}", *sub[1:]]
        required = set(node.get("required", []))
        lines = ["{"]
        for name, prop in node.get("properties", {}).items():
            key = json.dumps(name) + ("" if name in required else "?")
            sub = self.value(prop, depth + 1)
            lines.append(f"{pad}{_INDENT}{key}: {sub[0]}{self.comment(name, prop) if len(sub) == 1 else ''}")
            lines.extend(sub[1:])
        lines.append(pad + "}")
        return lines


def render_schema(schema: dict[str, Any]) -> str:
    """The outline of ``schema`` (see module docstring); ``?`` marks a key that may be left out.

    Raises:
        ValueError: a ``$ref`` that names no ``$defs`` entry.
    """
    return "\n".join(_Renderer(schema.get("$defs", {})).value(schema, 0))
