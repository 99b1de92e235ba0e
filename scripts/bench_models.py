"""Per-model capability of the served structurer on clean transcripts, against the adjudicated test reference.

Model capability, not noise effects: every record is written from the human reference transcript of a
test-split encounter (``data/gold_adjudicated_test``, the ten encounters written twice and reconciled), cut at
the gold's ``scope_turns`` exactly as ``bench_rules.py`` does, with the project's structuring request (the
config's prompt version, output contract and φ) on the managed llama.cpp server. For each model:

- valid / truncated: share of requests that gave a schema-valid record / stopped at ``max_tokens``;
- evidence coverage: share of the high-stakes fields of the valid records (safety flags of the high-stakes
  kinds, medication / allergy claims; :data:`~stresstest.mitigation.evidence.DEFAULT_HIGH_STAKES`) that keep at
  least one verbatim quote after the deterministic evidence filter (the guard's filter);
- claim F1, triage accuracy, critical-flag precision: ``bench_rules.score_against_gold`` against the adjudicated
  reference, on the valid records (so read them with the valid rate);
- s/record: mean wall time of a request (one at a time, on the threads the config gives).

``rules`` and writer A (the shipped gold) are scored the same way on the same encounters. Records are cached in
the stage cache (``--cache``), so a second run recomputes nothing.

Usage::

    python scripts/bench_models.py --models smollm2-135m qwen2.5-coder-0.5b --n 10
    python scripts/bench_models.py --models qwen2.5-coder-1.5b --n 3 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from bench_rules import SplitScore, score_against_gold

from stresstest.cache import active_cache_dir
from stresstest.config import load_config
from stresstest.corpus import load_corpus
from stresstest.gold.model import default_gold_dir, load_gold
from stresstest.mitigation.evidence import evidence_filter
from stresstest.schema import ClinicalRecord
from stresstest.structure.rules import extract_record
from stresstest.structure.stage import StructureItem, structure_many

ROOT = Path(__file__).resolve().parents[1]
#: model label -> ``structure.server.model`` (None = the bundled SmolLM2-135M-Instruct Q4_1)
MODELS = {"smollm2-135m": None, "qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b": "qwen2.5-coder-1.5b"}


def coverage(recs: list[tuple[ClinicalRecord, str]]) -> tuple[int, int]:
    """(high-stakes fields keeping a verbatim quote after the evidence filter, high-stakes fields)."""
    kept = total = 0
    for rec, text in recs:
        _, report = evidence_filter(rec, text)
        total += report.high_stakes_total
        kept += report.high_stakes_total - len(report.removed_claims) - len(report.removed_flags)
    return kept, total


def row(
    name: str, n: int, valid: int, truncated: int, score: SplitScore, cov: tuple[int, int] | None, s_per: float | None
) -> str:
    p = score.tp / max(score.n_pred, 1)
    r = score.tp / max(score.n_gold, 1)
    f1 = 2 * p * r / max(p + r, 1e-9)
    fp = (
        f"{score.flag_tp / score.flag_pred:.2f} ({score.flag_tp}/{score.flag_pred})"
        if score.flag_pred
        else "n/a (0 flagged)"
    )
    cov_s = "–" if cov is None else (f"{cov[0] / cov[1]:.2f} ({cov[0]}/{cov[1]})" if cov[1] else "n/a (0 fields)")
    return (
        f"| {name} | {n} | {valid}/{n} | {truncated}/{n} | {cov_s} | {f1:.2f} (P {p:.2f} R {r:.2f}) | "
        f"{score.triage_same}/{score.n} (under {score.under_triage}) | {fp} | "
        f"{'–' if s_per is None else f'{s_per:.0f}'} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--config",
        type=Path,
        default=ROOT / "configs" / "demo-llm.yaml",
        help="run config whose `structure` section (prompt, φ, server) is used",
    )
    ap.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["smollm2-135m"])
    ap.add_argument("--n", type=int, default=10, help="test encounters (in id order)")
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (default: the config's)")
    ap.add_argument("--adjudicated", type=Path, default=ROOT / "data" / "gold_adjudicated_test")
    ap.add_argument("--corpus", type=Path, default=ROOT / "data" / "osce")
    ap.add_argument("--cache", type=Path, default=None, help="stage cache (default: the stresstest cache)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-models", help="server logs go here")
    args = ap.parse_args(argv)

    adj = load_gold(args.adjudicated)
    if not adj:
        print(f"bench_models: no reference in {args.adjudicated}", file=sys.stderr)
        return 2
    shipped = load_gold(default_gold_dir())
    ids = sorted(adj)[: args.n]
    encs = {e.encounter_id: e for e in load_corpus("osce", args.corpus, ids=ids)}
    texts = {eid: encs[eid].truncated(adj[eid].scope_turns).reference_text() for eid in ids}
    cache = args.cache or active_cache_dir()
    base = load_config(args.config).structure

    print(
        f"{len(ids)} test encounters: {' '.join(ids)}; reference: {args.adjudicated.name}; "
        f"prompt {base.prompt_version}; φ {base.decoding.model_dump()}"
    )
    header = (
        "| model | n | valid | truncated | evidence coverage | claim F1 | triage | critical-flag precision | s/record |"
    )
    lines = [header, "|" + "---|" * 9]
    for label in args.models:
        srv = {"model": MODELS[label]}
        if args.threads:
            srv["n_threads"] = args.threads
        cfg = base.model_copy(update={"server": base.server.model_copy(update=srv), "max_retries": 0})
        items = [StructureItem(encounter_id=eid, condition="clean", transcript_text=texts[eid]) for eid in ids]
        t0 = time.monotonic()
        envs = structure_many(items, cfg, cache_dir=cache, log_dir=args.out / label)
        wall = time.monotonic() - t0
        score = SplitScore()
        good = [(e.record, texts[e.encounter_id]) for e in envs if e.record is not None]
        for e in envs:
            if e.record is not None:
                score_against_gold(e.record, adj[e.encounter_id], score, e.encounter_id)
        for e in envs:
            if e.failed:
                print(f"{label} {e.encounter_id}: failed: {(e.error or '')[:240]}", file=sys.stderr)
        truncated = sum(1 for e in envs if (e.error or "").startswith("truncated output"))
        times = [e.elapsed_s for e in envs if e.elapsed_s]
        cached = sum(1 for e in envs if e.extra.get("cached"))
        print(f"{label}: {len(envs)} records in {wall:.0f} s ({cached} from the cache)", file=sys.stderr)
        lines.append(
            row(
                f"{label} ({envs[0].model})",
                len(envs),
                len(good),
                truncated,
                score,
                coverage(good),
                statistics.mean(times) if times else None,
            )
        )
    rules, writer_a = SplitScore(), SplitScore()
    rules_recs = []
    for eid in ids:
        rec = extract_record(texts[eid])
        rules_recs.append((rec, texts[eid]))
        score_against_gold(rec, adj[eid], rules, eid)
        score_against_gold(shipped[eid], adj[eid], writer_a, eid)  # type: ignore[arg-type]
    lines.append(row("rules (deterministic)", len(ids), len(ids), 0, rules, coverage(rules_recs), None))
    lines.append(row("writer A (shipped gold)", len(ids), len(ids), 0, writer_a, None, None))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
