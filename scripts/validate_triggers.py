"""Run the trigger detector over real ACI-BENCH ASR-vs-human transcript pairs.

Pairs (joined on the encounter id, both test splits):

* ``*_virtscribe_asr.csv`` (hypothesis) vs ``*_virtscribe_humantrans.csv`` (reference)
* ``*_aci_asr.csv`` (hypothesis) vs ``*_aci_asrcorr.csv`` (reference)

Prints WER, event counts by type and, for reading, a seeded sample of events of
each type with their quotes. Every encounter must go through without an error.

Usage::

    python scripts/validate_triggers.py [--data DIR] [--per-type 5] [--seed 0] [--json OUT.jsonl]

ACI-BENCH (Yim et al., Scientific Data 10, 586, 2023) is CC BY 4.0.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import time
from pathlib import Path

from stresstest.metrics.negation import neg_err_flag
from stresstest.metrics.triggers import TRIGGER_TYPES, TriggerEvent, detect_triggers, trigger_counts
from stresstest.metrics.wer import asr_errors, wer_percent

DEFAULT_DATA = (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "corpora" / "aci-bench" / "src_experiment_data"
)
PAIRS = (("virtscribe_asr", "virtscribe_humantrans"), ("aci_asr", "aci_asrcorr"))


def _read(path: Path) -> dict[str, str]:
    csv.field_size_limit(1 << 30)
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if rows and not {"id", "dialogue"} <= set(rows[0]):
        raise SystemExit(f"{path}: expected columns 'id' and 'dialogue', found {sorted(rows[0])}")
    return {row["id"]: row["dialogue"] for row in rows}


def load_pairs(data: Path) -> list[tuple[str, str, str, str]]:
    """(source, encounter id, reference, hypothesis) for every pair found under ``data``."""
    out = []
    for split in ("test1", "test2"):
        for hyp_name, ref_name in PAIRS:
            hyp_path, ref_path = data / f"{split}_{hyp_name}.csv", data / f"{split}_{ref_name}.csv"
            if not (hyp_path.is_file() and ref_path.is_file()):
                continue
            hyp, ref = _read(hyp_path), _read(ref_path)
            missing = sorted(set(hyp) ^ set(ref))
            if missing:
                print(f"warning: {split} {hyp_name}/{ref_name}: ids only on one side: {missing}",
                      file=sys.stderr)
            for eid in sorted(set(hyp) & set(ref)):
                out.append((f"{split}_{hyp_name}", eid, ref[eid], hyp[eid]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="ACI-BENCH src_experiment_data folder")
    ap.add_argument("--per-type", type=int, default=5, help="events sampled per type for reading")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument("--json", type=Path, default=None, help="write every event as JSON lines here")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"error: ACI-BENCH pairs not found: expected a folder at {args.data}", file=sys.stderr)
        return 2
    pairs = load_pairs(args.data)
    if not pairs:
        print(f"error: no *_asr.csv / reference csv pairs in {args.data}", file=sys.stderr)
        return 2

    all_events: list[tuple[str, str, TriggerEvent]] = []
    by_source: dict[str, dict[str, int]] = {}
    errs = {}
    neg_flags = {}
    t0 = time.perf_counter()
    for source, eid, ref, hyp in pairs:
        events = detect_triggers(ref, hyp)
        for e in events:
            if ref[e.ref_start : e.ref_end] != e.ref_span or hyp[e.hyp_start : e.hyp_end] != e.hyp_span:
                raise SystemExit(f"{source}/{eid}: event quote does not match its offsets: {e}")
        all_events += [(source, eid, e) for e in events]
        counts = by_source.setdefault(source, dict.fromkeys(TRIGGER_TYPES, 0))
        for k, v in trigger_counts(events).items():
            counts[k] += v
        errs[(source, eid)] = asr_errors(ref, hyp)
        neg_flags[(source, eid)] = neg_err_flag(ref, hyp)
    elapsed = time.perf_counter() - t0

    print(f"{len(pairs)} encounter pairs, {elapsed:.1f} s (detector + WER + NegErr)\n")
    short = "  ".join(f"{t[:12]:>12}" for t in TRIGGER_TYPES)
    print(f"{'source':<24}{'n':>4}{'WER%':>7}{'NegErr%':>9}  {short}")
    for source, counts in by_source.items():
        keys = [k for k in errs if k[0] == source]
        wer = wer_percent([errs[k] for k in keys])
        neg = 100.0 * sum(neg_flags[k] for k in keys) / len(keys)
        cells = "  ".join(f"{counts[t]:>12}" for t in TRIGGER_TYPES)
        print(f"{source:<24}{len(keys):>4}{wer:>7.2f}{neg:>9.1f}  {cells}")
    total = trigger_counts(e for _, _, e in all_events)
    cells = "  ".join(f"{total[t]:>12}" for t in TRIGGER_TYPES)
    print(f"{'total':<24}{len(pairs):>4}{'':>7}{'':>9}  {cells}")

    rng = random.Random(args.seed)
    for t in TRIGGER_TYPES:
        of_type = [x for x in all_events if x[2].type == t]
        sample = rng.sample(of_type, min(args.per_type, len(of_type)))
        print(f"\n=== {t}: {len(of_type)} events, {len(sample)} sampled ===")
        for n, (source, eid, e) in enumerate(sample, 1):
            print(f"[{n}] {source}/{eid}  concept={e.concept}")
            print(f"    ref: {e.ref_span!r}")
            print(f"    hyp: {e.hyp_span!r}")
            print(f"    why: {e.explanation}")
    if args.json is not None:
        with args.json.open("w", encoding="utf-8") as fh:
            for source, eid, e in all_events:
                fh.write(json.dumps({"source": source, "encounter_id": eid, **e.model_dump()}) + "\n")
        print(f"\nwrote {len(all_events)} events to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
