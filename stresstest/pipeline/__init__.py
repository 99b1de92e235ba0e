"""Orchestration: the runner, the score stage, and where stage tasks run.

* :mod:`~stresstest.pipeline.runner` — ``run`` (the ``stresstest run`` job); only the CLI imports it;
* :mod:`~stresstest.pipeline.score` — item rows of ``items.jsonl`` from explicit stage outputs;
* :mod:`~stresstest.pipeline.failures` — the failure ledger and the ``run.max_failures`` policy;
* :mod:`~stresstest.pipeline.pairing` — the docs/spec.md §11 pairing rule over item rows;
* :mod:`~stresstest.pipeline.executor` — in-process and Ray executors for (stage, item) tasks;
* :mod:`~stresstest.pipeline.tasks` — each stage as picklable tasks / model-holding workers;
* :mod:`~stresstest.pipeline.housekeeping` — run-directory rules (``--out``, stale files, wall time).
"""
