"""``stresstest gold draft | check | audit``: the gold-reference workflow (docs/spec.md §5).

1. ``gold draft CONFIG --out DIR``: decompose each encounter's clean *human*
   transcript into atomic facts with the configured structurer (``rules`` offline,
   or the served LLM) and write one editable YAML per encounter, ``audited: false``.
   An audited file is never overwritten.
2. A clinician edits the YAML (claims, triage, flags, evidence quotes).
3. ``gold check CONFIG [--gold DIR]``: schema, evidence quotes present in the
   transcript, duplicate claims; non-zero exit when an error remains.
4. ``gold audit FILE --by NAME``: marks the file audited (name + date).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stresstest.errors import GoldError


def add_gold_arguments(g: argparse.ArgumentParser) -> None:
    """Sub-commands of ``stresstest gold``."""
    sub = g.add_subparsers(dest="gold_cmd", required=True)
    d = sub.add_parser("draft", help="draft gold YAML files from the human transcripts")
    d.add_argument("config", help="run config (its corpus and structure sections are used)")
    d.add_argument("--out", required=True, help="folder for the drafted YAML files")
    d.add_argument(
        "--backend",
        choices=["config", "rules"],
        default="config",
        help="'config' = the config's structure backend; 'rules' = the offline extractor",
    )
    c = sub.add_parser("check", help="check gold files against their transcripts")
    c.add_argument("config", help="run config (its corpus section locates the transcripts)")
    c.add_argument("--gold", help="gold folder (default: the config's gold.path or the shipped set)")
    a = sub.add_parser("audit", help="mark a reviewed gold file as clinician-audited")
    a.add_argument("file")
    a.add_argument("--by", required=True, help="auditor's name")


def gold_command(a: argparse.Namespace) -> int:
    """Run one ``gold`` sub-command; returns the exit status."""
    if a.gold_cmd == "audit":
        from stresstest.gold.workflow import mark_audited

        rec = mark_audited(a.file, a.by)
        link = Path(a.file)
        via = f" (a symlink: written through it to {link.resolve()})" if link.is_symlink() else ""
        print(f"{a.file}: audited by {rec.provenance.audited_by} on {rec.provenance.date}{via}")
        return 0

    from stresstest.config import load_config
    from stresstest.corpus import load_corpus

    cfg = load_config(a.config)
    encs = load_corpus(cfg.corpus.kind, cfg.corpus.path, ids=cfg.corpus.ids, limit=cfg.corpus.limit)

    if a.gold_cmd == "check":
        from stresstest.gold.model import default_gold_dir, load_gold
        from stresstest.gold.workflow import check_gold, gold_transcript_text

        root = Path(a.gold or cfg.gold.path or default_gold_dir())
        gold = load_gold(root)
        n_err = 0
        by_id = {e.encounter_id: e for e in encs}
        for eid, rec in sorted(gold.items()):
            if eid not in by_id:
                continue
            issues = check_gold(rec, gold_transcript_text(by_id[eid], rec))
            for issue in issues:
                print(f"{eid}: {issue}")
            n_err += sum(1 for i in issues if i.severity == "error")
        checked = sum(1 for e in gold if e in by_id)
        if checked == 0:  # "0 errors" would read as a pass
            raise GoldError(
                f"{root}: none of its {len(gold)} gold file(s) matches an encounter of the corpus "
                f"({len(encs)} encounter(s) in {cfg.corpus.path}); expected files named "
                "<encounter_id>.yaml"
            )
        print(f"checked {checked} gold file(s) in {root}: {n_err} error(s)")
        return 1 if n_err else 0

    from stresstest.gold.model import save_gold
    from stresstest.gold.workflow import draft_from_record

    out = Path(a.out)
    backend = "rules" if a.backend == "rules" else cfg.structure.backend
    written = skipped = 0
    for enc in encs:
        scoped = enc.truncated(cfg.corpus.max_turns)
        text = scoped.reference_text()
        if backend == "rules":
            from stresstest.structure.rules import RULES_VERSION, extract_record

            record, by = extract_record(text), f"rules-{RULES_VERSION} on the human transcript (draft)"
        else:
            from stresstest.structure.gold_draft import draft_gold_with_llm

            record = draft_gold_with_llm(text, cfg.structure, log_dir=out / "logs")
            by = f"LLM draft ({cfg.structure.server.model or 'bundled model'}) on the human transcript"
        draft = draft_from_record(scoped, record, by, scope_turns=cfg.corpus.max_turns if scoped is not enc else None)
        try:
            save_gold(draft, out / f"{enc.encounter_id}.yaml")
            written += 1
        except GoldError as exc:
            print(f"skipped: {exc}")
            skipped += 1
    print(f"drafted {written} gold file(s) in {out} ({skipped} audited file(s) left untouched)")
    return 0
