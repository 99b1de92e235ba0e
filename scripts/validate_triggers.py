"""Validate the trigger detector against clinician-style impact labels of real ASR errors.

Default mode scores the in-repo development set ``data/trigger_devset/pairs.jsonl`` (491 real ACI-BENCH
ASR/human utterance pairs labelled 0 none / 1 minimal / 2 significant by ``docs/trigger_labelling.md``,
split dev/test by encounter), or each set given to ``--pairs`` (e.g. ``data/trigger_devset_osce/pairs.jsonl``
and ``data/trigger_devset_primock/pairs.jsonl``: another ASR, other corpora). For each set and split it prints
AUROC with bootstrap 95% CIs (pairs resampled, 2000 replicates, seed 0) for two endpoints, "significant vs
rest" and "any impact vs none", of three scores:

* **trigger risk**: the sum of the weights of ``stresstest triggers`` events (SPEC §6, §10);
* **WER** of the pair (%);
* **content-word errors**: reference content words the hypothesis deletes or substitutes (a crude baseline).

Below each table it prints paired bootstrap 95% CIs of the AUROC differences trigger risk − WER and trigger risk −
content-word errors (the same replicates for both scores of a difference; pairs resampled, or encounters with
``--resample encounters``). ``--split dev`` scores the dev split only (what tuning may look at). ``--dump-scores
FILE`` writes every pair's trigger risk as JSON (``{set folder: {pair_id: risk}}``); run with
``PYTHONPATH=/work/main`` (another checkout's code) it records a reference detector, which ``--reference FILE`` then
prints beside this one ("old trigger risk", with its own differences and new − old).

``--encounters`` instead runs the detector over the whole ACI-BENCH encounter pairs in ``../shared`` (event
counts by type and a sample of events to read; every encounter must go through). That data is not shipped:
without it the mode says so and exits 0.

Usage::

    python scripts/validate_triggers.py [--pairs FILE [FILE ...]] [--split dev|test|all] [--resamples 2000]
        [--resample pairs|encounters] [--reference OLD.json] [--dump-scores OUT.json] [--misses]
    python scripts/validate_triggers.py --encounters [--data DIR] [--per-type 5] [--json OUT.jsonl]

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

import numpy as np

from stresstest.metrics.align import align
from stresstest.metrics.bootstrap import bootstrap_statistic
from stresstest.metrics.triggers import (
    TRIGGER_TYPES,
    TriggerEvent,
    content_word_errors,
    detect_in_pair,
    trigger_counts,
    trigger_risk,
)
from stresstest.metrics.wer import asr_errors, wer_percent
from stresstest.report.predictive import auroc

_ROOT = Path(__file__).resolve().parents[1]
_REL = Path("shared") / "corpora" / "aci-bench" / "src_experiment_data"
DEFAULT_DATA = next((p / _REL for p in (_ROOT.parent, _ROOT.parent.parent) if (p / _REL).is_dir()), _ROOT.parent / _REL)
DEFAULT_PAIRS = _ROOT / "data" / "trigger_devset" / "pairs.jsonl"
PAIRS = (("virtscribe_asr", "virtscribe_humantrans"), ("aci_asr", "aci_asrcorr"))
SCORES = (("risk", "trigger risk"), ("content", "content-word errors"), ("wer", "WER"))
ENDPOINTS = (("significant", "significant vs rest"), ("any", "any impact vs none"))


def read_devset(path: Path) -> list[dict[str, object]]:
    """The labelled pairs; a malformed line is a one-line error naming file and line."""
    rows = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            try:
                row = json.loads(line)
                assert isinstance(row["reference"], str) and isinstance(row["hypothesis"], str)
                assert row["label"] in (0, 1, 2) and row["split"] in ("dev", "test")
            except (ValueError, KeyError, AssertionError, TypeError) as exc:
                raise SystemExit(
                    f"{path}:{n}: expected reference, hypothesis, label 0/1/2, split dev/test ({exc!r})"
                ) from None
            rows.append(row)
    return rows


def score_pairs(rows: list[dict[str, object]]) -> dict[str, np.ndarray]:
    """Per-pair scores (trigger risk, trigger count, content-word errors, WER) and labels."""
    out: dict[str, list[float]] = {"risk": [], "count": [], "content": [], "wer": [], "label": []}
    for row in rows:
        ref, hyp = str(row["reference"]), str(row["hypothesis"])
        pair = align(ref, hyp)
        events = detect_in_pair(pair)
        out["risk"].append(trigger_risk(events))
        out["count"].append(float(len(events)))
        out["content"].append(float(content_word_errors(pair)))
        out["wer"].append(wer_percent([asr_errors(ref, hyp)]))
        out["label"].append(float(row["label"]))  # type: ignore[arg-type]
    return {k: np.array(v, float) for k, v in out.items()}


#: Paired AUROC differences printed under each table: (name, minuend, subtrahend).
DIFFERENCES = (
    ("trigger − WER", "risk", "wer"),
    ("trigger − content-word", "risk", "content"),
)
REF_DIFFERENCES = (
    ("old trigger − WER", "old", "wer"),
    ("old trigger − content-word", "old", "content"),
    ("new − old trigger", "risk", "old"),
)


def _clusters(encounters: list[str] | None, n: int) -> list[np.ndarray]:
    """Bootstrap units: one per pair, or the pairs of each encounter (sorted ids) when ``encounters`` is given."""
    if encounters is None:
        return [np.array([k]) for k in range(n)]
    by: dict[str, list[int]] = {}
    for k, e in enumerate(encounters):
        by.setdefault(e, []).append(k)
    return [np.array(by[e]) for e in sorted(by)]


def auroc_table(
    scores: dict[str, np.ndarray], resamples: int, seed: int, encounters: list[str] | None = None
) -> dict[str, dict[str, tuple]]:
    """{endpoint: {score or difference: (value, (lo, hi) | None)}} with a paired bootstrap.

    Every score and every difference of :data:`DIFFERENCES` (and :data:`REF_DIFFERENCES` when ``scores`` has a
    reference detector's ``old``) is computed on the same replicates, so a difference's CI is paired. Pairs are
    resampled, or whole encounters when ``encounters`` (one id per pair) is given.
    """
    table: dict[str, dict[str, tuple]] = {}
    names = [s for s, _ in (*SCORES, ("count", ""), ("old", "")) if s in scores]
    diffs = [d for d in (*DIFFERENCES, *REF_DIFFERENCES) if d[1] in scores and d[2] in scores]
    for ep, _ in ENDPOINTS:
        y = (scores["label"] == 2) if ep == "significant" else (scores["label"] >= 1)
        y = y.astype(float)

        def stat(ix: np.ndarray, y: np.ndarray = y) -> dict[str, float]:
            a = {s: auroc(scores[s][ix], y[ix]) for s in names}
            return {**a, **{d: a[x] - a[z] for d, x, z in diffs}}

        point, cis = bootstrap_statistic(_clusters(encounters, len(y)), stat, resamples, seed=seed)
        table[ep] = {s: (point[s], cis[s]) for s in point}
    return table


def _fmt_diff(v: tuple) -> str:
    a, ci = v
    if not ci:
        return f"{a:+.3f}"
    mark = " *" if ci[0] > 0 else ""
    return f"{a:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]{mark}"


def _fmt(v: tuple) -> str:
    a, ci = v
    return f"{a:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{a:.3f}"


def run_devset(args: argparse.Namespace) -> int:
    paths: list[Path] = args.pairs or [DEFAULT_PAIRS]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(f"error: labelled pairs not found: expected {missing[0]}", file=sys.stderr)
        return 2
    reference = _read_reference(args.reference) if args.reference else None
    dumped: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    for path in paths:
        rows = read_devset(path)
        if len(paths) > 1:
            print(f"\n##### {path}")
        splits = ("dev", "test") if args.split == "all" else (args.split,)
        for split in splits:
            part = [r for r in rows if r["split"] == split]
            if not part:
                print(f"\n== {split}: no pairs")
                continue
            sc = score_pairs(part)
            if args.dump_scores is not None:
                dumped.setdefault(path.parent.name, {}).update(
                    {str(r["pair_id"]): float(v) for r, v in zip(part, sc["risk"], strict=True)}
                )
            if reference is not None:
                sc["old"] = _reference_scores(reference, path, part, args.reference)
            n2, n1 = int((sc["label"] == 2).sum()), int((sc["label"] == 1).sum())
            with_event = int((sc["count"] > 0).sum())
            print(
                f"\n== {split}: {len(part)} pairs ({n2} significant, {n1} minimal); {with_event} pairs with ≥ 1 "
                f"event ({int((sc['count'][sc['label'] == 2] > 0).sum())}/{n2} significant)"
            )
            encounters = [str(r["encounter_id"]) for r in part] if args.resample == "encounters" else None
            table = auroc_table(sc, args.resamples, args.seed, encounters)
            print(f"{'AUROC (95% CI)':<22}" + "".join(f"{lab:<28}" for _, lab in ENDPOINTS))
            rows_out = (*SCORES, ("count", "trigger count"), *((("old", "old trigger risk"),) if "old" in sc else ()))
            for s, lab in rows_out:
                print(f"{lab:<22}" + "".join(f"{_fmt(table[ep][s]):<28}" for ep, _ in ENDPOINTS))
            unit = "encounters" if encounters is not None else "pairs"
            print(f"paired AUROC differences (95% CI, {unit} resampled; * = CI above 0)")
            for d, _, _ in (*DIFFERENCES, *REF_DIFFERENCES):
                if d in table[ENDPOINTS[0][0]]:
                    print(f"{d:<28}" + "".join(f"{_fmt_diff(table[ep][d]):<30}" for ep, _ in ENDPOINTS))
            if args.misses and split == "dev":
                for r, risk in zip(part, sc["risk"], strict=True):
                    if (r["label"] == 2 and risk == 0) or (r["label"] == 0 and risk > 0):
                        print(
                            f"  {'MISS' if r['label'] == 2 else 'FP  '} {r['pair_id']} risk={risk:.1f}\n"
                            f"      R: {r['reference']}\n      H: {r['hypothesis']}"
                        )
    if args.dump_scores is not None:
        args.dump_scores.write_text(json.dumps(dumped, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote the trigger risk of {sum(len(v) for v in dumped.values())} pairs to {args.dump_scores}")
    print(f"\n({time.perf_counter() - t0:.1f} s)")
    return 0


def _read_reference(path: Path) -> dict[str, dict[str, float]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(data, dict) and all(isinstance(v, dict) for v in data.values())
    except (OSError, ValueError, AssertionError) as exc:
        raise SystemExit(f"{path}: expected JSON {{set folder: {{pair_id: risk}}}} ({exc!r})") from None
    return data


def _reference_scores(
    reference: dict[str, dict[str, float]], path: Path, part: list[dict[str, object]], ref_path: Path
) -> np.ndarray:
    """The reference detector's risk of each pair of ``part`` (one line naming the first pair it lacks)."""
    scores = reference.get(path.parent.name, {})
    missing = [str(r["pair_id"]) for r in part if str(r["pair_id"]) not in scores]
    if missing:
        raise SystemExit(f"{ref_path}: no score for {path.parent.name}/{missing[0]} ({len(missing)} pairs missing)")
    return np.array([float(scores[str(r["pair_id"])]) for r in part], float)


def _read(path: Path) -> dict[str, str]:
    csv.field_size_limit(1 << 30)
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if rows and not {"id", "dialogue"} <= set(rows[0]):
        raise SystemExit(f"{path}: expected columns 'id' and 'dialogue', found {sorted(rows[0])}")
    return {row["id"]: row["dialogue"] for row in rows}


def load_pairs(data: Path) -> list[tuple[str, str, str, str]]:
    """(source, encounter id, reference, hypothesis) for every encounter pair found under ``data``."""
    out = []
    for split in ("test1", "test2"):
        for hyp_name, ref_name in PAIRS:
            hyp_path, ref_path = data / f"{split}_{hyp_name}.csv", data / f"{split}_{ref_name}.csv"
            if not (hyp_path.is_file() and ref_path.is_file()):
                continue
            hyp, ref = _read(hyp_path), _read(ref_path)
            missing = sorted(set(hyp) ^ set(ref))
            if missing:
                print(f"warning: {split} {hyp_name}/{ref_name}: ids only on one side: {missing}", file=sys.stderr)
            for eid in sorted(set(hyp) & set(ref)):
                out.append((f"{split}_{hyp_name}", eid, ref[eid], hyp[eid]))
    return out


def run_encounters(args: argparse.Namespace) -> int:
    if not args.data.is_dir():
        print(f"skipped: ACI-BENCH encounter pairs not found (expected a folder at {args.data})")
        return 0
    pairs = load_pairs(args.data)
    if not pairs:
        print(f"error: no *_asr.csv / reference csv pairs in {args.data}", file=sys.stderr)
        return 2
    all_events: list[tuple[str, str, TriggerEvent]] = []
    by_source: dict[str, dict[str, int]] = {}
    errs = {}
    t0 = time.perf_counter()
    for source, eid, ref, hyp in pairs:
        events = detect_in_pair(align(ref, hyp))
        for e in events:
            if ref[e.ref_start : e.ref_end] != e.ref_span or hyp[e.hyp_start : e.hyp_end] != e.hyp_span:
                raise SystemExit(f"{source}/{eid}: event quote does not match its offsets: {e}")
        all_events += [(source, eid, e) for e in events]
        counts = by_source.setdefault(source, dict.fromkeys(TRIGGER_TYPES, 0))
        for k, v in trigger_counts(events).items():
            counts[k] += v
        errs[(source, eid)] = asr_errors(ref, hyp)
    print(f"{len(pairs)} encounter pairs, {time.perf_counter() - t0:.1f} s\n")
    short = "  ".join(f"{t[:12]:>12}" for t in TRIGGER_TYPES)
    print(f"{'source':<24}{'n':>4}{'WER%':>7}  {short}")
    for source, counts in by_source.items():
        keys = [k for k in errs if k[0] == source]
        cells = "  ".join(f"{counts[t]:>12}" for t in TRIGGER_TYPES)
        print(f"{source:<24}{len(keys):>4}{wer_percent([errs[k] for k in keys]):>7.2f}  {cells}")
    rng = random.Random(args.seed)
    for t in TRIGGER_TYPES:
        of_type = [x for x in all_events if x[2].type == t]
        sample = rng.sample(of_type, min(args.per_type, len(of_type)))
        print(f"\n=== {t}: {len(of_type)} events, {len(sample)} sampled ===")
        for n, (source, eid, e) in enumerate(sample, 1):
            print(f"[{n}] {source}/{eid}  concept={e.concept} weight={e.weight}")
            print(f"    ref: {e.ref_span!r}\n    hyp: {e.hyp_span!r}\n    why: {e.explanation}")
    if args.json is not None:
        with args.json.open("w", encoding="utf-8") as fh:
            for source, eid, e in all_events:
                fh.write(json.dumps({"source": source, "encounter_id": eid, **e.model_dump()}) + "\n")
        print(f"\nwrote {len(all_events)} events to {args.json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument(
        "--pairs",
        type=Path,
        nargs="+",
        default=None,
        help="labelled pair sets (JSON lines), each scored by split (default: the ACI-BENCH set; "
        "data/trigger_devset_osce/pairs.jsonl is the OSCE TTS -> tiny.en set, "
        "data/trigger_devset_primock/pairs.jsonl the PriMock57 one)",
    )
    ap.add_argument("--split", choices=("dev", "test", "all"), default="all", help="which split(s) to score")
    ap.add_argument(
        "--resample", choices=("pairs", "encounters"), default="pairs", help="bootstrap unit (default pairs)"
    )
    ap.add_argument("--reference", type=Path, default=None, help="a reference detector's scores (--dump-scores)")
    ap.add_argument("--dump-scores", type=Path, default=None, help="write each pair's trigger risk here (JSON)")
    ap.add_argument("--resamples", type=int, default=2000, help="bootstrap replicates")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap / sampling seed")
    ap.add_argument("--misses", action="store_true", help="print dev-split misses and false positives")
    ap.add_argument("--encounters", action="store_true", help="whole ACI-BENCH encounters from ../shared instead")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="ACI-BENCH src_experiment_data folder")
    ap.add_argument("--per-type", type=int, default=5, help="events sampled per type for reading")
    ap.add_argument("--json", type=Path, default=None, help="write every event as JSON lines here")
    args = ap.parse_args(argv)
    return run_encounters(args) if args.encounters else run_devset(args)


if __name__ == "__main__":
    raise SystemExit(main())
