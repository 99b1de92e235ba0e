"""Score stage: one alignment per distinct (reference, hypothesis) pair vs one per metric and row (before).

Usage: python scripts/bench_score.py RUN_DIR [--repeats 3]

Reads the reference/hypothesis pairs of a finished run (items.jsonl) and times, on the same pairs in the same
process, (a) what the score stage does now — ``align`` once per distinct pair (a guard row shares its base's),
then WER counts, NegErr and trigger events read off that alignment (``pipeline.score.score_pair``) — and (b) the
previous path: for every row, ``asr_errors`` (jiwer), ``negation_mismatches`` and ``detect_triggers``, each
aligning the pair itself. Prints seconds and the ratio; both paths must give the same numbers (checked).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from stresstest.metrics.align import align, tokenize
from stresstest.metrics.negation import negation_mismatches
from stresstest.metrics.triggers import detect_triggers
from stresstest.metrics.wer import asr_errors, normalise
from stresstest.pipeline.score import score_pair


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--repeats", type=int, default=4)
    a = ap.parse_args()
    rows = [json.loads(x) for x in (Path(a.run_dir) / "items.jsonl").read_text("utf-8").splitlines()]
    # the previous stage scored every row (a guard row re-scored its base's transcript); now each distinct pair once
    row_pairs = [(r["reference_text"], r["hypothesis_text"]) for r in rows if r.get("hypothesis_text")]
    pairs = sorted(set(row_pairs))
    for ref, hyp in pairs:  # warm the normaliser and the vocabularies for both paths alike
        normalise(ref), normalise(hyp)
    score_pair(align(*pairs[0]), ())
    best_new = best_old = float("inf")
    new: list = []
    old: list = []
    for k in range(a.repeats):
        for which in ("new", "old") if k % 2 == 0 else ("old", "new"):  # alternate: no order advantage
            tokenize.cache_clear()  # neither path may reuse the other's tokenisations
            t0 = time.perf_counter()
            if which == "new":
                new = [score_pair(align(ref, hyp), ()) for ref, hyp in pairs]
                best_new = min(best_new, time.perf_counter() - t0)
            else:
                per_row = {
                    (ref, hyp): (asr_errors(ref, hyp), negation_mismatches(ref, hyp), detect_triggers(ref, hyp))
                    for ref, hyp in row_pairs
                }
                old = [per_row[p] for p in pairs]
                best_old = min(best_old, time.perf_counter() - t0)
    for n, (e, m, t) in zip(new, old, strict=True):
        assert n.errors == e and len(n.negation) == len(m) and len(n.triggers) == len(t)
    print(f"{len(row_pairs)} rows, {len(pairs)} distinct (reference, hypothesis) pairs; best of {a.repeats}")
    print(f"now: one alignment per distinct pair      : {best_new:.3f} s")
    print(f"before: one per metric, per row (guards too): {best_old:.3f} s")
    print(f"ratio before/now       : {best_old / best_new:.2f}x")


if __name__ == "__main__":
    main()
