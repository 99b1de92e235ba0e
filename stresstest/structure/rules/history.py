"""Pass 5 of the ``rules`` structurer, continued: the history read beyond a mention's own sentence -
how much and how often a habit (drinking, smoking), when a medication is taken, who a partner is - and the
claims of the dialogue itself: the occupation (answer to a work question), the functions asked "how is your
appetite/sleep/energy?" answered in words, and travel said as a statement.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Literal

from stresstest.clinical.lexicon import concept_info
from stresstest.records import revise
from stresstest.schema import Claim
from stresstest.structure.rules.common import (
    _NORMAL_WORDS,
    _answer_sentences,
    _Built,
    _Extractor,
    _fillers,
    _fmt_num,
    _fmt_qty,
    _Group,
    _has_any,
    _is_family,
    _lead_fillers,
    _supporting,
)
from stresstest.structure.rules.tables import _FAMILY, _TOPIC_SENTENCES, _WH_LEAD, _number_words

#: Habits whose amount and rate are read from what the patient says about them (:func:`_habit_attributes`).
_HABITS = frozenset({"alcohol", "smoking"})
_HABIT_GAP = frozenset({"uh", "um", "umm", "uhm", "er", "erm", "like"})  # said inside an amount or a rate
_DRINKS = (
    r"(?:(?:red|white) )?(?:wine|beer|beers|whiskey|whisky|vodka|rum|gin|liquor|spirits|champagne|scotch|"
    r"tequila|cider|sake)"
)
_HABIT_PERIODS = r"(?:day|week|month|night|weekend|year|evening)"
_ASK_WORDS = frozenset(
    {
        "do",
        "does",
        "did",
        "are",
        "is",
        "was",
        "were",
        "have",
        "has",
        "any",
        "how",
        "what",
        "when",
        "would",
        "could",
        "can",
        "so",
    }
)


@functools.lru_cache(maxsize=1)
def _habit_res() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """(drink amount, tobacco amount, rate, years smoked) over a sentence's words joined by single spaces."""
    num = r"(?:\d+|" + "|".join(sorted(_number_words(), key=len, reverse=True)) + ")"
    amount = rf"(?:{num}(?: (?:or|to) {num})?|half an?|an?(?: couple(?: of)?| few)?|couple(?: of)?|few|several)"
    drink = (
        rf"\b{amount} (?:(?:glass|glasses|bottle|bottles|pint|pints|shot|shots|drink|drinks|beer|beers)"
        rf"(?: of {_DRINKS})?|(?:can|cans|cup|cups) of {_DRINKS})(?: or {num})?\b"
    )
    tobacco = rf"\b(?P<n>{amount}) (?P<unit>packs?|cigarettes?|cigs)\b"
    times = rf"(?:once|twice|{num} times|an? (?:couple|few) (?:of )?times|couple (?:of )?times)"
    rate = (
        rf"\b(?:(?:{times} )?(?:a|per|every|each) {_HABIT_PERIODS}|every (?:other|single) {_HABIT_PERIODS}|"
        rf"every (?:couple(?: of)?|few|{num}) {_HABIT_PERIODS}s|on (?:the )?weekends?|daily|nightly|weekly|"
        rf"everyday)\b"
    )
    years = (
        rf"\bfor (?:about |around |almost |over |nearly |the (?:past|last) )?(?:{num}|a couple of|a few|many|"
        rf"several) years\b"
    )
    return re.compile(drink), re.compile(tobacco), re.compile(rate), re.compile(years)


def _habit_sentences(ex: _Extractor, g: _Group) -> list[tuple[int, str]]:
    """The sentences that talk about the patient's habit, in order, each with how it was said: "said" for the
    statements naming it and the answers to the questions that name it ("How much do you smoke? - maybe 2 packs
    a week"; a reply ending in "?" unless it asks something itself), "how long" for the answer to a "how long"
    question, "next" for the statement after one naming it when it names nothing clinical. A sentence about a
    relative is never the patient's habit."""
    out: dict[int, str] = {}
    for m, a in g.mentions:
        if _is_family(ex, m):
            continue
        s = ex.sentence_of(ex.span(m)[0])
        if not ex.ctx.ends_q[s]:
            out[s] = "said"
            n = s + 1  # "I smoke maybe like. I don't know like 5 per day": the statement goes on
            if (
                n < len(ex.ctx.sent_start)
                and not ex.ctx.ends_q[n]
                and n not in ex.mention_sents
                and not _names_family(ex, n)
            ):
                out.setdefault(n, "next")
            continue
        lo, hi = ex.sentence_bounds(s)
        how_long = _has_any(" " + " ".join(ex.words[lo:hi]) + " ", ("how long", "how many years"))
        replies = _answer_sentences(ex, s)
        if a.cue_start is not None:
            replies.append(ex.sentence_of(ex._tok_index(a.cue_start)))
        for s2 in replies:
            lo2, hi2 = ex.sentence_bounds(s2)
            lead = [w for w in ex.words[lo2:hi2] if w not in _lead_fillers()][:1]
            asks = ex.ctx.ends_q[s2] and (not lead or lead[0] in _ASK_WORDS or lead[0] in _WH_LEAD)
            if s2 != s and not asks and not _names_family(ex, s2):
                out[s2] = "how long" if how_long else "said"
    return sorted(out.items())


def _names_family(ex: _Extractor, s: int) -> bool:
    """Sentence ``s`` names a relative ("My dad smokes on the weekends too")."""
    lo, hi = ex.sentence_bounds(s)
    return any(w in _FAMILY for w in ex.words[lo:hi])


def _habit_words(ex: _Extractor, s: int) -> tuple[str, list[int]]:
    """Sentence ``s``'s words without hesitations and "like", joined by spaces, and each word's token index."""
    lo, hi = ex.sentence_bounds(s)
    keep = [k for k in range(lo, hi) if k not in ex.ctx.skip and ex.words[k] not in _HABIT_GAP]
    return " ".join(ex.words[k] for k in keep), keep


def _said(ex: _Extractor, toks: list[int], joined: str, start: int, end: int) -> str:
    """The transcript's words for the match ``joined[start:end]``, hesitations and "like" left out."""
    first = joined.count(" ", 0, start)
    last = first + joined.count(" ", start, end)
    raw = ex.text[ex.tokens[toks[first]].start : ex.tokens[toks[last]].end]
    words = [w for w in raw.split() if w.lower().strip(",.") not in _HABIT_GAP]
    return " ".join(words).strip(" ,.")


def _tobacco_amount(n: str, unit: str) -> tuple[str, str]:
    """("a", "pack") -> ("1", "packs"); ("one or two", "cigarettes") -> ("1-2", "cigarettes")."""
    words = _number_words()
    parts = [p for p in re.split(r" (?:or|to) ", n)]
    nums: list[str] = []
    for p in parts:
        p = p.removesuffix(" of").strip()
        if p.isdigit():
            nums.append(p)
        elif p in words:
            nums.append(_fmt_num(words[p]))
        elif p in ("a", "an"):
            nums.append("1")
        elif p in ("half a", "half an"):
            nums.append("0.5")
        elif p.endswith("couple"):
            nums.append("2")
        else:
            nums.append(p.removeprefix("a ").removeprefix("an "))
    unit = {"pack": "packs", "cigarette": "cigarettes", "cigs": "cigarettes"}.get(unit, unit)
    return "-".join(nums), unit


def _habit_attributes(
    ex: _Extractor, g: _Group, value: str | None, unit: str | None, time: str | None
) -> tuple[str | None, str | None, str | None, list[str]]:
    """How much and how often the patient drinks or smokes, as said: the drink with its amount ("a glass of red
    wine", "a couple beers", "a beer or two"), the packs or cigarettes ("5 per day" asked about cigarettes is 5
    cigarettes), the rate ("on the weekends", "every couple of months", "per day") and, for smoking, the years
    ("for how long? - about 40 years" -> "per day for 40 years"). (value, unit, time, quotes); what is not
    found keeps the value, unit and time read before."""
    drink_re, tobacco_re, rate_re, years_re = _habit_res()
    quotes: list[str] = []
    amount: tuple[str, str | None] | None = None
    rate = years = None
    cigarettes = any("cigarette" in m.surface.lower() or "cigs" in m.surface.lower() for m, _a in g.mentions)
    for s, how in _habit_sentences(ex, g):
        joined, toks = _habit_words(ex, s)
        if not toks:
            continue
        used = False
        if amount is None:
            if g.concept == "alcohol":
                mt = drink_re.search(joined)
                if mt:
                    amount, used = (_said(ex, toks, joined, mt.start(), mt.end()), None), True
            else:
                mt = tobacco_re.search(joined)
                if mt and not mt.group("unit").startswith("pack") and not rate_re.search(joined, mt.end()):
                    mt = None  # "each time I lit a cigarette": an amount smoked comes with its rate
                if mt:
                    amount, used = _tobacco_amount(mt.group("n"), mt.group("unit")), True
        r = rate_re.search(joined)
        if r and rate is None and joined[: r.start()].split()[-1:] not in (["for"], ["in"], ["within"], ["past"]):
            rate, used = _said(ex, toks, joined, r.start(), r.end()), True
            rate = re.sub(r"^once (?=every )", "", rate, flags=re.IGNORECASE)
            rate = re.sub(r"^an? (?=\w+$)", "per ", rate, flags=re.IGNORECASE)  # "2 packs a week": a rate, per week
            if g.concept == "smoking" and amount is None and value is None:
                n = joined[: r.start()].split()[-1:]  # "like 5 per day": the cigarettes smoked
                if n and (n[0].isdigit() or n[0] in _number_words()):
                    amount = (
                        _fmt_num(float(n[0])) if n[0].isdigit() else _fmt_num(_number_words()[n[0]]),
                        "cigarettes" if cigarettes else None,
                    )
        if g.concept == "smoking" and years is None and how != "next":
            y = years_re.search(joined)
            if y:
                years, used = _said(ex, toks, joined, y.start(), y.end()), True
            elif how == "how long":
                lo, hi = ex.sentence_bounds(s)
                for q, k in zip(ex.quantities, ex.qty_tok, strict=True):
                    if (
                        lo <= k < hi
                        and q.kind == "time"
                        and q.value is not None
                        and q.unit_canonical in ("years", "months")
                    ):
                        years, used = f"for {_fmt_qty(q)}", True
                        break
        if used:
            lo, hi = ex.sentence_bounds(s)
            quotes.append(ex.quote(toks[0], toks[-1] + 1, lo, hi))
    if amount is not None and (g.concept == "alcohol" or value is None):
        value, unit = amount
    if rate is not None or years is not None:
        time = " ".join(x for x in (rate, years) if x)
    return value, unit, time, quotes


_DOSE_ASKS = (
    "how often",
    "how many times",
    "how frequently",
    "when did you",
    "when was the last",
    "how long have",
    "how much",
    "how many did",
    "how many have",
)
_TOOK_IT = re.compile(
    r"^(?:i|i've|i have|i had)(?: just| only| been| usually| normally)* (?:took|take|taking|takes|"
    r"used|use|using|tried|had) (?:it|them|that|those|one|some)\b"
)
_BEDTIME = re.compile(
    r"\b(?:at bedtime|before (?:going to )?(?:bed|sleep)|before i go to (?:bed|sleep)|"
    r"before going to bed)\b"
)


def _medication_time(ex: _Extractor, g: _Group) -> tuple[str | None, list[str]]:
    """When or how often the patient took a medication, said apart from its name: in the answer to a question
    naming it ("how often are you taking the Tylenol cold? - I just took it like for four days just before
    going to sleep" -> "at bedtime for 4 days") or in the next statement that takes it up ("I took some Tylenol
    and that did help. OK. I took it once yesterday." -> "yesterday"). (time, quotes), (None, []) if none."""
    n = len(ex.ctx.sent_start)
    for m, _a in g.mentions:
        s = ex.sentence_of(ex.span(m)[0])
        lo, hi = ex.sentence_bounds(s)
        if ex.ctx.ends_q[s]:
            if not _has_any(" " + " ".join(ex.words[lo:hi]) + " ", _DOSE_ASKS):
                continue
            later = [s + 1] if s + 1 < n and not ex.ctx.ends_q[s + 1] else []
        else:
            later = []
            for s2 in range(s + 1, min(n, s + 3)):
                alo, ahi = ex.sentence_bounds(s2)
                said = " ".join(w for w in ex.words[alo:ahi] if w not in _lead_fillers())
                if ex.ctx.ends_q[s2] or s2 in ex.mention_sents:
                    break
                if _TOOK_IT.search(said):
                    later = [s2]
                    break
                if ahi - alo > 2:
                    break  # only an "OK." may come between
        for s2 in later:
            alo, ahi = ex.sentence_bounds(s2)
            time = next(
                (
                    _fmt_qty(q)
                    for q, k in zip(ex.quantities, ex.qty_tok, strict=True)
                    if alo <= k < ahi and q.kind in ("time", "frequency")
                ),
                None,
            )
            bedtime = _BEDTIME.search(" ".join(ex.words[alo:ahi]))
            if bedtime:
                time = "at bedtime" + ("" if not time else f" for {time}" if time[0].isdigit() else f" {time}")
            if time:
                return time, [ex.quote(lo, hi, lo, hi), ex.quote(alo, ahi, alo, ahi)]
    return None, []


_PARTNER = re.compile(
    r"\bwith (?:my |a |one |the same )?(?P<who>boyfriend|girlfriend|husband|wife|partner|spouse|"
    r"fiance|fiancee|fiancé|fiancée)\b"
)


def _partner(ex: _Extractor, g: _Group) -> tuple[str | None, list[str]]:
    """Who the patient is sexually active with, as said in the sentence or answer that says so ("are you
    currently sexually active? - Yeah just like with my boyfriend" -> "with boyfriend"): (value, quotes)."""
    for m, a in _supporting(g.mentions, "present"):
        for s in ex.scope_sentences(m, a):
            lo, hi = ex.sentence_bounds(s)
            mt = _PARTNER.search(" ".join(ex.words[lo:hi]))
            if mt:
                return f"with {mt.group('who')}", [ex.quote(lo, hi, lo, hi)]
    return None, []


_WORK_QUESTIONS = (
    "for work",
    "for a living",
    "what do you do",
    "occupation",
    "are you working",
    "do you work",
    "where do you work",
    "your job",
    "employed",
    "what kind of work",
    "what type of work",
    "line of work",
)
_JOB_PATTERNS = (
    re.compile(
        r"\b(?:i['\u2019]?m|i am|i work as|working as|work as|job as|i['\u2019]?m currently|i am currently)\s+"
        r"(?:an?|the)\s+(?P<job>[a-z]+(?:\s+[a-z]+){0,3})",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:work|working|job)\s+(?:(?:at|in|for)\s+)?(?:at|in|for)\s+(?:(?:an?|the|my|this)\s+)?"
        r"(?P<job>[a-z]+(?:\s+[a-z]+)?)",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?P<job>retired(?:\s+[a-z]+)?|unemployed|laid off|student|on disability|stay at home \w+|"
        r"not working)\b",
        re.IGNORECASE,
    ),
)
_JOB_NOUNS = (
    "worker",
    "teacher",
    "nurse",
    "engineer",
    "accountant",
    "student",
    "driver",
    "manager",
    "chef",
    "cook",
    "cashier",
    "clerk",
    "mechanic",
    "electrician",
    "plumber",
    "carpenter",
    "farmer",
    "lawyer",
    "secretary",
    "receptionist",
    "banker",
    "consultant",
    "programmer",
    "developer",
    "builder",
    "labourer",
    "laborer",
    "painter",
    "cleaner",
    "waiter",
    "waitress",
    "bartender",
    "server",
    "hairdresser",
    "firefighter",
    "officer",
    "technician",
    "assistant",
    "designer",
    "pharmacist",
    "butcher",
    "baker",
    "janitor",
    "landscaper",
    "roofer",
    "welder",
    "miner",
    "soldier",
    "paramedic",
    "dentist",
    "physician",
)
_WORKPLACES = (
    "factory",
    "warehouse",
    "office",
    "store",
    "shop",
    "restaurant",
    "hospital",
    "school",
    "bank",
    "daycare",
    "plant",
    "mine",
    "farm",
    "kitchen",
    "bakery",
    "hotel",
    "lab",
    "laboratory",
    "clinic",
    "garage",
    "call centre",
    "call center",
    "grocery store",
    "construction site",
    "gym",
    "salon",
)
#: Job statements clear enough without a work question ("I work as an accountant", "I'm a construction worker").
_JOB_STATEMENTS = (
    re.compile(r"\bi (?:work|worked) as (?:an?|the) (?P<job>[a-z]+(?:\s+[a-z]+)?)", re.IGNORECASE),
    re.compile(
        r"\bi (?:work|worked) in (?P<job>construction|retail|sales|finance|banking|insurance|accounting|"
        r"healthcare|health care|education|hospitality|manufacturing|landscaping|marketing|real estate|"
        r"it|tech|software|logistics|shipping|transport|administration|childcare|daycare)\b",
        re.IGNORECASE,
    ),
    re.compile(r"\b(?:i'm|i am) (?:an?) (?P<job>(?:[a-z]+\s+)?(?:" + "|".join(_JOB_NOUNS) + r"))\b", re.IGNORECASE),
    re.compile(
        r"\bi work (?:at|in) (?:an?|the|this) (?P<job>(?:[a-z]+\s+)?(?:" + "|".join(_WORKPLACES) + r"))\b",
        re.IGNORECASE,
    ),
)
_JOB_STOP = frozenset(
    {
        "um",
        "uh",
        "like",
        "so",
        "and",
        "but",
        "right",
        "now",
        "currently",
        "the",
        "a",
        "an",
        "at",
        "in",
        "as",
        "for",
        "it",
        "its",
        "when",
        "since",
        "until",
        "before",
        "after",
        "with",
        "who",
        "that",
        "because",
        "about",
        "there",
        "here",
        "then",
        "which",
    }
)


def _job_words(job: str) -> str | None:
    """The job named by a pattern's words, up to the first stop word and to its job noun ("retired school
    teacher when ..." -> "retired school teacher"; "bank as ..." -> "bank"), at most two words before it."""
    words: list[str] = []
    for w in job.lower().split():
        if w in _JOB_STOP:
            break
        words.append(w)
    noun = next((i for i, w in enumerate(words) if w in _JOB_NOUNS or w.removesuffix("s") in _JOB_NOUNS), None)
    words = words[: max(2, noun + 1)] if noun is not None else words[:2]
    return " ".join(words) or None


_AS_JOB = re.compile(r"\bas an? (?P<job>[a-z]+)\b", re.IGNORECASE)
_RETIRED = frozenset({"retired", "retiring", "retirement", "retire"})
_JOB_HOW_LONG = (
    "how long have you worked",
    "how long have you been working",
    "how long have you been doing",
    "how long have you had this job",
    "how long have you been there",
    "how long have you been in",
)


def _job_duration(ex: _Extractor, s0: int) -> tuple[str, list[str]] | None:
    """How long the patient has had the job: the duration answering "how long have you worked in this role?"
    within a few sentences after sentence ``s0`` (the job's), with the question and answer quotes."""
    n = len(ex.ctx.sent_start)
    for s in range(s0 + 1, min(n, s0 + _TOPIC_SENTENCES)):
        if not ex.ctx.ends_q[s]:
            continue
        lo, hi = ex.sentence_bounds(s)
        if not _has_any(" " + " ".join(ex.words[lo:hi]) + " ", _JOB_HOW_LONG):
            continue
        for s2 in _answer_sentences(ex, s, limit=1):
            if ex.ctx.ends_q[s2]:
                break
            alo, ahi = ex.sentence_bounds(s2)
            for q, k in zip(ex.quantities, ex.qty_tok, strict=True):
                if alo <= k < ahi and q.kind == "time" and q.value is not None:
                    return _fmt_qty(q), [ex.quote(lo, hi, lo, hi), ex.quote(alo, ahi, alo, ahi)]
        return None
    return None


def _occupation(ex: _Extractor, value: str | None, quotes: list[str], s: int, pos: int) -> list[_Built]:
    """The occupation claim for a job said in sentence ``s``, with how long the patient has had it."""
    time = None
    found = _job_duration(ex, s)
    if found is not None:
        time, more = found
        quotes = quotes + [q for q in more if q not in quotes]
    claim = Claim(id="", category="social", concept="occupation", status="present", value=value, time=time)
    return [_Built(claim, quotes, _Group("social", "occupation"), pos)]


def _occupation_claims(ex: _Extractor, have: set[str]) -> list[_Built]:
    """The patient's occupation, read from the answer to a work question ("What do you do for work? I'm an
    accountant."): one social claim ``occupation``; its value is the job when a pattern of
    :data:`_JOB_PATTERNS` names one ("an accountant", "work at a butcher shop", "retired"; "work at the bank
    as a consultant" is "bank consultant"), else None; a job said in the past tense with a retirement next to
    it is "retired <job>". Its time is how long the patient has had the job, when asked."""
    if "occupation" in have:
        return []
    for s in range(len(ex.ctx.sent_start)):
        if not ex.ctx.ends_q[s]:
            continue
        lo, hi = ex.sentence_bounds(s)
        if not _has_any(" " + " ".join(ex.words[lo:hi]) + " ", _WORK_QUESTIONS):
            continue
        for s2 in range(s + 1, min(len(ex.ctx.sent_start), s + 3)):
            alo, ahi = ex.sentence_bounds(s2)
            if ex.ctx.ends_q[s2]:
                if ahi > alo and ex.words[alo] == "or":
                    continue  # "What do you do for work? Or are you retired?": the same question goes on
                break
            if ahi - alo < 2 or ex.ctx._answer(alo, ahi) is not None and ahi - alo < 4:
                continue  # "Yes." / "No, not really.": no job named
            answer = " ".join(
                w
                for w in ex.text[ex.tokens[alo].start : ex.tokens[ahi - 1].end].split()
                if w.lower().strip(",.") not in _fillers()
            )
            value = None
            for n, pat in enumerate(_JOB_PATTERNS):
                mt = pat.search(answer)
                if mt:
                    value = _job_words(mt.group("job"))
                    role = _AS_JOB.search(answer, mt.start("job")) if n == 1 else None
                    if value and role and role.group("job").lower() in _JOB_NOUNS:
                        value = f"{value} {role.group('job').lower()}"  # "at the bank as a consultant"
                    break
            quotes = [ex.quote(lo, hi, lo, hi), ex.quote(alo, ahi, alo, ahi)]
            return _occupation(ex, value, quotes, s2, ex.tokens[alo].start)
    found = _statement_match(ex, _JOB_STATEMENTS)
    if found is not None:
        mt, lo, hi = found
        value = _job_words(mt.group("job"))
        s = ex.sentence_of(lo)
        if value and mt.group(0).lower().startswith("i worked") and not value.startswith("retired"):
            near = [
                w
                for s2 in range(s, min(len(ex.ctx.sent_start), s + 2))
                for w in ex.words[slice(*ex.sentence_bounds(s2))]
            ]
            if _RETIRED & set(near):
                value = f"retired {value}"  # "I worked as a mechanic when I was younger ... ever since retiring"
        return _occupation(ex, value, [ex.quote(lo, hi, lo, hi)], s, ex.tokens[lo].start)
    return []


#: "How is your appetite?" - the noun asked about and the concept its answer decides.
_HOW_IS_TOPICS = {
    "appetite": "loss of appetite",
    "sleep": "sleep disturbance",
    "sleeping": "sleep disturbance",
    "energy": "fatigue",
    "bowel": "change in bowel habit",
    "bowels": "change in bowel habit",
    "urination": "urinary symptoms",
    "peeing": "urinary symptoms",
}


_ABNORMAL_WORDS = frozenset(
    {
        "poor",
        "bad",
        "less",
        "decreased",
        "low",
        "down",
        "worse",
        "terrible",
        "trouble",
        "lost",
        "reduced",
        "hard",
        "difficult",
        "barely",
        "little",
    }
)
_NEGATORS = frozenset({"not", "isn't", "wasn't", "hasn't", "haven't", "can't", "never"})


def _how_is_claims(ex: _Extractor, have: set[str]) -> list[_Built]:
    """Open questions about a function ("How's your appetite?", "how has your energy been?") answered in
    words: "normal/fine/good/the same" makes the concept of :data:`_HOW_IS_TOPICS` absent, "poor/less/
    not/down" present; any other answer, or a concept already claimed, gives nothing."""
    out: list[_Built] = []
    seen = set(have)
    for s in range(len(ex.ctx.sent_start)):
        if not ex.ctx.ends_q[s]:
            continue
        lo, hi = ex.sentence_bounds(s)
        words = ex.words[lo:hi]
        if "how" not in words and "how's" not in words:
            continue
        concept = next((_HOW_IS_TOPICS[w] for w in words if w in _HOW_IS_TOPICS), None)
        if concept is None or concept in seen:
            continue
        sents = [x for x in _answer_sentences(ex, s, limit=1) if not ex.ctx.ends_q[x]]
        if not sents:
            continue
        alo, ahi = ex.sentence_bounds(sents[0])
        answer = ex.words[alo : min(ahi, alo + 8)]
        abnormal = normal = False
        for x, w in enumerate(answer):
            if w not in _NORMAL_WORDS and w not in _ABNORMAL_WORDS:
                continue
            flipped = x > 0 and answer[x - 1] in _NEGATORS  # "not great" is abnormal, "not bad" normal
            if (w in _NORMAL_WORDS) != flipped:
                normal = True
            else:
                abnormal = True
        if abnormal == normal:
            continue  # neither, or both ("not bad", "good but less"): leave it unread
        status: Literal["present", "absent"] = "present" if abnormal else "absent"
        info = concept_info(concept)
        claim = Claim(
            id="",
            category=info.category if info else "symptom",  # type: ignore[arg-type]
            concept=concept,
            status=status,
        )
        out.append(
            _Built(
                claim,
                [ex.quote(lo, hi, lo, hi), ex.quote(alo, ahi, alo, ahi)],
                _Group(claim.category, concept),
                ex.tokens[lo].start,
            )
        )
        seen.add(concept)
    return out


_PLACE = r"(?:the )?(?P<place>[A-Z][a-zA-Z]+(?: [A-Z][a-zA-Z]+)?)"
#: Trips said as statements ("since I got back from Mexico", "I went to Haiti on a trip", "I was in Italy for
#: the past three weeks"): the destination is a capitalised place name in the transcript.
_TRIP_PATTERNS = (
    re.compile(r"\b(?:got|came|just got|just came|coming|been) back from (?:a trip (?:to|in) )?" + _PLACE),
    re.compile(r"\b(?:went|travell?ed|flew|drove) (?:to|down to|over to) " + _PLACE),
    re.compile(r"\b(?:trip|vacation|holiday|visit) (?:to|in) " + _PLACE),
    re.compile(r"\b[Ii] was (?:in|visiting) " + _PLACE + r" for\b"),
)
_NOT_PLACES = frozenset(
    {
        "I",
        "The",
        "OK",
        "Okay",
        "Uh",
        "Um",
        "So",
        "And",
        "But",
        "It",
        "My",
        "Emergency",
        "Department",
        "ER",
        "Hospital",
        "School",
        "University",
        "Work",
        "Doctor",
    }
)


def _statement_match(
    ex: _Extractor, patterns: tuple[re.Pattern[str], ...], accept: Callable[[re.Match[str]], bool] | None = None
) -> tuple[re.Match[str], int, int] | None:
    """The first match of ``patterns`` (in pattern order, per sentence) in a sentence that is not a question,
    with the sentence's token bounds."""
    for s in range(len(ex.ctx.sent_start)):
        if ex.ctx.ends_q[s]:
            continue
        lo, hi = ex.sentence_bounds(s)
        if hi <= lo:
            continue
        sentence = ex.text[ex.tokens[lo].start : ex.tokens[hi - 1].end]
        for pat in patterns:
            mt = pat.search(sentence)
            if mt and (accept is None or accept(mt)):
                return mt, lo, hi
    return None


_STAY = re.compile(
    r"\b(?:i|we) (?:was|were|stayed|spent|ve been|have been|had been) (?:down |over |out |up )?"
    r"there for\b"
)
_STAY_REACH = 6  # sentences after the trip's in which the patient may say how long they were there


def _stay(ex: _Extractor, lo: int) -> tuple[str, str] | None:
    """When the patient got back or else how long they were away, said after the trip ("I went to Haiti on a trip
    ... I was there for almost two months"; "I was there for one night and got back five days ago" -> 5 days):
    (time, quote) from a statement within :data:`_STAY_REACH` sentences of token ``lo``."""
    s0 = ex.sentence_of(lo)
    for s in range(s0, min(len(ex.ctx.sent_start), s0 + _STAY_REACH + 1)):
        if ex.ctx.ends_q[s]:
            continue
        slo, shi = ex.sentence_bounds(s)
        words = [w.replace("'", "") for w in ex.words[slo:shi]]
        mt = _STAY.search(" ".join(words))
        if not mt:
            continue
        after = slo + " ".join(words)[: mt.end()].count(" ") + 1
        times = [
            (k, q)
            for q, k in zip(ex.quantities, ex.qty_tok, strict=True)
            if slo <= k < shi and q.kind == "time" and q.value is not None
        ]
        back = [q for k, q in times if {"back", "returned"} & set(ex.words[max(slo, k - 4) : k])]
        stayed = [q for k, q in times if after <= k < after + 4]
        if back or stayed:  # "I was there for one night and got back five days ago": how long ago, first
            return _fmt_qty((back or stayed)[0]), ex.quote(slo, shi, slo, shi)
    return None


def _travel(ex: _Extractor, built: list[_Built]) -> list[_Built]:
    """A trip said as a statement: the travel claim (present) with its destination as the value and how long
    the patient was there (:func:`_stay`) as its time."""
    found = _statement_match(ex, _TRIP_PATTERNS, lambda mt: mt.group("place").split()[0] not in _NOT_PLACES)
    if found is None:
        return built
    mt, lo, hi = found
    place, quote, pos = mt.group("place").lower(), ex.quote(lo, hi, lo, hi), ex.tokens[lo].start
    stay = _stay(ex, lo)
    have = [b for b in built if b.claim.concept == "travel"]
    if not have:
        claim = Claim(
            id="", category="social", concept="travel", status="present", value=place, time=stay[0] if stay else None
        )
        return built + [
            _Built(claim, [quote] + ([stay[1]] if stay and stay[1] != quote else []), _Group("social", "travel"), pos)
        ]
    out = []
    for b in built:
        if b.claim.concept == "travel" and b.claim.status != "absent" and not b.claim.value:
            b = _Built(
                revise(b.claim, status="present", value=place),
                b.evidence + ([quote] if quote not in b.evidence else []),
                b.group,
                b.pos,
            )
        if b.claim.concept == "travel" and b.claim.status == "present" and b.claim.time is None and stay:
            b = _Built(
                revise(b.claim, time=stay[0]),
                b.evidence + ([stay[1]] if stay[1] not in b.evidence else []),
                b.group,
                b.pos,
            )
        out.append(b)
    return out
