"""Run-directory housekeeping: where a run may write, what a reused directory keeps, how long it took.

Rules:

* ``--out`` must be a directory or not exist yet; a file there is a user error
  (never "internal error"). Who may write there (ownership, the lock) is
  :mod:`stresstest.pipeline.ownership`.
* A reused run directory keeps only artefacts of the current grid: the per-item
  files that the *previous run's marker lists* (``<dir>/<condition>/<id>.json``
  under ``transcripts/``, ``records/``, ``scores/``, ``quality/`` for the
  conditions and encounters it ran) and that the current run no longer has are
  removed, after the new config and corpus validated. A file the marker does
  not list, or one reached through a symlink out of the run directory, is never
  touched.
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

import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

from stresstest.errors import RunError
from stresstest.records import revise
from stresstest.results import FailureRecord, Invocation, read_manifest

PER_ITEM_DIRS: tuple[str, ...] = ("transcripts", "records", "scores", "quality")


def check_out_dir(out: Path) -> None:
    """Raise a one-line :class:`RunError` when ``out`` cannot be a run directory (a file is in the way).

    Creating it is :func:`stresstest.pipeline.ownership.claim_run_dir`'s job (after the ownership checks).
    """
    if out.exists() and not out.is_dir():
        raise RunError(f"--out {out}: exists and is not a directory; give a run directory (new or earlier)")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise RunError(f"--out {out}: {parent} is a file, so the run directory cannot be created there")
            break


def prune_stale(
    out: Path,
    listed_conditions: Iterable[str],
    listed_ids: Iterable[str],
    conditions: Iterable[str],
    encounter_ids: Iterable[str],
) -> list[Path]:
    """Remove the per-item files an earlier run listed that the current run no longer has.

    Args:
        out: The run directory.
        listed_conditions: Conditions the earlier run's marker lists (only their files are candidates).
        listed_ids: Encounter ids the earlier run's marker lists.
        conditions: The current grid's condition ids.
        encounter_ids: The current corpus selection.

    Returns:
        The files removed.
    """
    from stresstest.ids import IdError, id_path

    keep_conds, keep_ids = set(conditions), set(encounter_ids)
    removed: list[Path] = []
    for sub in PER_ITEM_DIRS:
        if (out / sub).is_symlink() or not (out / sub).is_dir():
            continue  # a symlinked per-item folder points outside the run: never followed
        for cond in sorted(set(listed_conditions)):
            stale_cond = cond not in keep_conds
            for eid in sorted(set(listed_ids)):
                if not stale_cond and eid in keep_ids:
                    continue
                try:
                    f = id_path(out, sub, cond, eid, suffix=".json")  # refuses a path resolving outside ``out``
                except IdError:
                    continue
                if f.is_file() and not f.is_symlink():
                    f.unlink()
                    removed.append(f)
            cdir = out / sub / cond
            if stale_cond and cdir.is_dir() and not cdir.is_symlink():
                try:
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


def carried_time(out: Path) -> tuple[list[Invocation], dict[str, float]]:
    """(invocations, stage_seconds) carried over from an unfinished earlier invocation of ``out``.

    Empty when there is no (readable) manifest, or the last invocation completed.
    """
    man = out / "manifest.json"
    prev = read_manifest(man)
    if prev is None or not prev.invocations or prev.invocations[-1].completed:
        return [], {}
    last = prev.invocations[-1]
    seconds = last.seconds
    try:
        started = datetime.fromisoformat(str(last.started)).timestamp()
    except ValueError:
        started = None
    newest = _newest_mtime(out, man)
    if started is not None and newest is not None:
        # Killed mid-stage: the newest file it wrote says how far it got.
        seconds = round(max(float(last.seconds or 0.0), newest - started), 3)
    invs = [*prev.invocations[:-1], revise(last, seconds=seconds, completed=False)]
    carried = {k: v for k, v in prev.stage_seconds.items() if k != "total"}
    return invs, carried


class WallClock:
    """This invocation's start plus what earlier unfinished invocations carried over."""

    def __init__(self, out: Path) -> None:
        self.t0 = time.perf_counter()
        self.started = datetime.now().astimezone().isoformat(timespec="seconds")
        self.previous, self.carried_stages = carried_time(out)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def invocations(self, completed: bool) -> list[Invocation]:
        """Every invocation since the last completed run, this one last."""
        return [*self.previous, Invocation(started=self.started, seconds=round(self.elapsed(), 3), completed=completed)]

    def total(self) -> float:
        """Wall seconds over every invocation since the last completed run."""
        return round(sum(float(i.seconds or 0.0) for i in self.previous) + self.elapsed(), 3)


def announce_failures(
    failures: Sequence[FailureRecord],
    n_items: int,
    max_failures: float,
    manifest_path: Path,
    pairing_sentence: str | None,
) -> None:
    """One line on stderr when some items failed but the run stayed within ``run.max_failures``."""
    if not failures:
        return
    from stresstest.console import warn

    stages = Counter(f.stage for f in failures)
    by_stage = ", ".join(f"{k}: {v}" for k, v in stages.items())
    warn(
        f"{len(failures)} of {n_items} items failed (within run.max_failures={max_failures:g}; {by_stage}); "
        + (f"{pairing_sentence}; " if pairing_sentence else "")
        + f'the list with reasons is under "failures" in {manifest_path}'
    )
