"""Pass 2 of the ``rules`` structurer, assertions: the ConText analyzer on every lexicon mention,
then the dialogue fixes (an answer read past fillers and clarifying sentences, yes/no questions with a
subordinate wh-word or a list split off by ASR punctuation, a listed question answered by naming some of its
concepts, inverted surfaces such as "this is completely new").
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from stresstest.clinical.lexicon import Mention
from stresstest.clinical.negation import Assertion
from stresstest.clinical.text import norm_phrase
from stresstest.structure.rules.common import (
    _NORMAL_WORDS,
    _SPUTUM_WORDS,
    _TYPE_HEDGES,
    _TYPE_LEADS,
    _answer_sentences,
    _Extractor,
    _fillers,
    _has_any,
    _is_modifier,
    _is_pain_concept,
    _lead_fillers,
)
from stresstest.structure.rules.tables import _LIST_ENDINGS, _MAX_CLARIFYING, _OPENER_WORDS, _WH_LEAD


def _pass_assertions(ex: _Extractor, lex: list[Mention]) -> dict[int, Assertion]:
    """Assertion of every lexicon mention (keyed by its start offset), with the dialogue fixes.

    1. A question whose first answer sentence is only fillers ("Um.") is read from the next
       sentence; an answer of only hedges/affirmations still decides it.
    2. A question that lists several concepts ("any cough or chest pain?") answered by naming
       some of them ("I have a cough") asserts only the named ones; the others stay unanswered.
    """
    out: dict[int, Assertion] = {}
    for m in lex:
        a = ex.ctx.assertion(m)
        if a.source == "unanswered":
            a = _answer_after_fillers(ex, m) or a
        elif _subordinate_wh_question(ex, m, a) or _question_continuation(ex, m, a):
            a = _read_yes_no(ex, ex.sentence_of(ex.span(m)[0])) or Assertion("uncertain", "unanswered")
        if a.source == "unanswered" and m.concept == "pain radiation":
            a = _stays_put(ex, m) or a
        normal = _normal_reply_sentence(ex, m) if a.source == "unanswered" else None
        if normal is not None:
            # "Any changes in your sense of smell? - I think that's pretty normal."
            alo, ahi = ex.sentence_bounds(normal)
            start, end = ex.tokens[alo].start, ex.tokens[ahi - 1].end
            a = Assertion("absent", "answer", ex.text[start:end], start, end)
        if m.concept in ("sputum", "cough") and a.source in ("unanswered", "answer"):
            dry = _dry_reply(ex, m)
            if dry is not None:  # "Is it a dry cough or are you bringing up sputum? - It's dry."
                a = dataclasses.replace(dry, status="absent" if m.concept == "sputum" else "present")
        if a.status == "absent" and a.source == "statement" and _named_exception(ex, m, a):
            a = Assertion("present", "statement")  # "Nothing I can think of, just this cough that's bugging me."
        if m.concept == "fever" and a.status == "absent" and _unmeasured(ex, m, a):
            a = dataclasses.replace(a, status="uncertain")  # "Any fever? - I don't have a thermometer, ..."
        if a.status == "present" and a.source == "answer" and _no_problem_with(ex, m, a):
            a = dataclasses.replace(a, status="absent")  # "Issues swallowing? - Oh yeah, no problem swallowing."
        if a.status == "uncertain" and (_hedged_degree(ex, a) or _yes_then_hedge(ex, a)):
            a = dataclasses.replace(a, status="present")  # "maybe a little bit": the hedge is on how much
        if _inverted(m):
            if a.source == "statement" and a.status == "absent" and _answer_particle(ex, a):
                a = dataclasses.replace(a, status="present")  # "No, this is the first time": the "no" answers
            # "completely new" = absent; "not the first time" / "first time? - No" = present.
            a = dataclasses.replace(a, status=_FLIP[a.status])
        out[m.start] = a
    by_sent: dict[int, list[Mention]] = {}
    for m in lex:
        by_sent.setdefault(ex.sentence_of(ex.span(m)[0]), []).append(m)
    for m in lex:
        # "Any weakness? - Yeah I haven't had any muscle weakness": the answer's own denial of the concept
        # beats its yes/no word.
        a = out[m.start]
        if a.source != "answer" or a.cue_start is None:
            continue
        s2 = ex.sentence_of(ex._tok_index(a.cue_start))
        said = [
            out[o.start]
            for o in by_sent.get(s2, [])
            if o.concept == m.concept
            and o.start != m.start
            and out[o.start].source == "statement"
            and _said_after(o, out[o.start], a.cue_start)
        ]
        if said and said[0].status == "absent" != a.status:  # a hedge in a "yes" answer keeps the "yes"
            out[m.start] = said[0]
    for s, ms in by_sent.items():
        listed = {m.concept for m in ms}
        if len(listed) < 2 or not ex.ctx.ends_q[s]:
            continue
        named: set[str] = set()
        for s2 in _answer_sentences(ex, s):
            named.update(m.concept for m in by_sent.get(s2, []))
        if not named & listed:
            continue
        factor_named = any(_is_modifier(c) and c.startswith("pain ") for c in named)
        for m in ms:
            a = out[m.start]
            if _is_pain_concept(m.concept) and factor_named:
                continue  # "Is the pain on your legs worse when you touch it? - Yeah ...": the pain is a given
            if m.concept not in named and a.source == "answer" and a.status == "present":
                out[m.start] = Assertion("uncertain", "unanswered")
    return out


#: Surfaces that assert the opposite of their concept: "this is completely new" / "is this the first
#: time? - Yes" mean no previous similar episode. Their status is flipped after the usual reading.
_INVERTED_SURFACES = {
    # "I haven't been as hungry", "I've been able to smell": the surface names the normal state.
    "loss of appetite": frozenset({"been as hungry", "felt hungry", "felt like eating", "eating as much"}),
    "loss of smell": frozenset({"able to smell"}),
    "loss of taste": frozenset({"able to taste"}),
    "previous similar episode": frozenset(
        {
            "first time",
            "completely new",
            "brand new",
            "nothing like this before",
            "never had this before",
            "never had anything like this",
            "never had anything like this before",
            "never happened before",
            "never experienced this before",
            "never experienced anything like this",
            "nothing like this really before",
            "never had anything like that",
        }
    ),
}
_FLIP: dict[str, Literal["present", "absent", "uncertain"]] = {
    "present": "absent",
    "absent": "present",
    "uncertain": "uncertain",
}


_DEGREE_AFTER_HEDGE = ("a little", "a bit", "little bit", "a tiny bit", "slightly", "a little bit")


def _hedged_degree(ex: _Extractor, a: Assertion) -> bool:
    """The uncertainty cue is "maybe" and what follows it is an amount ("Maybe a bit of a runny nose",
    "maybe a little bit this morning, yeah"): the patient has it, a little."""
    if (a.cue or "").lower() != "maybe" or a.cue_end is None:
        return False
    after = " ".join(norm_phrase(ex.text[a.cue_end : a.cue_end + 30]).split()[:4])
    return any(f" {after} ".startswith(f" {d} ") for d in _DEGREE_AFTER_HEDGE)


_YES_WORDS = frozenset({"yes", "yeah", "yep", "yup"})


def _yes_then_hedge(ex: _Extractor, a: Assertion) -> bool:
    """ "Yeah, I think it kind of goes to my neck": a "yes" opens the sentence and "I think / I guess" only
    softens the wording that follows; the patient has committed."""
    if (a.cue or "").lower() not in ("i think", "i guess", "i'd say", "i would say") or a.cue_start is None:
        return False
    k = ex._tok_index(a.cue_start)
    lo, _hi = ex.sentence_bounds(ex.sentence_of(k))
    lead = [w for w in ex.words[lo:k] if w not in _fillers()]
    return bool(lead) and lead[0] in _YES_WORDS and all(w in _YES_WORDS or w in _OPENER_WORDS for w in lead)


_CHANGE_ASKS = frozenset({"change", "changes", "changed", "problem", "problems", "issue", "issues", "trouble"})
_NORMAL_STATE = frozenset({"normal", "fine", "same", "ok", "okay", "good", "unchanged", "usual"})
_NOT_NORMAL = frozenset(
    {
        "not",
        "but",
        "no",
        "isn't",
        "hasn't",
        "haven't",
        "wasn't",
        "worse",
        "better",
        "except",
        "although",
        "though",
        "more",
        "less",
        "bit",
        "little",
    }
)


def _normal_reply_sentence(ex: _Extractor, m: Mention) -> int | None:
    """A question about changes or problems ("any changes in your sense of smell?", "any problems with your
    bowels?") answered with the normal state ("I think that's pretty normal", "they've been fine"), short and
    with no contrast or comparison in it, so absent: the answer sentence (past one follow-up question: "... Do
    you feel like you can smell less? - I think that's pretty normal."), or None."""
    s = ex.sentence_of(ex.span(m)[0])
    lo, hi = ex.sentence_bounds(s)
    n = len(ex.ctx.sent_start)
    if not ex.ctx.ends_q[s] or s + 1 >= n or not _CHANGE_ASKS.intersection(ex.words[lo:hi]):
        return None
    a = s + 2 if ex.ctx.ends_q[s + 1] and s + 2 < n else s + 1
    if ex.ctx.ends_q[a]:
        return None
    alo, ahi = ex.sentence_bounds(a)
    words = [w for w in ex.words[alo:ahi] if w not in _fillers()]
    ok = 0 < len(words) <= 10 and bool(_NORMAL_STATE.intersection(words)) and not _NOT_NORMAL.intersection(words)
    return a if ok else None


def _dry_reply(ex: _Extractor, m: Mention) -> Assertion | None:
    """The reply "it's dry" to a question offering a dry cough or sputum ("Is it a dry cough, or are you bringing
    up any phlegm?"): the answer assertion (its status set by the caller), or None."""
    s = ex.sentence_of(ex.span(m)[0])
    lo, hi = ex.sentence_bounds(s)
    if (
        not ex.ctx.ends_q[s]
        or s + 1 >= len(ex.ctx.sent_start)
        or "dry" not in ex.words[lo:hi]
        or not any(w in _SPUTUM_WORDS for w in ex.words[lo:hi])
    ):
        return None
    alo, ahi = ex.sentence_bounds(s + 1)
    k = alo
    while k < ahi and (
        ex.words[k] in _TYPE_LEADS
        or ex.words[k] in _TYPE_HEDGES
        or ex.words[k] in _fillers()
        or ex.words[k] in ("it", "is", "it's", "its")
    ):
        k += 1
    if k >= ahi or ex.words[k] != "dry":
        return None
    return Assertion(
        "absent", "answer", ex.text[ex.tokens[alo].start : ex.tokens[k].end], ex.tokens[alo].start, ex.tokens[k].end
    )


def _named_exception(ex: _Extractor, m: Mention, a: Assertion) -> bool:
    """The one thing a denial leaves out ("nothing I can think of, just this cough", "no, only the knee pain"):
    "just"/"only" + a determiner between the negation cue and the term."""
    if a.cue_end is None:
        return False
    c, i = ex._tok_index(a.cue_end - 1), ex.span(m)[0]
    between = ex.words[c + 1 : i]
    if not between:
        return False
    return any(
        w in ("just", "only") and nxt in ("this", "the", "a", "my", "some", "that")
        for w, nxt in zip(between, between[1:] + [ex.words[i]], strict=True)
    )


_MEASURE_WORDS = frozenset({"thermometer", "temperature", "temp"})


def _unmeasured(ex: _Extractor, m: Mention, a: Assertion) -> bool:
    """A fever "denied" by a no about measuring it ("have you checked your temperature? - No, I haven't"; "I don't
    have a thermometer, I maybe felt a little hot"): not measured is not absent. The question or the answer talks
    about the temperature or a thermometer and says nothing of it being normal."""
    sents = {ex.sentence_of(ex.span(m)[0])}
    if a.cue_start is not None:
        sents.add(ex.sentence_of(ex._tok_index(a.cue_start)))
    words = {w for s in sents for w in ex.words[slice(*ex.sentence_bounds(s))]}
    return bool(words & _MEASURE_WORDS) and not words & _NORMAL_WORDS


_NO_TROUBLE = frozenset({"problem", "problems", "issue", "issues", "trouble", "difficulty"})


def _no_problem_with(ex: _Extractor, m: Mention, a: Assertion) -> bool:
    """A "yes" that only opens a denial ("Any issues swallowing food? - Oh yeah, no problem swallowing"): the
    answer says "no problem/issues/trouble" right before a word of the question's term."""
    if a.cue_start is None:
        return False
    k = ex._tok_index(a.cue_start)
    lo, hi = ex.sentence_bounds(ex.sentence_of(k))
    i, j = ex.span(m)
    term = {w for w in ex.words[i:j] if w not in _NO_TROUBLE and len(w) > 3}
    for x in range(max(lo, k), hi - 2):
        if ex.words[x] == "no" and ex.words[x + 1] in _NO_TROUBLE:
            after = ex.words[x + 2 : x + 4]
            if term & set(after) or (after[:1] == ["with"] and term & set(ex.words[x + 3 : x + 5])):
                return True
    return False


def _said_after(m: Mention, a: Assertion, pos: int) -> bool:
    """Mention ``m`` and the cue that decided it (``a``) both come after offset ``pos``."""
    return m.start > pos and (a.cue_start is None or a.cue_start > pos)


def _answer_particle(ex: _Extractor, a: Assertion) -> bool:
    """The negation cue is a sentence-initial "no" followed by a comma: the answer to the question before,
    not a negation of what the sentence goes on to say ("No, this is the first time")."""
    if a.cue_start is None or a.cue_end is None or (a.cue or "").lower() != "no":
        return False
    k = ex._tok_index(a.cue_start)
    lo, _hi = ex.sentence_bounds(ex.sentence_of(k))
    return k == lo and ex.text[a.cue_end : a.cue_end + 1] == ","


def _inverted(m: Mention) -> bool:
    forms = _INVERTED_SURFACES.get(m.concept)
    return forms is not None and norm_phrase(m.surface) in forms


_STAYS_PUT = frozenset({"just", "only", "mainly", "mostly", "stays", "stayed", "stay", "staying"})
_STAYS_SKIP = frozenset(
    {"i", "would", "say", "think", "it's", "it", "is", "the", "pain", "i'm", "feeling", "feel", "has", "pretty", "much"}
)


def _stays_put(ex: _Extractor, m: Mention) -> Assertion | None:
    """ "Does it radiate anywhere? - It's just in my chest / mainly in those areas": the pain stays where it
    is, so radiation is absent: the answer's first word (past fillers and "I would say", "it's") is one of
    :data:`_STAYS_PUT`."""
    s = ex.sentence_of(ex.span(m)[0])
    if not ex.ctx.ends_q[s] or s + 1 >= len(ex.ctx.sent_start):
        return None
    lo, hi = ex.sentence_bounds(s + 1)
    fillers = _fillers()
    words = [w for w in ex.words[lo:hi] if w not in fillers and w not in _STAYS_SKIP]
    if not words or words[0] not in _STAYS_PUT:
        return None
    start, end = ex.tokens[lo].start, ex.tokens[hi - 1].end
    return Assertion("absent", "answer", ex.text[start:end], start, end)


def _answer_after_fillers(ex: _Extractor, m: Mention) -> Assertion | None:
    """Read a yes/no answer past a filler-only sentence ("Does your neck hurt? Um. A little tender")
    or a short follow-up question ("Any headaches or fevers? Any of those symptoms? No.")."""
    s = ex.sentence_of(ex.span(m)[0])
    if not ex.ctx.ends_q[s]:
        return None
    return _read_yes_no(ex, s, skip_first=True)


def _read_yes_no(ex: _Extractor, s: int, skip_first: bool = False) -> Assertion | None:
    """The yes/no answer to question sentence ``s`` in the next two sentences, or None.

    Filler-only sentences and short follow-up questions without a clinical mention are skipped;
    with ``skip_first`` the first real answer sentence (already read by the analyzer) is not re-read.
    """
    fillers = _fillers()
    n = len(ex.ctx.sent_start)
    explained = 0  # clarifying sentences skipped ("Any chills? So, shaking in your bed. No, not really.")
    for s2 in range(s + 1, min(n, s + 3 + _MAX_CLARIFYING)):
        lo, hi = ex.sentence_bounds(s2)
        words = [w for w in ex.words[lo:hi] if w not in fillers]
        if not words:
            continue  # "Um." / "Uh." carries nothing: the answer is in the next sentence
        if ex.ctx.ends_q[s2] and s2 not in ex.mention_sents and (len(words) <= 6 or ex.words[lo] in ("like", "such")):
            continue  # a follow-up of the same question ("Any of those symptoms?", "Like to your forearm ...?")
        ans = None if (skip_first and s2 == s + 1) else ex.ctx._answer(lo, hi)
        if ans is None:
            if not ex.ctx.ends_q[s] or ex.ctx.ends_q[s2] or s2 in ex.mention_sents or explained >= _MAX_CLARIFYING:
                return None
            explained += 1  # no yes/no and no clinical term: an explanation of the question; read on
            continue
        kind, a, b = ans
        status = {"answer_no": "absent", "answer_unsure": "uncertain"}.get(kind, "present")
        start, end = ex.tokens[a].start, ex.tokens[b - 1].end
        return Assertion(status, "answer", ex.text[start:end], start, end)  # type: ignore[arg-type]
    return None


def _question_continuation(ex: _Extractor, m: Mention, a: Assertion) -> bool:
    """A list split off the question before it ("...any other symptoms like sore throat? Running nose,
    chest pain, dizziness, anything like that."): a statement right after a question that ends like a
    question's list. Its mentions are asked about, not asserted."""
    if a.source != "statement" or a.cue_start is not None:
        return False
    s = ex.sentence_of(ex.span(m)[0])
    if s == 0 or ex.ctx.ends_q[s] or not ex.ctx.ends_q[s - 1]:
        return False
    lo, hi = ex.sentence_bounds(s)
    tail = " " + " ".join(ex.words[max(lo, hi - 4) : hi]) + " "
    return _has_any(tail, _LIST_ENDINGS)


def _subordinate_wh_question(ex: _Extractor, m: Mention, a: Assertion) -> bool:
    """A yes/no question read as presupposing its target only because a wh-word sits in a
    subordinate clause ("any pain when you're breathing in?"): the wh-word is not among the
    sentence's first words."""
    if a.source != "statement" or a.cue_start is not None:
        return False
    s = ex.sentence_of(ex.span(m)[0])
    if not ex.ctx.ends_q[s]:
        return False
    lo, hi = ex.sentence_bounds(s)
    lead = [w for w in ex.words[lo:hi] if w not in _lead_fillers() and w not in _OPENER_WORDS][:3]
    return not any(w in _WH_LEAD for w in lead)
