"""Gold references (docs/spec.md §5): format, loader, and the draft → check → audit workflow.

See docs/gold.md. The shipped, hand-written (not clinician-audited) set lives in
``stresstest/gold/data``; :func:`default_gold_dir` points at it.
"""

from stresstest.gold.model import GoldRecord, Provenance, default_gold_dir, load_gold, save_gold
from stresstest.gold.workflow import GoldIssue, check_gold, draft_from_record, mark_audited

__all__ = [
    "GoldIssue",
    "GoldRecord",
    "Provenance",
    "check_gold",
    "default_gold_dir",
    "draft_from_record",
    "load_gold",
    "mark_audited",
    "save_gold",
]
