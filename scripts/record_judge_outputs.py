"""Record raw note-quality judge outputs from the real llama.cpp server (bundled SmolLM2-135M).

Writes ``tests/metrics/data/note_judge_outputs.json``: the exact texts the server returned for one
entailment call and one pairwise pair (both orders), with the labels / outcomes parsed from them.
``tests/metrics/test_note_judges.py`` replays these texts through the client and checks the scoring rules
on them. Run from the repository root (``PYTHONPATH=$PWD python scripts/record_judge_outputs.py``); the
values written were checked by hand against the raw texts when the file was recorded.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from stresstest.cache import read_verified_json
from stresstest.llm.config import LLMConfig
from stresstest.llm.session import open_session
from stresstest.metrics.note_judges import EntailmentTask, PairTask, judge_entailment, judge_pairs
from stresstest.metrics.statements import Statement

SOURCE = ["I've had a cough for two days.", "No fever.", "I take Coumadin every night."]
STATEMENTS = ["Symptom: cough (2 days).", "Symptom: fever.", "Medication: warfarin.", "Triage: routine."]
NOTE_X = "- Symptom: cough (2 days).\n- Symptom: no fever.\n- Medication: warfarin."
NOTE_Y = "- Symptom: fever.\n- Allergy: penicillin."
OUT = Path(__file__).resolve().parents[1] / "tests" / "metrics" / "data" / "note_judge_outputs.json"


def main() -> int:
    cfg = LLMConfig.model_validate(
        {
            "backend": "openai",
            "concurrency": 1,
            "max_retries": 0,
            "timeout_s": 300,
            "decoding": {"max_tokens": 256},
            "server": {"startup_timeout_s": 180, "n_ctx": 2048},
        }
    )
    with tempfile.TemporaryDirectory() as tmp, open_session(cfg, cache_dir=tmp, log_dir=tmp) as s:
        stmts = tuple(Statement(f"h{i}", t, f"c{i}") for i, t in enumerate(STATEMENTS, start=1))
        (ent,) = judge_entailment(
            [EntailmentTask("rec", "groundedness", "transcript of the consultation", tuple(SOURCE), stmts)],
            s,
            batch=len(stmts),
        )
        (pair,) = judge_pairs([PairTask("rec", "rec", tuple(SOURCE), NOTE_X, NOTE_Y)], s)
        raw = [
            read_verified_json(p)["raw_text"]
            for p in sorted(Path(tmp).rglob("*.c2.json"))
            if "llm-quality-entailment" in str(p)
        ]
        texts = [
            read_verified_json(p)["raw_text"]
            for p in sorted(Path(tmp).rglob("*.c2.json"))
            if "llm-quality-pairwise" in str(p)
        ]
        # the server's own texts, in call order (X as Note A first, then swapped)
        pair_raw = [t for want in (pair.first, pair.second) for t in texts if json.loads(t) == want][:2]
        model = s.model_id
    if ent.verdicts is None or pair.outcomes is None or len(raw) != 1:
        print(f"a call failed (entailment: {ent.error}; pairwise: {pair.error}); nothing written", file=sys.stderr)
        return 1
    rec = {
        "model": model,
        "entailment": {
            "batch": len(stmts),
            "source": SOURCE,
            "statements": STATEMENTS,
            "raw": raw,
            "labels": [v["label"] for v in ent.verdicts],
            "score": ent.score,
        },
        "pairwise": {"raw": pair_raw, "outcomes": pair.outcomes, "consistent": pair.consistent},
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(rec, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(rec, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
