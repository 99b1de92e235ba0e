"""Content hashing, atomic writes and the stage cache.

A stage output is stored under a key that hashes its inputs' keys, its own
config and the code version the stage declares, so a finished sweep recomputes
nothing and a crash loses at most the items in flight. Writes are atomic:
temp file in the same directory, then ``os.replace``.

Cache directory: ``$STRESSTEST_CACHE`` if set, else ``~/.cache/stresstest``
(the one documented place outside a run directory that the tool writes to).

Reads are verified (:func:`write_verified_json` / :func:`read_verified_json`):
every entry is an envelope ``{"cache_format": 2, "key": K, "sha256": H, "value": V,
"files": {name: {"size", "sha256"}}}`` where ``K`` is the key the entry was written
for (its file name), ``H`` hashes the canonical JSON of ``V`` and ``files`` records
the size and content hash of each file the entry vouches for (a cached WAV). On read
the key, the hash, the shape (a validator given by the stage), the key's inputs the
value records (``expect``: a transcript's audio hash, model and decoding) and every
file are checked; any mismatch prints one warning naming the file, is counted
(:func:`rejected_entries`, recorded in the run's manifest) and the entry is treated
as missing, so the stage recomputes and overwrites it. Envelopes live in ``*.c2.json`` files (:data:`ENVELOPE_SUFFIX`),
next to, never over, the plain ``*.json`` entries versions before the envelope wrote, so an older checkout
sharing the cache keeps working. Those plain entries are never read: this version recomputes such an entry
and writes its envelope beside it.

File modes follow the umask (``0o666 & ~umask``), like any file ``open`` creates.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

CACHE_FORMAT = 2
#: File-name suffix of verified entries (plain ``.json`` entries, the pre-envelope format, are never read).
ENVELOPE_SUFFIX = ".c2.json"
_UMASK: int | None = None
_UMASK_LOCK = threading.Lock()
_ACTIVE_CACHE: Path | None = None
_ENV_LOCK = threading.Lock()


def _file_mode() -> int:
    """``0o666`` minus the process umask (read once: ``os.umask`` can only be read by setting it)."""
    global _UMASK
    with _UMASK_LOCK:
        if _UMASK is None:
            _UMASK = os.umask(0o022)
            os.umask(_UMASK)
    return 0o666 & ~_UMASK


def default_cache_dir() -> Path:
    """The documented cache directory (``$STRESSTEST_CACHE`` or ``~/.cache/stresstest``)."""
    env = os.environ.get("STRESSTEST_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "stresstest"


def confine_tool_dirs(cache_dir: str | Path | None = None) -> Path:
    """Point third-party libraries' own caches into ``<cache dir>/tools`` instead of ``$HOME``.

    matplotlib (font list, config: ``MPLCONFIGDIR``) and onnxruntime (a device id
    under ``$XDG_CACHE_HOME/Microsoft``) otherwise write into the home folder. The user's
    Hugging Face cache is kept (``HF_HOME`` pinned to where it was), since models are read from it. Set
    for this process and its children (the LLM server) before those libraries are
    imported; a value the user set explicitly is left alone. Returns the folder.
    """
    global _ACTIVE_CACHE
    _ACTIVE_CACHE = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    tools = _ACTIVE_CACHE / "tools"
    os.environ.setdefault("STRESSTEST_USER_XDG_CACHE_HOME", os.environ.get("XDG_CACHE_HOME", ""))
    # huggingface_hub derives its cache from $XDG_CACHE_HOME when $HF_HOME is unset: pin it to the user's own
    # Hugging Face home first, so the models the user downloaded (Whisper large-v3, the LLM) are found there —
    # by faster-whisper, transformers and the managed vLLM server, which inherits this environment.
    if not os.environ.get("HF_HOME"):
        os.environ["HF_HOME"] = str(user_cache_home() / "huggingface")
    for var, sub in (("MPLCONFIGDIR", "matplotlib"), ("XDG_CACHE_HOME", "xdg-cache")):
        if not os.environ.get(var):
            os.environ[var] = str(tools / sub)
    return tools


def active_cache_dir() -> Path:
    """The cache directory this process uses (the last one :func:`confine_tool_dirs` was given)."""
    return _ACTIVE_CACHE if _ACTIVE_CACHE is not None else default_cache_dir()


@contextlib.contextmanager
def tool_tmpdir() -> Iterator[Path]:
    """``$TMPDIR`` pointed at ``<cache dir>/tools/tmp`` while a third-party library runs.

    onnxruntime writes a session file ``$TMPDIR/.ses`` (``/tmp/.ses`` by default)
    when the piper voice is loaded; this keeps it inside the cache. Scoped, not
    process-wide, so our own temporary files keep their usual place.
    """
    tmp = active_cache_dir() / "tools" / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    with _ENV_LOCK:
        saved = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = str(tmp)
        try:
            yield tmp
        finally:
            if saved is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = saved


def user_cache_home() -> Path:
    """The user's own cache home (``$XDG_CACHE_HOME`` as it was before :func:`confine_tool_dirs`, or ``~/.cache``).

    Read-only use: where models the user downloaded earlier (``whisper``) are looked up.
    """
    env = os.environ.get("STRESSTEST_USER_XDG_CACHE_HOME", os.environ.get("XDG_CACHE_HOME", ""))
    return Path(env) if env else Path.home() / ".cache"


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
            os.fchmod(fh.fileno(), _file_mode())  # mkstemp makes 0600; the result should follow the umask
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_stream(path: str | Path, chunks: Iterable[bytes]) -> None:
    """Write the concatenated ``chunks`` to ``path`` atomically (temp file + rename), one chunk in memory at a time."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            os.fchmod(fh.fileno(), _file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str, ensure_ascii=False) + "\n")


def folder_files(folder: Path) -> dict[str, dict[str, Any]]:
    """Size and sha256 of every file in ``folder``: the ``files`` entry of a converted model's manifest."""
    return {
        p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)} for p in sorted(folder.iterdir()) if p.is_file()
    }


def folder_is_sound(target: Path, manifest_name: str, expect: Mapping[str, object], big_file: str) -> bool:
    """True when ``target`` holds a finished conversion: its manifest has every ``expect`` value and lists
    ``big_file``, and every listed file is there with its size (and, except ``big_file``, whose hash would cost
    seconds on every load, its sha256)."""
    try:
        manifest = json.loads((target / manifest_name).read_text())
    except (OSError, ValueError):
        return False
    if any(manifest.get(k) != v for k, v in expect.items()):
        return False
    files = manifest.get("files")
    if not isinstance(files, dict) or big_file not in files:
        return False
    for name, rec in files.items():
        path = target / name
        if not path.is_file() or path.stat().st_size != rec.get("size"):
            return False
        if name != big_file and sha256_file(path) != rec.get("sha256"):
            return False
    return True


def build_folder(
    target: Path, manifest_name: str, build: Callable[[Path], Mapping[str, Any]], is_sound: Callable[[Path], bool]
) -> None:
    """Make ``target`` (a converted model in the cache) so that it is there whole or not at all.

    ``build(tmp)`` writes the files into a temporary sibling of ``target`` and returns the manifest's fields;
    the manifest ``manifest_name`` is written with them and ``files`` (:func:`folder_files` of what ``build``
    wrote), and the folder is moved into place (:func:`publish_folder`). On any error or interruption the
    temporary folder is removed and the error raised.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        manifest = {**build(tmp), "files": folder_files(tmp)}
        (tmp / manifest_name).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        publish_folder(tmp, target, is_sound)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def publish_folder(tmp: Path, target: Path, is_sound: Callable[[Path], bool]) -> None:
    """Move a finished temporary folder into place as ``target`` (a converted model in the cache).

    ``tmp`` must be a sibling of ``target`` (same filesystem, so the move is one rename). Its folder and files
    get the umask's usual modes (``mkdtemp`` makes 0700, safetensors writes 0600). A ``target`` already there
    (stale or damaged: the caller returns a sound one before converting) is moved aside and removed first. When
    another process published ``target`` in between, theirs is kept if ``is_sound(target)``, and ``tmp`` is
    dropped.

    Raises:
        OSError: the rename failed and ``target`` is not a sound folder.
    """
    mask = os.umask(0o022)
    os.umask(mask)
    for p in tmp.iterdir():
        os.chmod(p, 0o666 & ~mask)
    os.chmod(tmp, 0o777 & ~mask)
    if target.exists():
        stale = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.replace(target, stale / "old")
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.replace(tmp, target)
    except OSError:
        if not is_sound(target):
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def file_digest(path: str | Path) -> dict[str, Any]:
    """``{"size": bytes, "sha256": hex}`` of a file, recorded when a cache entry vouches for it."""
    p = Path(path)
    return {"size": p.stat().st_size, "sha256": sha256_file(p)}


def file_problem(path: str | Path, digest: Mapping[str, Any]) -> str | None:
    """Why ``path`` does not match ``digest`` (missing, size, content), or ``None`` when it does."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError:
        return f"{p} is missing"
    if size != digest.get("size"):
        return f"{p} has {size} bytes, {digest.get('size')} were written"
    if sha256_file(p) != digest.get("sha256"):
        return f"{p} has a different content hash than was written"
    return None


def entry_key(path: str | Path) -> str:
    """The key an envelope file answers for: its name without :data:`ENVELOPE_SUFFIX` (``<key>.c2.json``)."""
    name = Path(path).name
    return name[: -len(ENVELOPE_SUFFIX)] if name.endswith(ENVELOPE_SUFFIX) else name


#: Entries read and refused in this process, by reason ("damaged", "answers another key", ...): the run's
#: manifest records them (``cache_rejected``), each was also warned about, naming the file.
REJECTED: dict[str, int] = {}
_REJECTED_LOCK = threading.Lock()


def _reject(reason: str, msg: str) -> None:
    from stresstest.console import warn

    with _REJECTED_LOCK:
        REJECTED[reason] = REJECTED.get(reason, 0) + 1
    warn(msg)


def rejected_entries() -> dict[str, int]:
    """A copy of :data:`REJECTED` (cache entries refused in this process, by reason)."""
    with _REJECTED_LOCK:
        return dict(sorted(REJECTED.items()))


def write_verified_json(path: str | Path, value: Any, files: Mapping[str, str | Path] | None = None) -> None:
    """Write a cache entry envelope for ``value`` and the files it vouches for (see module doc).

    The envelope records the key it answers for (its file name, :func:`entry_key`): a read compares it, so an
    entry moved or copied under another key (two transcripts swapped) is a miss, not someone else's answer.
    """
    env = {
        "cache_format": CACHE_FORMAT,
        "key": entry_key(path),
        "sha256": hash_obj(value),
        "value": value,
        "files": {name: file_digest(f) for name, f in (files or {}).items()},
    }
    atomic_write_json(path, env)


def short(value: Any, limit: int = 24) -> str:
    """A bounded repr for cache messages (hashes are cut, not printed whole)."""
    r = repr(value)
    return r if len(r) <= limit else r[: limit - 1] + "…"


def read_verified_json(
    path: str | Path,
    validate: Callable[[Any], Any] | None = None,
    files: Mapping[str, str | Path] | None = None,
    expect: Mapping[str, Any] | None = None,
) -> Any | None:
    """Read a cache entry envelope; ``None`` (with one warning naming the file) when it cannot be trusted.

    Args:
        path: the entry's envelope file (``*.c2.json``).
        validate: called with the value; raising any exception means "wrong shape".
            Its return value is returned (so it can build the model in one go).
        files: ``name -> path`` of the files this entry must vouch for, each checked
            against the size and sha256 recorded at write.
        expect: ``field -> value`` the entry's value must hold: the inputs its key was computed from that the
            value records (a transcript's audio hash, model and decoding), compared with those asked for. An
            envelope's recorded key is always compared with its file name (entries written before keys were
            recorded have only this check).

    Returns:
        The (validated) value, or ``None`` for a miss, a damaged entry, or a file mismatch.
    """
    from stresstest.console import one_line

    p = Path(path)
    if not p.is_file():
        return None  # a miss (a plain pre-envelope ``<key>.json`` beside it is never read: recomputed)
    try:
        data = json.loads(p.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        _reject("damaged", f"cache entry {p} is damaged ({type(exc).__name__}); recomputing it")
        return None
    if not (isinstance(data, dict) and data.get("cache_format") == CACHE_FORMAT and "value" in data):
        _reject("not an envelope", f"cache entry {p} is not a stresstest cache envelope; recomputing it")
        return None
    value = data["value"]
    if data.get("sha256") != hash_obj(value):
        _reject("content hash", f"cache entry {p} does not match its recorded content hash; recomputing it")
        return None
    if "key" in data and data["key"] != entry_key(p):
        _reject(
            "answers another key",
            f"cache entry {p} was written for key {str(data['key'])[:16]}…, not for its own; recomputing it",
        )
        return None
    recorded_raw = data.get("files")
    recorded: dict[str, Any] = recorded_raw if isinstance(recorded_raw, dict) else {}
    for name, f in (files or {}).items():
        digest = recorded.get(name)
        problem = "no digest recorded" if not isinstance(digest, dict) else file_problem(f, digest)
        if problem is not None:
            _reject("file mismatch", f"cache entry {p}: {problem}; recomputing it")
            return None
    raw = value
    if validate is not None:
        try:
            value = validate(value)
        except Exception as exc:
            _reject(
                "wrong shape",
                f"cache entry {p} has the wrong shape ({type(exc).__name__}: {one_line(exc)[:160]}); recomputing it",
            )
            return None
    for field, want in (expect or {}).items():  # after the shape: a wrong-shape entry is reported as such
        got = raw.get(field) if isinstance(raw, dict) else None
        if got != want:
            _reject(
                "answers another question",
                f"cache entry {p} records {field} {short(got)}, the question asked has {short(want)}; recomputing it",
            )
            return None
    return value


class KeyValueCache:
    """A directory of verified JSON entries addressed by hash key (``<root>/<ns>/<k[:2]>/<k>.c2.json``)."""

    def __init__(self, root: str | Path, namespace: str) -> None:
        self.root = Path(root) / namespace

    def path(self, key: str) -> Path:
        """The entry's envelope file."""
        return self.root / key[:2] / f"{key}{ENVELOPE_SUFFIX}"

    def file_path(self, key: str, suffix: str) -> Path:
        """Where a file that belongs to entry ``key`` lives (e.g. the mixture WAV)."""
        return self.root / key[:2] / f"{key}{suffix}"

    def get(
        self,
        key: str,
        validate: Callable[[Any], Any] | None = None,
        files: Mapping[str, str | Path] | None = None,
        expect: Mapping[str, Any] | None = None,
    ) -> Any | None:
        """The verified value for ``key`` or ``None`` (see :func:`read_verified_json`)."""
        return read_verified_json(self.path(key), validate, files, expect=expect)

    def put(self, key: str, value: Any, files: Mapping[str, str | Path] | None = None) -> None:
        write_verified_json(self.path(key), value, files)


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
