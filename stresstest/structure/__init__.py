"""Frozen clinical structuring y = LLM(I, S, x; φ) (SPEC §4).

Modules (import what you need; this package imports nothing eagerly). Schema S
and the record envelope live in :mod:`stresstest.schema`, outside this package,
so that gold, metrics, mitigation and report never import the structuring stage.

* :mod:`~stresstest.structure.config` — ``StructureConfig`` (backend, server, φ);
* :mod:`~stresstest.structure.stage` — ``structure_many`` / ``structure_fingerprint`` (runner entry points);
* :mod:`~stresstest.structure.instructions` + ``prompts/`` — versioned instruction files I and their hashes;
* :mod:`~stresstest.structure.client` — OpenAI-compatible client (retries, validation);
* :mod:`~stresstest.structure.server` — managed llama.cpp / vLLM servers, ``serve`` (llm serve);
* :mod:`~stresstest.structure.roles` — cache-first LLM session shared by every role;
* :mod:`~stresstest.structure.vllm_offline` — batch backend on ``vllm.LLM.generate``;
* :mod:`~stresstest.structure.rules` — the deterministic extractor (backend ``rules``);
* :mod:`~stresstest.structure.gold_draft` — LLM drafting of gold records;
* :mod:`~stresstest.structure.testing` — a scripted OpenAI-compatible stub server for tests.
"""
