"""Pass 4 of the ``rules`` structurer, dialogue attributes: answers to open questions (onset, 0-10
rating, walking distance) attached to the topic they are about - the symptom named in the question, else the
presenting pain for a pain question, else the latest present symptom, else the presenting complaint; an onset
asked of several symptoms dates each.
"""

from __future__ import annotations

import dataclasses
import re

from stresstest.clinical.lexicon import Mention
from stresstest.clinical.negation import FIRST_PERSON, Assertion
from stresstest.clinical.numbers import Quantity
from stresstest.structure.rules.common import (
    _COLOURS,
    _answer_sentences,
    _Answered,
    _colour_span,
    _Dialogue,
    _Extractor,
    _fillers,
    _fmt_num,
    _fmt_qty,
    _fmt_value,
    _Group,
    _has_any,
    _is_modifier,
    _is_pain_concept,
    _qualities_end,
    _vague,
)
from stresstest.structure.rules.tables import (
    _DESCRIBE_CUES,
    _NON_SYMPTOM_TOPICS,
    _OPENER_WORDS,
    _PAIN_QUALITIES,
    _PAIN_WORDS,
    _QUALIFIERS,
    _QUALITY_WORDS,
    _RATING_WORDS,
    _RECAP,
    _SEVERITY_ASKS,
    _TOPIC_POINTERS,
    _TOPIC_SENTENCES,
    _WEIGHT_UNITS,
    _WH_LEAD,
)

_REFINERS = frozenset(
    {
        "maybe",
        "like",
        "about",
        "probably",
        "or",
        "say",
        "so",
        "i",
        "i'd",
        "think",
        "guess",
        "around",
        "roughly",
        "um",
        "uh",
        "actually",
        "more",
        "exactly",
        "ago",
    }
)


def _refined_time(ex: _Extractor, q: Quantity, qs: list[Quantity]) -> str:
    """A rough duration refined by the number said right after it ("a couple of hours now, maybe like 8"
    = 8 hours); else the duration as read."""
    if q.value is not None and q.unit_canonical and re.search(r"\b(couple|few)\b", ex.text[q.start : q.end], re.I):
        for n in qs:
            if (
                n.start > q.end
                and n.kind == "count"
                and n.unit_canonical is None
                and n.value is not None
                and n.value_max is None
                and n.start - q.end <= 30
                and re.search(r"\b(maybe|like|about|probably|or|say)\s*$", ex.text[q.end : n.start], re.I)
            ):
                return f"{_fmt_num(n.value)} {q.unit_canonical}"
    return _fmt_qty(q)


def _question_kind(words: list[str]) -> str | None:
    """What an open question asks: onset/duration, a 0-10 rating, a walking distance, how often, or what a
    symptom is like."""
    text = " " + " ".join(words) + " "
    if (
        any(f" {w} " in text for w in _RATING_WORDS)
        or " 1 to 10 " in text
        or " 0 to 10 " in text
        or " out of 10 " in text
        or " one to 10 " in text
        or " zero to 10 " in text
    ):
        return "rating"
    if _has_any(
        text,
        (
            "how far",
            "how many blocks",
            "how many flights",
            "how many stairs",
            "how many steps",
            "how many meters",
            "how many metres",
            "how long can you walk",
            "how much can you walk",
            "how much can you run",
            "how much walking",
        ),
    ):
        return "distance"
    if _has_any(text, ("how often", "how many times", "how frequently", "how frequent")):
        return "frequency"
    if _has_any(text, ("how much weight", "how many pounds", "how many kilos", "how many kilograms", "how many lbs")):
        return "amount"
    if _has_any(text, _DESCRIBE_CUES) and not _has_any(text, ("how long", "how often", "how many")):
        return "describe"
    if _has_any(
        re.sub(
            r" last (?=(night|week|month|year|time|few|couple|day|days|weekend|monday|tuesday|"
            r"wednesday|thursday|friday|saturday|sunday) )",
            " ",
            text,
        ),
        ("last", "lasts", "lasting"),
    ):
        return None  # "how long does it last": an episode, not the onset ("if it started last night" is one)
    if _has_any(
        text,
        (
            "when did",
            "when was",
            "how long",
            "since when",
            "start",
            "started",
            "begin",
            "began",
            "first notice",
            "first noticed",
            "going on for",
            "how many days",
            "how many weeks",
            "how many hours",
            "how many months",
            "how many years",
            "how long ago",
            "how many minutes",
        ),
    ):
        return "onset"
    return None


def _pass_dialogue(
    ex: _Extractor,
    lex: list[Mention],
    assertions: dict[int, Assertion],
    groups: dict[tuple[str, str], _Group],
) -> _Dialogue:
    """Attach answers to open questions ("when did it start?", "on a scale of 1 to 10?", "how far can
    you walk?") to the topic they are about.

    Topic: the first symptom named in the question; else, for a question about "pain", the first
    pain at a site asserted present before it, else the latest present symptom within
    :data:`_TOPIC_SENTENCES` sentences; else the first present symptom (the presenting complaint).
    The answer is read from the next one or two sentences (up to the next question): the first
    time quantity (onset), the highest 0-10 number (rating; "10 being the worst" is ignored), or
    the first distance with a unit.
    """
    out = _Dialogue()
    key_of: dict[int, tuple[str, str]] = {}
    for gkey, g in groups.items():
        for m, _a in g.mentions:
            key_of[m.start] = gkey
    symptoms = [
        (ex.sentence_of(ex.span(m)[0]), m)
        for m in lex
        if m.start in key_of and key_of[m.start][0] == "symptom" and not _is_modifier(m.concept)
    ]
    present_syms = [(s, m) for s, m in symptoms if assertions[m.start].status == "present"]
    chief = present_syms[0][1] if present_syms else None
    n_sent = len(ex.ctx.sent_start)
    for s in range(n_sent):
        if not ex.ctx.ends_q[s] and not _unmarked_question(ex, s):
            stated = _stated_rating(ex, s)
            if stated is not None:
                value, ev = stated
                in_s = [m for s2, m in present_syms if s2 == s]
                before = [m for s2, m in present_syms if s2 <= s]
                topic_m = in_s[0] if in_s else (before[-1] if before else None)
                out.ratings.append((value, key_of.get(topic_m.start) if topic_m else None, ev))
            continue
        lo, hi = ex.sentence_bounds(s)
        kind = _question_kind(ex.words[lo:hi])
        if kind is None and s > 0 and _has_any(" " + " ".join(ex.words[lo:hi]) + " ", _SEVERITY_ASKS):
            plo, phi = ex.sentence_bounds(s - 1)
            if _question_kind(ex.words[plo:phi]) == "rating" or _scale_definition(ex, s - 1):
                kind = "rating"  # "One to 10, 10 being the worst. How bad is this pain?"
        echo = kind is None and _duration_echo(ex, s)
        if echo:
            kind = "onset"  # "Couple of weeks. OK, so about two weeks, three weeks? - About two to three weeks."
        if kind is None:
            continue
        in_q = [m for s2, m in symptoms if s2 == s]
        if not in_q and kind == "onset":  # "When did you have the injury? - It was just yesterday."
            in_q = [
                m
                for m in lex
                if m.start in key_of and key_of[m.start] == ("history", "trauma") and ex.sentence_of(ex.span(m)[0]) == s
            ]
        if kind == "distance":  # "until you feel the coughing or shortness of breath?": the breathlessness's
            in_q = sorted(in_q, key=lambda m: m.concept != "shortness of breath")
        topic: Mention | None = in_q[0] if in_q else None
        if kind == "amount" and topic is None:  # "How much weight have you gained?": the weight change said
            changes = [m for s2, m in present_syms if s2 <= s and m.concept in ("weight gain", "weight loss")]
            topic = changes[-1] if changes else None
            if topic is None:
                continue
        if topic is None and echo:
            recent = [m for s2, m in present_syms if s - _TOPIC_SENTENCES <= s2 < s]
            topic = recent[-1] if recent else None
            if topic is None:
                continue
        if topic is None and (
            not any(w in _TOPIC_POINTERS for w in ex.words[lo:hi])
            or any(w in _NON_SYMPTOM_TOPICS for w in ex.words[lo:hi])
        ):
            continue  # "how long has he been going to daycare?", "how long have you worked in this role?"
        if topic is None:
            recent = [m for s2, m in present_syms if s - _TOPIC_SENTENCES <= s2 < s]
            if any(w in _PAIN_WORDS for w in ex.words[lo:hi]):
                # "How would you rate the pain?": the presenting pain, i.e. the first pain at a site asserted present
                # so far (not the wrist the elbow pain is worse with), else the first pain of any kind.
                pains = [m for s2, m in present_syms if s2 < s and _is_pain_concept(m.concept)]
                sited = [m for m in pains if m.concept.endswith(" pain") and not _is_modifier(m.concept)]
                if sited or pains:
                    recent = [(sited or pains)[0]]
            topic = recent[-1] if recent else chief
            if (
                kind == "onset"
                and chief is not None
                and _has_any(" " + " ".join(ex.words[lo:hi]) + " ", _RECAP)
                and not any(w in _PAIN_WORDS for w in ex.words[lo:hi])
            ):
                topic = chief  # "And then you said it started a couple days ago?": the presenting complaint's onset
        answer = _read_answer(ex, s, kind)
        if answer is None:
            continue
        if echo:
            answer = dataclasses.replace(answer, kind="confirm")  # the checked onset replaces the first one
        if kind == "describe" and answer.value and not in_q:
            # "Does it feel dry, or are you bringing up gunky stuff? - It's really dry": the latest present
            # symptom that such a word can describe (a cough for "dry", a pain for "sharp").
            fits = [m for s2, m in present_syms if s - _TOPIC_SENTENCES <= s2 < s and _describes(answer.value, m)]
            topic = fits[-1] if fits else topic
        key = key_of.get(topic.start) if topic is not None else None
        if kind == "rating" and answer.rating is not None:
            out.ratings.append((answer.rating, key, answer.evidence))
        keys = [key] if key is not None else []
        if kind == "onset":
            keys += [k for k in _shared_onset(ex, s, in_q, present_syms, key_of) if k not in keys]
        for k in keys:
            out.answers.setdefault(k, []).append(answer)
    return out


#: Words by which an onset question asks about several symptoms at once ("when did these symptoms start?").
_PLURAL_POINTERS = frozenset({"these", "those", "they", "them", "symptoms", "both", "all", "everything"})


def _shared_onset(
    ex: _Extractor,
    s: int,
    in_q: list[Mention],
    present_syms: list[tuple[int, Mention]],
    key_of: dict[int, tuple[str, str]],
) -> list[tuple[str, str]]:
    """The other symptoms an onset question asks about: those it names joined by "and" ("when did the fever
    and cough start?"), or, when it names none and points at several ("when did these symptoms start?"),
    the present symptoms the patient named since the previous question."""
    lo, hi = ex.sentence_bounds(s)
    if in_q:
        if len(in_q) < 2:
            return []
        first_end, last_start = ex.span(in_q[0])[1], ex.span(in_q[-1])[0]
        if "and" not in ex.words[first_end:last_start]:
            return []
        named = {key_of[m.start] for m in in_q if m.start in key_of}
        return list(dict.fromkeys(key_of[m.start] for _s2, m in present_syms if key_of.get(m.start) in named))
    if not any(w in _PLURAL_POINTERS for w in ex.words[lo:hi]):
        return []
    prev_q = max((p for p in range(s) if ex.ctx.ends_q[p]), default=-1)
    out: list[tuple[str, str]] = []
    for s2, m in present_syms:
        k = key_of.get(m.start)
        if prev_q < s2 < s and k is not None and k not in out:
            out.append(k)
    return out if len(out) >= 2 else []


def _unmarked_question(ex: _Extractor, s: int) -> bool:
    """An open question the transcriber closed with a full stop ("And how would you describe the severity of
    this pain. One being the least pain and 10 the worst."): it opens with a question word, addresses the
    patient ("you", "your") and says nothing in the first person."""
    lo, hi = ex.sentence_bounds(s)
    words = [w for w in ex.words[lo:hi] if w not in _OPENER_WORDS and w not in _fillers()]
    if not words or words[0] not in _WH_LEAD or words[0] == "why":
        return False
    return any(w in ("you", "your", "you're", "you've") for w in words) and not any(w in FIRST_PERSON for w in words)


def _duration_echo(ex: _Extractor, s: int) -> bool:
    """A question that only proposes durations ("so about two weeks, three weeks?", "you said a couple of
    days, so about 2-3 days?"): a clinician checking the onset just given. A short question (at most 14
    words) with no clinical term, a numbered duration, and two of them, a range, or "so"/"said"."""
    lo, hi = ex.sentence_bounds(s)
    times = [
        q
        for q, k in zip(ex.quantities, ex.qty_tok, strict=True)
        if lo <= k < hi and q.kind == "time" and q.value is not None
    ]
    words = ex.words[lo:hi]
    return (
        bool(times)
        and hi - lo <= 14
        and s not in ex.mention_sents
        and (len(times) >= 2 or any(q.value_max is not None for q in times) or "so" in words or "said" in words)
    )


def _describes(word: str, m: Mention) -> bool:
    """Whether ``word`` can describe the concept of ``m`` (a pain quality a pain, a qualifier its concept)."""
    if word.split()[0] in _PAIN_QUALITIES and _is_pain_concept(m.concept):
        return True
    # a colour phrase ("dark yellow greenish") by its colours
    return m.concept in _QUALIFIERS and any(w in _QUALIFIERS[m.concept][0] for w in word.split())


def _stated_rating(ex: _Extractor, s: int) -> tuple[float, list[str]] | None:
    """A rating said in a statement ("I'd rate it a 9"): a number 0-10 within 5 words after a rating word."""
    lo, hi = ex.sentence_bounds(s)
    for x in range(lo, hi):
        if ex.words[x] not in _RATING_WORDS:
            continue
        for k in range(x + 1, min(hi, x + 6)):
            if ex.words[k].isdigit() and 0 <= int(ex.words[k]) <= 10:
                return float(ex.words[k]), [ex.quote(x, k + 1, lo, hi)]
    return None


def _scale_definition(ex: _Extractor, s: int) -> bool:
    """A sentence that only defines the rating scale ("Zero being the least amount of pain. 10 being the
    worst."), often split off the question by ASR punctuation."""
    lo, hi = ex.sentence_bounds(s)
    words = ex.words[lo:hi]
    return "being" in words and any(w in ("worst", "least", "best", "most", "no") for w in words)


def _read_answer(ex: _Extractor, s: int, kind: str) -> _Answered | None:
    sents = _answer_sentences(ex, s, limit=4 if kind == "rating" else 2)
    if (
        kind == "describe"
        and sents
        and ex.ctx.ends_q[sents[-1]]
        and any(w in _QUALITY_WORDS for w in ex.words[slice(*ex.sentence_bounds(sents[-1]))])
    ):
        # "How would you describe the pain? Is it like a dull, aching pain or sharp stabbing pain? - Dull and achy."
        sents += _answer_sentences(ex, sents[-1], limit=2)
    if kind == "rating":
        sents = [s2 for s2 in sents if not _scale_definition(ex, s2)][:2]
    if not sents:
        return None
    qlo, qhi = ex.sentence_bounds(s)
    q_quote = ex.quote(qlo, qhi, qlo, qhi)
    toks = [k for s2 in sents for k in range(*ex.sentence_bounds(s2))]
    if not toks:
        return None
    a_lo, a_hi = toks[0], toks[-1] + 1
    qs = [q for q, k in zip(ex.quantities, ex.qty_tok, strict=True) if a_lo <= k < a_hi]

    def ev(q: Quantity) -> list[str]:
        k = ex._tok_index(q.start)
        slo, shi = ex.sentence_bounds(ex.sentence_of(k))
        return [q_quote, ex.quote(k, k + 1, slo, shi)]

    if kind == "onset":
        # not a time in the clinician's next question ("... or in the last six hours?")
        times = [
            q
            for q in qs
            if q.kind == "time"
            and (q.value is not None or q.unit_canonical)
            and not ex.ctx.ends_q[ex.sentence_of(ex._tok_index(q.start))]
        ]
        if not times:
            return None
        q = times[0]  # the direct answer; a later number replaces a rough first one only right after it
        between = re.findall(r"[a-z']+", ex.text[q.end : times[1].start].lower()) if len(times) > 1 else []
        if (
            _vague(_fmt_qty(q))
            and len(times) > 1
            and not _vague(_fmt_qty(times[1]))
            and all(w in _REFINERS for w in between)
        ):
            q = times[1]  # "a few days, maybe 3 days"; not "a few months ago, but in the past couple of weeks ..."
        return _Answered("onset", None, None, _refined_time(ex, q, qs), None, ev(q))
    if kind == "frequency":
        for q in qs:
            if q.kind == "frequency" and q.value is not None:
                return _Answered("frequency", None, None, _fmt_qty(q), None, ev(q))
        return None
    if kind == "describe":
        for k in toks:
            if ex.words[k] in _QUALITY_WORDS and not ex.ctx.ends_q[ex.sentence_of(k)]:
                slo, shi = ex.sentence_bounds(ex.sentence_of(k))
                if ex.words[k] in _COLOURS:
                    lo, hi = _colour_span(ex.words[:shi], k)
                elif ex.words[k] in _PAIN_QUALITIES:
                    lo, hi = k, _qualities_end(ex.words[:shi], k)
                else:
                    lo, hi = k, k + 1
                lo = max(lo, slo)
                return _Answered(
                    "describe",
                    " ".join(w for w in ex.words[lo:hi] if w != "and"),
                    None,
                    None,
                    None,
                    [q_quote, ex.quote(lo, hi, slo, shi)],
                )
        return None
    if kind == "distance":
        for q in qs:
            if q.value is not None and q.unit_canonical and q.kind in ("count", "measure"):
                return _Answered("distance", _fmt_value(q), q.unit_canonical, None, None, ev(q))
        return None
    if kind == "amount":  # "How much weight have you gained? - Over the past six months, about 20 pounds."
        for q in qs:
            if q.value is not None and q.unit_canonical in _WEIGHT_UNITS:
                during = next((t for t in qs if t.kind == "time" and t.value is not None), None)
                return _Answered(
                    "amount",
                    _fmt_value(q),
                    q.unit_canonical,
                    _fmt_qty(during) if during else None,
                    None,
                    ev(q) + (ev(during)[1:] if during else []),
                )
        return None
    best: Quantity | None = None
    for q in qs:
        if q.value is None or q.kind not in ("count", "measure"):
            continue
        if q.unit_canonical not in (None, "out of 10"):
            continue
        top = q.value_max if q.value_max is not None else q.value
        if not 0 <= top <= 10:
            continue
        k = ex._tok_index(q.start)
        nxt = ex.words[k + 1 : k + 3]
        prev = ex.words[max(0, k - 2) : k]
        if nxt[:1] == ["being"] or (top == 10 and (prev == ["out", "of"] or "worst" in nxt)):
            continue  # the scale's anchor echoed back ("10 being the worst"), not the rating
        if best is None or top > (best.value_max if best.value_max is not None else best.value or 0):
            best = q
    if best is None:
        return None
    best_top = best.value_max if best.value_max is not None else best.value
    value = _fmt_value(best)
    lower = next(
        (
            q
            for q in qs
            if q.end <= best.start
            and q.value is not None
            and q.value_max is None
            and best.value_max is None
            and q.kind in ("count", "measure")
            and q.unit_canonical is None
            and q.value < (best.value or 0)
            and re.fullmatch(r"\s*(?:or|to)\s+(?:a|an|maybe|like|\s)*", ex.text[q.end : best.start], re.I)
        ),
        None,
    )
    if lower is not None:
        value = f"{_fmt_num(lower.value or 0)}-{value}"  # "probably a 6 or a 7": the range 6-7
    return _Answered("rating", value, "out of 10", None, best_top, ev(best))
