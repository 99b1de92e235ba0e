"""Versioned prompts of the note-quality judges (entailment, hallucination, pairwise) and their ontology file.

Loaded with :func:`stresstest.llm.prompts.load_prompt` (``package=`` this package); each file's
sha256 is recorded in the run manifest and in every cache key, like the structuring prompts.
"""
