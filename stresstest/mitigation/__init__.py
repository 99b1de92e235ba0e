"""Mitigation: the evidence-grounded guard agent (docs/spec.md §7).

Public surface: :func:`mitigate_many` (the runner's entry point),
:func:`evidence_filter` (the pure deterministic filter), :func:`enforce_guard`
(the Guard's delete-only contract) and :func:`dual_view` (raw + cleaned text).
"""

from stresstest.mitigation.agent import mitigate_many, mitigation_fingerprint
from stresstest.mitigation.evidence import DEFAULT_HIGH_STAKES, FilterReport, HighStakes, evidence_filter
from stresstest.mitigation.guard import GuardReport, enforce_guard
from stresstest.mitigation.views import DualView, clean_text, dual_view

__all__ = [
    "DEFAULT_HIGH_STAKES",
    "DualView",
    "FilterReport",
    "GuardReport",
    "HighStakes",
    "clean_text",
    "dual_view",
    "enforce_guard",
    "evidence_filter",
    "mitigate_many",
    "mitigation_fingerprint",
]
