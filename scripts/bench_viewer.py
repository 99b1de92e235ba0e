"""Item viewer: build time, page weight, and how fast its index opens in headless Chromium.

Usage: python scripts/bench_viewer.py [RUN_DIR] [--encounters 272] [--repeats 3]

Without RUN_DIR a synthetic run of ``--encounters`` × 9 conditions is written first (tests/report/synthetic_run.py:
records, items and summary built through the project's models), the paper grid's size at 272. The viewer is
then written (``report/items/``) and timed, its page weights printed, and the index opened ``--repeats`` times
in headless Chromium (/usr/bin/chromium): ``ready`` is the page's own ``performance.now()`` when its script has
set up sorting and filtering over every row (the page is usable), ``wall`` the whole ``chromium --dump-dom`` call
(browser start included), beside the same call on an empty page.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _open(page: Path, profile: Path) -> tuple[float, float | None]:
    t0 = time.perf_counter()
    res = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],  # noqa: S603
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    wall = time.perf_counter() - t0
    m = re.search(r'data-ready-ms="(\d+)"', res.stdout)
    return wall, float(m.group(1)) / 1000 if m else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="?")
    ap.add_argument("--encounters", type=int, default=272)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    from stresstest.report.rundir import load_run
    from stresstest.report.viewer import write_viewer

    tmp = Path(tempfile.mkdtemp(prefix="bench-viewer-"))
    if a.run_dir:
        run_dir = Path(a.run_dir)
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "report"))
        from synthetic_run import make_run

        t0 = time.perf_counter()
        run_dir = make_run(tmp / "synthetic", n_encounters=a.encounters, seed=7)
        print(f"synthetic run: {a.encounters} encounters in {time.perf_counter() - t0:.1f} s")
    run = load_run(run_dir)
    t0 = time.perf_counter()
    v = write_viewer(run, run_dir / "report")
    build = time.perf_counter() - t0
    pages = [p.stat().st_size for p in v.pages]
    print(
        f"items: {len(run.items)}; viewer written in {build:.1f} s; index {v.index.stat().st_size / 1e3:.0f} kB; "
        f"{len(pages)} encounter pages, {sum(pages) / 1e6:.2f} MB in all "
        f"(median {statistics.median(pages) / 1e3:.0f} "
        f"kB, largest {max(pages) / 1e3:.0f} kB); audio linked {v.audio_linked}, referenced {v.audio_referenced}, "
        f"missing {v.audio_missing}"
    )
    empty = tmp / "empty.html"
    empty.write_text("<!DOCTYPE html><html><body></body></html>")
    walls, readies, base = [], [], []
    for k in range(a.repeats):
        w, r = _open(v.index, tmp / f"p{k}")
        walls.append(w)
        readies.append(r)
        base.append(_open(empty, tmp / f"e{k}")[0])
    print(
        f"index in Chromium: ready {', '.join(f'{r:.2f}' if r is not None else '–' for r in readies)} s "
        f"(page script done); wall {', '.join(f'{w:.2f}' for w in walls)} s; empty page wall "
        f"{', '.join(f'{b:.2f}' for b in base)} s"
    )


if __name__ == "__main__":
    main()
