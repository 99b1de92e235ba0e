"""Content hashing, atomic writes and the stage cache.

A stage output is stored under a key that hashes its inputs' keys, its own
config and the code version the stage declares, so a finished sweep recomputes
nothing and a crash loses at most the items in flight. Writes are atomic:
temp file in the same directory, then ``os.replace``.

Cache directory: ``$STRESSTEST_CACHE`` if set, else ``~/.cache/stresstest``
(the one documented place outside a run directory that the tool writes to).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np


def default_cache_dir() -> Path:
    """The documented cache directory (``$STRESSTEST_CACHE`` or ``~/.cache/stresstest``)."""
    env = os.environ.get("STRESSTEST_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "stresstest"


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces) used for hashing."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def hash_obj(*parts: Any) -> str:
    """sha256 hex of the canonical JSON of ``parts``."""
    return hashlib.sha256(canonical_json(list(parts)).encode()).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_array(x: np.ndarray) -> str:
    """Hash of an array's dtype, shape and bytes."""
    h = hashlib.sha256(f"{x.dtype.str}{x.shape}".encode())
    h.update(np.ascontiguousarray(x).tobytes())
    return h.hexdigest()


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str, ensure_ascii=False) + "\n")


class KeyValueCache:
    """A directory of JSON blobs addressed by hash key (``<root>/<ns>/<k[:2]>/<k>.json``)."""

    def __init__(self, root: str | Path, namespace: str) -> None:
        self.root = Path(root) / namespace

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        p = self.path(key)
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text("utf-8"))
        except (OSError, json.JSONDecodeError):
            return None  # a torn or foreign file is a miss, recomputed and overwritten

    def put(self, key: str, value: Any) -> None:
        atomic_write_json(self.path(key), value)


class JsonlWriter:
    """Append-only JSONL manifest that knows which ids it already holds.

    Each line is flushed and fsynced as it is written, so an interrupted run
    keeps every finished line; a torn last line is ignored on reload.
    """

    def __init__(self, path: str | Path, id_fields: Iterable[str]) -> None:
        self.path = Path(path)
        self.id_fields = tuple(id_fields)
        self.rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        if self.path.exists():
            for row in read_jsonl(self.path, tolerate_torn_tail=True):
                self.rows[self._id(row)] = row

    def _id(self, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row.get(f) for f in self.id_fields)

    def __contains__(self, ident: tuple[Any, ...]) -> bool:
        return ident in self.rows

    def write(self, row: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, sort_keys=True, default=str, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.rows[self._id(row)] = row


def read_jsonl(path: str | Path, tolerate_torn_tail: bool = False) -> Iterator[dict[str, Any]]:
    """Yield JSON objects from a JSONL file; a bad line is an error naming file and line.

    With ``tolerate_torn_tail`` a malformed *last* line (an interrupted write) is skipped.
    """
    lines = Path(path).read_text("utf-8").splitlines()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if tolerate_torn_tail and n == len(lines):
                return
            raise ValueError(f"{path}:{n}: not valid JSON ({exc.msg})") from exc
        if not isinstance(obj, dict):
            raise ValueError(f"{path}:{n}: expected a JSON object, got {type(obj).__name__}")
        yield obj
