"""Versioned instruction files, shipped as package data; loaded by stresstest.llm.prompts."""
