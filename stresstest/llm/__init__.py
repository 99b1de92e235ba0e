"""The LLM runtime: one engine per run, shared by every role that asks a model.

Used by structuring (:mod:`stresstest.structure`), the guard agent (:mod:`stresstest.mitigation`), the LLM judge
and the note-quality judges (:mod:`stresstest.metrics`) and gold drafting; it depends on none of them. Modules
(import what you need; this package imports nothing eagerly), bottom to top:

* :mod:`~stresstest.llm.config` — ``LLMConfig`` (the run config's ``structure`` section: backend, server, φ);
* :mod:`~stresstest.llm.prompts` — versioned instruction files I and their hashes (each role ships its own);
* :mod:`~stresstest.llm.client` — OpenAI-compatible client (retries, validation, φ payload);
* :mod:`~stresstest.llm.gpu` — the GPU memory share a vLLM engine takes;
* :mod:`~stresstest.llm.served` — managed llama.cpp / ``vllm serve`` processes, external servers, ``llm serve``;
* :mod:`~stresstest.llm.offline` — the in-process ``vllm.LLM`` batch engine;
* :mod:`~stresstest.llm.engine` — ``LLMEngine``: the run's one engine (served or offline), started lazily;
* :mod:`~stresstest.llm.session` — ``LLMSession`` / ``open_session``: cache-first calls of one role on an engine.
"""
