"""Orchestration: the runner that calls each stage in turn, and the score stage.

* :mod:`~stresstest.pipeline.runner` — ``run`` (the ``stresstest run`` job); only the CLI imports it;
* :mod:`~stresstest.pipeline.score` — item rows of ``items.jsonl`` from explicit stage outputs.
"""
