"""Cut real ACI-BENCH ASR/human encounter pairs into utterance-level pairs for the trigger dev set.

For each encounter of ``test1``/``test2`` (virtscribe ASR vs human transcript; ACI ASR vs its human
correction), the two whole transcripts are aligned word by word (:func:`stresstest.metrics.align.align`),
the reference is cut into sentences inside speaker turns, each sentence is mapped to the hypothesis
stretch aligned to it, and the pairs whose normalised words differ are kept. A seeded sample (patient
turns first, as in primary-care error studies; ``--all`` appends every other differing pair) is written as
JSON lines WITHOUT labels; labels were added by hand following ``docs/trigger_labelling.md`` and the split by
encounter fixed before tuning: the result is ``data/trigger_devset/pairs.jsonl`` (see its README).

Usage::

    python scripts/make_trigger_devset.py --out /tmp/unlabelled.jsonl [--n 300] [--seed 10] [--all]
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

from validate_triggers import load_pairs  # scripts/ is on sys.path when this runs as a script

from stresstest.metrics.align import AlignedPair, align

_ROOT = Path(__file__).resolve().parents[1]
_REL = Path("shared") / "corpora" / "aci-bench" / "src_experiment_data"
# ../shared next to the checkout (main), or two levels up (a worktree under wt/).
DATA = next((p / _REL for p in (_ROOT.parent, _ROOT.parent.parent) if (p / _REL).is_dir()), _ROOT.parent / _REL)
_TURN = re.compile(r"\[(doctor|patient|patient_guest|doctor_guest|guest_family|guest_clinician)\]")
_SENT = re.compile(r"[^.?!\n]+[.?!]?")


def _sentences(ref: str) -> list[tuple[str, int, int]]:
    """(speaker, start, end) of each reference sentence, inside speaker turns."""
    marks = [(m.start(), m.end(), m.group(1)) for m in _TURN.finditer(ref)]
    out = []
    for k, (_, body_start, speaker) in enumerate(marks):
        body_end = marks[k + 1][0] if k + 1 < len(marks) else len(ref)
        for s in _SENT.finditer(ref, body_start, body_end):
            a, b = s.start(), s.end()
            while a < b and ref[a].isspace():
                a += 1
            if len(ref[a:b].split()) >= 3:
                out.append((speaker, a, b))
    return out


_MAX_WORDS = 40
_HALF_WINDOW = 12


def _windows(pair: AlignedPair, i: int, j: int) -> list[tuple[int, int]]:
    """The sentence [i, j) itself, or for a long one, windows of ±12 words around each differing stretch."""
    if j - i <= _MAX_WORDS:
        return [(i, j)]
    out: list[tuple[int, int]] = []
    for o in pair.ops:
        inside = o.ref_start < j and o.ref_end > i if o.ref_end > o.ref_start else i < o.ref_start < j
        if o.op == "equal" or not inside:
            continue
        lo, hi = max(i, o.ref_start - _HALF_WINDOW), min(j, o.ref_end + _HALF_WINDOW)
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def utterance_pairs() -> list[dict[str, object]]:
    """Every differing sentence-level pair of the four ACI-BENCH test files (read by
    :func:`validate_triggers.load_pairs`, the one ACI-BENCH reader)."""
    out: list[dict[str, object]] = []
    for source, eid, ref, hyp in load_pairs(DATA):
        pair = align(ref, hyp)
        for speaker, a, b in _sentences(ref):
            si, sj = pair.ref.tokens_in(a, b)
            for i, j in _windows(pair, si, sj):
                hi, hj = pair.hyp_range_for_ref(i, j)
                if j - i < 3 or pair.ref.words[i:j] == pair.hyp.words[hi:hj]:
                    continue
                rs, re_ = pair.ref.char_span(i, j)
                hs, he = pair.hyp.char_span(hi, hj) if hj > hi else (0, 0)
                out.append({
                    "source": source.rsplit("_", 1)[0], "encounter_id": eid,  # "test1_aci_asr" -> "test1_aci"
                    "speaker": speaker, "reference": _TURN.sub("", ref[rs:re_]).strip(),
                    "hypothesis": _TURN.sub("", hyp[hs:he]).strip(),
                })
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--all", action="store_true", help="append every other differing pair after the sample")
    args = ap.parse_args()
    pairs = utterance_pairs()
    rng = random.Random(args.seed)
    patient = [p for p in pairs if str(p["speaker"]).startswith("patient")]
    other = [p for p in pairs if not str(p["speaker"]).startswith("patient")]
    n_pat = min(len(patient), args.n)
    sample = rng.sample(patient, n_pat) + rng.sample(other, min(len(other), args.n - n_pat))
    sample.sort(key=lambda p: (str(p["source"]), str(p["encounter_id"])))
    if args.all:
        # The first --n pairs keep their ids; every remaining differing pair follows (labelled second).
        chosen = {id(p) for p in sample}
        sample += sorted((p for p in pairs if id(p) not in chosen),
                         key=lambda p: (str(p["source"]), str(p["encounter_id"])))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        for k, p in enumerate(sample):
            fh.write(json.dumps({"pair_id": f"p{k:03d}", **p}) + "\n")
    print(f"{len(pairs)} differing sentence pairs ({len(patient)} patient); wrote {len(sample)} to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
