"""Pass 1 of the ``rules`` structurer, mentions: lexicon, drug and composed terms ("pain ... in my left
knee" -> knee pain; "hurts to swallow" -> painful swallowing; blood said with a cough word -> hemoptysis;
aggravating and relieving factors, joint swelling, the senses of a screening question), allergens and the
reaction they cause.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Container, Iterator

from stresstest.clinical.drugs import match_drug_tokens
from stresstest.clinical.lexicon import Mention, canonical_concept, concept_info, match_tokens
from stresstest.clinical.text import norm_phrase, read_table
from stresstest.structure.rules.common import (
    _MODIFIER_ACTIVITIES,
    _MODIFIER_CONCEPTS,
    _SPUTUM_WORDS,
    _Extractor,
    _fillers,
    _Found,
    _lead_fillers,
    _site_words,
)
from stresstest.structure.rules.tables import (
    _ALLERGY_CUES,
    _BLOOD_PARTNERS,
    _BLOOD_WORDS,
    _CO_SYMPTOM_WORDS,
    _COUGH_WORDS,
    _JOINT_SITES,
    _LIST_JOINERS,
    _OPENER_WORDS,
    _PAIN_QUALITIES,
    _PAIN_WORD_PARTNERS,
    _PAIN_WORDS,
    _RADIATION,
    _SITE_PAIN,
    _WH_LEAD,
)


@functools.lru_cache(maxsize=1)
def _allergens() -> dict[tuple[str, ...], str]:
    return {tuple(norm_phrase(r[0]).split()): r[1] for r in read_table("allergens.tsv") if len(r) >= 2}


def _covered(ex: _Extractor, mentions: list[Mention]) -> set[int]:
    """Token indexes inside a clinical mention (body sites excluded: they are what terms pair with)."""
    return {k for m in mentions if m.category != "body_site" for k in range(*ex.span(m))}


def _free_words(ex: _Extractor, mentions: list[Mention], words: Container[str]) -> Iterator[tuple[int, int, int, int]]:
    """``(token, sentence, sentence start, sentence end)`` of each word in ``words`` that no clinical mention
    covers, in text order: the anchors the free-form readings below start from."""
    covered = _covered(ex, mentions)
    for k, w in enumerate(ex.words):
        if w in words and k not in covered:
            s = ex.sentence_of(k)
            yield (k, s, *ex.sentence_bounds(s))


def _concept_mention(ex: _Extractor, start: int, end: int, concept: str, category: str | None = None) -> Mention:
    """A mention of ``concept`` over ``ex.text[start:end]`` carrying the lexicon's facts (category unless given,
    red flag, triage hint); a concept the lexicon lacks is a plain symptom."""
    info = concept_info(concept)
    return Mention(
        start,
        end,
        ex.text[start:end],
        concept,
        category or (info.category if info else "symptom"),
        bool(info and info.red_flag),
        info.triage_hint if info else None,
    )


def _compose(
    ex: _Extractor,
    mentions: list[Mention],
    anchors: frozenset[str],
    partner: Callable[[str], str | None],
    reach: int = 5,
    partner_may_be_covered: bool = False,
    back_reach: int | None = None,
) -> list[Mention]:
    """Two words a few tokens apart that together name a concept no lexicon surface covered.

    "pain ... in my left knee" -> knee pain; "any blood that you notice in the sputum" ->
    hemoptysis. ``partner(word)`` gives the concept for a partner word (None otherwise); the
    nearest partner in the same sentence within ``reach`` tokens wins. With
    ``partner_may_be_covered`` the partner may be part of another mention ("sputum"), which the
    caller then drops in favour of the composed one.
    """
    covered = _covered(ex, mentions)
    out: list[Mention] = []
    used: set[int] = set()
    for k, w in enumerate(ex.words):
        if w not in anchors or k in covered or k in used:
            continue
        lo, hi = ex.sentence_bounds(ex.sentence_of(k))
        found: tuple[int, str] | None = None
        back = reach if back_reach is None else back_reach
        for d in range(1, reach + 1):
            for kk in (k + d, k - d) if d <= back else (k + d,):
                if lo <= kk < hi and (partner_may_be_covered or kk not in covered) and kk not in used:
                    between = range(min(k, kk) + 1, max(k, kk))
                    if any(ex.words[x] in _LIST_JOINERS and ex.words[x + 1] not in _CO_SYMPTOM_WORDS for x in between):
                        continue  # "blood or any sputum" names two things, not bloody sputum
                    concept = partner(ex.words[kk])
                    if concept is not None and ex.words[kk] == "back" and _adverb_back(ex, kk):
                        continue  # "the pain comes back", "it goes back to normal": not the back
                    if concept is not None:
                        found = (kk, concept)
                        break
            if found:
                break
        if found is None:
            continue
        kk, concept = found
        a, b = min(k, kk), max(k, kk)
        out.append(_concept_mention(ex, ex.tokens[a].start, ex.tokens[b].end, concept, "symptom"))
        used.update(range(a, b + 1))
    return out


_IT_HURTS = frozenset({"hurts", "hurt", "hurting", "painful", "sore"})
_IT_WORDS = frozenset({"it", "it's", "that", "that's"})


def _pain_of_the_site_before(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """ "I twisted my ankle. I think I stepped on something and it really hurts.": a statement whose "it"
    hurts, naming no site, after a statement that names exactly one body site, is a pain at that site. The
    mention spans the hurt word, so negation reads it as for any term ("it doesn't hurt")."""
    sites = _site_words()
    out: list[Mention] = []
    for k, s, lo, hi in _free_words(ex, mentions, _IT_HURTS):
        w = ex.words[k]
        if s == 0 or ex.ctx.ends_q[s] or ex.ctx.ends_q[s - 1] or not _IT_WORDS & set(ex.words[max(lo, k - 3) : k]):
            continue
        if any(x in sites or x in _PAIN_WORDS and x != w for x in ex.words[lo:hi]):
            continue
        plo, phi = ex.sentence_bounds(s - 1)
        named = {sites[x] for x in ex.words[plo:phi] if x in sites}
        if len(named) != 1 or any(x in _PAIN_WORDS for x in ex.words[plo:phi]):
            continue
        site = named.pop()
        concept = _SITE_PAIN.get(site, f"{site} pain")
        if concept_info(concept) is not None:
            out.append(_concept_mention(ex, ex.tokens[k].start, ex.tokens[k].end, concept, "symptom"))
    return out


_BACK_VERBS = frozenset(
    {
        "come",
        "comes",
        "came",
        "coming",
        "go",
        "goes",
        "went",
        "going",
        "get",
        "gets",
        "got",
        "bring",
        "brings",
        "brought",
        "keep",
        "keeps",
        "kept",
        "is",
        "was",
        "be",
        "been",
        "it's",
        "bounce",
        "bounced",
        "call",
        "called",
        "sit",
        "sat",
        "lie",
        "lay",
        "laid",
        "step",
        "stepped",
        "pull",
        "pulled",
        "push",
        "pushed",
        "think",
        "thinking",
        "looking",
    }
)
_BACK_AFTER = frozenset({"to", "again", "up", "home", "then", "and", "after", "later", "on", "in", "from"})


def _adverb_back(ex: _Extractor, k: int) -> bool:
    """ "back" used as an adverb ("the pain comes back", "it went back to normal") or as a side of another site
    ("the back of my knee"), not the body part ("my back", "lower back", "back pain")."""
    prev = ex.words[k - 1] if k > 0 else ""
    nxt = ex.words[k + 1] if k + 1 < len(ex.words) else ""
    if nxt == "of":
        return True  # "the back of my knee": a side of another site
    if prev in ("my", "your", "his", "her", "the", "lower", "upper", "mid", "middle", "their", "our") and nxt != "to":
        return False
    return prev in _BACK_VERBS or nxt in _BACK_AFTER


def _pain_partner(word: str) -> str | None:
    if word.startswith("swallow"):
        return "painful swallowing"  # odynophagia: not the red flag of true dysphagia
    if word in _PAIN_WORD_PARTNERS:
        return _PAIN_WORD_PARTNERS[word]
    site = _site_words().get(word)
    return None if site is None else _SITE_PAIN.get(site, f"{site} pain")


def _blood_partner(word: str) -> str | None:
    return _BLOOD_PARTNERS.get(word)


def _allergy_context(ex: _Extractor, tok: int) -> bool:
    """True when the token sits in an allergy statement or the answer to an allergy question."""
    s = ex.sentence_of(tok)
    lo, hi = ex.sentence_bounds(s)
    if any(w in _ALLERGY_CUES for w in ex.words[max(lo, tok - 8) : min(hi, tok + 3)]):
        return True
    # Answer to "Any allergies?", which may take two sentences ("Yeah, I do. Penicillin.").
    for back in (1, 2):
        q = s - back
        if q < 0:
            break
        if ex.ctx.ends_q[q]:
            plo, phi = ex.sentence_bounds(q)
            return any(w in _ALLERGY_CUES for w in ex.words[plo:phi]) and tok - phi <= 16
    return False


def _find_allergens(ex: _Extractor, drugs: list[Mention]) -> tuple[list[Mention], set[int]]:
    """Allergen mentions (drugs and common non-drug allergens) in allergy context."""
    out: list[Mention] = []
    consumed: set[int] = set()
    for idx, d in enumerate(drugs):
        if _allergy_context(ex, ex.span(d)[0]):
            out.append(Mention(d.start, d.end, d.surface, d.concept, "allergy"))
            consumed.add(idx)
    # Other mentions of a drug the patient is allergic to ("what happens when you take
    # penicillin?") are about the allergy, not a medication they take.
    allergic_to = {m.concept for m in out}
    consumed.update(idx for idx, d in enumerate(drugs) if d.concept in allergic_to)
    table = _allergens()
    drug_toks = {k for d in drugs for k in range(*ex.span(d))}
    k = 0
    n = len(ex.tokens)
    while k < n:
        hit = None
        for ln in (2, 1):
            key = tuple(ex.words[k : k + ln])
            if len(key) == ln and key in table and k not in drug_toks:
                hit = (ln, table[key])
                break
        if hit and _allergy_context(ex, k):
            ln, canon = hit
            start, end = ex.tokens[k].start, ex.tokens[k + ln - 1].end
            out.append(Mention(start, end, ex.text[start:end], canon, "allergy"))
            k += ln
        else:
            k += 1
    out.sort(key=lambda m: m.start)
    return out, consumed


#: A drug class and the members that, named in the same sentence, make the class mention redundant
#: ("anti-inflammatories like ibuprofen or Advil" is ibuprofen).
_CLASS_MEMBERS = {
    "nsaid": frozenset({"ibuprofen", "naproxen", "diclofenac", "celecoxib", "meloxicam", "ketorolac", "indomethacin"})
}


def _named_members(ex: _Extractor, drugs: list[Mention]) -> list[Mention]:
    sents: dict[int, set[str]] = {}
    for d in drugs:
        sents.setdefault(ex.sentence_of(ex.span(d)[0]), set()).add(d.concept)
    return [
        d
        for d in drugs
        if not (d.concept in _CLASS_MEMBERS and _CLASS_MEMBERS[d.concept] & sents[ex.sentence_of(ex.span(d)[0])])
    ]


def _pass_mentions(ex: _Extractor) -> _Found:
    """Lexicon, drug and composed mentions; allergens and their reaction regions.

    Composed terms replace what they swallowed; a "bright red blood" next to a cough word is
    hemoptysis, not rectal bleeding; lexicon mentions that are the allergen itself are dropped.
    """
    all_mentions = match_tokens(ex.text, ex.tokens)
    drugs = _named_members(ex, match_drug_tokens(ex.text, ex.tokens))
    lex = [m for m in all_mentions if m.category != "body_site"]
    composed = _compose(ex, all_mentions, _PAIN_WORDS, _pain_partner, reach=6)
    composed += _compose(
        ex, all_mentions, _BLOOD_WORDS, _blood_partner, reach=6, partner_may_be_covered=True, back_reach=3
    )
    composed += _listed_blood(ex, all_mentions + composed)
    composed += _pain_of_the_site_before(ex, all_mentions + composed)
    lex = [
        m
        for m in lex
        if not any(c.start <= m.start and m.end <= c.end for c in composed)
        or norm_phrase(m.surface) in _CO_SYMPTOM_WORDS | {"swollen"}  # "pain and swelling in my knee"
        or m.concept == "pain radiation"
    ]  # "does this pain move anywhere else in your hand?"
    modifiers = _modifier_mentions(ex, all_mentions + composed)
    lex = [m for m in lex if not any(c.start <= m.start and m.end <= c.end for c in modifiers)]
    composed += modifiers
    composed += _sense_mentions(ex, all_mentions + composed)
    discharge = _listed_discharge(ex, all_mentions + composed)
    if discharge:  # "any discharge like mucus or tears from your eyes?": not a sputum question
        asked = {ex.sentence_of(ex.span(m)[0]) for m in discharge}
        lex = [m for m in lex if m.concept not in ("discharge", "sputum") or ex.sentence_of(ex.span(m)[0]) not in asked]
    composed += discharge
    composed += _cough_time_of_day(ex, all_mentions + composed)
    composed += _breathless_after_coughing(ex, all_mentions + composed)
    composed += _never_before(ex, all_mentions + composed)
    composed += _listed_sites(ex, all_mentions + composed)
    lex = (
        _airway_factors(ex, [_joint_swelling(ex, _cough_blood(ex, m)) for m in lex if not _pain_descriptor(ex, m)])
        + composed
    )
    lex = [
        m
        for m in lex
        if not _radiation_destination(ex, m)
        and not _not_a_fall(ex, m)
        and not _constant_not_pain(ex, m)
        and not _not_the_illness(ex, m)
    ]
    allergens, consumed = _find_allergens(ex, drugs)
    spans = [(a.start, a.end) for a in allergens]
    lex = sorted((m for m in lex if not any(a <= m.start < b for a, b in spans)), key=lambda m: m.start)
    ex.mention_sents = {ex.sentence_of(ex.span(m)[0]) for m in lex + drugs}
    ex.mention_toks = {ex.span(m)[0] for m in lex + drugs}
    return _Found(lex, drugs, allergens, consumed, _reaction_regions(ex, allergens))


#: Factors that change a cough or breathlessness rather than a pain ("worse in the cold air", "the dust makes
#: it worse"): word sequence -> the activity named in "<symptom> worse with <activity>".
_AIRWAY_ACTIVITIES: dict[tuple[str, ...], str] = {
    **dict.fromkeys([("cold", "air"), ("cold", "weather"), ("the", "cold"), ("cold", "temperatures")], "cold air"),
    **dict.fromkeys([("dust",), ("dusty",)], "dust"),
    **dict.fromkeys([("smoke",), ("smoking",), ("cigarettes",)], "smoking"),
    **dict.fromkeys([("running",), ("run",), ("stairs",), ("exertion",)], "exertion"),
}
#: A pain made worse by stairs or running keeps that activity ("pain worse with stairs"); other exertion is
#: movement.
_PAIN_EXERTION = {
    ("stairs",): "pain worse with stairs",
    ("running",): "pain worse with running",
    ("run",): "pain worse with running",
    **dict.fromkeys(
        [
            ("upstairs",),
            ("downstairs",),
            ("up", "stairs"),
            ("down", "stairs"),
            ("walking", "down", "stairs"),
            ("walking", "up", "stairs"),
            ("walking", "upstairs"),
            ("walking", "downstairs"),
            ("going", "upstairs"),
            ("going", "downstairs"),
        ],
        "pain worse with stairs",
    ),
}
_BREATH_WORDS = frozenset(
    {"breath", "breathing", "breathe", "breathless", "breathlessness", "winded", "wheeze", "wheezing", "wheezy"}
)


_COUGH_MODIFIER = frozenset({"cough", "coughing", "coughs"})
_WORSE_WORDS = frozenset({"worse", "worsens", "worsen", "aggravates", "aggravate", "aggravated"})
_BETTER_WORDS = frozenset(
    {
        "better",
        "helps",
        "help",
        "helped",
        "relieves",
        "relieve",
        "relieved",
        "eases",
        "ease",
        "eased",
        "improves",
        "improve",
        "improved",
    }
)
_MODIFIER_REACH = 6


_SENSES = {
    "vision": "vision changes",
    "eyesight": "vision changes",
    "hearing": "hearing changes",
    "smell": "loss of smell",
    "taste": "loss of taste",
    "hair": "hair changes",
    "nails": "nail changes",
    "nail": "nail changes",
}
_SENSE_CUES = frozenset(
    {"change", "changes", "changed", "problems", "problem", "trouble", "loss", "senses", "difficulty", "issues"}
)


_BLOOD_NOT_SPUTUM = frozenset(
    {
        "pressure",
        "pressures",
        "work",
        "test",
        "tests",
        "thinner",
        "thinners",
        "sugar",
        "sugars",
        "clot",
        "clots",
        "type",
        "transfusion",
        "transfusions",
        "count",
        "counts",
        "cells",
        "vessel",
        "vessels",
        "donation",
        "bank",
    }
)


def _listed_blood(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """Blood listed beside sputum in one question ("bringing up any sputum or any blood?"): coughed-up
    blood, i.e. hemoptysis, asked about on its own (the sputum keeps its own mention). The word "blood"
    alone becomes the mention, so the answer decides its status as for any term."""
    out: list[Mention] = []
    for k, s, lo, hi in _free_words(ex, mentions, {"blood"}):
        if k + 1 < hi and ex.words[k + 1] in _BLOOD_NOT_SPUTUM:
            continue  # blood pressure, blood work, blood thinners ...
        if not any(x in _SPUTUM_WORDS for x in ex.words[max(lo, k - 8) : min(hi, k + 8)]):
            # "Any sputum? - Yes, a little. - Have you noticed any blood?": a question about blood right after
            # the sputum was talked about (two sentences back) is about blood in it.
            plo = ex.sentence_bounds(max(0, s - 3))[0]
            if not (ex.ctx.ends_q[s] and any(x in _SPUTUM_WORDS or x in _COUGH_WORDS for x in ex.words[plo:lo])):
                continue
        out.append(_concept_mention(ex, ex.tokens[k].start, ex.tokens[k].end, "hemoptysis", "symptom"))
    return out


def _listed_sites(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """Body sites listed in a yes/no pain question ("any pain in other joints, like the hips or the knees or
    your shoulders?"): each listed site is a "<site> pain" asked about (two or more sites, a pain or joint
    word in the question, no wh-word leading it). Sites a composed pain already covers are left to it."""
    covered = _covered(ex, mentions)
    sites = _site_words()
    out: list[Mention] = []
    for s in range(len(ex.ctx.sent_start)):
        if not ex.ctx.ends_q[s]:
            continue
        lo, hi = ex.sentence_bounds(s)
        words = ex.words[lo:hi]
        lead = [w for w in words if w not in _lead_fillers() and w not in _OPENER_WORDS][:3]
        if any(w in _WH_LEAD for w in lead) or not (
            {"pain", "pains", "joints", "joint", "hurt", "hurts", "aches"} & set(words)
        ):
            continue
        listed = [k for k in range(lo, hi) if ex.words[k] in sites and k not in covered]
        if len(listed) < 2:
            continue
        for k in listed:
            concept = _SITE_PAIN.get(sites[ex.words[k]], f"{sites[ex.words[k]]} pain")
            if concept_info(concept) is not None:
                out.append(_concept_mention(ex, ex.tokens[k].start, ex.tokens[k].end, concept))
    return out


def _never_before(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """ "I've never had any pain in my chest before" / "never experienced any kind of pain there": no
    previous similar episode. A statement with "never" and "before"/"experienced" and a pain or symptom
    word gives a mention on "never" ... whose status the negation cue makes absent."""
    out: list[Mention] = []
    for k, s, _lo, hi in _free_words(ex, mentions, {"never"}):
        rest = ex.words[k + 1 : hi]
        if (
            ex.ctx.ends_q[s]
            or not ({"before", "experienced"} & set(rest))
            or not (_PAIN_WORDS & set(rest) or {"this", "that", "it", "anything", "something"} & set(rest[:4]))
        ):
            continue
        end_k = next(x for x in range(k + 1, hi) if ex.words[x] in ("before", "experienced"))
        start, end = ex.tokens[k + 1].start, ex.tokens[end_k].end
        out.append(Mention(start, end, ex.text[start:end], "previous similar episode", "history"))
    return out


def _sense_mentions(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """The senses listed in a screening question ("any changes in your vision, hearing, smell or taste?"):
    each bare sense word is a mention of its change/loss concept, answered by the usual reading.
    Only in questions that ask about changes or problems; statements ("my taste is fine") are left alone."""
    out: list[Mention] = []
    for k, s, lo, hi in _free_words(ex, mentions, _SENSES):
        if not ex.ctx.ends_q[s] or not any(x in _SENSE_CUES for x in ex.words[lo:hi]):
            continue
        out.append(_concept_mention(ex, ex.tokens[k].start, ex.tokens[k].end, _SENSES[ex.words[k]]))
    return out


_DAY_TIMES = {
    ("at", "night"): "at night",
    ("at", "nighttime"): "at night",
    ("at", "night-time"): "at night",
    ("in", "the", "morning"): "in the morning",
    ("in", "the", "mornings"): "in the morning",
}
_MOSTLY = frozenset({"worse", "worst", "mostly", "mainly", "especially", "bad", "usually", "more"})


def _cough_time_of_day(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """A cough worse at a time of day, said in a statement about the cough ("I think the cough's worse at night",
    "it's worse in the morning" after a cough question, "I've been coughing at night too"): "cough worse at
    night" / "cough worse in the morning", the mention on the time phrase. A sentence (and the one before) that
    talks about a pain is left alone."""
    covered = _covered(ex, mentions)
    out: list[Mention] = []
    for k in range(len(ex.words)):
        phrase = next((p for p in _DAY_TIMES if tuple(ex.words[k : k + len(p)]) == p), None)
        if phrase is None or covered.intersection(range(k, k + len(phrase))):
            continue
        s = ex.sentence_of(k)
        if ex.ctx.ends_q[s]:
            continue
        lo, hi = ex.sentence_bounds(s)
        plo = ex.sentence_bounds(s - 1)[0] if s > 0 else lo
        if any(w in _PAIN_WORDS for w in ex.words[plo:hi]) or not any(
            w in _COUGH_MODIFIER or w == "cough's" for w in ex.words[plo:hi]
        ):
            continue
        before = ex.words[max(lo, k - 4) : k]
        if not (_MOSTLY.intersection(before) or (before and before[-1] in ("coughing", "cough", "coughs"))):
            continue
        start, end = ex.tokens[k].start, ex.tokens[k + len(phrase) - 1].end
        out.append(Mention(start, end, ex.text[start:end], f"cough worse {_DAY_TIMES[phrase]}", "symptom"))
    return out


_AFTER_COUGH = frozenset(
    {"i", "my", "some", "of", "a", "the", "each", "every", "really", "bad", "big", "long", "her", "his", "he", "she"}
)


def _breathless_after_coughing(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """Breathlessness brought on by the cough ("I've been short of breath after I cough", "after some of my
    coughing fits I can be a little bit shorter in breath", "Any shortness of breath? - Just bad after I cough"):
    "after" right before a cough word, in a statement that (or whose question) talks about breathing and no pain.
    The mention is on "after ... cough", so negation reads it as for any term."""
    covered = _covered(ex, mentions)
    out: list[Mention] = []
    for k, w in enumerate(ex.words):
        if w != "after":
            continue
        c = next((x for x in range(k + 1, min(len(ex.words), k + 5)) if ex.words[x] in _COUGH_MODIFIER), None)
        s = ex.sentence_of(k)
        if (
            c is None
            or ex.ctx.ends_q[s]
            or ex.sentence_of(c) != s
            or covered.intersection(range(k, c))
            or not all(x in _AFTER_COUGH for x in ex.words[k + 1 : c])
        ):
            continue  # not "it's come on after that, the cough started first"
        lo, hi = ex.sentence_bounds(s)
        plo = ex.sentence_bounds(max(0, s - 2))[0]
        words = ex.words[plo:hi]
        if any(x in _PAIN_WORDS for x in words) or not any(x in _BREATH_WORDS or x == "shorter" for x in words):
            continue
        start, end = ex.tokens[k].start, ex.tokens[c].end
        out.append(
            Mention(
                start, end, ex.text[start:end], canonical_concept("shortness of breath worse with coughing"), "symptom"
            )
        )
    return out


_DISCHARGE_REACH = 10
_DISCHARGE_SITES = {"eye": "eye discharge", "eyes": "eye discharge", "ear": "ear discharge", "ears": "ear discharge"}


def _listed_discharge(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """Discharge asked about with the eyes or ears ("any discharge like mucus or tears from your eyes or ears?",
    "any eye symptoms such as discharge?"): each of those sites within :data:`_DISCHARGE_REACH` tokens of
    "discharge" in the question is a mention of its discharge, answered by the usual reading (the caller then
    drops the bare "discharge" and a "mucus" there). Sites a lexicon surface covers are left to it."""
    covered = _covered(ex, mentions)
    out: list[Mention] = []
    for k, w in enumerate(ex.words):
        if w != "discharge" or not ex.ctx.ends_q[ex.sentence_of(k)]:
            continue
        lo, hi = ex.sentence_bounds(ex.sentence_of(k))
        seen: set[str] = set()
        for x in range(max(lo, k - _DISCHARGE_REACH), min(hi, k + _DISCHARGE_REACH + 1)):
            concept = _DISCHARGE_SITES.get(ex.words[x])
            if concept is None or concept in seen or x in covered:
                continue
            seen.add(concept)
            out.append(_concept_mention(ex, ex.tokens[x].start, ex.tokens[x].end, concept))
    return out


def _airway_factors(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """A pain factor the lexicon found ("rest helps", "worse when I lie down") said about a cough or
    breathlessness, in a sentence (and the one before) that names no pain, is that symptom's factor."""
    out: list[Mention] = []
    for m in mentions:
        if m.concept not in _MODIFIER_CONCEPTS or not m.concept.startswith("pain "):
            out.append(m)
            continue
        i, j = ex.span(m)
        s = ex.sentence_of(i)
        plo = ex.sentence_bounds(s - 1)[0] if s > 0 else ex.sentence_bounds(s)[0]
        words = ex.words[plo : ex.sentence_bounds(s)[1]]
        subject = None if any(w in _PAIN_WORDS or w == "pain" for w in words) else _airway_subject(words)
        concept = (
            _airway_factor(subject, "worse" if " worse " in f" {m.concept} " else "better", m.concept, ex.words[i:j])
            if subject
            else None
        )
        out.append(dataclasses.replace(m, concept=concept) if concept else m)
    return out


def _airway_subject(words: list[str]) -> str | None:
    """The airway symptom a factor sentence is about: cough, else breathlessness, else None."""
    if any(w in _COUGH_MODIFIER for w in words):
        return "cough"
    if any(w in _BREATH_WORDS for w in words):
        return "shortness of breath"
    return None


def _airway_factor(subject: str, direction: str, pain_concept: str | None, words: list[str]) -> str | None:
    """The pain factor's concept rewritten for a cough or breathlessness ("pain worse with movement" ->
    "shortness of breath on exertion"), in the one spelling of :func:`canonical_concept`."""
    if pain_concept is None:
        return None
    if tuple(words) in _AIRWAY_ACTIVITIES:
        activity = _AIRWAY_ACTIVITIES[tuple(words)]
    else:
        activity = pain_concept.split(" with ", 1)[-1].split(" by ", 1)[-1]
        activity = activity.removeprefix("pain worse ").removeprefix("pain relieved ")
    if subject == "cough" and activity == "coughing":
        return None  # "worse when I'm coughing" is not a factor of the cough itself
    concept = canonical_concept(f"{subject} {direction} with {activity}")
    # Breathlessness on exertion is the breathlessness itself (its distance or "on exertion" is its value).
    return None if concept == "shortness of breath on exertion" else concept


def _modifier_mentions(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """Aggravating / relieving factors of a pain said in free form: an activity of
    :data:`_MODIFIER_ACTIVITIES` within :data:`_MODIFIER_REACH` tokens of "worse" or "better/helps"
    in the same sentence, in a sentence (or the one before) that talks about pain. The mention spans
    the activity, so its status comes from the same negation and question/answer reading as any term.
    Tokens a lexicon surface already covers are left to it."""
    covered = _covered(ex, mentions)
    activities = {
        **{
            k: (_PAIN_EXERTION.get(k, "pain worse with movement") if v == "exertion" else f"pain worse with {v}", None)
            for k, v in _AIRWAY_ACTIVITIES.items()
        },
        **_MODIFIER_ACTIVITIES,
        **{k: (c, None) for k, c in _PAIN_EXERTION.items() if len(k) > 1 or k not in _AIRWAY_ACTIVITIES},
    }
    longest = max(len(k) for k in activities)
    out: list[Mention] = []
    k = 0
    n = len(ex.words)
    while k < n:
        hit = None
        for size in range(longest, 0, -1):
            key = tuple(ex.words[k : k + size])
            if len(key) == size and key in activities and not covered.intersection(range(k, k + size)):
                hit = (size, activities[key])
                break
        if (
            hit is None
            and ex.words[k] in _COUGH_MODIFIER
            and k in covered
            and any(w in _WORSE_WORDS for w in ex.words[max(ex.sentence_bounds(ex.sentence_of(k))[0], k - 4) : k])
        ):
            hit = (1, _MODIFIER_ACTIVITIES[(ex.words[k],)])  # "worse when I'm coughing": not a cough of its own
        if hit is None:
            k += 1
            continue
        size, (worse_c, better_c) = hit
        s = ex.sentence_of(k)
        lo, hi = ex.sentence_bounds(s)
        near = ex.words[max(lo, k - _MODIFIER_REACH) : min(hi, k + size + _MODIFIER_REACH)]
        plo = ex.sentence_bounds(s - 1)[0] if s > 0 else lo
        about_pain = any(w in _PAIN_WORDS or w == "pain" for w in ex.words[plo:hi])
        airway = None if about_pain else _airway_subject(ex.words[plo:hi])
        if airway is not None:  # "does anything make the cough worse? - running", "worse with the cold air"
            worse_c = _airway_factor(airway, "worse", worse_c, ex.words[k : k + size]) if worse_c else None
            better_c = _airway_factor(airway, "better", better_c, ex.words[k : k + size]) if better_c else None
        elif not about_pain and "it" not in ex.words[plo:hi]:
            worse_c = better_c = None
        concept = None
        if worse_c and any(w in _WORSE_WORDS for w in near):
            concept = worse_c
        elif better_c and any(w in _BETTER_WORDS for w in near):
            concept = better_c
        elif (
            worse_c
            and worse_c.startswith("pain ")
            and (about_pain or "it" in ex.words[plo:hi])
            and not ex.ctx.ends_q[s]
            and (
                _hurts_when(ex, k, size, lo, hi)
                or _short_answer_to(ex, s, _WORSE_WORDS)
                or _IT_HURTS.intersection(ex.words[k + size : min(hi, k + size + 3)])
            )
        ):
            concept = worse_c  # ... or "my shoes touching it hurts"
        elif better_c and better_c.startswith("pain ") and not ex.ctx.ends_q[s] and _tried_and_helped(ex, k, size):
            concept = better_c  # "I've tried some ibuprofen and some ice, that seems to help temporarily"
        elif (
            better_c
            and better_c.startswith("pain ")
            and not ex.ctx.ends_q[s]
            and (
                _short_answer_to(ex, s, _BETTER_WORDS)
                or _conditional(ex, k, lo)
                and any(w in _BETTER_WORDS or w in _GOES_AWAY for w in ex.words[k + size : min(hi, k + size + 10)])
            )
        ):
            concept = better_c  # "if I'm just resting the elbow, um, it makes it better", "if I rest, it goes away"
        if concept is not None:
            start, end = ex.tokens[k].start, ex.tokens[k + size - 1].end
            out.append(Mention(start, end, ex.text[start:end], concept, "symptom"))
        k += size
    return out


_WHEN_WORDS = frozenset({"when", "whenever", "if", "anytime", "any", "time", "every", "during", "while"})
#: Words between "when"/"if"/"any" and the activity ("anytime I tried to move it", "if I take a rest").
_WHEN_SKIP = frozenset(
    {"i", "i'm", "try", "tried", "to", "of", "type", "kind", "sort", "it's", "am", "do", "start", "just", "take", "a"}
)
_HURT_WORDS = _PAIN_WORDS | {"bad", "sharp", "achy", "bugs", "bug", "bothers", "bother"}
_GOES_AWAY = frozenset({"away", "settles", "subsides", "eases", "calms"})


def _conditional(ex: _Extractor, k: int, lo: int) -> bool:
    """The activity at ``k`` opens a condition: "when"/"if"/"any(time)" right before it, past "I", "try to"."""
    j = k - 1
    while j >= lo and ex.words[j] in _WHEN_SKIP:
        j -= 1
    return j >= lo and ex.words[j] in _WHEN_WORDS


def _hurts_when(ex: _Extractor, k: int, size: int, lo: int, hi: int) -> bool:
    """An activity said as the time the pain comes ("anytime I tried to move it, it hurts", "any type of movement
    is really bad", "it hurts the most when I'm moving the knee"): "when"/"if"/"any" right before the activity
    and a hurt word within :data:`_MODIFIER_REACH` tokens of it."""
    if not _conditional(ex, k, lo):
        return False
    near = ex.words[max(lo, k - _MODIFIER_REACH) : min(hi, k + size + _MODIFIER_REACH)]
    return any(w in _HURT_WORDS for w in near)


def _tried_and_helped(ex: _Extractor, k: int, size: int) -> bool:
    """A remedy tried ("I've tried icing it", "some ice") that helped: "tried"/"used" before it in the sentence
    and a help word after it there or opening the next statement ("It seems to help temporarily")."""
    s = ex.sentence_of(k)
    lo, hi = ex.sentence_bounds(s)
    if not {"tried", "try", "trying", "used", "using", "put"}.intersection(ex.words[max(lo, k - 8) : k]):
        return False
    if _BETTER_WORDS.intersection(ex.words[k + size : hi]):
        return True
    if s + 1 >= len(ex.ctx.sent_start) or ex.ctx.ends_q[s + 1]:
        return False
    nlo, nhi = ex.sentence_bounds(s + 1)
    return bool(_BETTER_WORDS.intersection(ex.words[nlo : min(nhi, nlo + 5)]))


def _short_answer_to(ex: _Extractor, s: int, asked: frozenset[str]) -> bool:
    """A short reply (at most 8 words) to a question about what makes it worse or better (one of ``asked`` in it):
    "What makes it worse? - Um, I guess moving it.", "Anything that helps? - Just if I rest"."""
    if s == 0 or not ex.ctx.ends_q[s - 1]:
        return False
    lo, hi = ex.sentence_bounds(s)
    plo, phi = ex.sentence_bounds(s - 1)
    words = [w for w in ex.words[lo:hi] if w not in _fillers()]
    return len(words) <= 8 and any(w in asked for w in ex.words[plo:phi])


_VACCINE_WORDS = frozenset({"vaccine", "vaccines", "vaccination", "vaccinations", "shot", "shots", "jab"})
_WEATHER_AFTER = frozenset({"air", "weather", "temperature", "temperatures", "water", "days", "outside"})
_REMEDY_AFTER = frozenset(
    {"medication", "medications", "medicine", "medicines", "remedy", "remedies", "pills", "tablets", "syrup"}
)


def _not_the_illness(ex: _Extractor, m: Mention) -> bool:
    """An illness word that names something else: "the cold" as the weather ("triggers like the cold, time of day",
    "going out into the cold", "the cold air"), a cold remedy ("the cold medications"), "the flu vaccine" / "flu
    shot" (a vaccination, not influenza). "Just the cold I was talking about" stays the illness."""
    i, j = ex.span(m)
    nxt = ex.words[j] if j < len(ex.words) else ""
    if m.concept == "influenza" and nxt in _VACCINE_WORDS:
        return True
    surface = norm_phrase(m.surface)
    if m.concept == "common cold" and surface in ("cold", "the cold"):
        the = surface == "the cold" or (i > 0 and ex.words[i - 1] == "the")
        k = i - 1 if surface == "the cold" else i - 2  # the word before "the"
        out_in = k >= 0 and ex.words[k] in ("like", "into", "in", "outside", "out", "to")
        return (the and out_in) or nxt in _WEATHER_AFTER or nxt in _REMEDY_AFTER
    return False


def _constant_not_pain(ex: _Extractor, m: Mention) -> bool:
    """ "constant" / "all the time" said of something other than a pain: of another symptom named around it with
    no pain word ("a cough that's been constantly bothering me", "nauseated ... all the time"), or of an activity
    ("constant lifting", "continuous contraction of your wrist extensors"). Its sentence and the two before."""
    if m.concept != "constant pain":
        return False
    i, j = ex.span(m)
    if j < len(ex.words) and ex.words[j].endswith(("ing", "tion")) and ex.words[j] not in _PAIN_WORDS:
        return True
    s = ex.sentence_of(i)
    words = ex.words[ex.sentence_bounds(max(0, s - 2))[0] : ex.sentence_bounds(s)[1]]
    return not any(w in _PAIN_WORDS for w in words) and any(w in _NOT_PAIN_SYMPTOMS for w in words)


_NOT_PAIN_SYMPTOMS = frozenset(
    {
        "cough",
        "coughing",
        "coughs",
        "nausea",
        "nauseous",
        "nauseated",
        "breath",
        "breathing",
        "wheeze",
        "wheezing",
        "sputum",
        "phlegm",
        "vomiting",
        "fever",
        "tired",
        "numbness",
        "tingling",
        "itch",
        "itching",
        "itchy",
    }
)


_SEASONS = frozenset({"winter", "spring", "summer", "autumn", "season", "seasons", "seasonal"})


def _not_a_fall(ex: _Extractor, m: Mention) -> bool:
    """ "fall" as the season ("congested during the fall", "every fall", "in the spring and fall") or of a thing
    ("fall asleep", "it falls out of my hand"), not a fall ("I hurt it in the fall" stays a fall)."""
    if m.concept != "trauma" or norm_phrase(m.surface) not in ("fall", "falls", "fell", "falling"):
        return False
    i, _j = ex.span(m)
    before = ex.words[max(0, i - 2) : i]
    near = ex.words[max(0, i - 4) : i + 5]
    if i + 1 < len(ex.words) and ex.words[i + 1] in ("asleep", "out", "apart", "behind"):
        return True  # "fall asleep", "it'll just fall out of my hand": no one fell
    if norm_phrase(m.surface) != "fall":
        return False
    return (
        before[-1:] in (["this"], ["last"], ["every"], ["next"])
        or before == ["during", "the"]
        or (i + 1 < len(ex.words) and ex.words[i + 1] in _SEASONS)
        or any(w in _SEASONS for w in near)
    )


def _radiation_destination(ex: _Extractor, m: Mention) -> bool:
    """A site pain named in a question about where the pain goes ("does the pain radiate anywhere else, like
    pain in the hand or wrist, or up into the arm?") is a destination of the radiation, not a pain of its own."""
    if not m.concept.endswith(" pain") or m.concept in ("chest pain", "back pain"):
        return False
    s = ex.sentence_of(ex.span(m)[0])
    lo, hi = ex.sentence_bounds(s)
    return ex.ctx.ends_q[s] and any(w in _RADIATION or w in ("radiation", "anywhere") for w in ex.words[lo:hi])


def _pain_descriptor(ex: _Extractor, m: Mention) -> bool:
    """ "achy" in a list of pain qualities ("sharp, burning, achy") describes a pain, it is not
    muscle aches."""
    if m.surface.lower() not in ("achy", "aching", "ache", "achey"):
        return False
    i, j = ex.span(m)
    lo, hi = ex.sentence_bounds(ex.sentence_of(i))
    near = ex.words[max(lo, i - 4) : min(hi, j + 4)]
    # "an achy pain", "it's pretty sharp ... it's really achy", "the pain is achy": the pain's character
    return any(w in _PAIN_QUALITIES or w in ("pain", "pains") for w in near)


def _joint_swelling(ex: _Extractor, m: Mention) -> Mention:
    """Swelling said of a joint ("swelling in my right knee", "the knee is swollen") is joint swelling; of
    the legs or feet ("my legs felt a bit swollen"), leg swelling."""
    if m.concept != "swelling":
        return m
    i, j = ex.span(m)
    lo, hi = ex.sentence_bounds(ex.sentence_of(i))
    sites = _site_words()
    near = [
        sites.get(ex.words[k].removesuffix("'s")) or ex.words[k].removesuffix("'s")
        for k in range(max(lo, i - 5), min(hi, j + 5))
    ]  # "my knee's swollen"
    if any(x in _JOINT_SITES or x in ("joint", "joints") for x in near):
        concept = "joint swelling"
    elif any(x in ("leg", "foot") for x in near):
        concept = "leg swelling"  # "my legs felt a bit swollen", "swelling in the feet"
    else:
        return m
    info = concept_info(concept)
    return Mention(m.start, m.end, m.surface, concept, info.category if info else "symptom")


def _cough_blood(ex: _Extractor, m: Mention) -> Mention:
    """Blood said with a cough word in the same clause is coughed up ("bright red blood when you're
    coughing it up"): hemoptysis, whatever the lexicon surface suggested."""
    if m.concept != "rectal bleeding":
        return m
    i, j = ex.span(m)
    lo, hi = ex.sentence_bounds(ex.sentence_of(i))
    near = ex.words[max(lo, i - 6) : min(hi, j + 8)]
    if not any(w in _COUGH_WORDS for w in near):
        return m
    return _concept_mention(ex, m.start, m.end, "hemoptysis", "symptom")


#: How far after an allergen its reaction may be described ("Penicillin. What happens? I get hives.").
_REACTION_REACH = 30
_REACTION_WORDS = frozenset({"happen", "happens", "happened", "reaction", "reactions", "react", "get"})


def _reaction_regions(ex: _Extractor, allergens: list[Mention]) -> list[tuple[int, int, str]]:
    """Token ranges where symptoms describe an allergen's reaction: (start, end, allergen concept).

    From the allergen's sentence up to :data:`_REACTION_REACH` tokens after it, cut at the first
    later question that is not about the reaction ("What happens?" keeps the region open).
    """
    out: list[tuple[int, int, str]] = []
    for al in allergens:
        i, j = ex.span(al)
        s = ex.sentence_of(i)
        lo, _hi = ex.sentence_bounds(s)
        end = min(len(ex.tokens), j + _REACTION_REACH)
        s2 = s + 1
        while s2 < len(ex.ctx.sent_start) and ex.ctx.sent_start[s2] < end:
            qlo, qhi = ex.sentence_bounds(s2)
            if ex.ctx.ends_q[s2] and not any(w in _REACTION_WORDS for w in ex.words[qlo:qhi]):
                end = qlo
                break
            s2 += 1
        # Reactions named before the allergen stay in its clause ("hives from penicillin").
        out.append((max(lo, i - 8), end, al.concept))
    return out
