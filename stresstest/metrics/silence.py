"""Silence probes: what the ASR writes in inserted non-speech, and the record fields that rest on it (issue 28).

A chain condition whose first step is ``silence`` (:mod:`stresstest.noise.chain`) inserts stretches of
non-speech into pauses between turns and records each one (``mix.chain[0].stretches``: the turn it follows,
its start and end in the output timeline). The ASR backends give text per 30-s decoding window only (the
transcript's ``segments``), not per word, so a word cannot be placed in time by its own timestamp. The
attribution therefore uses the ONE alignment WER is counted on (:func:`stresstest.metrics.align.align` of the
reference r_i and the hypothesis):

**Words written inside a stretch.** A stretch inserted after turn *i* lies in the pause between turn *i* and
the next turn with text, *j*. Its reference boundary is the position *p* of the first reference token of turn
*j* (the reference is the turns joined by spaces, :func:`stresstest.metrics.split_wer.turn_spans`). The
hypothesis words of the alignment's insertions at *p* (``ins`` ops with ``ref_start == p``: words with no
reference counterpart between the last word of turn *i* and the first word of turn *j*) are the words the ASR
wrote in that pause, and they are counted as written inside the stretch. A substitution or a deletion at the
boundary is not counted (its hypothesis words replaced speech), so the count is a lower bound for text that
replaced turn-edge words, and it includes what the ASR would have written in the pause's original gap (a
fraction of a second to a few seconds, compared with ``pause_s``; compare with the same chain without the
probe's ``ins_rate`` to see that baseline).

**halluc_per_min** of a condition = 60 · Σ_i (words written inside item i's stretches) / Σ_i (seconds of
stretches inserted into item i), micro-averaged over the condition's paired items like WER; empty where the
condition has no silence step.

**Traced record fields.** A field of the structured record (a claim, a safety flag or the triage) is traced to
a stretch when one of its evidence quotes (``field_evidence``) is found in the hypothesis and every occurrence
of that quote lies inside words written inside a stretch (every letter and digit of it; punctuation and spaces
aside) — the quote cannot have come from speech. A quote that only touches such words (an inserted "Oh" before
a patient's real answer) is not traced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from stresstest.metrics.align import AlignedPair
from stresstest.metrics.split_wer import turn_spans
from stresstest.records import MixInfo, Turn
from stresstest.results import ProbeField, ProbeScores
from stresstest.schema import ClinicalRecord
from stresstest.steps import SilenceFacts, SilenceStretch

__all__ = [
    "ProbeStretch",
    "ProbeWords",
    "Probes",
    "probe_detail",
    "probe_scores",
    "probe_stretches",
    "probe_words",
    "traced_fields",
]

_WS = re.compile(r"\s+")


#: One inserted stretch as the ``silence`` step recorded it (``MixInfo.chain``'s typed facts).
ProbeStretch = SilenceStretch


@dataclass(frozen=True)
class Probes:
    """The stretches of one chain audio and its number of active-speech runs."""

    stretches: tuple[ProbeStretch, ...]
    runs: int


def probe_stretches(mix: MixInfo | None) -> Probes | None:
    """The silence step's stretches of a chain mixture; None when its chain has no ``silence`` step."""
    if mix is None or not mix.chain:
        return None
    for entry in mix.chain:
        if isinstance(entry, SilenceFacts):
            stretches = tuple(entry.stretches)
            return Probes(stretches, entry.runs if entry.runs is not None else len(stretches) + 1)
    return None


@dataclass(frozen=True)
class ProbeWords:
    """What the ASR wrote inside the stretches of one item.

    Attributes:
        seconds: total length of the inserted stretches.
        words: hypothesis words attributed to them (see the module docstring).
        spans: ``(start, end)`` character spans of those words in the hypothesis, one per insertion.
        per_stretch: ``(after_turn, start_s, end_s, words, text)`` per stretch (the audit detail).
        mapped: False when the stretches could not be placed between the reference's turns (then
            ``words`` is 0 and the item has no ``halluc_per_min`` contribution).
    """

    seconds: float
    words: int
    spans: tuple[tuple[int, int], ...]
    per_stretch: tuple[tuple[int, float, float, int, str], ...]
    mapped: bool = True


def _boundary_tokens(pair: AlignedPair, turns: Sequence[Turn], probes: Probes) -> list[tuple[int, int] | None]:
    """(turn index, reference token position p of the next turn) per stretch; None where it cannot be placed."""
    ref = pair.ref
    spans = turn_spans(turns, ref.original)
    nonempty = [i for i, t in enumerate(turns) if _WS.sub(" ", t.text).strip()]
    if spans is None or len(spans) != len(nonempty):
        return [None] * len(probes.stretches)
    out: list[tuple[int, int] | None] = []
    for st in probes.stretches:
        if st.after_turn is not None:
            turn = st.after_turn
        elif probes.runs == len(nonempty) and 0 <= st.after_run < len(nonempty):
            turn = nonempty[st.after_run]  # corpus timings: one active-speech run per non-empty turn
        else:
            out.append(None)
            continue
        nxt = next((k for k, i in enumerate(nonempty) if i > turn), None)
        p = len(ref) if nxt is None else ref.tokens_in(spans[nxt][0], len(ref.original))[0]
        out.append((turn, p))
    return out


def probe_words(pair: AlignedPair, turns: Sequence[Turn], probes: Probes) -> ProbeWords:
    """Hypothesis words written inside the stretches of one item (the rule of the module docstring)."""
    seconds = sum(st.seconds for st in probes.stretches)
    places = _boundary_tokens(pair, turns, probes)
    if any(pl is None for pl in places):
        return ProbeWords(seconds=seconds, words=0, spans=(), per_stretch=(), mapped=False)
    ins_at: dict[int, list[tuple[int, int]]] = {}
    for o in pair.ops:
        if o.op == "ins":
            ins_at.setdefault(o.ref_start, []).append((o.hyp_start, o.hyp_end))
    spans: list[tuple[int, int]] = []
    per: list[tuple[int, float, float, int, str]] = []
    words = 0
    for st, pl in zip(probes.stretches, places, strict=True):
        assert pl is not None
        turn, p = pl
        n = 0
        texts = []
        for h0, h1 in ins_at.get(p, []):
            n += h1 - h0
            c0, c1 = pair.hyp.char_span(h0, h1)
            spans.append((c0, c1))
            texts.append(pair.hyp.original[c0:c1])
        words += n
        per.append((turn, st.start_s, st.end_s, n, " ".join(texts)))
    return ProbeWords(seconds=seconds, words=words, spans=tuple(spans), per_stretch=tuple(per))


def _occurrences(text: str, quote: str) -> list[tuple[int, int]]:
    out, k = [], text.find(quote)
    while k >= 0 and quote:
        out.append((k, k + len(quote)))
        k = text.find(quote, k + 1)
    return out


def _inside(text: str, a: int, b: int, spans: Sequence[tuple[int, int]]) -> bool:
    """True when every letter or digit of ``text[a:b]`` lies in one of ``spans`` (punctuation and spaces between
    or around the stretch's words do not count)."""
    return all(not text[k].isalnum() or any(s <= k < e for s, e in spans) for k in range(a, b))


def traced_fields(record: ClinicalRecord, hypothesis: str, spans: Sequence[tuple[int, int]]) -> list[ProbeField]:
    """Fields of ``record`` whose evidence rests on words written inside a stretch (module docstring rule)."""
    if not spans:
        return []
    names: Mapping[str, tuple[Literal["claim", "flag", "triage"], str]] = {
        **{c.id: ("claim", c.concept) for c in record.claims},
        **{f.id: ("flag", f.name) for f in record.safety_flags},
        "triage": ("triage", record.triage.level),
    }
    out: list[ProbeField] = []
    for fid, quotes in record.field_evidence.items():
        for q in quotes:
            occ = _occurrences(hypothesis, q.strip())
            if occ and all(_inside(hypothesis, a, b, spans) for a, b in occ):
                kind, name = names.get(fid, ("claim", fid))
                out.append(ProbeField(field_id=fid, kind=kind, name=name, quote=q))
                break
    return out


def probe_detail(pw: ProbeWords) -> dict[str, Any]:
    """The audit detail written to ``scores/<condition>/<id>.json``."""
    return {
        "seconds": round(pw.seconds, 6),
        "words": pw.words,
        "mapped": pw.mapped,
        "stretches": [
            {"after_turn": t, "start_s": a, "end_s": b, "words": n, "text": txt} for t, a, b, n, txt in pw.per_stretch
        ],
    }


def probe_scores(
    pw: ProbeWords | None, twin: tuple[str, int] | None = None, fields: Sequence[ProbeField] | None = None
) -> ProbeScores | None:
    """The item's probe part: the stretches' seconds (to the ms) and words when they were placed, the twin's
    ``(condition, words)`` when it has one, the record fields traced to the stretches when the item has a
    record; None when there is nothing to report."""
    got: dict[str, object] = {}
    if pw is not None and pw.mapped:
        got.update(probe_s=round(pw.seconds, 3), probe_words=pw.words)
        if twin is not None:
            got.update(probe_twin=twin[0], probe_words_twin=twin[1])
    if fields is not None:
        got["probe_fields"] = list(fields)
    return ProbeScores.model_validate(got) if got else None
