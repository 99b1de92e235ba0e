"""Error rates a clinician reads: clinical-term WER and WER split by speaker (docs/spec.md §13).

Both are read off the ONE alignment WER already uses (:func:`stresstest.metrics.align.align`
of the normalised reference and hypothesis), so their counts add up to WER's.

**Speaker of a reference word.** The reference r_i is the turns' texts joined by one space
(:meth:`stresstest.records.Encounter.reference_text`), so every turn owns a character span of r_i; a
normalised reference token belongs to the turn in which its first character lies. Turns of speaker
``doctor`` are the *clinician*'s, turns of ``patient`` the patient's; ``other`` (a relative, an
interpreter) enters neither split (only the overall WER).

**Attribution of an alignment op** (documented rule, no timing needed):

* a hit, substitution or deletion belongs to the speaker of its reference token;
* an insertion (hypothesis words with no reference counterpart) belongs to the speaker of the
  reference word it follows (the last reference word before the insertion point), or — for words
  inserted before the first reference word — to the speaker of the first reference word.
  So words the ASR writes in the pause after a turn count against that turn's speaker.

``wer_<speaker> = 100 · Σ_i (S+D+I attributed to the speaker) / Σ_i N_i(speaker)``, micro-averaged as
WER is. Summed over clinician, patient and other, the errors and reference words equal WER's.

**Clinical terms of the reference** are the mentions of the project's lexicon, drug names and term vocabulary
(the ``medwer`` list behind the project's overlay) in r_i (:func:`stresstest.metrics.triggers.clinical_mentions`:
the terms the trigger detector's ``clinical_omission`` watches); a reference token is clinical when it overlaps
one.
``clinical_wer = 100 · Σ_i (S+D on clinical tokens) / Σ_i N_i(clinical)``: the share of the reference's
clinical words that did not come through. Insertions are not counted: no reference term owns them
(inserted content is what InsRate and the ``nonspeech_pollution`` trigger measure). The same with the
speaker split gives ``clinical_wer_clinician`` / ``clinical_wer_patient``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from stresstest.metrics.align import AlignedPair, TokenizedText
from stresstest.metrics.summary import ERROR_RATE_FIELDS
from stresstest.metrics.wer import AsrErrors
from stresstest.records import Turn
from stresstest.results import AsrScores

__all__ = [
    "ITEM_FIELDS",
    "SPEAKER_GROUPS",
    "SplitErrors",
    "clinical_token_mask",
    "split_errors",
    "turn_spans",
]

#: Speaker label of a turn -> the group its words are counted in (``other`` is in neither).
SPEAKER_GROUPS: dict[str, str] = {"doctor": "clinician", "patient": "patient"}
_GROUPS = ("clinician", "patient")
_WS = re.compile(r"\s+")

#: The ``items.jsonl`` count fields written per item (summed by ``summary.aggregate_error_rates``).
ITEM_FIELDS: tuple[str, ...] = tuple(f for pair in ERROR_RATE_FIELDS.values() for f in pair)


def turn_spans(turns: Sequence[Turn], reference: str) -> list[tuple[int, int, str]] | None:
    """Character span ``(start, end, speaker)`` of every non-empty turn in ``reference``.

    Built by the rule of :meth:`~stresstest.records.Encounter.reference_text` (each turn's text with
    whitespace runs collapsed, turns joined by one space). Returns None when the spans do not rebuild
    ``reference`` exactly (a reference that was not made from these turns): then no speaker split.
    """
    spans: list[tuple[int, int, str]] = []
    parts: list[str] = []
    pos = 0
    for t in turns:
        s = _WS.sub(" ", t.text).strip()
        if not s:
            continue
        if parts:
            pos += 1
        spans.append((pos, pos + len(s), t.speaker))
        parts.append(s)
        pos += len(s)
    return spans if " ".join(parts) == reference else None


def _token_speakers(ref: TokenizedText, spans: Sequence[tuple[int, int, str]]) -> list[str]:
    """Speaker of each reference token: the turn holding its first character (linear merge)."""
    out: list[str] = []
    k = 0
    for tok in ref.tokens:
        while k + 1 < len(spans) and tok.start >= spans[k + 1][0]:
            k += 1
        out.append(spans[k][2] if spans else "other")
    return out


@lru_cache(maxsize=32)
def _clinical_spans(text: str) -> tuple[tuple[int, int], ...]:
    # Cached by text: a reference is paired with the transcript of every condition in turn.
    from stresstest.metrics.triggers import clinical_mentions

    return tuple((m.start, m.end) for m in clinical_mentions(text))


def clinical_token_mask(ref: TokenizedText) -> list[bool]:
    """True for each reference token that overlaps a clinical term (lexicon or drug name) of the text."""
    mask = [False] * len(ref)
    for start, end in _clinical_spans(ref.original):
        i, j = ref.tokens_in(start, end)
        for k in range(i, j):
            mask[k] = True
    return mask


@dataclass(frozen=True)
class SplitErrors:
    """Counts of one aligned pair, split by clinical terms and by speaker.

    Attributes:
        clin_words: clinical tokens of the reference (all speakers).
        clin_errors: of those, substituted or deleted.
        by_speaker: ``{group: (ref_words, errors, clin_words, clin_errors)}`` for ``clinician`` and
            ``patient``; empty when the reference has no speaker turns to split by.
    """

    clin_words: int
    clin_errors: int
    by_speaker: Mapping[str, tuple[int, int, int, int]]

    def item_fields(self) -> dict[str, int]:
        """The ``items.jsonl`` count fields the summary reads (the speaker ones only when split)."""
        out = {"clin_words": self.clin_words, "clin_errors": self.clin_errors}
        for g, (n, e, cn, ce) in self.by_speaker.items():
            out.update({f"ref_words_{g}": n, f"errors_{g}": e, f"clin_words_{g}": cn, f"clin_errors_{g}": ce})
        return out


def asr_scores(errors: AsrErrors, split: SplitErrors | None, clean: AsrErrors | None) -> AsrScores:
    """An item's ASR part: S, D, I, N_i and its WER (None when the reference has no word), the clinical and
    per-speaker counts when ``split`` is given, and ΔE_i against the clean-ASR ``clean`` errors when given."""
    e = errors
    fields: dict[str, object] = {
        "asr_sub": e.sub,
        "asr_del": e.dele,
        "asr_ins": e.ins,
        "ref_words": e.ref_words,
        "item_wer": round(100.0 * (e.sub + e.dele + e.ins) / e.ref_words, 4) if e.ref_words else None,
    }
    if split is not None:
        fields.update(split.item_fields())
    if clean is not None:
        fields["asr_delta_e"] = max(0, e.errors - clean.errors)
    return AsrScores.model_validate(fields)


def split_errors(pair: AlignedPair, turns: Sequence[Turn] | None = None) -> SplitErrors:
    """Clinical-term and per-speaker error counts of one aligned (reference, hypothesis) pair.

    Args:
        pair: the alignment WER is counted on (reference first).
        turns: the encounter's turns (the reference must be :meth:`Encounter.reference_text` of them);
            None or a mismatch gives no speaker split.

    Returns:
        The counts (see the module docstring for every rule).
    """
    ref = pair.ref
    clin = clinical_token_mask(ref)
    spans = turn_spans(turns, ref.original) if turns is not None else None
    speakers = _token_speakers(ref, spans) if spans else None
    # per token: 1 when substituted or deleted; per reference position: insertions that follow it
    wrong = [0] * len(ref)
    ins_after = [0] * len(ref)
    for o in pair.ops:
        if o.op in ("sub", "del"):
            for k in range(o.ref_start, o.ref_end):
                wrong[k] = 1
        elif o.op == "ins" and len(ref):
            ins_after[max(0, o.ref_start - 1)] += o.hyp_end - o.hyp_start
    clin_words = sum(clin)
    clin_errors = sum(w for w, c in zip(wrong, clin, strict=True) if c)
    by_speaker: dict[str, tuple[int, int, int, int]] = {}
    if speakers is not None:
        acc = {g: [0, 0, 0, 0] for g in _GROUPS}
        for k, spk in enumerate(speakers):
            g = SPEAKER_GROUPS.get(spk)
            if g is None:
                continue
            a = acc[g]
            a[0] += 1
            a[1] += wrong[k] + ins_after[k]
            if clin[k]:
                a[2] += 1
                a[3] += wrong[k]
        by_speaker = {g: (a[0], a[1], a[2], a[3]) for g, a in acc.items()}
    return SplitErrors(clin_words=clin_words, clin_errors=clin_errors, by_speaker=by_speaker)
