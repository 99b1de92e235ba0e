"""Pass 6 of the ``rules`` structurer, patient context: age ("2 1/2 months old", an answer to "how old
are you?"), the highest temperature reading and the vital signs in a critical range.
"""

from __future__ import annotations

import re

from stresstest.structure.rules.common import (
    _answer_sentences,
    _Built,
    _Extractor,
    _fmt_num,
    _has_any,
    _is_number,
    _num_word,
    _Patient,
)
from stresstest.structure.rules.tables import _CRITICAL_VITALS, _age_re


def _pass_patient(ex: _Extractor, built: list[_Built]) -> _Patient:
    """Age ("2 1/2 months old", "I'm 50" in answer to "how old are you?"), the highest temperature
    reading, and vital signs in a critical range (see :data:`_CRITICAL_VITALS`)."""
    p = _Patient()
    for mt in _age_re().finditer(ex.text):
        n = _num_word(mt.group("n"))
        if n is None:
            continue
        if mt.group("half"):
            n += 0.5
        unit = mt.group("unit").lower()
        p.age_years = n / 12 if unit.startswith("month") else n / 52 if unit.startswith("week") else n
        p.age_evidence = [mt.group(0)]
        break
    if p.age_years is None:
        for s in range(len(ex.ctx.sent_start)):
            lo, hi = ex.sentence_bounds(s)
            words = ex.words[lo:hi]
            if not ex.ctx.ends_q[s] or not ("age" in words or _has_any(" " + " ".join(words) + " ", ("how old",))):
                continue
            for s2 in _answer_sentences(ex, s):
                alo, ahi = ex.sentence_bounds(s2)
                nums = [k for k in range(alo, min(ahi, alo + 8)) if ex.words[k].isdigit()]
                if nums and 0 < int(ex.words[nums[0]]) < 111:
                    p.age_years = float(ex.words[nums[0]])
                    p.age_evidence = [ex.quote(nums[0], nums[0] + 1, alo, ahi)]
                    break
            if p.age_years is not None:
                break
    opening = (
        ex.text[: ex.tokens[ex.sentence_bounds(min(_OPENING_SENTENCES, len(ex.ctx.sent_start)) - 1)[1] - 1].end]
        if ex.tokens
        else ""
    )
    p.child = bool(_PARENT_RE.search(opening))
    readings = [(v if v < 50 else (v - 32) * 5 / 9, start) for start, v in ex.temp_at.items()]
    readings += [
        (float(b.claim.value), ex.text.find(b.evidence[0]) if b.evidence else 0)
        for b in built
        if b.claim.concept == "fever"
        and b.claim.unit in ("degrees", "°C")
        and b.claim.value
        and _is_number(b.claim.value)
        and 35 <= float(b.claim.value) <= 43
    ]
    if readings:
        v, start = max(readings)
        p.temperature = v
        k = ex._tok_index(max(start, 0))
        lo, hi = ex.sentence_bounds(ex.sentence_of(k))
        p.temp_evidence = [ex.quote(k, k + 1, lo, hi)]
        if v >= 40.0:
            p.critical.append(("hyperpyrexia", f"{_fmt_num(v)} degrees", p.temp_evidence))
    for name, pattern, critical in _CRITICAL_VITALS:
        for mt in pattern.finditer(ex.text):
            vals = [float(x) for x in mt.groups() if x is not None]
            if critical(vals):
                p.critical.append((name, mt.group(0), [mt.group(0)]))
                break
    return p


#: A parent presenting a child in the opening sentences: "I'm here with my daughter", "brought my son in", "my
#: little boy has been ...".
_OPENING_SENTENCES = 6
_PARENT_RE = re.compile(
    r"\b(?:here with|brought|bringing|with)\s+(?:my|our)\s+(?:\w+\s+)?(?:daughter|son|child|baby|kid|boy|girl)\b"
    r"|\b(?:my|our)\s+(?:little\s+)?(?:daughter|son|baby|boy|girl)\s+(?:has|is|had|was|'s|seems)\b",
    re.IGNORECASE,
)
