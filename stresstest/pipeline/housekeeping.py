"""Run-directory housekeeping: where a run may write, what a reused directory keeps, how long it took.

Rules:

* ``--out`` must be a directory or not exist yet; a file there is a user error
  (never "internal error").
* A reused run directory keeps only artefacts of the current grid: per-item
  files under ``transcripts/``, ``records/`` and ``scores/`` whose condition is
  no longer in the grid, or whose encounter is no longer in the corpus
  selection, are removed before the stages run (only ``*.json`` files in those
  three folders are touched; nothing else of the user's is deleted).
* Wall time accumulates across resumes: each invocation is recorded in the
  manifest's ``invocations`` list. When the previous invocation did not
  complete (killed, interrupted), its time is kept — estimated, for a kill, as
  the newest file time in the run directory minus its start — and the reported
  totals (``stage_seconds``) add up every invocation since the last completed
  one. An invocation after a completed run starts a new account.
* Partial failures within ``run.max_failures`` are announced on stderr: how
  many, which stages, how many encounters the pairing rule dropped, and where
  the list is (:func:`announce_failures`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from stresstest.errors import RunError

PER_ITEM_DIRS: tuple[str, ...] = ("transcripts", "records", "scores")


def check_out_dir(out: Path) -> None:
    """Create ``out`` (a directory), or raise a one-line :class:`RunError` when that cannot be."""
    if out.exists() and not out.is_dir():
        raise RunError(f"--out {out}: exists and is not a directory; give a run directory (new or earlier)")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise RunError(f"--out {out}: {parent} is a file, so the run directory cannot be created there")
            break
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # permission denied, read-only or special file system, full disk...
        raise RunError(f"--out {out}: cannot create the run directory ({exc.strerror or exc})") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise RunError(f"--out {out}: the run directory is not writable")


def prune_stale(out: Path, conditions: Iterable[str], encounter_ids: Iterable[str]) -> list[Path]:
    """Remove per-item files of conditions/encounters outside the current run; returns what was removed."""
    keep_conds, keep_ids = set(conditions), set(encounter_ids)
    removed: list[Path] = []
    for sub in PER_ITEM_DIRS:
        root = out / sub
        if not root.is_dir():
            continue
        for cdir in sorted(root.iterdir()):
            if not cdir.is_dir() or cdir.is_symlink():
                continue
            stale_cond = cdir.name not in keep_conds
            for f in sorted(cdir.glob("*.json")):
                if f.is_file() and (stale_cond or f.stem not in keep_ids):
                    f.unlink()
                    removed.append(f)
            try:
                if stale_cond:
                    cdir.rmdir()  # only when empty: a user's own file there stays, and so does the folder
            except OSError:
                pass
    return removed


def _newest_mtime(out: Path, skip: Path) -> float | None:
    newest: float | None = None
    for dirpath, _dirs, files in os.walk(out):
        for name in files:
            p = Path(dirpath) / name
            if p == skip:
                continue
            try:
                m = p.stat().st_mtime
            except OSError:
                continue
            newest = m if newest is None or m > newest else newest
    return newest


def carried_time(out: Path) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """(invocations, stage_seconds) carried over from an unfinished earlier invocation of ``out``.

    Empty when there is no manifest, or the last invocation completed.
    """
    man = out / "manifest.json"
    try:
        prev = json.loads(man.read_text("utf-8"))
    except (OSError, ValueError):
        return [], {}
    if not isinstance(prev, dict):
        return [], {}
    invs = [dict(i) for i in prev.get("invocations") or [] if isinstance(i, dict)]
    if not invs or invs[-1].get("completed"):
        return [], {}
    last = invs[-1]
    try:
        started = datetime.fromisoformat(str(last.get("started"))).timestamp()
    except ValueError:
        started = None
    newest = _newest_mtime(out, man)
    if started is not None and newest is not None:
        # Killed mid-stage: the newest file it wrote says how far it got.
        last["seconds"] = round(max(float(last.get("seconds") or 0.0), newest - started), 3)
    last["completed"] = False
    raw_stages = prev.get("stage_seconds")
    stages: dict[str, Any] = raw_stages if isinstance(raw_stages, dict) else {}
    carried = {str(k): float(v) for k, v in stages.items() if isinstance(v, (int, float)) and k != "total"}
    return invs, carried


class WallClock:
    """This invocation's start plus what earlier unfinished invocations carried over."""

    def __init__(self, out: Path) -> None:
        self.t0 = time.perf_counter()
        self.started = datetime.now().astimezone().isoformat(timespec="seconds")
        self.previous, self.carried_stages = carried_time(out)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def invocations(self, completed: bool) -> list[dict[str, Any]]:
        """Every invocation since the last completed run, this one last."""
        return [*self.previous, {"started": self.started, "seconds": round(self.elapsed(), 3),
                                 "completed": completed}]

    def total(self) -> float:
        """Wall seconds over every invocation since the last completed run."""
        return round(sum(float(i.get("seconds") or 0.0) for i in self.previous) + self.elapsed(), 3)


def announce_failures(
    failures: Sequence[Mapping[str, Any]], n_items: int, max_failures: float, manifest_path: Path,
    pairing_sentence: str | None,
) -> None:
    """One line on stderr when some items failed but the run stayed within ``run.max_failures``."""
    if not failures:
        return
    from stresstest.console import warn

    stages: dict[str, int] = {}
    for f in failures:
        stages[str(f.get("stage"))] = stages.get(str(f.get("stage")), 0) + 1
    by_stage = ", ".join(f"{k}: {v}" for k, v in stages.items())
    warn(
        f"{len(failures)} of {n_items} items failed (within run.max_failures={max_failures:g}; {by_stage}); "
        + (f"{pairing_sentence}; " if pairing_sentence else "")
        + f"the list with reasons is under \"failures\" in {manifest_path}"
    )
