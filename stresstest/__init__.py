"""stresstest: a paired acoustic stress test for ASR→LLM clinical scribes."""

from stresstest.errors import StressTestError

__version__ = "0.1.0"
__all__ = ["StressTestError", "__version__"]
