"""Run-directory ownership: a run writes only where it may, and one writer at a time.

Rules (``docs/reliability.md``, promise 17):

* ``--out`` must be a new or empty directory, or one whose marker
  (:data:`MARKER`, written by the run) says it is a stresstest run directory.
  Any other non-empty folder — a project folder, the working directory, a run
  directory of a version before markers — is refused, and nothing in it is touched.
* A *finished* run directory made from a different config is refused unless
  the caller passes ``replace=True`` (``stresstest run --replace-run``); the
  message names the config sections that differ. An unfinished run may be
  resumed with a corrected config (that is how a failed run is repaired).
* ``--out`` may not be an input (corpus, gold, noise folders, the config file),
  lie inside one, be the cache directory or lie inside it, or contain the cache.
* One writer per run directory: an exclusive ``flock`` on :data:`LOCK_NAME`,
  held for the whole run; a second writer gets a one-line error naming the
  holder's pid. The kernel releases the lock when the holder dies (SIGKILL too),
  so a stale lock file never blocks a resume.
* Nothing of an existing run is replaced before the new config and corpus have
  validated: the runner calls :meth:`RunDirClaim.commit` (marker) only after the
  corpus stage, and writes ``config.resolved.yaml`` and ``manifest.json`` after it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from stresstest.cache import atomic_write_json, hash_obj
from stresstest.errors import RunError
from stresstest.ids import confined_path
from stresstest.results import read_manifest

#: Marker file a run writes into its directory; its presence makes the directory a stresstest run.
MARKER = ".stresstest-run.json"
#: Lock file (held with ``flock`` while a process writes the run directory).
LOCK_NAME = ".stresstest.lock"
MARKER_SCHEMA_VERSION = 1
#: Config keys that do not change a run's results (where it runs, how it shows progress, the report's settings).
_NOT_RESULTS: Mapping[str, tuple[str, ...]] = {"run": ("progress", "cache_dir", "executor", "max_failures")}
_IGNORED_SECTIONS = ("report",)


def config_sections(resolved: Mapping[str, Any]) -> dict[str, str]:
    """Hash of each top-level config section that decides a run's results (the resolved config's JSON form)."""
    out: dict[str, str] = {}
    for key, value in sorted(resolved.items()):
        if key in _IGNORED_SECTIONS:
            continue
        if isinstance(value, Mapping) and key in _NOT_RESULTS:
            value = {k: v for k, v in value.items() if k not in _NOT_RESULTS[key]}
        out[key] = hash_obj(value)
    return out


class RunMarker(BaseModel):
    """:data:`MARKER`: the config sections, conditions and encounters of the run that claimed the directory."""

    model_config = ConfigDict(extra="ignore")

    tool: Literal["stresstest"]
    schema_version: int = MARKER_SCHEMA_VERSION
    config_sections: dict[str, str] | None = None  # None: unknown
    conditions: list[str] = Field(default_factory=list)
    encounter_ids: list[str] = Field(default_factory=list)
    claimed: str | None = None


class LockInfo(BaseModel):
    """What the lock holder wrote into :data:`LOCK_NAME`."""

    model_config = ConfigDict(extra="ignore")

    pid: int
    started: str = "?"


_M = TypeVar("_M", bound=BaseModel)


def _read_model(path: Path, model: type[_M]) -> _M | None:
    """``path`` as ``model``; None when it is missing, not JSON or not that model."""
    try:
        return model.model_validate_json(path.read_bytes())
    except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
        return None


@dataclass
class PreviousRun:
    """What an earlier run left in the directory (from its marker)."""

    sections: dict[str, str] | None  # None: unknown (a marker written before the run's config was known)
    completed: bool
    conditions: list[str] = field(default_factory=list)
    encounter_ids: list[str] = field(default_factory=list)


def _previous_run(out: Path) -> PreviousRun | None:
    """The stresstest run in ``out``, or ``None`` when ``out`` holds no run (empty or someone else's)."""
    marker = _read_model(out / MARKER, RunMarker)
    manifest = read_manifest(out / "manifest.json")
    completed = bool(manifest is not None and manifest.invocations and manifest.invocations[-1].completed)
    if marker is None:
        return None
    return PreviousRun(
        sections=marker.config_sections,
        completed=completed,
        conditions=list(marker.conditions),
        encounter_ids=list(marker.encounter_ids),
    )


def _stresstest_manifest(out: Path) -> bool:
    """Does ``out`` hold a ``manifest.json`` that stresstest wrote (a run directory, marker or not)?"""
    manifest = read_manifest(out / "manifest.json")
    return manifest is not None and manifest.stresstest_version is not None and manifest.run_id is not None


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
    except ValueError:
        return False
    return True


def _resolved(path: Path, what: str) -> Path:
    """``path.resolve()``, with a symlink loop (or an unreadable link) as a one-line user error."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:  # Python 3.11 raises RuntimeError("Symlink loop from ...")
        raise RunError(
            f"{what} {path}: cannot be resolved ({' '.join(str(exc).split())}); a symlink loop? give a real folder"
        ) from exc


def config_inputs(cfg: Any, config_path: str | Path) -> dict[str, str | None]:
    """Config key → input path of a :class:`~stresstest.config.RunConfig`, for the ``--out`` overlap check."""
    inputs: dict[str, str | None] = {
        "the config file": str(config_path),
        "corpus.path": cfg.corpus.path,
        "gold.path": cfg.gold.path,
    }
    inputs.update({f"noise.{fam}.root": spec.root for fam, spec in cfg.noise.items()})
    for name, steps, _ in cfg.chains.expand():
        for s in steps:
            if s.room is not None and s.room.ir is not None:
                inputs[f"chains: {name}: room.ir"] = s.room.ir
    return inputs


def out_problem(
    out: Path, cache: Path, inputs: Mapping[str, str | None], sections: Mapping[str, str], *, replace: bool = False
) -> str | None:
    """Why ``run --out OUT`` would be refused, or ``None``: the one test ``run`` and ``check`` both apply.

    A file in the way, an ``--out`` that is or holds the cache or an input, a folder the run writes (``report/``,
    ``records/``, ``logs/``...) that is a symlink leading out of ``out``, a foreign non-empty folder, a finished
    run of another config (without ``replace``); a symlink loop is named as such.
    """
    from stresstest.pipeline.housekeeping import PER_ITEM_DIRS, check_out_dir
    from stresstest.results import REPORT_DIRS

    try:
        check_out_dir(out)
        check_no_overlap(out, cache, inputs)
        for sub in (*((d,) for d in PER_ITEM_DIRS), ("logs",), *REPORT_DIRS):  # folders a run writes
            confined_path(out, *sub)
    except RunError as exc:
        return str(exc)
    return _ownership_problem(out, sections, replace)


def check_no_overlap(out: Path, cache: Path, inputs: Mapping[str, str | None]) -> None:
    """Refuse an ``--out`` that is (or lies inside) an input or the cache, or that contains the cache.

    Args:
        out: The run directory.
        cache: The stage cache directory.
        inputs: Config key (``corpus.path``...) → input path (file or folder); ``None`` values are skipped.

    Raises:
        RunError: naming the key whose path ``--out`` collides with.
    """
    o = _resolved(out, "--out")
    c = _resolved(cache, "the cache directory")
    if o == c or _inside(o, c):
        raise RunError(
            f"--out {out}: is {'the' if o == c else 'inside the'} cache directory {cache}; a run "
            "directory must lie outside it (the cache holds entries of every config)"
        )
    if _inside(c, o):
        raise RunError(f"--out {out}: contains the cache directory {cache}; choose a run directory elsewhere")
    for key, value in inputs.items():
        if not value:
            continue
        i = _resolved(Path(value), key)
        if o == i or _inside(o, i):
            raise RunError(
                f"--out {out}: is {'the input' if o == i else 'inside the input'} {key} ({value}); "
                "choose a run directory outside the inputs"
            )


def _entries(out: Path) -> list[str]:
    try:
        return sorted(p.name for p in out.iterdir() if p.name != LOCK_NAME)
    except FileNotFoundError:
        return []


def _ownership_problem(out: Path, sections: Mapping[str, str], replace: bool) -> str | None:
    """Why this run may not write into ``out`` (``None`` when it may)."""
    if not out.exists():
        return None
    names = _entries(out)
    if not names:
        return None
    prev = _previous_run(out)
    if prev is None and not (out / MARKER).exists() and _stresstest_manifest(out):
        return (
            f"--out {out}: holds a run written by a stresstest version before run-directory markers (no "
            f"{MARKER}); it is neither resumed nor replaced and nothing was written there. Give a new or empty "
            "directory"
        )
    if prev is None:
        shown = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return (
            f"--out {out}: is not empty ({shown}) and is not a stresstest run directory; nothing was written "
            "there. Give a new or empty directory (or an earlier run directory of this config)"
        )
    if prev.completed and not replace and prev.sections != dict(sections):
        if prev.sections is None:
            differ = "its resolved config cannot be read"
        else:
            keys = sorted({k for k, _ in set(prev.sections.items()) ^ set(sections.items())})
            differ = "the config differs in " + ", ".join(keys)
        return (
            f"--out {out}: holds a finished run of another config ({differ}); nothing was changed. Choose "
            "another --out, or pass --replace-run to replace that run's results with this config's"
        )
    return None


def _lock_holder(path: Path) -> str:
    info = _read_model(path, LockInfo)
    if info is not None and info.pid:
        return f"pid {info.pid}, since {info.started}"
    return "another process"


@dataclass
class RunDirClaim:
    """An owned, locked run directory (see the module doc). Release with :meth:`release`."""

    out: Path
    sections: dict[str, str]
    previous: PreviousRun | None
    created: bool
    _fd: int | None = None

    def commit(self, conditions: Iterable[str], encounter_ids: Iterable[str]) -> None:
        """Mark ``out`` as this config's run (after the config and corpus validated, before anything else)."""
        atomic_write_json(
            self.out / MARKER,
            {
                "tool": "stresstest",
                "schema_version": MARKER_SCHEMA_VERSION,
                "config_sections": self.sections,
                "conditions": sorted(conditions),
                "encounter_ids": sorted(encounter_ids),
                "claimed": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            },
        )

    def release(self, *, failed_before_commit: bool = False) -> None:
        """Drop the lock; a directory this run created and left empty is removed again."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
        if failed_before_commit and self.created:
            with contextlib.suppress(OSError):
                (self.out / LOCK_NAME).unlink()
                self.out.rmdir()  # only if empty


def claim_run_dir(out: Path, sections: Mapping[str, str], *, replace: bool = False) -> RunDirClaim:
    """Check ownership, create ``out`` if needed and take its exclusive lock.

    Read-only checks run first, so a refused folder never gets a lock file; they
    run again under the lock, since another process may have claimed ``out`` in between.

    Raises:
        RunError: a foreign non-empty folder, a finished run of another config
            (without ``replace``), a second writer, or an unusable path.
    """
    problem = _ownership_problem(out, sections, replace)
    if problem:
        raise RunError(problem)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # permission denied, read-only or special file system, full disk...
        raise RunError(f"--out {out}: cannot create the run directory ({exc.strerror or exc})") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise RunError(f"--out {out}: the run directory is not writable")
    lock_path = out / LOCK_NAME
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as exc:
        raise RunError(f"--out {out}: cannot create the lock file {LOCK_NAME} ({exc.strerror or exc})") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise RunError(
                f"--out {out}: another stresstest process ({_lock_holder(lock_path)}) is writing this "
                "run directory; wait for it to finish or choose another --out"
            ) from exc
        raise RunError(f"--out {out}: cannot lock the run directory ({exc.strerror or exc})") from exc
    claim = RunDirClaim(out=out, sections=dict(sections), previous=None, created=created, _fd=fd)
    try:
        problem = _ownership_problem(out, sections, replace)
        if problem:
            raise RunError(problem)
        claim.previous = _previous_run(out)
        os.ftruncate(fd, 0)
        os.write(
            fd,
            json.dumps(
                {"pid": os.getpid(), "started": datetime.now().astimezone().isoformat(timespec="seconds")}
            ).encode(),
        )
    except BaseException:
        claim.release(failed_before_commit=True)
        raise
    return claim


@contextlib.contextmanager
def locked_run_dir(out: Path) -> Iterator[None]:
    """Hold a run directory's lock for a writer that is not a run (``stresstest report``).

    Only a directory that holds a run (marker or manifest) gets a lock file; any
    other path is left alone and reported by the caller's own checks.

    Raises:
        RunError: when a run is writing ``out`` right now.
    """
    fd: int | None = None
    if out.is_dir() and ((out / MARKER).is_file() or (out / "manifest.json").is_file()):
        lock_path = out / LOCK_NAME
        with contextlib.suppress(OSError):  # a read-only run directory: nobody can be writing it
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                raise RunError(
                    f"{out}: a stresstest process ({_lock_holder(lock_path)}) is writing this run "
                    "directory; wait for it to finish"
                ) from exc
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)
