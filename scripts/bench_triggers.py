"""Throughput of the trigger detector on utterance-sized real ASR/human pairs.

The ACI-BENCH encounter pairs (see ``validate_triggers.py``) are cut into
utterance pairs: each reference dialogue is split at sentence ends and speaker
turns into pieces of 5-40 words, and each piece is paired with the hypothesis
words aligned to it. The detector then runs over every pair; we report pairs per
second overall and on the pairs that differ after normalisation, next to plain
jiwer WER alignment of the same pairs measured in the same run.

Usage::

    python scripts/bench_triggers.py [--data DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import jiwer

from stresstest.metrics.align import align
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
            hi, hj = pair.hyp_range_for_ref(start, k)
            hs, he = pair.hyp.char_span(hi, hj)
            out.append((reference[rs:re_], hypothesis[hs:he]))
            start = k
    return out


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f} pairs/s ({n} pairs in {seconds:.2f} s)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="ACI-BENCH src_experiment_data folder")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes; the best is reported")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"error: ACI-BENCH pairs not found: expected a folder at {args.data}", file=sys.stderr)
        return 2
    pairs = [u for _, _, ref, hyp in load_pairs(args.data) for u in utterance_pairs(ref, hyp)]
    differing = [(r, h) for r, h in pairs if normalise(r) != normalise(h)]
    words = sum(len(r.split()) for r, _ in pairs)
    print(f"{len(pairs)} utterance pairs ({words / len(pairs):.1f} reference words on average), "
          f"{len(differing)} differ after normalisation")

    detect_triggers("no fever since monday", "fever since sunday")  # load dictionaries outside the timing

    def best(fn, items) -> float:  # type: ignore[no-untyped-def]
        times = []
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            for r, h in items:
                fn(r, h)
            times.append(time.perf_counter() - t0)
        return min(times)

    t_all = best(detect_triggers, pairs)
    t_diff = best(detect_triggers, differing)
    t_jiwer = best(lambda r, h: jiwer.process_words(normalise(r) or "-", normalise(h)), pairs)
    counts = trigger_counts(e for r, h in pairs for e in detect_triggers(r, h))
    print(f"detect_triggers, all pairs:       {_rate(len(pairs), t_all)}")
    print(f"detect_triggers, differing pairs: {_rate(len(differing), t_diff)}")
    print(f"jiwer WER alignment (same normalisation), all pairs: {_rate(len(pairs), t_jiwer)}")
    print(f"detector cost relative to jiwer alignment: {t_all / t_jiwer:.1f}x")
    print(f"events on utterance pairs: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
