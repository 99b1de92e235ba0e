"""One structuring outcome from a real LLM server (the llama.cpp and vLLM integration tests).

Imported by name (``from outcome_checks import check_outcome``): pytest puts this folder on ``sys.path`` when it
loads ``tests/conftest.py``, as it puts each test's own folder there for its helpers.
"""

from __future__ import annotations

from stresstest.schema import ClinicalRecord, RecordEnvelope


def check_outcome(env: RecordEnvelope) -> None:
    """A served outcome is a record valid against the schema, or a recorded failure with the raw text and a
    reason (never a record and a failure at once)."""
    if env.failed:
        assert env.record is None and env.error and env.raw_text is not None, env
    else:
        assert env.record is not None
        ClinicalRecord.model_validate_json(env.record.model_dump_json())
