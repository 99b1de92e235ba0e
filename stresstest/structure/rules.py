"""The deterministic ``rules`` structurer: transcript -> schema S with exact evidence.

A fully traceable baseline built on :mod:`stresstest.clinical`. Every claim and
flag cites quotes that are exact substrings of the input (the sentence around
the mention, capped to a window in unpunctuated ASR text, plus the answer for
dialogue questions). Pure, deterministic and fast (no model, no I/O after the
data tables are loaded).

Claims
    * symptoms / findings / history / social / risk concepts from the lexicon,
      one claim per (category, concept); "pain" next to a body site composes
      "<site> pain"; family members in the sentence make it ``family_history``;
    * status: present if any mention is asserted present, else absent if any is
      negated (or answered "no"), else uncertain; questions with no readable
      answer assert nothing;
    * value/unit (dose, count, measure such as "3 flights of stairs", "7 out of
      10") and time (duration, onset anchor or frequency) from quantities in
      the same sentence or the answer; laterality from left/right/both next to
      a body site;
    * medications (concept = generic name) with dose and frequency; drugs in a
      prescribing sentence are ``plan`` claims; allergies ("allergic to
      penicillin") are ``allergy`` claims and never medication claims.

Flags
    red-flag symptom present -> ``red_flag`` (plus composite red flags: chest
    pain at rest or radiating, shortness of breath at rest, GI bleeding with
    dizziness/fainting, fever with neck stiffness); allergy present ->
    ``allergy``; high-risk drug class -> ``high_risk_medication``; any other
    present medication -> ``current_medication``; suicidal ideation / self-harm
    -> ``self_harm_risk``; current smoking, heavy alcohol, recreational drug
    use -> ``social_risk``.

Triage rule (documented, deterministic)
    1. ``emergency`` if any present red flag has an emergency hint
       (hemoptysis, hematemesis, stridor, cyanosis, suicidal ideation...) or a
       composite emergency red flag is present;
    2. ``urgent`` if any other red flag is present, or a present symptom has an
       acute onset (duration in minutes/hours, at most 2 days, or anchored to
       today / yesterday / last night / this morning), or a severity cue (pain
       rated >= 8 out of 10, also as the answer to "on a scale of 1 to 10?";
       "severe", "excruciating", "worst"... within 3 words);
    3. ``routine`` otherwise.
    ``field_evidence["triage"]`` quotes what drove the level (for routine: the
    chief complaint's quote, when there is one).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata, resources

from stresstest.clinical.drugs import high_risk_class, match_drug_tokens
from stresstest.clinical.lexicon import Mention, concept_info, match_tokens, surfaces_by_category
from stresstest.clinical.negation import Assertion, ContextAnalyzer
from stresstest.clinical.numbers import Quantity, find_quantities
from stresstest.clinical.text import Token, norm_phrase, read_table, tokenize
from stresstest.schema import Claim, ClinicalRecord, SafetyFlag, Triage

#: Bump on any behaviour change: it is part of the structure cache key.
RULES_VERSION = 1

# Sentences longer than this (run-on ASR text) are quoted as a window around the mention.
_MAX_QUOTE_TOKENS = 30
_QUOTE_SIDE = 12
_QTY_WINDOW = 8  # tokens between a mention and a quantity that may belong to it

_CATEGORY = {
    "symptom": "symptom", "finding": "finding", "history": "history", "social": "social", "risk": "symptom",
}
_PAIN_WORDS = frozenset({"pain", "pains", "painful", "ache", "aches", "aching", "hurts", "hurt", "hurting",
                         "sore", "soreness", "discomfort", "tender"})
_SITE_PAIN = {
    "chest": "chest pain", "abdomen": "abdominal pain", "back": "back pain", "neck": "neck pain",
    "head": "headache", "throat": "sore throat", "knee": "knee pain", "hip": "hip pain",
    "shoulder": "shoulder pain", "ankle": "ankle pain", "foot": "foot pain", "wrist": "wrist pain",
    "hand": "hand pain", "elbow": "elbow pain", "leg": "leg pain", "arm": "arm pain",
}
_FAMILY = frozenset({"mother", "mom", "mum", "father", "dad", "sister", "brother", "sisters", "brothers",
                     "parents", "parent", "grandmother", "grandfather", "grandma", "grandpa", "aunt", "uncle",
                     "cousin", "siblings", "sibling", "family", "son", "daughter", "aunts", "uncles",
                     "cousins",
                     "grandparents", "sons", "daughters", "mother's", "father's", "mom's", "dad's", "mum's"})
_ALLERGY_CUES = frozenset({"allergic", "allergy", "allergies", "anaphylaxis", "anaphylactic"})
_PLAN_CUES = ("prescribe", "prescribing", "i'll give you", "we'll start", "we will start", "i'll start you",
              "start you on", "recommend", "i'd like you to take", "we can try", "we could try", "i'll send",
              "you can take", "you could take", "you can try", "you could try", "try taking", "suggest",
              "we'll give", "we can give", "we could give", "we'd give", "gon na prescribe",
              "going to prescribe", "we can use", "we could use", "using medications", "management",
              "treatment options", "options")
_FORMER_CUES = frozenset({"quit", "quitted", "stopped", "former", "ex", "used"})
_REST_CUES = ("at rest", "while resting", "when resting", "when i'm resting", "sitting down", "sitting still",
              "lying down", "doing nothing", "not doing anything", "even at rest")
_RADIATION = frozenset({"radiate", "radiates", "radiating", "radiated", "spreads", "spreading", "spread",
                        "travels", "moves", "goes"})
_RADIATION_SITES = frozenset({"arm", "arms", "jaw", "neck", "shoulder", "shoulders", "back"})
_HEAVY_DRINK = ("a lot", "heavily", "heavy", "every day", "every night", "daily", "a bottle", "binge",
                "too much")
_DRINK_UNITS = frozenset({"drinks", "glasses", "glasses of wine", "bottles"})
_RATING_WORDS = frozenset({"rate", "rated", "rating", "scale", "severity"})
_SEVERE = frozenset({"severe", "severely", "excruciating", "unbearable", "agonizing", "agonising", "worst",
                     "intense", "terrible"})
# Partners more specific than their body-site concept ("ears" is a face site; ear pain is a concept).
_PAIN_WORD_PARTNERS = {
    **dict.fromkeys(("ear", "ears"), "ear pain"), **dict.fromkeys(("eye", "eyes"), "eye pain"),
    "jaw": "jaw pain", **dict.fromkeys(("tooth", "teeth"), "dental pain"),
    **dict.fromkeys(("calf", "calves"), "calf pain"), "groin": "groin pain",
    **dict.fromkeys(("pee", "peeing", "urinate", "urinating", "urination", "wee"), "dysuria"),
}
_BLOOD_WORDS = frozenset({"blood", "bloody", "bleeding"})
_BLOOD_PARTNERS = {
    **dict.fromkeys(("sputum", "phlegm", "mucus", "cough", "coughing", "coughed"), "hemoptysis"),
    **dict.fromkeys(
        ("stool", "stools", "poo", "poop", "bowel", "rectum", "bottom", "toilet", "wipe", "wiping"),
        "rectal bleeding",
    ),
    **dict.fromkeys(("urine", "pee", "urinating"), "hematuria"),
    **dict.fromkeys(("vomit", "vomiting", "vomited"), "hematemesis"),
}
_TEMP_REACH = 25
_LIST_JOINERS = frozenset({"or", "and", "nor"})
_GI_BLEED = frozenset({"rectal bleeding", "melena", "hematemesis"})
_ACUTE_ANCHORS = frozenset({"today", "yesterday", "last night", "this morning", "tonight", "this afternoon",
                            "this evening"})


@dataclass
class _Group:
    """All mentions of one (category, concept), accumulated in text order."""

    category: str
    concept: str
    mentions: list[tuple[Mention, Assertion]] = field(default_factory=list)
    red_flag: bool = False
    triage_hint: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


@functools.lru_cache(maxsize=1)
def _site_words() -> dict[str, str]:
    return {k: v for k, v in surfaces_by_category("body_site").items() if " " not in k}


@functools.lru_cache(maxsize=1)
def _allergens() -> dict[tuple[str, ...], str]:
    return {tuple(norm_phrase(r[0]).split()): r[1] for r in read_table("allergens.tsv") if len(r) >= 2}


def rules_fingerprint() -> str:
    """sha256 of the rules version, the extractor's code, every shipped clinical data file and the
    drug dictionary version.

    Code is hashed too so that a behaviour change that forgot to bump :data:`RULES_VERSION`
    still invalidates cached records.
    """
    h = hashlib.sha256(f"rules-{RULES_VERSION}".encode())
    clinical = resources.files("stresstest.clinical")
    data = clinical.joinpath("data")
    files = [(f"data/{e.name}", e) for e in data.iterdir() if e.name.endswith(".tsv")]
    files += [(e.name, e) for e in clinical.iterdir() if e.name.endswith(".py")]
    files.append(("rules.py", resources.files("stresstest.structure").joinpath("rules.py")))
    for name, entry in sorted(files, key=lambda t: t[0]):
        h.update(name.encode())
        h.update(entry.read_bytes())
    try:
        h.update(metadata.version("drug-named-entity-recognition").encode())
    except metadata.PackageNotFoundError:  # pragma: no cover - it is a hard dependency
        h.update(b"no-drug-ner")
    return h.hexdigest()


def _fmt_num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _fmt_value(q: Quantity) -> str:
    assert q.value is not None  # callers check; internal invariant, not user input
    return _fmt_num(q.value) + (f"-{_fmt_num(q.value_max)}" if q.value_max is not None else "")


def _fmt_qty(q: Quantity) -> str:
    if q.value is None:
        anchor = q.unit_canonical or ""
        return anchor if anchor.startswith(("last", "this", "yesterday")) else f"since {anchor}"
    val = _fmt_value(q)
    return f"{val} {q.unit_canonical}" if q.unit_canonical else val


class _Extractor:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[Token] = tokenize(text)
        self.words = [t.norm for t in self.tokens]
        self.ctx = ContextAnalyzer(text, self.tokens)
        self.quantities = find_quantities(text)
        self.qty_tok = [self._tok_index(q.start) for q in self.quantities]

    # ---- token / sentence helpers
    def _tok_index(self, char: int) -> int:
        import bisect

        return max(0, bisect.bisect_right(self.ctx.starts, char) - 1)

    def span(self, m: Mention) -> tuple[int, int]:
        i = self._tok_index(m.start)
        j = self._tok_index(m.end - 1) + 1
        return i, j

    def sentence_of(self, tok: int) -> int:
        return self.ctx.sent_id[tok]

    def sentence_bounds(self, s: int) -> tuple[int, int]:
        lo = self.ctx.sent_start[s]
        hi = self.ctx.sent_start[s + 1] if s + 1 < len(self.ctx.sent_start) else len(self.tokens)
        while lo < hi and lo in self.ctx.skip:
            lo += 1  # never quote a speaker label as part of the sentence
        return lo, hi

    def quote(self, i: int, j: int, lo: int, hi: int) -> str:
        """Exact substring: the sentence [lo, hi) around tokens [i, j), capped for run-on text."""
        if hi - lo > _MAX_QUOTE_TOKENS:
            lo = max(lo, i - _QUOTE_SIDE)
            hi = min(hi, j + _QUOTE_SIDE)
        return self.text[self.tokens[lo].start : self.tokens[hi - 1].end]

    def evidence(self, m: Mention, a: Assertion) -> list[str]:
        i, j = self.span(m)
        s = self.sentence_of(i)
        lo, hi = self.sentence_bounds(s)
        quotes = [self.quote(i, j, lo, hi)]
        if a.cue_start is not None:  # an answer, or a cue such as a temperature reading
            k = self._tok_index(a.cue_start)
            s2 = self.sentence_of(k)
            lo2, hi2 = self.sentence_bounds(s2)
            if s2 != s and lo2 < hi2:
                quotes.append(self.quote(k, k + 1, lo2, min(hi2, lo2 + _MAX_QUOTE_TOKENS)))
        return quotes

    def context_norms(self, m: Mention, a: Assertion | None = None, side: int = _QUOTE_SIDE) -> list[str]:
        """Normalised words around the mention (its sentence, capped to ``side`` tokens each way) and,
        for an answered question, the start of the answer. Capping keeps run-on ASR text local."""
        i, j = self.span(m)
        s = self.sentence_of(i)
        lo, hi = self.sentence_bounds(s)
        out = [" " + " ".join(self.words[max(lo, i - side) : min(hi, j + side)]) + " "]
        if a is not None and a.source == "answer" and a.cue_start is not None:
            # The answer sentence only: the doctor's next question must not count as the answer.
            k = self._tok_index(a.cue_start)
            _alo, ahi = self.sentence_bounds(self.sentence_of(k))
            out.append(" " + " ".join(self.words[k : min(ahi, k + 2 * side)]) + " ")
        return out

    def scope_sentences(self, m: Mention, a: Assertion) -> list[int]:
        s = self.sentence_of(self.span(m)[0])
        out = [s]
        if a.source == "answer" and a.cue_start is not None:
            s2 = self.sentence_of(self._tok_index(a.cue_start))
            if s2 != s:
                out.append(s2)
        return out

    # ---- attributes
    def quantities_near(self, m: Mention, a: Assertion, after_only: bool = False) -> list[Quantity]:
        i, j = self.span(m)
        sents = self.scope_sentences(m, a)
        out: list[tuple[int, Quantity]] = []
        for q, k in zip(self.quantities, self.qty_tok, strict=True):
            s = self.sentence_of(min(k, len(self.tokens) - 1))
            if s not in sents:
                continue
            if s == sents[0]:
                if after_only and k < j:
                    continue
                dist = (i - k) if k < i else (k - j)
                if k >= i and k < j:
                    continue  # inside the mention itself ("type 2 diabetes")
                if dist > _QTY_WINDOW:
                    continue
                out.append((dist, q))
            else:
                out.append((_QTY_WINDOW + 1 + k, q))  # in the answer: after same-sentence ones
        return [q for _, q in sorted(out, key=lambda t: (t[0], t[1].start))]

    def laterality(self, m: Mention) -> str | None:
        i, j = self.span(m)
        s = self.sentence_of(i)
        lo, hi = self.sentence_bounds(s)
        sites = _site_words()
        found: set[str] = set()
        for k in range(max(lo, i - 4), min(hi, j + 4)):
            w = self.words[k]
            if w not in ("left", "right", "both", "bilateral"):
                continue
            nxt = self.words[k + 1 : min(hi, k + 3)]
            if w == "bilateral" or any(x in sites or x in ("side", "sided", "sides") for x in nxt):
                found.add("bilateral" if w in ("both", "bilateral") else w)
        if "bilateral" in found or {"left", "right"} <= found:
            return "bilateral"
        return next(iter(sorted(found)), None)


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
    covered = [False] * len(ex.tokens)
    for m in mentions:
        if m.category == "body_site":
            continue  # sites are what we pair with, not what blocks pairing
        i, j = ex.span(m)
        for k in range(i, j):
            covered[k] = True
    out: list[Mention] = []
    used: set[int] = set()
    for k, w in enumerate(ex.words):
        if w not in anchors or covered[k] or k in used:
            continue
        lo, hi = ex.sentence_bounds(ex.sentence_of(k))
        found: tuple[int, str] | None = None
        back = reach if back_reach is None else back_reach
        for d in range(1, reach + 1):
            for kk in (k + d, k - d) if d <= back else (k + d,):
                if lo <= kk < hi and (partner_may_be_covered or not covered[kk]) and kk not in used:
                    if any(ex.words[x] in _LIST_JOINERS for x in range(min(k, kk) + 1, max(k, kk))):
                        continue  # "blood or any sputum" names two things, not bloody sputum
                    concept = partner(ex.words[kk])
                    if concept is not None:
                        found = (kk, concept)
                        break
            if found:
                break
        if found is None:
            continue
        kk, concept = found
        info = concept_info(concept)
        a, b = min(k, kk), max(k, kk)
        start, end = ex.tokens[a].start, ex.tokens[b].end
        out.append(Mention(start, end, ex.text[start:end], concept, "symptom",
                           bool(info and info.red_flag), info.triage_hint if info else None))
        used.update(range(a, b + 1))
    return out


def _pain_partner(word: str) -> str | None:
    if word.startswith("swallow"):
        return "dysphagia"
    if word in _PAIN_WORD_PARTNERS:
        return _PAIN_WORD_PARTNERS[word]
    site = _site_words().get(word)
    return None if site is None else _SITE_PAIN.get(site, f"{site} pain")


def _blood_partner(word: str) -> str | None:
    return _BLOOD_PARTNERS.get(word)


def _temperature_claims(ex: _Extractor) -> list[tuple[Mention, Assertion]]:
    """Fever from a measured temperature ("have you taken his temperature? ... it was 39.4").

    A reading of 37.8-43 (Celsius) or 100-110 (Fahrenheit), or "high", within
    :data:`_TEMP_REACH` tokens after the word makes fever present; a reading of
    35-37.5 / 95-99.5 or "normal" makes it absent. The mention spans the word
    "temperature" through the reading, so its quote holds both.
    """
    out: list[tuple[Mention, Assertion]] = []
    for k, w in enumerate(ex.words):
        if w not in ("temperature", "temp"):
            continue
        status: str | None = None
        end_tok = k
        for kk in range(k + 1, min(len(ex.words), k + _TEMP_REACH)):
            x = ex.words[kk]
            if x in ("high", "raised", "elevated", "spiking"):
                status, end_tok = "present", kk
                break
            if x in ("normal", "fine"):
                status, end_tok = "absent", kk
                break
            if x[0].isdigit():
                v = _reading(ex, kk)
                if v is None:
                    continue
                if 37.8 <= v <= 43 or 100 <= v <= 110:
                    status, end_tok = "present", kk
                elif 35 <= v <= 37.5 or 95 <= v <= 99.5:
                    status, end_tok = "absent", kk
                if status:
                    break
        if status is None:
            continue
        start, end = ex.tokens[k].start, ex.tokens[end_tok].end
        m = Mention(start, end, ex.text[start:end], "fever", "symptom")
        cue = ex.tokens[end_tok]
        out.append((m, Assertion(status, "statement", cue.text, cue.start, cue.end)))  # type: ignore[arg-type]
    return out


def _reading(ex: _Extractor, k: int) -> float | None:
    """The number starting at token k, joining "39" "." "4" back into 39.4."""
    try:
        v = float(ex.words[k])
    except ValueError:
        return None
    if k + 1 < len(ex.tokens) and ex.text[ex.tokens[k].end : ex.tokens[k + 1].start] == "." \
            and ex.words[k + 1].isdigit():
        v = float(f"{ex.words[k]}.{ex.words[k + 1]}")
    return v


def _is_family(ex: _Extractor, m: Mention) -> bool:
    i, _ = ex.span(m)
    s = ex.sentence_of(i)
    lo, _hi = ex.sentence_bounds(s)
    _, j = ex.span(m)
    _lo, hi = ex.sentence_bounds(s)
    near = ex.words[max(lo, i - 8) : i] + ex.words[j : min(hi, j + 4)]
    if any(w in _FAMILY for w in near):
        return True
    # Answer to "any family history of ...?": the family word comes in the answer sentence.
    return any("family history" in c or " in the family " in c for c in ex.context_norms(m))


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


def _no_allergy_statements(ex: _Extractor) -> list[Mention]:
    """'allergies' / 'allergic' cue tokens, used for 'no allergies' (absent) claims."""
    out = []
    for k, w in enumerate(ex.words):
        if w in ("allergies", "allergic", "nkda"):
            t = ex.tokens[k]
            out.append(Mention(t.start, t.end, t.text, "allergies", "allergy"))
    return out


def _aggregate_status(items: list[tuple[Mention, Assertion]]) -> str | None:
    statuses = [a.status for _, a in items if a.source != "unanswered"]
    if not statuses:
        return None
    for st in ("present", "absent", "uncertain"):
        if st in statuses:
            return st
    return None  # pragma: no cover


def _supporting(items: list[tuple[Mention, Assertion]], status: str) -> list[tuple[Mention, Assertion]]:
    return [(m, a) for m, a in items if a.status == status and a.source != "unanswered"]


def _has_any(norm: str, phrases: tuple[str, ...]) -> bool:
    return any(f" {p} " in norm for p in phrases)


def extract_record(transcript: str) -> ClinicalRecord:
    """Structure one transcript into schema S, deterministically, with exact evidence.

    Args:
        transcript: The transcript text (human reference or ASR hypothesis),
            with or without punctuation and speaker labels.

    Returns:
        A valid :class:`ClinicalRecord`; every ``field_evidence`` quote is an
        exact substring of ``transcript``; claims are ``c1..`` and flags
        ``f1..`` in text order.
    """
    ex = _Extractor(transcript)
    all_mentions = match_tokens(transcript, ex.tokens)
    drug_mentions = match_drug_tokens(transcript, ex.tokens)
    lex_mentions = [m for m in all_mentions if m.category != "body_site"]
    composed = _compose(ex, all_mentions, _PAIN_WORDS, _pain_partner)
    composed += _compose(ex, all_mentions, _BLOOD_WORDS, _blood_partner, reach=6, partner_may_be_covered=True,
                         back_reach=3)
    # A composed term replaces what it swallowed ("blood ... in the sputum" is not "sputum").
    lex_mentions = [
        m for m in lex_mentions if not any(c.start <= m.start and m.end <= c.end for c in composed)
    ]
    lex_mentions += composed
    allergens, consumed = _find_allergens(ex, drug_mentions)
    # Lexicon mentions that are the allergen itself (e.g. "cats") are not symptoms.
    allergen_spans = [(a.start, a.end) for a in allergens]

    regions = _reaction_regions(ex, allergens)
    reactions: dict[str, list[str]] = {}
    groups: dict[tuple[str, str], _Group] = {}

    def add(
        category: str, concept: str, m: Mention, red: bool = False, hint: str | None = None,
        assertion: Assertion | None = None,
    ) -> _Group:
        g = groups.get((category, concept))
        if g is None:
            g = groups[(category, concept)] = _Group(category, concept, red_flag=red, triage_hint=hint)
        g.red_flag = g.red_flag or red
        g.mentions.append((m, assertion or ex.ctx.assertion(m)))
        return g

    for m in sorted(lex_mentions, key=lambda x: x.start):
        if any(a <= m.start < b for a, b in allergen_spans):
            continue
        if m.category in ("symptom", "finding"):
            tok = ex.span(m)[0]
            hit = next((r for r in regions if r[0] <= tok < r[1]), None)
            if hit is not None:
                # The reaction to an allergen ("gives me hives"), not a current symptom.
                reactions.setdefault(hit[2], [])
                if m.concept not in reactions[hit[2]]:
                    reactions[hit[2]].append(m.concept)
                continue
        category = _CATEGORY.get(m.category, "symptom")
        if category == "history" and _is_family(ex, m):
            category = "family_history"
        add(category, m.concept, m, m.red_flag and category == "symptom", m.triage_hint)
    for m, asr in _temperature_claims(ex):
        add("symptom", "fever", m, assertion=asr)
    for idx, d in enumerate(drug_mentions):
        if idx in consumed:
            continue
        category = "plan" if _has_any(ex.context_norms(d, side=8)[0], _PLAN_CUES) else "medication"
        add(category, d.concept, d)
    for al in allergens:
        add("allergy", al.concept, al)
    if not allergens:
        for cue in _no_allergy_statements(ex):
            asr = ex.ctx.assertion(cue)
            if asr.status == "absent":
                g = groups.setdefault(("allergy", "allergies"), _Group("allergy", "allergies"))
                g.mentions.append((cue, asr))

    claims: list[tuple[int, Claim, list[str], _Group]] = []
    for g in groups.values():
        status = _aggregate_status(g.mentions)
        if status is None:
            continue
        support = _supporting(g.mentions, status)
        first_m, first_a = support[0]
        evidence: list[str] = []
        for m, a in support[:2]:
            for quote in ex.evidence(m, a):
                if quote not in evidence:
                    evidence.append(quote)
        value = unit = time = None
        for m, a in support:
            qs = ex.quantities_near(m, a, after_only=g.category in ("medication", "plan"))
            for q in qs:
                if q.kind in ("time", "frequency") and time is None:
                    time = _fmt_qty(q)
                elif q.kind in ("dose", "count", "measure") and value is None and q.value is not None:
                    if q.unit_canonical is None and g.category not in ("medication", "plan", "social"):
                        continue  # a bare number next to a symptom is rarely its value
                    value = _fmt_value(q)
                    unit = q.unit_canonical
            if value is not None or time is not None:
                break
        if g.category == "social" and status == "present":
            norm = " ".join(c for m, a in support for c in ex.context_norms(m, a))
            if any(f" {w} " in norm for w in _FORMER_CUES) and g.concept == "smoking":
                g.extra["former"] = "1"
                value = value or "former"
            if g.concept == "alcohol" and _has_any(norm, _HEAVY_DRINK):
                g.extra["heavy"] = "1"
            if g.concept == "alcohol" and unit in _DRINK_UNITS and value:
                try:
                    n = float(value.split("-")[-1])
                except ValueError:
                    n = 0.0
                per_week = time is not None and "week" in time
                if (per_week and n >= 14) or (not per_week and time is not None and n >= 4):
                    g.extra["heavy"] = "1"
        laterality = None
        if g.category in ("symptom", "finding"):
            for m, _a in support:
                laterality = ex.laterality(m)
                if laterality:
                    break
        claim = Claim(id="", category=g.category, concept=g.concept, status=status,  # type: ignore[arg-type]
                      value=value, unit=unit, time=time, laterality=laterality)  # type: ignore[arg-type]
        claims.append((first_m.start, claim, evidence, g))

    claims.sort(key=lambda t: (t[0], t[1].category, t[1].concept))
    record_claims: list[Claim] = []
    field_evidence: dict[str, list[str]] = {}
    present_by_concept: dict[str, tuple[Claim, list[str], _Group]] = {}
    for n, (_, claim, evidence, g) in enumerate(claims, start=1):
        claim = claim.model_copy(update={"id": f"c{n}"})
        record_claims.append(claim)
        field_evidence[claim.id] = evidence
        if claim.status == "present":
            present_by_concept.setdefault(claim.concept, (claim, evidence, g))

    # ---- safety flags
    # (text position, kind, name, detail, evidence, triage hint)
    flag_rows: list[tuple[int, str, str, str | None, list[str], str | None]] = []

    def flag(
        kind: str, name: str, detail: str | None, ev: list[str], g: _Group, hint: str | None = None
    ) -> None:
        pos = _supporting(g.mentions, "present")[0][0].start if _supporting(g.mentions, "present") else 0
        flag_rows.append((pos, kind, name, detail, ev, hint))

    for claim, evidence, g in present_by_concept.values():
        amount = f"{claim.value} {claim.unit or ''}".strip() if claim.value else None
        det_parts = [p for p in (amount, claim.time) if p]
        detail = "; ".join(det_parts) or None
        if claim.category == "symptom" and g.red_flag:
            if claim.concept in ("suicidal ideation", "self-harm"):
                flag("self_harm_risk", claim.concept, detail, evidence, g, g.triage_hint)
            else:
                flag("red_flag", claim.concept, detail, evidence, g, g.triage_hint)
        elif claim.category == "symptom" and claim.concept in ("suicidal ideation", "self-harm"):
            flag("self_harm_risk", claim.concept, detail, evidence, g, g.triage_hint)
        elif claim.category == "allergy":
            reaction = ", ".join(reactions.get(claim.concept, [])[:3]) or None
            flag("allergy", claim.concept, reaction, evidence, g)
        elif claim.category == "medication":
            cls = high_risk_class(claim.concept)
            if cls is not None:
                flag("high_risk_medication", claim.concept, "; ".join([cls, *det_parts]), evidence, g)
            else:
                flag("current_medication", claim.concept, detail, evidence, g)
        elif claim.category == "social":
            if claim.concept == "smoking" and "former" not in g.extra:
                flag("social_risk", "smoking", detail, evidence, g)
            elif claim.concept == "alcohol" and "heavy" in g.extra:
                flag("social_risk", "heavy alcohol use", detail, evidence, g)
            elif claim.concept == "recreational drug use":
                flag("social_risk", "recreational drug use", detail, evidence, g)

    for name, hint, ev, g in _composite_red_flags(ex, present_by_concept):
        flag("red_flag", name, None, ev, g, hint)

    flag_rows.sort(key=lambda r: (r[0], r[1], r[2]))
    flags: list[SafetyFlag] = []
    seen: set[tuple[str, str]] = set()
    triage_drivers: list[tuple[str, str, list[str]]] = []  # level, name, evidence
    for row in flag_rows:
        _, kind, name, detail, ev, flag_hint = row
        if (kind, name) in seen:
            continue
        seen.add((kind, name))
        f = SafetyFlag(id=f"f{len(flags) + 1}", kind=kind, name=name, detail=detail)  # type: ignore[arg-type]
        flags.append(f)
        field_evidence[f.id] = ev
        if kind in ("red_flag", "self_harm_risk"):
            triage_drivers.append(("emergency" if flag_hint == "emergency" else "urgent", name, ev))

    # ---- triage
    chief = next((c for c in record_claims if c.category == "symptom" and c.status == "present"), None)
    level = "routine"
    driving: list[tuple[str, list[str]]] = []
    if any(lv == "emergency" for lv, _, _ in triage_drivers):
        level = "emergency"
        driving = [(nm, ev) for lv, nm, ev in triage_drivers if lv == "emergency"]
    elif triage_drivers:
        level = "urgent"
        driving = [(nm, ev) for _, nm, ev in triage_drivers]
    else:
        acute = [
            c for c in record_claims
            if c.category == "symptom" and c.status == "present" and _is_acute(c.time)
        ]
        severe = [
            (c, ev) for c, ev, g in present_by_concept.values()
            if c.category == "symptom" and _is_severe(ex, c, g)
        ]
        rated = [(v, ev) for v, ev in _severity_ratings(ex) if v >= 8]
        if acute or severe or rated:
            level = "urgent"
            driving = [(f"{c.concept} ({c.time})", field_evidence[c.id]) for c in acute]
            driving += [(f"severe {c.concept}", ev) for c, ev in severe]
            driving += [(f"pain rated {_fmt_num(v)}/10", ev) for v, ev in rated[:1]]
    if driving:
        names = ", ".join(nm for nm, _ in driving[:4])
        why = "present emergency red flag" if level == "emergency" else (
            "present red flag" if triage_drivers else "acute onset or severe symptom")
        rationale = f"{level}: {why}: {names}."
        tri_ev: list[str] = []
        for _, ev in driving:
            for quote in ev[:1]:
                if quote not in tri_ev:
                    tri_ev.append(quote)
    else:
        rationale = "routine: no red flag, acute onset or severe symptom documented."
        tri_ev = field_evidence.get(chief.id, [])[:1] if chief else []
    if tri_ev:
        field_evidence["triage"] = tri_ev

    # Guarantee the exact-substring contract even if a helper above misbehaves.
    field_evidence = {k: [q for q in v if q and q in transcript] for k, v in field_evidence.items()}
    return ClinicalRecord(
        chief_complaint=chief.concept if chief else None,
        triage=Triage(level=level, rationale=rationale),  # type: ignore[arg-type]
        claims=record_claims,
        safety_flags=flags,
        field_evidence=field_evidence,
    )


def _severity_ratings(ex: _Extractor) -> list[tuple[float, list[str]]]:
    """Pain ratings of 0-10 ("I'd rate it an 8"; "On a scale of 1 to 10? ... about an 8").

    A number right after a rating word in the same sentence, or the first number in the answer
    to a question that asks for a rating. Returns (rating, evidence quotes).
    """
    out: list[tuple[float, list[str]]] = []
    n_sent = len(ex.ctx.sent_start)
    for s in range(n_sent):
        lo, hi = ex.sentence_bounds(s)
        words = ex.words[lo:hi]
        rate_at = [x for x, w in enumerate(words) if w in _RATING_WORDS]
        if not rate_at:
            continue
        if ex.ctx.ends_q[s] and s + 1 < n_sent:
            alo, ahi = ex.sentence_bounds(s + 1)
            nums = [k for k in range(alo, min(ahi, alo + 12)) if ex.words[k].isdigit()]
            if nums:
                k = nums[-1] if ex.words[nums[0]] == "10" and len(nums) > 1 else nums[0]
                v = float(ex.words[k])
                if 0 <= v <= 10:
                    out.append((v, [ex.quote(lo, hi, lo, hi), ex.quote(k, k + 1, alo, ahi)]))
            continue
        for x in rate_at:
            nums = [k for k in range(lo + x + 1, min(hi, lo + x + 6)) if ex.words[k].isdigit()]
            if nums and 0 <= float(ex.words[nums[0]]) <= 10 and not ex.ctx.ends_q[s]:
                out.append((float(ex.words[nums[0]]), [ex.quote(lo + x, nums[0] + 1, lo, hi)]))
                break
    return out


def _is_severe(ex: _Extractor, claim: Claim, g: _Group) -> bool:
    """Severity cue on a present symptom: >= 8 out of 10, or 'severe' / 'excruciating' / 'worst'."""
    if claim.unit == "out of 10" and claim.value:
        try:
            if float(claim.value.split("-")[-1]) >= 8:
                return True
        except ValueError:
            pass
    for m, _a in _supporting(g.mentions, "present"):
        i, j = ex.span(m)
        lo, hi = ex.sentence_bounds(ex.sentence_of(i))
        # Only the words right before the mention or a few after ("severe pain", "the pain is severe").
        near = ex.words[max(lo, i - 3) : i] + ex.words[j : min(hi, j + 3)]
        if any(w in _SEVERE for w in near):
            return True
    return False


def _is_acute(time: str | None) -> bool:
    if not time:
        return False
    if time in _ACUTE_ANCHORS or time.replace("since ", "") in _ACUTE_ANCHORS:
        return True
    parts = time.split()
    if len(parts) != 2:
        return False
    try:
        value = float(parts[0].split("-")[-1])
    except ValueError:
        return False
    unit = parts[1]
    return unit in ("minutes", "hours", "seconds") or (unit == "days" and value <= 2)


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


def _composite_red_flags(
    ex: _Extractor, present: dict[str, tuple[Claim, list[str], _Group]]
) -> list[tuple[str, str, list[str], _Group]]:
    """Red flags that need a modifier or a combination of present concepts."""
    out: list[tuple[str, str, list[str], _Group]] = []

    def sent_norms(g: _Group) -> list[str]:
        # A tight window: a modifier must be said about this mention, not somewhere in the turn.
        return [c for m, a in _supporting(g.mentions, "present") for c in ex.context_norms(m, a, side=8)]

    if "chest pain" in present:
        claim, ev, g = present["chest pain"]
        norms = sent_norms(g)
        if any(_has_any(nm, _REST_CUES) for nm in norms):
            out.append(("chest pain at rest", "emergency", ev, g))
        if any(any(f" {r} " in nm for r in _RADIATION) and any(f" {s} " in nm for s in _RADIATION_SITES)
               for nm in norms):
            out.append(("radiating chest pain", "emergency", ev, g))
    if "shortness of breath" in present and "shortness of breath at rest" not in present:
        claim, ev, g = present["shortness of breath"]
        if any(_has_any(nm, ("at rest", "while resting", "when resting", "even resting", "sitting still",
                              "doing nothing")) for nm in sent_norms(g)):
            out.append(("shortness of breath at rest", "emergency", ev, g))
    bleed = sorted(_GI_BLEED & present.keys())
    faint = sorted({"dizziness", "fainting"} & present.keys())
    if bleed and faint:
        _, ev1, g = present[bleed[0]]
        ev2 = present[faint[0]][1]
        out.append((f"{bleed[0]} with {faint[0]}", "emergency", ev1[:1] + ev2[:1], g))
    if "fever" in present and "neck stiffness" in present:
        _, ev1, g = present["neck stiffness"]
        out.append(("fever with neck stiffness", "emergency", present["fever"][1][:1] + ev1[:1], g))
    return out
