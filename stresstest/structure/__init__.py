"""Frozen clinical structuring y = LLM(I, S, x; φ) (docs/spec.md §4).

Modules (import what you need; this package imports nothing eagerly). Schema S
and the record envelope live in :mod:`stresstest.schema`, outside this package,
so that gold, metrics, mitigation and report never import the structuring stage;
the LLM runtime (engine, client, servers, sessions, config) is :mod:`stresstest.llm`.

* :mod:`~stresstest.structure.stage` — ``structure_many`` / ``structure_fingerprint`` (runner entry points);
* ``prompts/`` — the versioned structuring and gold-drafting instructions I;
* :mod:`~stresstest.structure.rules` — the deterministic extractor (backend ``rules``);
* :mod:`~stresstest.structure.gold_draft` — LLM drafting of gold records.
"""
