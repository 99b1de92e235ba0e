"""Benchmark the deterministic ``rules`` structurer on real OSCE transcripts.

Prints records/second (after the one-off table load, reported separately),
claims and flags per encounter, the fraction of claims/flags with evidence and
whether every quote is an exact substring, on the human transcripts and on an
"ASR-like" copy of them (lower-cased, punctuation removed), which is the hard
case for negation and question/answer reading.

Usage::

    python scripts/bench_rules.py [--corpus ../shared/corpora/osce] [--n 50]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from stresstest.corpus import load_corpus
from stresstest.errors import StressTestError
from stresstest.schema import ClinicalRecord
from stresstest.structure.rules import extract_record

_PUNCT = re.compile(r"[^\w\s']+")


def asr_like(text: str) -> str:
    """Lower-case, punctuation-free, single-spaced: what some ASR front-ends emit."""
    return " ".join(_PUNCT.sub(" ", text.lower()).split())


def run(texts: list[str]) -> tuple[list[ClinicalRecord], float]:
    t0 = time.perf_counter()
    recs = [extract_record(t) for t in texts]
    return recs, time.perf_counter() - t0


def summarise(name: str, texts: list[str], recs: list[ClinicalRecord], elapsed: float) -> list[str]:
    claims = [len(r.claims) for r in recs]
    flags = [len(r.safety_flags) for r in recs]
    n_claims = sum(claims)
    n_flags = sum(flags)
    with_ev_c = sum(1 for r in recs for c in r.claims if r.field_evidence.get(c.id))
    with_ev_f = sum(1 for r in recs for f in r.safety_flags if r.field_evidence.get(f.id))
    quotes = [
        (q, t) for r, t in zip(recs, texts, strict=True) for qs in r.field_evidence.values() for q in qs
    ]
    exact = sum(1 for q, t in quotes if q in t)
    status = Counter(c.status for r in recs for c in r.claims)
    triage = Counter(r.triage.level for r in recs)
    return [
        name,
        f"{len(recs) / elapsed:.1f}",
        f"{statistics.mean(claims):.1f} (median {statistics.median(claims):g})",
        f"{statistics.mean(flags):.1f}",
        f"{with_ev_c / max(n_claims, 1):.3f}",
        f"{with_ev_f / max(n_flags, 1):.3f}",
        f"{exact}/{len(quotes)}",
        " ".join(f"{k}:{status[k]}" for k in ("present", "absent", "uncertain")),
        " ".join(f"{k}:{triage[k]}" for k in ("routine", "urgent", "emergency")),
    ]


def robustness(human: list[ClinicalRecord], asr: list[ClinicalRecord]) -> str:
    """How much of the record survives losing case and punctuation (same words, same order)."""
    agree = common = only_h = only_a = same_triage = 0
    for rh, ra in zip(human, asr, strict=True):
        dh = {(c.category, c.concept): c.status for c in rh.claims}
        da = {(c.category, c.concept): c.status for c in ra.claims}
        both = dh.keys() & da.keys()
        common += len(both)
        agree += sum(dh[k] == da[k] for k in both)
        only_h += len(dh.keys() - da.keys())
        only_a += len(da.keys() - dh.keys())
        same_triage += rh.triage.level == ra.triage.level
    return (
        f"claim status agreement on shared concepts {agree}/{common} = {agree / max(common, 1):.3f}; "
        f"concepts only in human {only_h}, only in asr-like {only_a}; "
        f"same triage {same_triage}/{len(human)}"
    )


def gold_agreement(corpus: Path) -> list[str] | None:
    """Agreement with the shipped hand-written gold records (OSCE ones), or None when there are none.

    Concept recall: gold concepts (canonical form, as the claim matcher sees them) that the
    extractor also produced; status agreement on those; exact claim matches; triage agreement;
    safety-critical flag recall/precision.
    """
    from stresstest.gold.model import default_gold_dir, load_gold
    from stresstest.metrics.claims import canonical_claim, flag_keys, match_claims
    from stresstest.schema import CRITICAL_FLAG_KINDS

    golds = {k: g for k, g in load_gold(default_gold_dir()).items() if g.corpus == "osce"}
    if not golds:
        return None
    encs = {e.encounter_id: e for e in load_corpus("osce", corpus, ids=sorted(golds))}
    g_n = both = same = exact = n_pred = tri = fg = fp = fm = 0
    for eid, g in sorted(golds.items()):
        rec = extract_record(encs[eid].truncated(g.scope_turns).reference_text())
        gcon = {canonical_claim(c).concept: c.status for c in g.claims}
        pcon = {canonical_claim(c).concept: c.status for c in rec.claims}
        common = gcon.keys() & pcon.keys()
        g_n += len(gcon)
        n_pred += len(pcon)
        both += len(common)
        same += sum(gcon[k] == pcon[k] for k in common)
        exact += len(match_claims(rec.claims, g.claims).matched)
        tri += rec.triage.level == g.triage.level
        gf = flag_keys(g.safety_flags, CRITICAL_FLAG_KINDS)
        pf = flag_keys(rec.safety_flags, CRITICAL_FLAG_KINDS)
        fg, fp, fm = fg + len(gf), fp + len(pf), fm + len(gf & pf)
    return [
        f"{len(golds)} gold encounters (hand-written, not clinician-audited)",
        f"concept recall {both}/{g_n} = {both / max(g_n, 1):.2f}; concept precision {both}/{n_pred} = "
        f"{both / max(n_pred, 1):.2f}; status agreement on shared concepts {same}/{both} = "
        f"{same / max(both, 1):.2f}; exact claim matches {exact}",
        f"triage agreement {tri}/{len(golds)}; critical flags recall {fm}/{fg}, precision {fm}/{fp}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "osce"
    parser.add_argument("--corpus", type=Path, default=default, help="OSCE corpus folder")
    parser.add_argument("--n", type=int, default=50, help="number of transcripts (spread over specialties)")
    args = parser.parse_args(argv)
    try:
        encs = load_corpus("osce", args.corpus)
    except StressTestError as exc:
        print(f"bench_rules: {exc}", file=sys.stderr)
        return 2
    step = max(1, len(encs) // args.n)
    encs = encs[::step][: args.n]  # every k-th id: all five specialties, not just the first ones
    human = [e.reference_text() for e in encs]
    asr = [asr_like(t) for t in human]

    t0 = time.perf_counter()
    extract_record("warm-up: load the lexicon and the drug dictionary")
    load_s = time.perf_counter() - t0

    rows = []
    outputs: list[list[ClinicalRecord]] = []
    for name, texts in (("human transcript", human), ("asr-like (lower, no punct)", asr)):
        recs, elapsed = run(texts)
        again, _ = run(texts)
        if again != recs:
            print("bench_rules: non-deterministic output", file=sys.stderr)
            return 1
        rows.append(summarise(name, texts, recs, elapsed))
        outputs.append(recs)

    header = ["input", "records/s", "claims/enc", "flags/enc", "claims w/ ev", "flags w/ ev",
              "exact quotes", "claim status", "triage"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    spec = Counter(e.specialty or e.encounter_id[:3] for e in encs)
    mean_chars = statistics.mean(len(t) for t in human)
    print(f"rules structurer on {len(encs)} OSCE transcripts ({dict(sorted(spec.items()))}); "
          f"one-off table load {load_s:.2f} s; mean transcript {mean_chars:.0f} chars")
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    print("human vs asr-like: " + robustness(outputs[0], outputs[1]))
    agreement = gold_agreement(args.corpus)
    if agreement:
        print("agreement with gold: " + "\n  ".join(agreement))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
