"""Word error counts against the reference transcript (docs/spec.md §6: WER, InsRate).

The project has exactly ONE text normalisation for word-level comparison,
:func:`normalise` (defined in :mod:`stresstest.textnorm`, below the clinical
vocabulary that also reads it, and re-exported here). It is Whisper's ``EnglishTextNormalizer`` (package
``whisper-normalizer``), the normaliser the Whisper authors use to score
English ASR, so our WER is comparable with published Whisper numbers. It:

* lower-cases the text;
* drops text inside ``[...]``, ``<...>`` and ``(...)`` (speaker tags such as
  ``[doctor]``, transcriber tags);
* drops hesitation fillers (``um``, ``uh``, ``hmm``, ``mm``, ``mhm``);
* expands contractions and clitics (``don't`` -> ``do not``,
  ``he's`` -> ``he has``/``he is``, ``won't`` -> ``will not``) and common
  titles (``mr`` -> ``mister``, ``dr`` -> ``doctor``);
* turns spelled-out numbers into digits (``twenty five`` -> ``25``,
  ``three`` -> ``3``, ``first`` -> ``1st``) and separates numbers from units
  (``25mg`` -> ``25 mg``);
* maps British spellings to American ones (``colour`` -> ``color``,
  ``haemoglobin`` -> ``hemoglobin``);
* removes punctuation and symbols, keeps decimal points inside numbers, and
  collapses whitespace.

Everything word-level in the project (WER, InsRate, the aligned diff in
:mod:`stresstest.metrics.align`, the trigger detector) tokenises
``normalise(text).split()``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jiwer

from stresstest.errors import MetricError
from stresstest.textnorm import normalise

if TYPE_CHECKING:
    from stresstest.metrics.align import AlignedPair

__all__ = ["AsrErrors", "asr_errors", "ins_rate_percent", "normalise", "wer_percent"]


@dataclass(frozen=True)
class AsrErrors:
    """Levenshtein edit counts of one hypothesis against its reference.

    Attributes:
        sub: substituted reference words (S).
        dele: deleted reference words (D).
        ins: inserted hypothesis words (I).
        hits: reference words matched exactly.
        ref_words: N, words in the normalised reference (= sub + dele + hits).
    """

    sub: int
    dele: int
    ins: int
    hits: int
    ref_words: int

    @property
    def errors(self) -> int:
        """E = S + D + I, the numerator of WER."""
        return self.sub + self.dele + self.ins

    @classmethod
    def from_pair(cls, pair: AlignedPair) -> AsrErrors:
        """The counts of an existing alignment (``stresstest.metrics.align.align``).

        Equal to :func:`asr_errors` on the same texts: both align the tokens of
        :func:`normalise` with rapidfuzz's Levenshtein opcodes (jiwer's own
        ``process_words`` does exactly that on integer-coded words), so a caller
        that needs the alignment anyway never aligns the pair a second time.
        """
        sub, dele, hits = pair.substitutions, pair.deletions, pair.hits
        return cls(sub=sub, dele=dele, ins=pair.insertions, hits=hits, ref_words=sub + dele + hits)

    def item_fields(self) -> dict[str, int]:
        """The ``items.jsonl`` fields :mod:`stresstest.metrics.summary` reads for WER and InsRate."""
        return {"asr_sub": self.sub, "asr_del": self.dele, "asr_ins": self.ins, "ref_words": self.ref_words}


def asr_errors(reference: str, hypothesis: str) -> AsrErrors:
    """Count S, D, I of ``hypothesis`` against ``reference`` after :func:`normalise`.

    The alignment is jiwer's (``jiwer.process_words``) on the normalised texts.
    An empty (after normalisation) reference has ``ref_words == 0`` and every
    hypothesis word counts as an insertion; jiwer is not called then, because
    its behaviour on empty references has changed between releases.

    Args:
        reference: human reference transcript r_i.
        hypothesis: ASR transcript a_i^(c).

    Returns:
        The edit counts; ``ref_words`` is N_i of docs/spec.md §6.
    """
    ref = normalise(reference)
    hyp = normalise(hypothesis)
    if not ref:
        return AsrErrors(sub=0, dele=0, ins=len(hyp.split()), hits=0, ref_words=0)
    if not hyp:
        n = len(ref.split())
        return AsrErrors(sub=0, dele=n, ins=0, hits=0, ref_words=n)
    out = jiwer.process_words(ref, hyp)
    return AsrErrors(
        sub=out.substitutions,
        dele=out.deletions,
        ins=out.insertions,
        hits=out.hits,
        ref_words=out.substitutions + out.deletions + out.hits,
    )


def _total_ref_words(errors: list[AsrErrors], what: str) -> int:
    n = sum(e.ref_words for e in errors)
    if n <= 0:
        raise MetricError(
            f"{what} needs at least one reference word; got {len(errors)} item(s) "
            "with 0 normalised reference words in total"
        )
    return n


def wer_percent(errors: Iterable[AsrErrors]) -> float:
    """Micro-averaged WER in percent: 100 · Σ(S+D+I) / ΣN (docs/spec.md §6).

    Args:
        errors: per-item counts from :func:`asr_errors`.

    Raises:
        MetricError: when the references hold no words at all.
    """
    errs = list(errors)
    n = _total_ref_words(errs, "WER")
    return 100.0 * sum(e.errors for e in errs) / n


def ins_rate_percent(errors: Iterable[AsrErrors]) -> float:
    """Micro-averaged insertion rate in percent: 100 · ΣI / ΣN (docs/spec.md §6).

    Args:
        errors: per-item counts from :func:`asr_errors`.

    Raises:
        MetricError: when the references hold no words at all.
    """
    errs = list(errors)
    n = _total_ref_words(errs, "InsRate")
    return 100.0 * sum(e.ins for e in errs) / n
