"""Lost answers: a short yes/no answer of the reference lost in the hypothesis is the
``clinical_omission`` of the fact it answered, weighted by what the question before it asked.
"""

from __future__ import annotations

from collections.abc import Sequence

from stresstest.clinical.lexicon import Mention
from stresstest.clinical.vocab import category_weight
from stresstest.metrics.align import AlignedPair, TokenizedText
from stresstest.metrics.triggers.regions import _event, _Region, _Side
from stresstest.metrics.triggers.words import _FILLERS, _HEDGES, _NEG_CUES, _is_content, _stem
from stresstest.records import revise
from stresstest.results import TriggerEvent

_YES = frozenset({"yes", "yeah", "yep", "yup", "mhm", "correct", "sure", "absolutely", "definitely"})
_NO = frozenset({"no", "nope", "nah", "never"})

# Characters between two tokens that end a sentence or a turn ("[patient]", "Patient:").
_BOUNDARY = frozenset(".?!]:\n")
_BARE_ANSWER_MAX = 6  # tokens of a sentence that is only an answer ("I I don't think so", "No, not really")
_QUESTION_MAX = 30  # tokens of a question looked back over

# What a question asks, in order of precedence: (weight key, cue words). Clinical terms in the question
# make it a symptom (or medication) question when no cue word decides.
_QUESTION_TOPICS = (
    ("answer_allergy", frozenset({"allergy", "allergies", "allergic", "reaction", "reactions"})),
    (
        "answer_medication",
        frozenset(
            {
                "medication",
                "medications",
                "medicine",
                "medicines",
                "pill",
                "pills",
                "tablet",
                "tablets",
                "drug",
                "drugs",
                "prescription",
                "inhaler",
                "dose",
            }
        ),
    ),
    (
        "answer_severity",
        frozenset(
            {
                "scale",
                "severe",
                "severity",
                "bad",
                "worse",
                "worst",
                "better",
                "rate",
                "intense",
                "intensity",
                "mild",
                "much",
            }
        ),
    ),
)
_DURATION_CUES = frozenset({"long", "since", "start", "started", "ago", "often", "frequently", "lasted"})


def _boundary_before(tt: TokenizedText, k: int) -> bool:
    """Does a sentence or turn end right before token ``k`` (or is ``k`` the first token)?"""
    if k == 0:
        return True
    gap = tt.original[tt.tokens[k - 1].end : tt.tokens[k].start]
    return any(c in _BOUNDARY for c in gap)


def _speaker_label(tt: TokenizedText, k: int) -> bool:
    """Is token ``k`` a speaker label ("Patient:", "[doctor]")?"""
    end = tt.tokens[k].end
    return tt.words[k] in _SPEAKERS and tt.original[end : end + 1] in (":", "]")


_SPEAKERS = frozenset({"doctor", "patient", "clinician", "nurse", "dr", "pt"})


def _sentence_end(tt: TokenizedText, k: int) -> int:
    """First token index after the sentence that holds token ``k``."""
    j = k + 1
    while j < len(tt) and not _boundary_before(tt, j):
        j += 1
    return j


def _question_before(tt: TokenizedText, k: int) -> tuple[int, int] | None:
    """Tokens [i, j) of the question that ends right before token ``k`` (a "?" in the gap), if any."""
    while k > 0 and _speaker_label(tt, k - 1):
        k -= 1  # "Do you smoke? Patient: No."
    if k == 0 or "?" not in tt.original[tt.tokens[k - 1].end : tt.tokens[k].start]:
        return None
    i = k - 1
    while i > 0 and k - i < _QUESTION_MAX and not _boundary_before(tt, i):
        i -= 1
    return i, k


def _question_topic(pair: AlignedPair, ref: _Side, q: tuple[int, int] | None) -> str:
    """Weight key of what the question [i, j) asks (symptom, duration, severity, allergy, medication)."""
    if q is None:
        return "answer"
    words = set(pair.ref.words[q[0] : q[1]])
    for key, cues in _QUESTION_TOPICS:
        if words & cues:
            return key
    found = [a.item for a in (*ref.mentions.overlapping(*q), *ref.terms.overlapping(*q)) if isinstance(a.item, Mention)]
    if any(m.category == "medication" for m in found):
        return "answer_medication"
    if found:
        return "answer_symptom"
    return "answer_duration" if words & _DURATION_CUES else "answer"


def _answer_polarity(words: Sequence[str]) -> str | None:
    """ "yes" / "no" when the words open with an answer particle or are a bare negative answer ("I don't
    think so", "not really"); else None."""
    lead = [w for w in words if w not in _FILLERS or w in _YES]
    if not lead:
        return None
    if lead[0] in _YES:
        return "yes"
    if lead[0] in _NO:
        return "no"
    content = [w for w in lead if _is_content(w) and w not in _HEDGES]
    if len(words) <= _BARE_ANSWER_MAX and not content and any(w in _NEG_CUES for w in lead):
        return "no"
    return None


def _lost_answers(pair: AlignedPair, g: _Region, ref: _Side, taken: list[tuple[int, int]]) -> list[TriggerEvent]:
    """Short answers of the reference in region ``g`` lost in the hypothesis: clinical_omission of the answered
    fact, weighted by what the question before it asked.

    An answer is a sentence that opens with a yes/no particle ("Yeah, yeah", "No.") or is a bare negative
    ("I don't think so"). It is lost when the hypothesis, over the sentence's aligned stretch, has no word of
    the same polarity and none of the sentence's content words ("Yeah, it's creamy yellow" -> "okay, okay").
    Its question is the sentence ending in "?" right before it; an answer with no question in view counts
    only when the sentence is nothing but the answer.
    """
    out: list[TriggerEvent] = []
    tt, words = pair.ref, pair.ref.words
    k = g.r0
    while k < g.r1:
        if not _boundary_before(tt, k):
            k += 1
            continue
        if _speaker_label(tt, k):
            k += 1
            continue
        end = _sentence_end(tt, k)
        polarity = _answer_polarity(words[k:end])
        if polarity is None:
            k = end
            continue
        while (
            end < len(tt)
            and _answer_polarity(words[end : (nxt := _sentence_end(tt, end))]) == polarity
            and not any(_is_content(w) for w in words[end:nxt])
        ):
            end = nxt  # "Yeah. Yeah": one answer said twice
        q = _question_before(tt, k)
        content = [w for w in words[k:end] if _is_content(w) and w not in _HEDGES and w not in _NEG_CUES]
        pi, pj = pair.hyp_range_for_ref(k, end)
        window = pair.hyp.words[max(0, pi - 1) : pj + 1]
        kept_polarity = any(w in (_YES if polarity == "yes" else _NEG_CUES) for w in window)
        stems = {_stem(h) for h in window}
        kept_content = any(w in window or _stem(w) in stems for w in content)
        rs, re_ = tt.char_span(k, end)
        overlaps = any(a < re_ and b > rs for a, b in taken)
        # With no question in view a bare "yeah" is a backchannel; a bare "no" / "I don't think so" still answers.
        backchannel = q is None and not content and polarity == "yes"
        lead = [w for w in words[k:end] if w not in _FILLERS]
        # ... and a "No," that opens a statement ("No, that I can do") answers nothing in view.
        opener = q is None and len(lead) > 2 and lead[0] in _NO and not any(w in _NEG_CUES for w in lead[1:])
        if kept_polarity or kept_content or overlaps or backchannel or opener:
            k = end
            continue
        key = _question_topic(pair, ref, q)
        asked = f" to {tt.original[slice(*tt.char_span(*q))]!r}" if q else ""
        what = key.replace("answer_", "") if key != "answer" else ("no clinical topic" if q else "question out of view")
        why = f"{polarity!r} answer{asked} ({what}) does not survive in the hypothesis"
        region = _Region(k, end, pi, pj)
        ev = _event("clinical_omission", pair, region, why, f"answer:{polarity}", weight=category_weight(key))
        out.append(revise(ev, ref_start=rs, ref_end=re_, ref_span=tt.original[rs:re_]))
        k = end
    return out
