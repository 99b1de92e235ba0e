"""Throughput of the trigger detector on utterance-sized real ASR/human pairs.

The ACI-BENCH encounter pairs (see ``validate_triggers.py``) are cut into
utterance pairs: each reference dialogue is split at sentence ends and speaker
turns into pieces of 5-40 words, and each piece is paired with the hypothesis
words aligned to it. The detector then runs over every pair; we report pairs per
second overall and on the pairs that differ after normalisation, next to plain
jiwer WER alignment of the same pairs measured in the same run. Times are
process CPU seconds (one core), best of ``--repeat`` passes, with the text
caches cleared before each pass.

``--long N`` instead times one long pair: the ACI-BENCH encounters (ASR and human transcript joined in
the same encounter order) repeated to N reference words, through ``detect_triggers`` (process CPU seconds
and wall seconds, dictionaries loaded beforehand, as the CLI does once per call) next to the project's
normalisation + jiwer WER of the same pair in the same run.

Usage::

    python scripts/bench_triggers.py [--data DIR] [--repeat 3]
    python scripts/bench_triggers.py --long 200000
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import jiwer

from stresstest.metrics.align import align, tokenize
from stresstest.metrics.triggers import detect_triggers, trigger_counts
from stresstest.metrics.wer import normalise

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_triggers import DEFAULT_DATA, load_pairs  # noqa: E402

_BREAK = re.compile(r"[.?!]|\n|\[")
_MIN_WORDS, _MAX_WORDS = 5, 40


def utterance_pairs(reference: str, hypothesis: str) -> list[tuple[str, str]]:
    """Cut one aligned encounter pair into utterance-sized (reference, hypothesis) pairs."""
    pair = align(reference, hypothesis)
    toks = pair.ref.tokens
    out: list[tuple[str, str]] = []
    start = 0
    for k in range(1, len(toks) + 1):
        n = k - start
        at_break = k == len(toks) or bool(_BREAK.search(reference[toks[k - 1].end : toks[k].start]))
        if (at_break and n >= _MIN_WORDS) or n >= _MAX_WORDS or k == len(toks):
            rs, re_ = pair.ref.char_span(start, k)
            # Cut points map to cut points, so the hypothesis pieces tile it (insertions included).
            hi, hj = pair.hyp_index_for_ref(start), pair.hyp_index_for_ref(k)
            hs, he = pair.hyp.char_span(hi, hj)
            out.append((reference[rs:re_], hypothesis[hs:he]))
            start = k
    return out


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f} pairs/s ({n} pairs in {seconds:.2f} CPU s)"


def long_pair(data: Path, n_words: int) -> int:
    """Time ``detect_triggers`` on one ``n_words``-word pair against normalisation + jiwer on it."""
    enc = load_pairs(data)
    ref_words = " ".join(r for _, _, r, _ in enc).split()
    hyp_words = " ".join(h for _, _, _, h in enc).split()
    reps = n_words // len(ref_words) + 1
    n_hyp = round(n_words * len(hyp_words) / len(ref_words))
    ref, hyp = " ".join((ref_words * reps)[:n_words]), " ".join((hyp_words * reps)[:n_hyp])
    detect_triggers("no fever since monday", "fever since sunday")  # dictionaries, as loaded once per CLI call
    t0, w0 = time.process_time(), time.perf_counter()
    events = detect_triggers(ref, hyp)
    t_det, w_det = time.process_time() - t0, time.perf_counter() - w0
    normalise.cache_clear()
    t0, w0 = time.process_time(), time.perf_counter()
    jiwer.process_words(normalise(ref), normalise(hyp))
    t_wer, w_wer = time.process_time() - t0, time.perf_counter() - w0
    print(f"{n_words} reference words, {n_hyp} hypothesis words, {len(events)} events")
    print(f"detect_triggers: {t_det:.1f} CPU s, {w_det:.1f} s wall")
    print(f"normalise + jiwer WER: {t_wer:.1f} CPU s, {w_wer:.1f} s wall")
    print(f"detector / WER: {t_det / t_wer:.2f}x; load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="ACI-BENCH src_experiment_data folder")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes; the best is reported")
    ap.add_argument("--long", type=int, default=0, help="time one pair of this many reference words instead")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"error: ACI-BENCH pairs not found: expected a folder at {args.data}", file=sys.stderr)
        return 2
    if args.long:
        return long_pair(args.data, args.long)
    pairs = [u for _, _, ref, hyp in load_pairs(args.data) for u in utterance_pairs(ref, hyp)]
    differing = [(r, h) for r, h in pairs if normalise(r) != normalise(h)]
    words = sum(len(r.split()) for r, _ in pairs)
    print(
        f"{len(pairs)} utterance pairs ({words / len(pairs):.1f} reference words on average), "
        f"{len(differing)} differ after normalisation"
    )

    detect_triggers("no fever since monday", "fever since sunday")  # load dictionaries outside the timing

    walls: list[float] = []

    def best(fn, items) -> float:  # type: ignore[no-untyped-def]
        # Process CPU time: on a shared machine the wall clock also measures the neighbours (the
        # best wall time is printed too). Best of --repeat passes.
        times, wall = [], []
        for _ in range(max(1, args.repeat)):
            # Cold text caches every pass: each pair is new text, as in a run's first comparison.
            normalise.cache_clear()
            tokenize.cache_clear()
            t0, w0 = time.process_time(), time.perf_counter()
            for r, h in items:
                fn(r, h)
            times.append(time.process_time() - t0)
            wall.append(time.perf_counter() - w0)
        walls.append(min(wall))
        return min(times)

    t_all = best(detect_triggers, pairs)
    t_diff = best(detect_triggers, differing)
    t_jiwer = best(lambda r, h: jiwer.process_words(normalise(r) or "-", normalise(h)), pairs)
    counts = trigger_counts(e for r, h in pairs for e in detect_triggers(r, h))
    w_all, w_diff, w_jiwer = walls
    print(f"detect_triggers, all pairs:       {_rate(len(pairs), t_all)}; wall {len(pairs) / w_all:,.0f}/s")
    print(f"detect_triggers, differing pairs: {_rate(len(differing), t_diff)}; wall {len(differing) / w_diff:,.0f}/s")
    print(
        f"jiwer WER alignment (same normalisation), all pairs: {_rate(len(pairs), t_jiwer)}; "
        f"wall {len(pairs) / w_jiwer:,.0f}/s"
    )
    print(f"load average while measuring: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"detector cost relative to jiwer alignment: {t_all / t_jiwer:.1f}x")
    print(f"events on utterance pairs: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
