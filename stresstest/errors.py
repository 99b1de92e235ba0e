"""Exception types, one per stage.

Every user-facing failure raises a subclass of :class:`StressTestError`. The CLI
turns any of them into a one-line message on stderr and a non-zero exit status;
messages say what was expected, what came, and where (file, line, key path, id).
"""

from __future__ import annotations


class StressTestError(Exception):
    """Base class for every error the CLI reports as a one-line message."""


class ConfigError(StressTestError):
    """The run configuration is invalid (unknown key, wrong type, bad value)."""


class CorpusError(StressTestError):
    """A corpus file is missing or malformed (message names file and line)."""


class AudioError(StressTestError):
    """An audio file cannot be read, or audio has an unusable shape."""


class SpeechError(StressTestError):
    """Speech rendering (TTS) failed."""


class NoiseError(StressTestError):
    """A noise corpus is missing or a noise generator was misconfigured."""


class MixError(StressTestError):
    """A mixture cannot be built as requested (e.g. silent speech)."""


class ASRError(StressTestError):
    """The ASR backend failed or is not installed."""


class StructureError(StressTestError):
    """Clinical structuring failed (server, client, schema validation)."""


class LLMError(StructureError):
    """The LLM runtime failed (engine start, server, client, offline engine). A subclass of
    :class:`StructureError` because every role that asks the model (structuring, guard, judges) handles both."""


class GoldError(StressTestError):
    """A gold reference file is missing or invalid."""


class MetricError(StressTestError):
    """A metric cannot be computed from the given inputs."""


class RunDirError(StressTestError):
    """A run directory cannot be read (a missing or malformed manifest.json, items.jsonl or summary.csv)."""


class ReportError(StressTestError):
    """A report cannot be built from the run directory."""


class RunError(StressTestError):
    """The run as a whole failed (e.g. too many failed items)."""
