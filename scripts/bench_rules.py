"""Benchmark the deterministic ``rules`` structurer on real OSCE transcripts.

Prints records/second (after the one-off table load, reported separately),
claims and flags per encounter, the fraction of claims/flags with evidence and
whether every quote is an exact substring, on the human transcripts and on an
"ASR-like" copy of them (lower-cased, punctuation removed), which is the hard
case for negation and question/answer reading.

Usage::

    python scripts/bench_rules.py [--corpus ../shared/corpora/osce] [--n 50] [--second-gold DIR]
        [--second-gold-test DIR]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
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
    quotes = [(q, t) for r, t in zip(recs, texts, strict=True) for qs in r.field_evidence.values() for q in qs]
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


def _split_rows() -> list[list[str]]:
    from stresstest.gold.model import default_gold_dir

    path = default_gold_dir() / "splits.tsv"
    return [
        [p.strip() for p in line.split("\t")]
        for line in path.read_text("utf-8").splitlines()
        if not line.startswith("#") and len(line.split("\t")) >= 2 and not line.startswith("encounter_id")
    ]


def gold_splits() -> dict[str, str]:
    """encounter id -> split ('dev' or 'test') from ``stresstest/gold/data/splits.tsv``; unlisted = dev."""
    return {r[0]: r[1] for r in _split_rows()}


def gold_sets() -> dict[str, str]:
    """encounter id -> dev set (third column of ``splits.tsv``: demo, blind-1, blind-2, blind-3); unlisted =
    older."""
    return {r[0]: r[2] for r in _split_rows() if len(r) >= 3 and r[2]}


@dataclass
class SplitScore:
    """Agreement of the extractor with the hand-written gold on one split (micro-averaged)."""

    n: int = 0
    triage_same: int = 0
    under_triage: int = 0
    tp: int = 0  # (concept, status) pairs in both
    n_pred: int = 0
    n_gold: int = 0
    vt_gold: int = 0  # gold value and time fields
    vt_hit: int = 0  # ... reproduced on the claim with the same concept and status
    flag_tp: int = 0
    flag_pred: int = 0
    flag_gold: int = 0
    misses: list[str] = field(default_factory=list)

    def line(self, name: str) -> str:
        p = self.tp / max(self.n_pred, 1)
        r = self.tp / max(self.n_gold, 1)
        f1 = 2 * p * r / max(p + r, 1e-9)
        fp = f"{self.flag_tp / self.flag_pred:.2f}" if self.flag_pred else "n/a"
        fr = f"{self.flag_tp / self.flag_gold:.2f}" if self.flag_gold else "n/a"
        return (
            f"{name:13s} n={self.n:2d}  triage {self.triage_same}/{self.n} = {self.triage_same / max(self.n, 1):.0%}"
            f" (under-triage {self.under_triage})  claim (concept,status) P {p:.2f} R {r:.2f} F1 {f1:.2f}"
            f"  value/time recall {self.vt_hit}/{self.vt_gold} = {self.vt_hit / max(self.vt_gold, 1):.0%}"
            f"  critical flags P {fp} ({self.flag_tp}/{self.flag_pred}) R {fr} ({self.flag_tp}/{self.flag_gold})"
        )


def score_against_gold(rec: ClinicalRecord, gold: object, score: SplitScore, eid: str) -> None:
    """Add one encounter's agreement to ``score`` (see :class:`SplitScore`)."""
    from stresstest.clinical.claims import canonical_claim, flag_keys
    from stresstest.schema import CRITICAL_FLAG_KINDS, triage_ord

    g = gold
    score.n += 1
    score.triage_same += rec.triage.level == g.triage.level  # type: ignore[attr-defined]
    score.under_triage += triage_ord(rec.triage.level) < triage_ord(g.triage.level)  # type: ignore[attr-defined]
    pred = {(c.concept, c.status): c for c in map(canonical_claim, rec.claims)}
    gold_c = {(c.concept, c.status): c for c in map(canonical_claim, g.claims)}  # type: ignore[attr-defined]
    score.tp += len(pred.keys() & gold_c.keys())
    score.n_pred += len(pred)
    score.n_gold += len(gold_c)
    for key, gc in gold_c.items():
        for attr in ("value", "time"):
            want = getattr(gc, attr)
            if not want:
                continue
            score.vt_gold += 1
            got = getattr(pred[key], attr) if key in pred else None
            if got == want:
                score.vt_hit += 1
            else:
                score.misses.append(f"{eid}: {key[0]} {attr} gold {want!r} got {got!r}")
    gf = flag_keys(g.safety_flags, CRITICAL_FLAG_KINDS)  # type: ignore[attr-defined]
    pf = flag_keys(rec.safety_flags, CRITICAL_FLAG_KINDS)
    score.flag_tp += len(gf & pf)
    score.flag_pred += len(pf)
    score.flag_gold += len(gf)


def gold_agreement(corpus: Path, show_dev: bool = False) -> list[str] | None:
    """Agreement with the shipped hand-written OSCE gold, per split (dev, test), or None without gold.

    The test split (``splits.tsv``) was written before the issue-14 rules changes and is never
    used to tune them; only its totals are printed. ``show_dev`` lists the dev split's
    value/time misses.
    """
    from stresstest.gold.model import default_gold_dir, load_gold

    golds = {k: g for k, g in load_gold(default_gold_dir()).items() if g.corpus == "osce"}
    if not golds:
        return None
    splits, sets = gold_splits(), gold_sets()
    encs = {e.encounter_id: e for e in load_corpus("osce", corpus, ids=sorted(golds))}
    names = ["dev", "test", "dev/asr-like", "test/asr-like"]
    named = list(dict.fromkeys(v for e, v in sets.items() if splits.get(e, "dev") == "dev"))  # file order
    dev_sets = [f"  dev:{x}" for x in named + ["older"]]
    scores = {name: SplitScore() for name in names + dev_sets}
    for eid, g in sorted(golds.items()):
        text = encs[eid].truncated(g.scope_turns).reference_text()
        split = splits.get(eid, "dev")
        rec = extract_record(text)
        score_against_gold(rec, g, scores[split], eid)
        if split == "dev":
            score_against_gold(rec, g, scores[f"  dev:{sets.get(eid, 'older')}"], eid)
        score_against_gold(extract_record(asr_like(text)), g, scores[f"{split}/asr-like"], eid)
    out = ["hand-written gold, not clinician-audited; test split never used for tuning"]
    out += [scores[s].line(s) for s in names[:1] + dev_sets + names[1:]]
    if show_dev:
        out += ["dev value/time misses:"] + [f"  {m}" for m in scores["dev"].misses]
    return out


def writer_agreement(
    second: Path, corpus: Path, split: str = "dev", adjudicated: Path | None = None
) -> list[str] | None:
    """How far two engineers agree: a second gold folder, written independently for some encounters of one
    split of the shipped gold, scored against the shipped gold with the same measures as the structurer (the
    human ceiling the rules numbers should be read against), and the structurer on the same encounters against
    each writer. None when the folder holds no file for a shipped OSCE gold encounter.

    A folder holds one split only: ``data/gold_second_writer`` is dev (it may be read while tuning), and
    ``data/gold_second_writer_test`` is test (written by engineers who never tune the structurer; only these
    totals are ever read). A file of the other split is refused.

    ``adjudicated``: a folder of references reconciled from both writers and the transcript for the same
    encounters (``data/gold_adjudicated_test``); each writer and the structurer are scored against it too."""
    from stresstest.gold.model import default_gold_dir, load_gold

    first = load_gold(default_gold_dir())
    other = {k: g for k, g in load_gold(second).items() if k in first and first[k].corpus == "osce"}
    if not other:
        return None
    splits = gold_splits()
    wrong = sorted(k for k in other if splits.get(k, "dev") != split)
    if wrong:
        raise StressTestError(
            f"{second}: {wrong} are not {split}-split encounters; this folder is for the {split} split only"
        )
    encs = {e.encounter_id: e for e in load_corpus("osce", corpus, ids=sorted(other))}
    rows = {
        f"{split}: writer B vs writer A": SplitScore(),
        f"{split}: rules vs writer A": SplitScore(),
        f"{split}: rules vs writer B": SplitScore(),
    }
    score_b, score_ra, score_rb = rows.values()
    adj = load_gold(adjudicated) if adjudicated is not None and adjudicated.is_dir() else {}
    if adj:
        if sorted(adj) != sorted(other):
            raise StressTestError(
                f"{adjudicated}: holds {sorted(adj)}, expected the encounters written twice ({sorted(other)})"
            )
        rows |= {
            f"{split}: writer A vs adjudicated": SplitScore(),
            f"{split}: writer B vs adjudicated": SplitScore(),
            f"{split}: rules vs adjudicated": SplitScore(),
        }
    for eid, g2 in sorted(other.items()):
        g1 = first[eid]
        for name, g in [(second, g2)] + ([(adjudicated, adj[eid])] if adj else []):
            if g.scope_turns != g1.scope_turns:
                raise StressTestError(
                    f"{name}/{eid}: scope_turns {g.scope_turns} differs from the shipped gold's {g1.scope_turns}"
                )
        rec = extract_record(encs[eid].truncated(g1.scope_turns).reference_text())
        score_against_gold(g2, g1, score_b, eid)  # type: ignore[arg-type]
        score_against_gold(rec, g1, score_ra, eid)
        score_against_gold(rec, g2, score_rb, eid)
        if adj:
            ga = adj[eid]
            score_against_gold(g1, ga, rows[f"{split}: writer A vs adjudicated"], eid)  # type: ignore[arg-type]
            score_against_gold(g2, ga, rows[f"{split}: writer B vs adjudicated"], eid)  # type: ignore[arg-type]
            score_against_gold(rec, ga, rows[f"{split}: rules vs adjudicated"], eid)
    out = [
        f"{len(other)} {split} encounters written twice (A: shipped gold, B: {second})"
        + (f", adjudicated: {adjudicated}" if adj else "")
    ]
    return out + [score.line(f"  {name}") for name, score in rows.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    repo = Path(__file__).resolve().parents[1]
    parser.add_argument(
        "--corpus",
        type=Path,
        default=repo / "data" / "osce",
        help="OSCE corpus folder (default: the transcripts shipped in data/osce)",
    )
    parser.add_argument("--show-dev", action="store_true", help="list the dev split's value/time misses")
    parser.add_argument("--n", type=int, default=50, help="number of transcripts (spread over specialties)")
    parser.add_argument(
        "--second-gold",
        type=Path,
        default=repo / "data" / "gold_second_writer",
        help="independently re-written gold for some dev encounters (writer agreement)",
    )
    parser.add_argument(
        "--second-gold-test",
        type=Path,
        default=repo / "data" / "gold_second_writer_test",
        help="independently re-written gold for test encounters (writer agreement on test)",
    )
    parser.add_argument(
        "--adjudicated-test",
        type=Path,
        default=repo / "data" / "gold_adjudicated_test",
        help="test references reconciled from both writers and the transcript",
    )
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

    header = [
        "input",
        "records/s",
        "claims/enc",
        "flags/enc",
        "claims w/ ev",
        "flags w/ ev",
        "exact quotes",
        "claim status",
        "triage",
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    spec = Counter(e.specialty or e.encounter_id[:3] for e in encs)
    mean_chars = statistics.mean(len(t) for t in human)
    print(
        f"rules structurer on {len(encs)} OSCE transcripts ({dict(sorted(spec.items()))}); "
        f"one-off table load {load_s:.2f} s; mean transcript {mean_chars:.0f} chars"
    )
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    print("human vs asr-like: " + robustness(outputs[0], outputs[1]))
    agreement = gold_agreement(args.corpus, args.show_dev)
    if agreement:
        print("agreement with gold: " + "\n  ".join(agreement))
    for folder, split, adjudicated in (
        (args.second_gold, "dev", None),
        (args.second_gold_test, "test", args.adjudicated_test),
    ):
        if not folder.is_dir():
            continue
        try:
            writers = writer_agreement(folder, args.corpus, split, adjudicated)
        except StressTestError as exc:
            print(f"bench_rules: {exc}", file=sys.stderr)
            return 2
        if writers:
            print("writer agreement: " + "\n  ".join(writers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
