"""The deterministic ``rules`` structurer: transcript -> schema S with exact evidence.

A fully traceable baseline built on :mod:`stresstest.clinical`. Every claim and
flag cites quotes that are exact substrings of the input (the sentence around
the mention, capped to a window in unpunctuated ASR text, plus the answer for
dialogue questions). Pure, deterministic and fast (no model, no I/O after the
data tables are loaded).

Passes (:func:`extract_record` runs them in this order on one token stream)
    1. mentions: lexicon, drug and composed terms ("pain ... in my left knee" ->
       knee pain; "hurts to swallow" -> painful swallowing, not the red flag of
       dysphagia; blood said with a cough word -> hemoptysis), allergens and
       the reaction they cause;
    2. assertions: the ConText analyzer, then the dialogue fixes: an answer is
       read past a filler-only sentence ("Um.") and a short follow-up question
       ("Any of those symptoms?"); a question whose only wh-word sits in a
       subordinate clause ("any pain when you breathe in?") is a yes/no
       question, and so is a list split off a question by ASR punctuation
       ("...like sore throat? Running nose, chest pain, anything like that.");
       a question listing several concepts answered by naming some of them
       ("cough or chest pain?" - "I have a cough") asserts only those; up to two
       clarifying sentences without a clinical term are read past ("Any chills?
       So, shaking in your bed. - No, not really."); inverted surfaces flip
       ("this is completely new", "first time? - yes" = no previous episode).
       Composed mentions also include aggravating/relieving factors said in free
       form (an activity near "worse"/"better"/"helps" in a pain context: "worse
       when I'm coughing or laying down"), joint swelling (swelling at a joint
       site) and the senses listed in a screening question ("changes in your
       vision, hearing, smell or taste?");
    3. groups: one per (category, concept) with every mention;
    4. dialogue: answers to open questions attach to the topic they are
       about: onset ("when did it start?" -> time), 0-10 rating (the highest
       number of the answer; the scale's "10 being the worst" is ignored) and
       walking distance. The topic is the symptom named in the question, else
       (when the question points at one: "it", "this", "the pain") the
       presenting pain (the first pain at a site) for a pain question, else the
       latest present symptom, else the presenting complaint; an onset asked of
       several symptoms ("when did these symptoms start?") dates each;
    5. claims: status present if any mention is asserted present (unless every
       present mention is a past episode and a direct question was answered
       no), else absent, else uncertain; unanswered questions assert nothing.
       value/unit/time: a dialogue answer first, then quantities next to a
       mention (same sentence or its answer; a duration in the very next
       statement for a symptom), then a descriptive qualifier (sputum colour,
       dry/wet cough), a pain's character ("sharp", from its sentence or the
       answer to "how would you describe it?"); a number beats a vague duration
       ("a few days"); temperature
       readings and oxygen litres; laterality. A hedge on a habit or medication
       ("maybe a glass of wine on weekends") qualifies the amount: present.
       Dialogue claims: occupation (answer to a work question) and functions
       asked "how is your appetite/sleep/energy?" answered in words;
    6. patient: age ("2 1/2 months old", an answer to "how old are you?"), the
       highest temperature reading, vital signs in a critical range (SpO2 < 92%,
       heart rate >= 130, respiratory rate >= 30, systolic BP < 90,
       temperature >= 40);
    7. flags (below); 8. triage (below).

Flags
    red-flag symptom present -> ``red_flag`` (constitutional ones - night
    sweats, weight loss, fatigue - only when the presenting complaint is older
    than 14 days; dysphagia not with a sore throat; composites: shortness of
    breath at rest, GI bleeding with dizziness/fainting, fever with neck
    stiffness; "fever in infant" under 3 months; "respiratory distress" for fast
    breathing on oxygen or in an infant); critical vital sign ->
    ``critical_vital``; allergy present -> ``allergy``; high-risk drug class ->
    ``high_risk_medication``; any other present medication ->
    ``current_medication``; suicidal ideation / self-harm -> ``self_harm_risk``;
    current smoking, heavy alcohol, recreational drug use -> ``social_risk``.

Triage rule (documented, deterministic)
    1. ``emergency`` if any of: a present red flag with an emergency hint
       (hemoptysis, hematemesis, stridor, cyanosis, suicidal ideation, fever in
       an infant...) that is not chronic (its onset, or the presenting
       complaint's, at least 14 days ago); chest pain that began at most 12
       hours ago (minutes, hours, "this morning", "last night"); chest pain at
       rest or radiating to the arm or jaw; supplemental oxygen; a critical
       vital sign;
    2. ``urgent`` if any of: any other red flag (chronic emergency ones
       included); a symptom rated >= 8/10 or called severe / excruciating /
       worst; a measured temperature >= 38; a fever at age < 16 or >= 65, or
       with shortness of breath; orthopnea or paroxysmal nocturnal dyspnea;
       shortness of breath or chest pain at age >= 65; shortness of breath that
       is new (under 14 days, undated, or the presenting complaint) and not only
       on exertion; a hot swollen joint (swelling + warmth + redness or joint
       pain, also a red flag);
    3. ``routine`` otherwise (an acute onset alone no longer makes a case urgent).
    ``field_evidence["triage"]`` quotes what drove the level (for routine: the
    chief complaint's quote, when there is one).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata, resources
from typing import Literal

from stresstest.clinical.drugs import high_risk_class, match_drug_tokens
from stresstest.clinical.lexicon import Mention, canonical_concept, concept_info, match_tokens, surfaces_by_category
from stresstest.clinical.negation import FIRST_PERSON, Assertion, ContextAnalyzer
from stresstest.clinical.numbers import Quantity, find_quantities
from stresstest.clinical.text import Token, norm_phrase, read_table, tokenize
from stresstest.clinical.vocab import answer_fillers, discourse_fillers, hesitations, number_words
from stresstest.schema import Claim, ClinicalRecord, SafetyFlag, Triage

#: Bump on any behaviour change: it is part of the structure cache key.
RULES_VERSION = 5

# Sentences longer than this (run-on ASR text) are quoted as a window around the mention.
_MAX_QUOTE_TOKENS = 30
_QUOTE_SIDE = 12
_QTY_WINDOW = 8  # tokens between a mention and a quantity that may belong to it
_TIME_WINDOW = 12  # ... and for a duration said after it with no other clinical term between

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
_ACS_RADIATION = frozenset({"arm", "arms", "jaw"})
_HEAVY_DRINK = ("a lot", "heavily", "heavy", "every day", "every night", "daily", "a bottle", "binge",
                "too much")
_DRINK_UNITS = frozenset({"drinks", "glasses", "glasses of wine", "bottles"})
#: Hedges that, on a habit or a medication, qualify the amount or frequency, not whether it happens.
_AMOUNT_HEDGES = frozenset({"maybe", "probably", "i think", "i guess", "perhaps"})
_SEVERITY_ASKS = ("how bad", "how severe", "how much pain", "how painful", "how intense", "how strong")
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
_MAX_CLARIFYING = 2  # sentences without a clinical term skipped between a question and its yes/no
_LIST_JOINERS = frozenset({"or", "and", "nor"})
#: Symptoms said together with a pain at one site ("pain and swelling in my right knee"): a joiner
#: followed by one of these does not split the pain from its site.
_CO_SYMPTOM_WORDS = frozenset({"swelling", "stiffness", "tenderness", "redness", "bruising", "numbness",
                               "tingling", "weakness", "discomfort"})
_GI_BLEED = frozenset({"rectal bleeding", "melena", "hematemesis"})
_LIST_ENDINGS = ("anything like that", "anything of that sort", "or anything", "any of those", "any of these",
                 "et cetera", "etc", "things like that", "stuff like that", "or something like that")
_WH_LEAD = frozenset({"when", "how", "what", "where", "which", "why", "what's", "where's", "how's", "whereabouts"})
_OPENER_WORDS = frozenset({"ok", "okay", "and", "but", "so", "now", "alright", "all", "right", "great", "good",
                           "yeah", "yes", "sure", "then", "just", "oh", "i", "see", "sorry", "hi", "hello", "hey",
                           "well"})
_PAST_MARKERS = ("last week", "last month", "last year", "used to", "in the past", "not anymore", "no longer",
                 "anymore", "went away", "gone away", "not right now", "not now")
_PAIN_QUALITIES = frozenset({"sharp", "dull", "burning", "stabbing", "throbbing", "pressure", "shooting",
                             "crampy", "cramping", "tight", "squeezing", "throbby", "achy", "aching"})
_QUALITY_REACH = 5
#: Open questions about a symptom's character ("how would you describe the pain?", "is it dry?").
_DESCRIBE_CUES = ("describe", "feel like", "feels like", "what kind of", "what type of", "what sort of",
                  "character", "quality of", "sharp or dull", "dull or sharp", "is it dry", "dry or",
                  "what colour", "what color")
_COUGH_WORDS = frozenset({"cough", "coughs", "coughing", "coughed", "sputum", "phlegm", "mucus", "spit"})
#: Sentences back in which the topic of an open question ("when did it start?") is looked for.
_TOPIC_SENTENCES = 10
_TEMPERATURE_UNITS = frozenset({"degrees", "degrees celsius", "degrees fahrenheit", "°C", "°F"})
_WEIGHT_UNITS = frozenset({"lb", "kg", "pounds", "kilograms"})
#: A clinician recapping what the patient said ("you said it started ...", "you mentioned ...").
_RECAP = ("you said", "you mentioned", "you told me", "so it started", "so this started")
#: Focal symptoms that make a fever same-day (urgent): a focus of infection to examine or test.
_FOCAL_WITH_FEVER = ("sore throat", "painful swallowing", "loss of smell", "loss of taste", "rash",
                     "lymphadenopathy", "ear pain", "dysuria")
#: Words that make an open question about life, not the symptom ("how long have you worked in this role?").
_NON_SYMPTOM_TOPICS = frozenset({"work", "worked", "working", "job", "role", "live", "lived", "living", "married",
                                 "smoke", "smoked", "smoking", "drink", "drinking", "school", "retired", "moved"})
#: Words by which a question without a named symptom points at the current topic.
_TOPIC_POINTERS = frozenset({"it", "it's", "this", "that", "these", "those", "they", "them", "symptoms", "symptom",
                             "pain", "pains", "problem", "problems", "issue", "issues", "breathlessness",
                             "discomfort"})
#: A present chest pain that began at most this many hours ago is an emergency (acute coronary
#: syndrome / PE cannot be excluded without an ECG and troponin now).
_ACUTE_CHEST_PAIN_HOURS = 12.0
#: A presenting complaint at most this old is an acute illness; it explains night sweats etc.
_ACUTE_ILLNESS_DAYS = 14
#: An emergency-hint red flag present for at least this long is chronic: urgent, not emergency.
_CHRONIC_DAYS = 14
#: A 0-10 rating at or above this is severe (urgent).
_SEVERE_RATING = 8.0
#: An injury this recent with one of these signs is triaged urgent (same-day examination and X-ray).
_ACUTE_INJURY_DAYS = 7
_INJURY_SIGNS = ("deformity", "joint swelling", "swelling", "bruising", "limited range of motion",
                 "inability to bear weight")
#: Red-flag symptoms that are constitutional: flagged only outside an acute illness.
_CONSTITUTIONAL = frozenset({"night sweats", "weight loss", "fatigue"})
#: Present heart-failure symptoms make a case urgent.
#: Lexicon concepts too unspecific to be a claim of their own ("any swelling?", "any discharge?"):
#: matched (so they shadow and give context) but never written; specific ones (joint swelling,
#: leg swelling, wound discharge) are.
_VAGUE_CONCEPTS = frozenset({"swelling", "discharge", "skin lesion"})
#: Illnesses mostly talked about rather than had ("laid off because of COVID", "I'll do a COVID test"): a claim
#: only when a sentence that names them says the patient had, caught or tested positive for them.
_TALKED_ABOUT = frozenset({"covid-19"})
_DIAGNOSED_CUES = frozenset({"had", "caught", "contracted"})
_JOINT_SITES = frozenset({"knee", "hip", "ankle", "elbow", "wrist", "shoulder"})
_JOINT_PAIN_SITES = ("knee pain", "hip pain", "ankle pain", "elbow pain", "wrist pain", "shoulder pain")
#: Words that make breathlessness exertional only ("short of breath when I run"), which alone is not urgent.
#: Exertion that a healthy person may be breathless with: breathlessness with only these is not urgent.
_VIGOROUS = ("exercise", "exercising", "running", "when i run", "jogging", "exertion", "playing", "sports",
             "hockey", "soccer", "stairs", "climbing", "i ran", "i run", "flights", "shovelling", "shoveling")
#: Everyday exertion (walking, moving around): breathlessness with it stays urgent.
_MILD_EXERTION = ("exert", "exerting", "walk", "walking", "activity", "active", "moving around", "blocks")
#: Any exertion: breathlessness with these (and not at rest) has the value "on exertion".
_EXERTION = _VIGOROUS + _MILD_EXERTION
#: Tokens either side of a breathlessness mention searched for exertion ("I ran to catch the bus yesterday and I
#: was a bit more short of breath").
_EXERTION_REACH = 14
#: Said with breathlessness, these deny that it comes with exertion ("no relationship with activity").
_AT_REST = ("at rest", "resting", "all the time", "always", "sitting", "no relationship", "not related",
            "even when i'm not", "lying down", "laying down", "sleeping")
_HEART_FAILURE = ("orthopnea", "paroxysmal nocturnal dyspnea")
#: concept -> (descriptive values, token reach) read as the claim's value when no number is.
_QUALIFIERS: dict[str, tuple[frozenset[str], int]] = {
    "sputum": (frozenset({
        "yellow", "yellowish", "green", "greenish", "white", "clear", "brown", "rusty", "frothy", "pink", "bloody",
        "creamy", "thick"}), 6),
    "cough": (frozenset({"dry", "wet", "productive", "barking", "hacking", "chesty"}), 3),
}
_QUALITY_WORDS = _PAIN_QUALITIES | frozenset(w for words, _reach in _QUALIFIERS.values() for w in words)
_THROAT_PAIN = frozenset({"sore throat", "painful swallowing"})
_ANCHOR_HOURS = {
    "today": 6.0, "this morning": 6.0, "this afternoon": 3.0, "this evening": 2.0, "tonight": 2.0,
    "last night": 12.0, "yesterday": 24.0,
}
_UNIT_HOURS = {"second": 1 / 3600, "minute": 1 / 60, "hour": 1.0, "day": 24.0, "week": 168.0, "month": 720.0,
               "year": 8760.0}


@functools.lru_cache(maxsize=1)
def _age_re() -> re.Pattern[str]:
    """ "2 1/2 months old", "three years old", "75-year-old", "almost 75 years old"."""
    words = "|".join(sorted(_number_words(), key=len, reverse=True))
    return re.compile(
        r"\b(?P<n>\d{1,3}|" + words + r")"
        r"(?P<half>\s+(?:and\s+a\s+)?(?:1/2|half)|½)?[\s-]+(?P<unit>years?|months?|weeks?)[\s-]+old\b",
        re.IGNORECASE,
    )


@functools.lru_cache(maxsize=1)
def _number_words() -> dict[str, float]:
    return {**number_words("small"), **number_words("tens")}


# (name, pattern, is-critical(values)): measured vital signs in a critical range.
_CRITICAL_VITALS: tuple[tuple[str, re.Pattern[str], Callable[[list[float]], bool]], ...] = (
    ("low oxygen saturation",
     re.compile(r"\b(?:sats|saturations?|oxygen levels?|o2 sat\w*|spo2)\D{0,20}?(\d{2,3})\s*(?:%|percent)",
                re.IGNORECASE), lambda v: 50 <= v[0] < 92),
    ("tachycardia", re.compile(r"\b(?:heart rate|pulse)\D{0,20}?(\d{2,3})\b", re.IGNORECASE),
     lambda v: v[0] >= 130),
    ("tachypnea", re.compile(r"\b(?:respiratory rate|breathing rate)\D{0,20}?(\d{1,2})\b", re.IGNORECASE),
     lambda v: v[0] >= 30),
    ("hypotension", re.compile(r"\bblood pressure\D{0,20}?(\d{2,3})\s*(?:/|over)\s*(\d{2,3})\b", re.IGNORECASE),
     lambda v: v[0] < 90),
)
_OXYGEN_RE = re.compile(
    r"\bon\s+(?:(?P<n>\d+(?:\.\d+)?|one|two|three|four|five|six)\s+)?(?:(?:litres?|liters?|l)\s+(?:of\s+)?)?oxygen\b",
    re.IGNORECASE,
)


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
        return anchor if anchor.startswith(("last", "this", "yesterday", "few", "several")) else f"since {anchor}"
    val = _fmt_value(q)
    unit = q.unit_canonical
    if unit in _PLURAL_UNITS and q.value == 1 and q.value_max is None:
        unit = unit[:-1]  # "1 week", not "1 weeks"
    return f"{val} {unit}" if unit else val


_PLURAL_UNITS = frozenset({"seconds", "minutes", "hours", "days", "nights", "weeks", "months", "years", "times"})


_CLAUSE_JOINERS = frozenset({"and", "but", "so", "then"})


class _Extractor:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[Token] = tokenize(text)
        self.words = [t.norm for t in self.tokens]
        self.ctx = ContextAnalyzer(text, self.tokens)
        self.quantities = find_quantities(text)
        self.qty_tok = [self._tok_index(q.start) for q in self.quantities]
        #: temperature readings (Celsius or Fahrenheit as said) by the start of their fever mention
        self.temp_at: dict[int, float] = {}
        #: sentences that hold a clinical mention (filled by the mentions pass)
        self.mention_sents: set[int] = set()
        self.mention_toks: set[int] = set()

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
                if q.kind == "time" and k < i and not self._opens_sentence(k) and any(
                        self.sentence_bounds(s)[0] <= t < k and k - t < i - k
                        and not _CLAUSE_JOINERS.intersection(self.words[t + 1 : k]) for t in self.mention_toks):
                    # "a fever that I measured this morning and I had a cough": the fever's time (not in "a fever
                    # a couple of nights and just yesterday I noticed a loss of taste": a new clause starts)
                    continue
                if dist > _QTY_WINDOW and not (q.kind == "time" and k >= j and dist <= _TIME_WINDOW
                                               and not any(j <= t < k for t in self.mention_toks)) \
                        and not (q.kind == "time" and k < i and self._opens_sentence(k)):
                    continue  # a duration may trail its symptom further ("pain that's been going on
                    # now for the last two weeks"), unless another clinical term comes between; a time that
                    # opens the sentence dates all of it ("Five days ago I started having pain and swelling")
                out.append((dist, q))
            else:
                out.append((_QTY_WINDOW + 1 + k, q))  # in the answer: after same-sentence ones
        return [q for _, q in sorted(out, key=lambda t: (t[0], t[1].start))]

    def _opens_sentence(self, k: int) -> bool:
        """Token ``k`` starts its sentence, after fillers and openers ("So, this morning I woke up ...")."""
        lo, _hi = self.sentence_bounds(self.sentence_of(k))
        return all(w in _OPENER_WORDS or w in _fillers() for w in self.words[lo:k])

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


def _covered(ex: _Extractor, mentions: list[Mention]) -> set[int]:
    """Token indexes inside a clinical mention (body sites excluded: they are what terms pair with)."""
    return {k for m in mentions if m.category != "body_site" for k in range(*ex.span(m))}


def _concept_mention(ex: _Extractor, start: int, end: int, concept: str, category: str | None = None) -> Mention:
    """A mention of ``concept`` over ``ex.text[start:end]`` carrying the lexicon's facts (category unless given,
    red flag, triage hint); a concept the lexicon lacks is a plain symptom."""
    info = concept_info(concept)
    return Mention(start, end, ex.text[start:end], concept, category or (info.category if info else "symptom"),
                   bool(info and info.red_flag), info.triage_hint if info else None)


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
                    if any(ex.words[x] in _LIST_JOINERS and ex.words[x + 1] not in _CO_SYMPTOM_WORDS
                           for x in between):
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
    covered = _covered(ex, mentions)
    sites = _site_words()
    out: list[Mention] = []
    for k, w in enumerate(ex.words):
        if w not in _IT_HURTS or k in covered:
            continue
        s = ex.sentence_of(k)
        lo, hi = ex.sentence_bounds(s)
        if s == 0 or ex.ctx.ends_q[s] or ex.ctx.ends_q[s - 1] \
                or not _IT_WORDS & set(ex.words[max(lo, k - 3) : k]):
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


_BACK_VERBS = frozenset({"come", "comes", "came", "coming", "go", "goes", "went", "going", "get", "gets", "got",
                         "bring", "brings", "brought", "keep", "keeps", "kept", "is", "was", "be", "been", "it's",
                         "bounce", "bounced", "call", "called", "sit", "sat", "lie", "lay", "laid",
                         "step", "stepped", "pull", "pulled", "push", "pushed", "think", "thinking", "looking"})
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


def _narrows(first: str | None, later: str) -> bool:
    """Whether a later onset answer restates ``first`` as a range that contains it ("2 weeks" ->
    "2-3 weeks"): the clinician's clarifying question got the more exact answer."""
    if not first:
        return False
    a, b = first.split(" ", 1) if " " in first else (first, "")
    c, d = later.split(" ", 1) if " " in later else (later, "")
    if b != d or "-" not in c or "-" in a:
        return False
    try:
        lo, hi = (float(x) for x in c.split("-", 1))
        return lo <= float(a) <= hi
    except ValueError:
        return False


_REFINERS = frozenset({"maybe", "like", "about", "probably", "or", "say", "so", "i", "i'd", "think", "guess",
                       "around", "roughly", "um", "uh", "actually", "more", "exactly", "ago"})


def _refined_time(ex: _Extractor, q: Quantity, qs: list[Quantity]) -> str:
    """A rough duration refined by the number said right after it ("a couple of hours now, maybe like 8"
    = 8 hours); else the duration as read."""
    if q.value is not None and q.unit_canonical and re.search(r"\b(couple|few)\b", ex.text[q.start : q.end], re.I):
        for n in qs:
            if n.start > q.end and n.kind == "count" and n.unit_canonical is None and n.value is not None \
                    and n.value_max is None and n.start - q.end <= 30 \
                    and re.search(r"\b(maybe|like|about|probably|or|say)\s*$", ex.text[q.end : n.start], re.I):
                return f"{_fmt_num(n.value)} {q.unit_canonical}"
    return _fmt_qty(q)


def _anchored(time: str | None) -> bool:
    """ "last night", "since Monday", "this morning", "yesterday": a point in time, not a duration."""
    return bool(time) and time.startswith(("last ", "this ", "since ", "yesterday"))  # type: ignore[union-attr]


def _vague(time: str) -> bool:
    """ "a few days", "several weeks": a duration without a number."""
    return time.startswith(("few ", "several "))


def _pain_partner(word: str) -> str | None:
    if word.startswith("swallow"):
        return "painful swallowing"  # odynophagia: not the red flag of true dysphagia
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
            if x in ("high", "raised", "elevated", "spiking") and status is None:
                status, end_tok = "present", kk
                continue  # a reading may follow ("pretty high actually, it was like 39.4")
            if x in ("normal", "fine") and status is None:
                status, end_tok = "absent", kk
                continue
            if x[0].isdigit():
                if status is not None and kk - end_tok > 8:
                    break
                v = _reading(ex, kk)
                if v is None:
                    continue
                if 37.8 <= v <= 43 or 100 <= v <= 110:
                    status, end_tok = "present", kk
                    break
                if 35 <= v <= 37.5 or 95 <= v <= 99.5:
                    status, end_tok = "absent", kk
                    break
        if status is None:
            continue
        start, end = ex.tokens[k].start, ex.tokens[end_tok].end
        m = Mention(start, end, ex.text[start:end], "fever", "symptom")
        cue = ex.tokens[end_tok]
        reading = _reading(ex, end_tok) if ex.words[end_tok][0].isdigit() else None
        if reading is not None:
            ex.temp_at[start] = reading
        out.append((m, Assertion(status, "statement", cue.text, cue.start, cue.end)))  # type: ignore[arg-type]
    return out


def _oxygen_claims(ex: _Extractor) -> list[tuple[Mention, Assertion]]:
    """Supplemental oxygen ("he is on 2 litres of oxygen"): a present finding; its litres are the value."""
    out: list[tuple[Mention, Assertion]] = []
    for mt in _OXYGEN_RE.finditer(ex.text):
        m = Mention(mt.start(), mt.end(), mt.group(0), "supplemental oxygen", "finding")
        out.append((m, Assertion("present", "statement")))
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


_RELATIVE = {"mom": "mother", "mum": "mother", "mom's": "mother", "mum's": "mother", "mother's": "mother",
             "dad": "father", "dad's": "father", "father's": "father", "grandma": "grandmother",
             "grandpa": "grandfather", "aunts": "aunt", "uncles": "uncle", "sisters": "sister",
             "brothers": "brother", "cousins": "cousin", "sons": "son", "daughters": "daughter",
             "parent": "parents", "sibling": "siblings"}


def _relative(ex: _Extractor, support: list[tuple[Mention, Assertion]]) -> str | None:
    """Who in the family has it ("my dad has high blood pressure" -> father), when the sentence names
    exactly one kind of relative next to the condition; None for "the family" or two relatives."""
    for m, _a in support:
        i, j = ex.span(m)
        lo, hi = ex.sentence_bounds(ex.sentence_of(i))
        near = ex.words[max(lo, i - 8) : i] + ex.words[j : min(hi, j + 4)]
        kinds = {_RELATIVE.get(w, w) for w in near if w in _FAMILY and w != "family"}
        if len(kinds) == 1:
            return kinds.pop()
        if kinds:
            return None
    return None


_RARELY = ("rarely", "occasionally", "socially", "once in a while", "every now and then", "now and again",
           "special occasions")


def _rarely(ex: _Extractor, g: _Group) -> bool:
    """The "no" that denied a habit is followed, in the same answer, by how rarely ("No, very rarely")."""
    for _m, a in g.mentions:
        if a.source != "answer" or a.cue_start is None:
            continue
        k = ex._tok_index(a.cue_start)
        _lo, hi = ex.sentence_bounds(ex.sentence_of(k))
        if _has_any(" " + " ".join(ex.words[k:hi]) + " ", _RARELY):
            return True
    return False


def _diagnosed(ex: _Extractor, g: _Group) -> bool:
    """A sentence that names the illness says the patient tested positive or was diagnosed, or a verb of
    having it comes right before it ("I had COVID", "caught the flu")."""
    for m, _a in g.mentions:
        i, _j = ex.span(m)
        lo, hi = ex.sentence_bounds(ex.sentence_of(i))
        if any(w in ("positive", "diagnosed") for w in ex.words[lo:hi]) or any(
                w in _DIAGNOSED_CUES for w in ex.words[max(lo, i - 2) : i]):
            return True
    return False


def _is_family(ex: _Extractor, m: Mention) -> bool:
    i, _ = ex.span(m)
    s = ex.sentence_of(i)
    lo, _hi = ex.sentence_bounds(s)
    _, j = ex.span(m)
    _lo, hi = ex.sentence_bounds(s)
    near = ex.words[max(lo, i - 8) : i] + ex.words[j : min(hi, j + 4)]
    if any(w in _FAMILY for w in near):
        return True
    # "My dad smoked two packs a day for 30 years and had lung cancer": a sentence about a relative, up to where
    # the patient speaks of themself again.
    lead = [w for w in ex.words[lo : min(i, lo + 4)] if w not in _fillers()]
    if len(lead) >= 2 and lead[0] in ("my", "his", "her", "our") and lead[1] in _FAMILY \
            and not any(w in FIRST_PERSON - {"my"} for w in ex.words[lo + 2 : i]):
        return True
    # Answer to "any family history of ...?": the family word comes in the answer sentence.
    if any("family history" in c or " in the family " in c for c in ex.context_norms(m)):
        return True
    return _family_list_continues(ex, s)


_LIST_OPENERS = frozenset({"there's", "there", "like", "including", "mostly", "mainly", "especially", "so", "and",
                           "um", "uh", "yeah", "well"})


def _family_list_continues(ex: _Extractor, s: int) -> bool:
    """ "There's a lot of cancer in the family. There's colon cancer, breast cancer, ovarian cancer.": a statement
    that goes on listing after a family-history sentence (no first person, opening with "there's", "like", ...)."""
    if s == 0 or ex.ctx.ends_q[s]:
        return False
    plo, phi = ex.sentence_bounds(s - 1)
    prev = " " + " ".join(ex.words[plo:phi]) + " "
    if not _has_any(prev, ("in the family", "family history", "runs in", "in my family", "side of the family")):
        return False
    lo, hi = ex.sentence_bounds(s)
    words = ex.words[lo:hi]
    return bool(words) and words[0] in _LIST_OPENERS and not any(w in FIRST_PERSON for w in words)


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


def _only_past(ex: _Extractor, g: _Group) -> bool:
    """Every present mention of a symptom describes a past episode (a marker such as "last week",
    "not anymore", "used to" in its sentence or the two before it) and a direct question about it
    was answered no: the symptom is absent now."""
    answered_no = any(a.status == "absent" and a.source == "answer" for _m, a in g.mentions)
    present = _supporting(g.mentions, "present")
    if not answered_no or not present:
        return False
    for m, _a in present:
        s = ex.sentence_of(ex.span(m)[0])
        lo = ex.sentence_bounds(max(0, s - 2))[0]
        hi = ex.sentence_bounds(min(len(ex.ctx.sent_start) - 1, s + 1))[1]
        if not _has_any(" " + " ".join(ex.words[lo:hi]) + " ", _PAST_MARKERS):
            return False
    return True


_PAST_USE_CONCEPTS = frozenset({"recreational drug use"})
_PAST_USE = ("used to", "in the past", "when i was younger", "when i was young", "when i was a teenager",
             "as a teenager", "in college", "in high school", "in university", "back in the day", "years ago",
             "not anymore", "no longer", "haven't really recently", "haven't recently", "not recently",
             "haven't since", "quit", "stopped")


def _past_drug_use(ex: _Extractor, g: _Group) -> list[tuple[Mention, Assertion]]:
    """The present mentions of a habit when the patient denied it when asked and every one of them is about the
    past ("Any recreational drugs? - Um, no, no. I mean, when I was like younger I sometimes like would use
    marijuana, but I haven't really recently"): docs/gold_guide.md writes the use as absent with the history in
    the value, as for an ex-smoker. [] when the use is current or was not denied."""
    if not any(a.status == "absent" and a.source == "answer" for _m, a in g.mentions):
        return []
    present = _supporting(g.mentions, "present")
    for m, _a in present:
        lo, hi = ex.sentence_bounds(ex.sentence_of(ex.span(m)[0]))
        said = " " + " ".join(w for w in ex.words[lo:hi] if w not in _HABIT_GAP) + " "
        if not _has_any(said, _PAST_USE):
            return []
    return present


def _supporting(items: list[tuple[Mention, Assertion]], status: str) -> list[tuple[Mention, Assertion]]:
    return [(m, a) for m, a in items if a.status == status and a.source != "unanswered"]


def _has_any(norm: str, phrases: tuple[str, ...]) -> bool:
    return any(f" {p} " in norm for p in phrases)


def extract_record(transcript: str) -> ClinicalRecord:
    """Structure one transcript into schema S, deterministically, with exact evidence.

    The work is done in passes over one shared token stream (see the module docstring):
    mentions -> assertions -> groups -> dialogue attributes -> claims -> patient context ->
    flags -> triage.

    Args:
        transcript: The transcript text (human reference or ASR hypothesis),
            with or without punctuation and speaker labels.

    Returns:
        A valid :class:`ClinicalRecord`; every ``field_evidence`` quote is an
        exact substring of ``transcript``; claims are ``c1..`` and flags
        ``f1..`` in text order.
    """
    ex = _Extractor(transcript)
    found = _pass_mentions(ex)
    assertions = _pass_assertions(ex, found.lex)
    groups, reactions = _pass_groups(ex, found, assertions)
    dialogue = _pass_dialogue(ex, found.lex, assertions, groups)
    built = _pass_claims(ex, groups, dialogue)
    have = {b.claim.concept for b in built}
    built = _renumber(_travel(ex, _injury_time(_productive_cough(built))) + _occupation_claims(ex, have)
                      + _how_is_claims(ex, have))
    patient = _pass_patient(ex, built)
    field_evidence: dict[str, list[str]] = {b.claim.id: b.evidence for b in built}
    flags = _pass_flags(ex, built, reactions, patient, field_evidence)
    triage, triage_ev = _pass_triage(ex, built, flags, patient, dialogue)
    if triage_ev:
        field_evidence["triage"] = triage_ev
    chief = next((b.claim for b in built if b.claim.category == "symptom" and b.claim.status == "present"
                  and not _is_modifier(b.claim.concept)), None)
    # Guarantee the exact-substring contract even if a helper above misbehaves.
    field_evidence = {k: [q for q in v if q and q in transcript] for k, v in field_evidence.items()}
    return ClinicalRecord(
        chief_complaint=chief.concept if chief else None,
        triage=triage,
        claims=[b.claim for b in built],
        safety_flags=[f for f, _ev, _hint in flags],
        field_evidence=field_evidence,
    )


# ---------------------------------------------------------------- pass 1: mentions


@dataclass
class _Found:
    """Pass 1 output: what the text mentions (character offsets into the transcript)."""

    lex: list[Mention]                # symptoms, findings, history, social (composed terms included)
    drugs: list[Mention]
    allergens: list[Mention]
    consumed: set[int]                # indexes into ``drugs`` that are allergens, not medications
    regions: list[tuple[int, int, str]]  # token ranges describing an allergen's reaction


#: A drug class and the members that, named in the same sentence, make the class mention redundant
#: ("anti-inflammatories like ibuprofen or Advil" is ibuprofen).
_CLASS_MEMBERS = {"nsaid": frozenset({"ibuprofen", "naproxen", "diclofenac", "celecoxib", "meloxicam", "ketorolac",
                                      "indomethacin"})}


def _named_members(ex: _Extractor, drugs: list[Mention]) -> list[Mention]:
    sents: dict[int, set[str]] = {}
    for d in drugs:
        sents.setdefault(ex.sentence_of(ex.span(d)[0]), set()).add(d.concept)
    return [d for d in drugs if not (d.concept in _CLASS_MEMBERS
                                     and _CLASS_MEMBERS[d.concept] & sents[ex.sentence_of(ex.span(d)[0])])]


def _pass_mentions(ex: _Extractor) -> _Found:
    """Lexicon, drug and composed mentions; allergens and their reaction regions.

    Composed terms replace what they swallowed; a "bright red blood" next to a cough word is
    hemoptysis, not rectal bleeding; lexicon mentions that are the allergen itself are dropped.
    """
    all_mentions = match_tokens(ex.text, ex.tokens)
    drugs = _named_members(ex, match_drug_tokens(ex.text, ex.tokens))
    lex = [m for m in all_mentions if m.category != "body_site"]
    composed = _compose(ex, all_mentions, _PAIN_WORDS, _pain_partner, reach=6)
    composed += _compose(ex, all_mentions, _BLOOD_WORDS, _blood_partner, reach=6, partner_may_be_covered=True,
                         back_reach=3)
    composed += _listed_blood(ex, all_mentions + composed)
    composed += _pain_of_the_site_before(ex, all_mentions + composed)
    lex = [m for m in lex if not any(c.start <= m.start and m.end <= c.end for c in composed)
           or norm_phrase(m.surface) in _CO_SYMPTOM_WORDS | {"swollen"}  # "pain and swelling in my knee"
           or m.concept == "pain radiation"]  # "does this pain move anywhere else in your hand?"
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
    lex = _airway_factors(ex, [_joint_swelling(ex, _cough_blood(ex, m)) for m in lex
                               if not _pain_descriptor(ex, m)]) + composed
    lex = [m for m in lex if not _radiation_destination(ex, m) and not _not_a_fall(ex, m)
           and not _constant_not_pain(ex, m) and not _not_the_illness(ex, m)]
    allergens, consumed = _find_allergens(ex, drugs)
    spans = [(a.start, a.end) for a in allergens]
    lex = sorted((m for m in lex if not any(a <= m.start < b for a, b in spans)), key=lambda m: m.start)
    ex.mention_sents = {ex.sentence_of(ex.span(m)[0]) for m in lex + drugs}
    ex.mention_toks = {ex.span(m)[0] for m in lex + drugs}
    return _Found(lex, drugs, allergens, consumed, _reaction_regions(ex, allergens))


#: Activities that change a pain ("worse when I'm coughing or laying down", "leaning forward helps"):
#: word sequence -> (concept when it makes the pain worse, concept when it relieves it).
_MODIFIER_ACTIVITIES: dict[tuple[str, ...], tuple[str | None, str | None]] = {
    **dict.fromkeys([("lie", "down"), ("lying", "down"), ("laying", "down"), ("lay", "down"), ("lie", "flat"),
                     ("lying", "flat"), ("laying", "flat")], ("pain worse lying down", "pain relieved by lying down")),
    **dict.fromkeys([("cough",), ("coughing",), ("coughs",)], ("pain worse with coughing", None)),
    **dict.fromkeys([("deep", "breath"), ("deep", "breaths"), ("breathe", "in"), ("breathing", "in"),
                     ("deep", "breathing")], ("pain worse with deep breath", None)),
    **dict.fromkeys([("move",), ("moving",), ("movement",), ("movements",), ("walk",), ("walking",),
                     ("activity",), ("activities",), ("bend",), ("bending",), ("lifting",), ("exercise",),
                     ("exercising",)], ("pain worse with movement", None)),
    **dict.fromkeys([("eat",), ("eating",), ("meal",), ("meals",), ("food",)], ("pain worse with eating", None)),
    **dict.fromkeys([("lean", "forward"), ("leaning", "forward"), ("sit", "forward"), ("sitting", "forward")],
                    ("pain worse leaning forward", "pain relieved by leaning forward")),
    **dict.fromkeys([("rest",), ("resting",), ("rested",)], (None, "pain relieved by rest")),
    **dict.fromkeys([("ice",), ("icing",), ("ice", "packs"), ("ice", "pack")], (None, "pain relieved by ice")),
    **dict.fromkeys([("touch",), ("touching",), ("palpate",), ("pressing",), ("press",)],
                    ("pain worse with touch", None)),
}
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
_PAIN_EXERTION = {("stairs",): "pain worse with stairs", ("running",): "pain worse with running",
                  ("run",): "pain worse with running",
                  **dict.fromkeys([("upstairs",), ("downstairs",), ("up", "stairs"), ("down", "stairs"),
                                   ("walking", "down", "stairs"), ("walking", "up", "stairs"),
                                   ("walking", "upstairs"), ("walking", "downstairs"), ("going", "upstairs"),
                                   ("going", "downstairs")], "pain worse with stairs")}
_BREATH_WORDS = frozenset({"breath", "breathing", "breathe", "breathless", "breathlessness", "winded", "wheeze",
                           "wheezing", "wheezy"})
#: Concepts that describe another symptom (its modifiers, pattern, radiation, history), never a topic
#: or the presenting complaint themselves.
_MODIFIER_CONCEPTS = frozenset(
    {c for pair in _MODIFIER_ACTIVITIES.values() for c in pair if c}
    | {"pain radiation", "constant pain", "previous similar episode", "pain worse with deep breath",
       "pain worse with coughing", "pain worse with movement", "pain worse with eating", "pain worse lying down",
       "pain relieved by rest", "pain relieved by leaning forward"}
)
_FACTOR_WORDS = (" worse with ", " relieved by ", " worse at ", " worse in the ", " on exertion")


def _is_modifier(concept: str) -> bool:
    """A factor, pattern or history of another symptom (never a topic or the presenting complaint)."""
    return concept in _MODIFIER_CONCEPTS or any(w in f" {concept}" for w in _FACTOR_WORDS)


_COUGH_MODIFIER = frozenset({"cough", "coughing", "coughs"})
_WORSE_WORDS = frozenset({"worse", "worsens", "worsen", "aggravates", "aggravate", "aggravated"})
_BETTER_WORDS = frozenset({"better", "helps", "help", "helped", "relieves", "relieve", "relieved", "eases", "ease",
                           "eased", "improves", "improve", "improved"})
_MODIFIER_REACH = 6


_SENSES = {"vision": "vision changes", "eyesight": "vision changes", "hearing": "hearing changes",
           "smell": "loss of smell", "taste": "loss of taste", "hair": "hair changes", "nails": "nail changes",
           "nail": "nail changes"}
_SENSE_CUES = frozenset({"change", "changes", "changed", "problems", "problem", "trouble", "loss", "senses",
                         "difficulty", "issues"})


_SPUTUM_WORDS = frozenset({"sputum", "phlegm", "mucus"})
_BLOOD_NOT_SPUTUM = frozenset({"pressure", "pressures", "work", "test", "tests", "thinner", "thinners", "sugar",
                               "sugars", "clot", "clots", "type", "transfusion", "transfusions", "count", "counts",
                               "cells", "vessel", "vessels", "donation", "bank"})


def _listed_blood(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """Blood listed beside sputum in one question ("bringing up any sputum or any blood?"): coughed-up
    blood, i.e. hemoptysis, asked about on its own (the sputum keeps its own mention). The word "blood"
    alone becomes the mention, so the answer decides its status as for any term."""
    covered = _covered(ex, mentions)
    out: list[Mention] = []
    for k, w in enumerate(ex.words):
        if w != "blood" or k in covered:
            continue
        s = ex.sentence_of(k)
        lo, hi = ex.sentence_bounds(s)
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
        if any(w in _WH_LEAD for w in lead) or not ({"pain", "pains", "joints", "joint", "hurt", "hurts", "aches"}
                                                    & set(words)):
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
    covered = _covered(ex, mentions)
    out: list[Mention] = []
    for k, w in enumerate(ex.words):
        if w != "never" or k in covered:
            continue
        s = ex.sentence_of(k)
        lo, hi = ex.sentence_bounds(s)
        rest = ex.words[k + 1 : hi]
        if ex.ctx.ends_q[s] or not ({"before", "experienced"} & set(rest)) or not (
                _PAIN_WORDS & set(rest) or {"this", "that", "it", "anything", "something"} & set(rest[:4])):
            continue
        end_k = next(x for x in range(k + 1, hi) if ex.words[x] in ("before", "experienced"))
        start, end = ex.tokens[k + 1].start, ex.tokens[end_k].end
        out.append(Mention(start, end, ex.text[start:end], "previous similar episode", "history"))
    return out


def _sense_mentions(ex: _Extractor, mentions: list[Mention]) -> list[Mention]:
    """The senses listed in a screening question ("any changes in your vision, hearing, smell or taste?"):
    each bare sense word is a mention of its change/loss concept, answered by the usual reading.
    Only in questions that ask about changes or problems; statements ("my taste is fine") are left alone."""
    covered = _covered(ex, mentions)
    out: list[Mention] = []
    for k, w in enumerate(ex.words):
        if w not in _SENSES or k in covered:
            continue
        s = ex.sentence_of(k)
        if not ex.ctx.ends_q[s]:
            continue
        lo, hi = ex.sentence_bounds(s)
        if not any(x in _SENSE_CUES for x in ex.words[lo:hi]):
            continue
        out.append(_concept_mention(ex, ex.tokens[k].start, ex.tokens[k].end, _SENSES[w]))
    return out


_DAY_TIMES = {("at", "night"): "at night", ("at", "nighttime"): "at night", ("at", "night-time"): "at night",
              ("in", "the", "morning"): "in the morning", ("in", "the", "mornings"): "in the morning"}
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
        if any(w in _PAIN_WORDS for w in ex.words[plo:hi]) or not any(w in _COUGH_MODIFIER or w == "cough's"
                                                                      for w in ex.words[plo:hi]):
            continue
        before = ex.words[max(lo, k - 4) : k]
        if not (_MOSTLY.intersection(before) or (before and before[-1] in ("coughing", "cough", "coughs"))):
            continue
        start, end = ex.tokens[k].start, ex.tokens[k + len(phrase) - 1].end
        out.append(Mention(start, end, ex.text[start:end], f"cough worse {_DAY_TIMES[phrase]}", "symptom"))
    return out


_AFTER_COUGH = frozenset({"i", "my", "some", "of", "a", "the", "each", "every", "really", "bad", "big", "long",
                          "her", "his", "he", "she"})


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
        if c is None or ex.ctx.ends_q[s] or ex.sentence_of(c) != s or covered.intersection(range(k, c)) \
                or not all(x in _AFTER_COUGH for x in ex.words[k + 1 : c]):
            continue  # not "it's come on after that, the cough started first"
        lo, hi = ex.sentence_bounds(s)
        plo = ex.sentence_bounds(max(0, s - 2))[0]
        words = ex.words[plo:hi]
        if any(x in _PAIN_WORDS for x in words) or not any(x in _BREATH_WORDS or x == "shorter" for x in words):
            continue
        start, end = ex.tokens[k].start, ex.tokens[c].end
        out.append(Mention(start, end, ex.text[start:end], canonical_concept("shortness of breath worse with coughing"),
                           "symptom"))
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
        concept = _airway_factor(subject, "worse" if " worse " in f" {m.concept} " else "better", m.concept,
                                 ex.words[i:j]) if subject else None
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
    activities = {**{k: (_PAIN_EXERTION.get(k, "pain worse with movement") if v == "exertion"
                         else f"pain worse with {v}", None)
                     for k, v in _AIRWAY_ACTIVITIES.items()},
                  **_MODIFIER_ACTIVITIES,
                  **{k: (c, None) for k, c in _PAIN_EXERTION.items() if len(k) > 1 or k not in _AIRWAY_ACTIVITIES}}
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
        if hit is None and ex.words[k] in _COUGH_MODIFIER and k in covered and any(
                w in _WORSE_WORDS for w in ex.words[max(ex.sentence_bounds(ex.sentence_of(k))[0], k - 4) : k]):
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
        elif worse_c and worse_c.startswith("pain ") and (about_pain or "it" in ex.words[plo:hi]) \
                and not ex.ctx.ends_q[s] and (_hurts_when(ex, k, size, lo, hi) or _short_answer_to(ex, s, _WORSE_WORDS)
                                              or _IT_HURTS.intersection(ex.words[k + size : min(hi, k + size + 3)])):
            concept = worse_c  # ... or "my shoes touching it hurts"
        elif better_c and better_c.startswith("pain ") and not ex.ctx.ends_q[s] and _tried_and_helped(ex, k, size):
            concept = better_c  # "I've tried some ibuprofen and some ice, that seems to help temporarily"
        elif better_c and better_c.startswith("pain ") and not ex.ctx.ends_q[s] and (
                _short_answer_to(ex, s, _BETTER_WORDS) or _conditional(ex, k, lo) and any(
                    w in _BETTER_WORDS or w in _GOES_AWAY for w in ex.words[k + size : min(hi, k + size + 10)])):
            concept = better_c  # "if I'm just resting the elbow, um, it makes it better", "if I rest, it goes away"
        if concept is not None:
            start, end = ex.tokens[k].start, ex.tokens[k + size - 1].end
            out.append(Mention(start, end, ex.text[start:end], concept, "symptom"))
        k += size
    return out


_WHEN_WORDS = frozenset({"when", "whenever", "if", "anytime", "any", "time", "every", "during", "while"})
#: Words between "when"/"if"/"any" and the activity ("anytime I tried to move it", "if I take a rest").
_WHEN_SKIP = frozenset({"i", "i'm", "try", "tried", "to", "of", "type", "kind", "sort", "it's", "am", "do", "start",
                        "just", "take", "a"})
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
_REMEDY_AFTER = frozenset({"medication", "medications", "medicine", "medicines", "remedy", "remedies", "pills",
                           "tablets", "syrup"})


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


_NOT_PAIN_SYMPTOMS = frozenset({"cough", "coughing", "coughs", "nausea", "nauseous", "nauseated", "breath",
                                "breathing", "wheeze", "wheezing", "sputum", "phlegm", "vomiting", "fever", "tired",
                                "numbness", "tingling", "itch", "itching", "itchy"})


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
    return before[-1:] in (["this"], ["last"], ["every"], ["next"]) or before == ["during", "the"] \
        or (i + 1 < len(ex.words) and ex.words[i + 1] in _SEASONS) or any(w in _SEASONS for w in near)


def _radiation_destination(ex: _Extractor, m: Mention) -> bool:
    """A site pain named in a question about where the pain goes ("does the pain radiate anywhere else, like
    pain in the hand or wrist, or up into the arm?") is a destination of the radiation, not a pain of its own."""
    if not m.concept.endswith(" pain") or m.concept in ("chest pain", "back pain"):
        return False
    s = ex.sentence_of(ex.span(m)[0])
    lo, hi = ex.sentence_bounds(s)
    return ex.ctx.ends_q[s] and any(w in _RADIATION or w in ("radiation", "anywhere") for w in ex.words[lo:hi])


def _pain_descriptor(ex: _Extractor, m: Mention) -> bool:
    """"achy" in a list of pain qualities ("sharp, burning, achy") describes a pain, it is not
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
    near = [sites.get(ex.words[k].removesuffix("'s")) or ex.words[k].removesuffix("'s")
            for k in range(max(lo, i - 5), min(hi, j + 5))]  # "my knee's swollen"
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


# ---------------------------------------------------------------- pass 2: assertions


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
        said = [out[o.start] for o in by_sent.get(s2, []) if o.concept == m.concept and o.start != m.start
                and out[o.start].source == "statement" and _said_after(o, out[o.start], a.cue_start)]
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
    "previous similar episode": frozenset({
        "first time", "completely new", "brand new", "nothing like this before", "never had this before",
        "never had anything like this", "never had anything like this before", "never happened before",
        "never experienced this before", "never experienced anything like this", "nothing like this really before",
        "never had anything like that"}),
}
_FLIP: dict[str, Literal["present", "absent", "uncertain"]] = {
    "present": "absent", "absent": "present", "uncertain": "uncertain"}


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
_NOT_NORMAL = frozenset({"not", "but", "no", "isn't", "hasn't", "haven't", "wasn't", "worse", "better", "except",
                         "although", "though", "more", "less", "bit", "little"})


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
    if not ex.ctx.ends_q[s] or s + 1 >= len(ex.ctx.sent_start) or "dry" not in ex.words[lo:hi] \
            or not any(w in _SPUTUM_WORDS for w in ex.words[lo:hi]):
        return None
    alo, ahi = ex.sentence_bounds(s + 1)
    k = alo
    while k < ahi and (ex.words[k] in _TYPE_LEADS or ex.words[k] in _TYPE_HEDGES or ex.words[k] in _fillers()
                       or ex.words[k] in ("it", "is", "it's", "its")):
        k += 1
    if k >= ahi or ex.words[k] != "dry":
        return None
    return Assertion("absent", "answer", ex.text[ex.tokens[alo].start : ex.tokens[k].end], ex.tokens[alo].start,
                     ex.tokens[k].end)


def _named_exception(ex: _Extractor, m: Mention, a: Assertion) -> bool:
    """The one thing a denial leaves out ("nothing I can think of, just this cough", "no, only the knee pain"):
    "just"/"only" + a determiner between the negation cue and the term."""
    if a.cue_end is None:
        return False
    c, i = ex._tok_index(a.cue_end - 1), ex.span(m)[0]
    between = ex.words[c + 1 : i]
    if not between:
        return False
    return any(w in ("just", "only") and nxt in ("this", "the", "a", "my", "some", "that")
               for w, nxt in zip(between, between[1:] + [ex.words[i]], strict=True))


_MEASURE_WORDS = frozenset({"thermometer", "temperature", "temp"})
_NORMAL_WORDS = frozenset({"normal", "fine", "ok", "okay"})


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


def _answer_sentences(ex: _Extractor, s: int, limit: int = 2) -> list[int]:
    """The sentences after question ``s`` that answer it: up to ``limit``, stopping at the next question."""
    out: list[int] = []
    n = len(ex.ctx.sent_start)
    for s2 in range(s + 1, min(n, s + 1 + limit)):
        out.append(s2)
        if ex.ctx.ends_q[s2]:
            break
    return out


_STAYS_PUT = frozenset({"just", "only", "mainly", "mostly", "stays", "stayed", "stay", "staying"})
_STAYS_SKIP = frozenset({"i", "would", "say", "think", "it's", "it", "is", "the", "pain", "i'm", "feeling", "feel",
                         "has", "pretty", "much"})


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
        if ex.ctx.ends_q[s2] and s2 not in ex.mention_sents and (
                len(words) <= 6 or ex.words[lo] in ("like", "such")):
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


def _fillers() -> frozenset[str]:
    """Hesitations and discourse fillers ("um", "well"): a sentence of only these carries no answer."""
    return answer_fillers()


@functools.lru_cache(maxsize=1)
def _lead_fillers() -> frozenset[str]:
    """Words skipped when looking for a question's first word: hesitations and discourse fillers."""
    return hesitations() | discourse_fillers()


# ---------------------------------------------------------------- pass 3: groups


def _pass_groups(
    ex: _Extractor, found: _Found, assertions: dict[int, Assertion]
) -> tuple[dict[tuple[str, str], _Group], dict[str, list[str]]]:
    """One group per (category, concept) with every mention and its assertion; allergen reactions."""
    groups: dict[tuple[str, str], _Group] = {}
    reactions: dict[str, list[str]] = {}

    def add(category: str, concept: str, m: Mention, a: Assertion, red: bool = False,
            hint: str | None = None) -> None:
        g = groups.get((category, concept))
        if g is None:
            g = groups[(category, concept)] = _Group(category, concept, red_flag=red, triage_hint=hint)
        g.red_flag = g.red_flag or red
        g.mentions.append((m, a))

    for m in found.lex:
        if m.category in ("symptom", "finding"):
            tok = ex.span(m)[0]
            hit = next((r for r in found.regions if r[0] <= tok < r[1]), None)
            if hit is not None:
                # The reaction to an allergen ("gives me hives"), not a current symptom.
                reactions.setdefault(hit[2], [])
                if m.concept not in reactions[hit[2]]:
                    reactions[hit[2]].append(m.concept)
                continue
        category = _CATEGORY.get(m.category, "symptom")
        if category == "history" and _is_family(ex, m):
            category = "family_history"
        if category == "social" and _is_family(ex, m):
            continue  # "my dad smoked two packs a day": the relative's habit, not the patient's
        add(category, m.concept, m, assertions[m.start], m.red_flag and category == "symptom", m.triage_hint)
    for m, a in _temperature_claims(ex):
        add("symptom", "fever", m, a)
    for m, a in _oxygen_claims(ex):
        add("finding", "supplemental oxygen", m, a)
    for idx, d in enumerate(found.drugs):
        if idx in found.consumed:
            continue
        category = "plan" if _has_any(ex.context_norms(d, side=8)[0], _PLAN_CUES) else "medication"
        add(category, d.concept, d, ex.ctx.assertion(d))
    for al in found.allergens:
        add("allergy", al.concept, al, ex.ctx.assertion(al))
    if not found.allergens:
        for cue in _no_allergy_statements(ex):
            a = ex.ctx.assertion(cue)
            if a.status == "absent":
                add("allergy", "allergies", cue, a)
    return groups, reactions


# ---------------------------------------------------------------- pass 4: dialogue attributes


@dataclass
class _Answered:
    """An attribute read from the answer to a clinician's question about the current topic."""

    kind: str                 # "onset" | "confirm" (a checked onset) | "rating" | "distance" | "describe" |
    #                           "frequency"
    value: str | None
    unit: str | None
    time: str | None
    rating: float | None      # the highest number of a 0-10 rating
    evidence: list[str]


@dataclass
class _Dialogue:
    """Pass 4 output: answers attached to a group key, and every 0-10 rating heard."""

    answers: dict[tuple[str, str], list[_Answered]] = field(default_factory=dict)
    ratings: list[tuple[float, tuple[str, str] | None, list[str]]] = field(default_factory=list)


def _question_kind(words: list[str]) -> str | None:
    """What an open question asks: onset/duration, a 0-10 rating, a walking distance, how often, or what a
    symptom is like."""
    text = " " + " ".join(words) + " "
    if any(f" {w} " in text for w in _RATING_WORDS) or " 1 to 10 " in text or " 0 to 10 " in text \
            or " out of 10 " in text or " one to 10 " in text or " zero to 10 " in text:
        return "rating"
    if _has_any(text, ("how far", "how many blocks", "how many flights", "how many stairs", "how many steps",
                       "how many meters", "how many metres", "how long can you walk", "how much can you walk",
                       "how much can you run", "how much walking")):
        return "distance"
    if _has_any(text, ("how often", "how many times", "how frequently", "how frequent")):
        return "frequency"
    if _has_any(text, ("how much weight", "how many pounds", "how many kilos", "how many kilograms", "how many lbs")):
        return "amount"
    if _has_any(text, _DESCRIBE_CUES) and not _has_any(text, ("how long", "how often", "how many")):
        return "describe"
    if _has_any(re.sub(r" last (?=(night|week|month|year|time|few|couple|day|days|weekend|monday|tuesday|"
                       r"wednesday|thursday|friday|saturday|sunday) )", " ", text), ("last", "lasts", "lasting")):
        return None  # "how long does it last": an episode, not the onset ("if it started last night" is one)
    if _has_any(text, ("when did", "when was", "how long", "since when", "start", "started", "begin", "began",
                       "first notice", "first noticed", "going on for", "how many days", "how many weeks",
                       "how many hours", "how many months", "how many years", "how long ago", "how many minutes")):
        return "onset"
    return None


def _pass_dialogue(
    ex: _Extractor, lex: list[Mention], assertions: dict[int, Assertion],
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
        (ex.sentence_of(ex.span(m)[0]), m) for m in lex
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
            in_q = [m for m in lex if m.start in key_of and key_of[m.start] == ("history", "trauma")
                    and ex.sentence_of(ex.span(m)[0]) == s]
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
        if topic is None and (not any(w in _TOPIC_POINTERS for w in ex.words[lo:hi])
                              or any(w in _NON_SYMPTOM_TOPICS for w in ex.words[lo:hi])):
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
            if kind == "onset" and chief is not None and _has_any(" " + " ".join(ex.words[lo:hi]) + " ", _RECAP) \
                    and not any(w in _PAIN_WORDS for w in ex.words[lo:hi]):
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
    ex: _Extractor, s: int, in_q: list[Mention], present_syms: list[tuple[int, Mention]],
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
    times = [q for q, k in zip(ex.quantities, ex.qty_tok, strict=True)
             if lo <= k < hi and q.kind == "time" and q.value is not None]
    words = ex.words[lo:hi]
    return bool(times) and hi - lo <= 14 and s not in ex.mention_sents and (
        len(times) >= 2 or any(q.value_max is not None for q in times) or "so" in words or "said" in words)


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


def _is_pain_concept(concept: str) -> bool:
    if _is_modifier(concept):
        return False
    return any(w in concept for w in ("pain", "ache", "sore", "headache", "dysuria"))


def _scale_definition(ex: _Extractor, s: int) -> bool:
    """A sentence that only defines the rating scale ("Zero being the least amount of pain. 10 being the
    worst."), often split off the question by ASR punctuation."""
    lo, hi = ex.sentence_bounds(s)
    words = ex.words[lo:hi]
    return "being" in words and any(w in ("worst", "least", "best", "most", "no") for w in words)


def _read_answer(ex: _Extractor, s: int, kind: str) -> _Answered | None:
    sents = _answer_sentences(ex, s, limit=4 if kind == "rating" else 2)
    if kind == "describe" and sents and ex.ctx.ends_q[sents[-1]] and any(
            w in _QUALITY_WORDS for w in ex.words[slice(*ex.sentence_bounds(sents[-1]))]):
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
        times = [q for q in qs if q.kind == "time" and (q.value is not None or q.unit_canonical)
                 and not ex.ctx.ends_q[ex.sentence_of(ex._tok_index(q.start))]]
        if not times:
            return None
        q = times[0]  # the direct answer; a later number replaces a rough first one only right after it
        between = re.findall(r"[a-z']+", ex.text[q.end : times[1].start].lower()) if len(times) > 1 else []
        if _vague(_fmt_qty(q)) and len(times) > 1 and not _vague(_fmt_qty(times[1])) \
                and all(w in _REFINERS for w in between):
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
                return _Answered("describe", " ".join(w for w in ex.words[lo:hi] if w != "and"), None, None, None,
                                 [q_quote, ex.quote(lo, hi, slo, shi)])
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
                return _Answered("amount", _fmt_value(q), q.unit_canonical, _fmt_qty(during) if during else None,
                                 None, ev(q) + (ev(during)[1:] if during else []))
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
    lower = next((q for q in qs if q.end <= best.start and q.value is not None and q.value_max is None
                  and best.value_max is None and q.kind in ("count", "measure") and q.unit_canonical is None
                  and q.value < (best.value or 0)
                  and re.fullmatch(r"\s*(?:or|to)\s+(?:a|an|maybe|like|\s)*", ex.text[q.end : best.start], re.I)), None)
    if lower is not None:
        value = f"{_fmt_num(lower.value or 0)}-{value}"  # "probably a 6 or a 7": the range 6-7
    return _Answered("rating", value, "out of 10", None, best_top, ev(best))


# ---------------------------------------------------------------- pass 5: claims


@dataclass
class _Built:
    """One claim with its evidence and the group it came from."""

    claim: Claim
    evidence: list[str]
    group: _Group
    pos: int = 0  # character offset of the first supporting mention (claims are numbered in text order)


def _pass_claims(ex: _Extractor, groups: dict[tuple[str, str], _Group], dialogue: _Dialogue) -> list[_Built]:
    """Status, value/unit, time and laterality per group; ids c1.. in text order.

    Attribute precedence: an answer to a question about this topic (rating, onset, distance)
    beats a quantity found next to a mention; a mention's own sentence beats its answer's.
    """
    rows: list[tuple[int, Claim, list[str], _Group]] = []
    for key, g in groups.items():
        if g.concept in _VAGUE_CONCEPTS or (g.concept in _TALKED_ABOUT and not _diagnosed(ex, g)):
            continue
        status = _aggregate_status(g.mentions)
        if status is None:
            continue
        read_as = status  # the mentions that decided the status support the claim
        if status == "present" and g.category == "symptom" and _only_past(ex, g):
            status = "absent"  # "Any cough? No, not right now, but I did have a flu last week..."
        if status == "uncertain" and g.category in ("social", "medication") and all(
                a.status != "uncertain" or a.source == "unanswered" or (a.cue or "").lower() in _AMOUNT_HEDGES
                for _m, a in g.mentions) and any(a.source != "unanswered" for _m, a in g.mentions):
            status = "present"  # "maybe a glass of wine on the weekend": the hedge is on the amount
        rare = status == "absent" and g.category == "social" and _rarely(ex, g)
        if rare:
            status = "present"  # "Do you drink? - No, very rarely": some, not none
        past_use = _past_drug_use(ex, g) if status == "present" and g.concept in _PAST_USE_CONCEPTS else []
        if past_use:
            status = "absent"  # "any recreational drugs? - no, no. When I was younger I would use marijuana"
        support = _supporting(g.mentions, read_as if read_as == "uncertain" or rare else status)
        first_m, _first_a = support[0]
        evidence: list[str] = []
        for m, a in support[:2]:
            for quote in ex.evidence(m, a):
                if quote not in evidence:
                    evidence.append(quote)
        value, unit, time, more = _near_attributes(ex, g, support)
        evidence += [q for q in more if q not in evidence]
        if past_use:
            m, a = past_use[0]
            drug = m.surface.lower()
            value, unit, time = (None if "drug" in drug else f"{drug} in the past"), None, None
            evidence += [q for q in ex.evidence(m, a) if q not in evidence]
        if status == "present":
            used: set[str] = set()  # the first answer of each kind wins (later ones are about episodes)
            for ans in dialogue.answers.get(key, []):
                if ans.kind == "confirm" and ans.time and not _vague(ans.time):
                    time = ans.time  # "a couple of days ... so about 2-3 days? - about 3 days ago"
                    used.add("onset")
                    for quote in ans.evidence:
                        if quote not in evidence:
                            evidence.append(quote)
                    continue
                if ans.kind == "onset" and "onset" in used and ans.time and _narrows(time, ans.time):
                    time = ans.time  # "a couple of weeks ... two weeks, three weeks? - about two to three weeks"
                    continue
                if ans.kind == "onset" and "onset" in used and ans.time and _anchored(time) \
                        and not _anchored(ans.time) and not _vague(ans.time):
                    time = ans.time  # "started last night ... how long has it been going on? - maybe 8 hours"
                    for quote in ans.evidence:
                        if quote not in evidence:
                            evidence.append(quote)
                    continue
                if ans.kind in used:
                    continue
                if ans.kind == "onset" and ans.time:
                    if _vague(ans.time) and time is not None and not _vague(time):
                        continue  # "a few days" does not replace "3 days"
                    time = ans.time
                    if _vague(time):
                        continue  # keep reading: a later answer may give the number
                elif ans.kind == "describe" and ans.value and value is None:
                    value, unit = ans.value, None
                elif ans.kind == "amount" and ans.value and value is None and unit is None:
                    value, unit, time = ans.value, ans.unit, time or ans.time
                elif ans.kind == "frequency" and ans.time and time is None:
                    time = ans.time  # "how often? - two to three times a week" (no onset was given)
                elif ans.kind in ("rating", "distance") and ans.value and (
                    ans.kind == "rating" or value is None or unit is None
                ) and not (ans.kind == "rating" and g.concept == "cough"):  # a cough's value is its type
                    value, unit = ans.value, ans.unit
                else:
                    continue
                used.add(ans.kind)
                for quote in ans.evidence:
                    if quote not in evidence:
                        evidence.append(quote)
        if g.category == "social" and status == "present":
            _social_extras(ex, g, support, value, unit, time)
            if g.concept in _HABITS:
                value, unit, time, more = _habit_attributes(ex, g, value, unit, time)
                evidence += [q for q in more if q not in evidence]
            if g.concept == "sexually active" and value is None:
                value, more = _partner(ex, g)
                evidence += [q for q in more if q not in evidence]
            if g.concept == "smoking" and "former" in g.extra:
                value = value or "former"
        if g.category == "medication" and status == "present" and time is None:
            time, more = _medication_time(ex, g)
            evidence += [q for q in more if q not in evidence]
        if g.category == "family_history" and status == "present" and value is None and unit is None:
            value = _relative(ex, support)
        if g.concept == "shortness of breath" and status == "present" and value is None and unit is None \
                and _exertional_only(ex, g):
            value = "on exertion"  # docs/gold.md: breathlessness "on exertion" or a distance as its value
        laterality = None
        if g.category in ("symptom", "finding"):
            for m, _a in support:
                laterality = ex.laterality(m)
                if laterality:
                    break
        claim = Claim(id="", category=g.category, concept=g.concept, status=status,  # type: ignore[arg-type]
                      value=value, unit=unit, time=time, laterality=laterality)  # type: ignore[arg-type]
        rows.append((first_m.start, claim, evidence, g))
    rows.sort(key=lambda t: (t[0], t[1].category, t[1].concept))
    return [
        _Built(claim.model_copy(update={"id": f"c{n}"}), evidence, g, pos)
        for n, (pos, claim, evidence, g) in enumerate(rows, start=1)
    ]


def _near_attributes(
    ex: _Extractor, g: _Group, support: list[tuple[Mention, Assertion]]
) -> tuple[str | None, str | None, str | None, list[str]]:
    """(value, unit, time, extra quotes) from quantities next to the supporting mentions (or in their
    answer); the extra quotes cover what came from the next sentence, so every field keeps its evidence."""
    more: list[str] = []
    value = unit = time = None
    for m, _a in support:
        if m.start in ex.temp_at:
            t = ex.temp_at[m.start]
            value, unit = _fmt_num(t), "°C" if t < 50 else "°F"  # 36-43 is Celsius, 95-110 Fahrenheit
            break
        if g.concept == "supplemental oxygen":
            n = _OXYGEN_RE.match(m.surface)
            if n and n.group("n"):
                value, unit = _fmt_num(_num_word(n.group("n")) or 0), "litres"
            break
    for m, a in support:
        if g.concept == "supplemental oxygen":
            break
        qs = ex.quantities_near(m, a, after_only=g.category in ("medication", "plan"))
        for q in qs:
            if q.kind in ("time", "frequency") and (time is None or _vague(time)) and not (
                    time is not None and _vague(_fmt_qty(q))):
                time = _fmt_qty(q)  # a number beats "a few days" said alongside it
            elif q.kind in ("dose", "count", "measure") and value is None and q.value is not None \
                    and unit is None:
                if q.unit_canonical is None and g.category not in ("medication", "plan", "social"):
                    continue  # a bare number next to a symptom is rarely its value
                if q.unit_canonical == "years of age":
                    continue  # the patient's age, not the symptom's value
                if q.unit_canonical in _TEMPERATURE_UNITS and g.concept != "fever":
                    continue  # "vomiting ... and a temperature of 38.3 degrees": the fever's value
                value = _fmt_value(q)
                unit = q.unit_canonical
        if value is not None or (time is not None and not _vague(time)):
            break
    rough = time is not None and _vague(time)
    if g.category == "symptom" and (time is None or rough or (value is None and unit is None)):
        next_time, next_value, next_unit, quote = _next_sentence_attrs(ex, support, g.concept)
        # "over the last few days. I started having it around three days ago": the number refines it
        better = next_time is not None and (time is None or (rough and not _vague(next_time)))
        used_next = better or (value is None and unit is None and next_value is not None)
        time = next_time if better else time
        if value is None and unit is None:
            value, unit = next_value, next_unit
        if used_next and quote:
            more.append(quote)
    if value is None and unit is None and g.concept == "diabetes":
        value = _diabetes_type(ex, support)
    if value is None and unit is None and g.concept == "joint pain" and any(
            " other joints " in c or " any other joint " in c for m, a in support for c in ex.context_norms(m, a)):
        value = "other joints"  # "Any pain in other joints? - No": the pain asked of the joints not presenting
    if value is None and g.concept in _QUALIFIERS:
        value = _qualifier(ex, g.concept, support)
    if value is None and unit is None and g.concept == "cough":
        found = _cough_type_answer(ex)
        if found:
            value, quote = found
            more.append(quote)
    if value is None and g.category == "symptom" and _is_pain_concept(g.concept):
        value = _pain_quality(ex, support)
    return value, unit, time, more


_DIABETES_TYPE = re.compile(r"\btype\s*(1|2|one|two|i{1,2})\b", re.IGNORECASE)


def _diabetes_type(ex: _Extractor, support: list[tuple[Mention, Assertion]]) -> str | None:
    """ "type 2 diabetes", "diabetes, type one": "type 1" / "type 2" said with a supporting mention."""
    for m, a in support:
        for norm in ex.context_norms(m, a, side=3):
            t = _DIABETES_TYPE.search(norm)
            if t:
                n = t.group(1).lower()
                return f"type {'1' if n in ('1', 'one', 'i') else '2'}"
    return None


def _qualifier(ex: _Extractor, concept: str, support: list[tuple[Mention, Assertion]]) -> str | None:
    """A descriptive value said next to the symptom or in its answer: sputum colour/consistency
    ("yellow sputum", "it's creamy yellow"), cough type ("a dry cough")."""
    words, reach = _QUALIFIERS[concept]
    if concept == "cough":  # its type (dry / productive) before a sound ("hacking", "barking")
        word = _first_word_near(ex, support, _COUGH_TYPES, reach) or _first_word_near(ex, support, words, reach)
    elif concept == "sputum":
        return _colour_phrase(ex, support, words, reach)
    else:
        word = _first_word_near(ex, support, words, reach)
    return _QUALIFIER_SPELLING.get(word, word) if word else None


_COLOURS = frozenset({"yellow", "yellowish", "green", "greenish", "white", "whitish", "clear", "brown", "brownish",
                      "rusty", "pink", "pinkish", "red", "grey", "gray", "greyish"})
_SHADES = frozenset({"dark", "light", "bright", "pale"})


def _colour_phrase(
    ex: _Extractor, support: list[tuple[Mention, Assertion]], words: frozenset[str], reach: int
) -> str | None:
    """Sputum's look as said: the first qualifier near a supporting mention, a colour taken with the colours and
    shade said with it ("dark yellow greenish mucus", "clear to white", "yellowish green"), else the word."""
    for m, a in support:
        for norm in ex.context_norms(m, a, side=reach):
            toks = norm.split()
            for i, w in enumerate(toks):
                if w not in words:
                    continue
                if w not in _COLOURS:
                    return w
                lo, hi = _colour_span(toks, i)
                return " ".join(toks[lo:hi])
    return None


def _colour_span(toks: list[str], i: int) -> tuple[int, int]:
    """The colours said together with the colour at ``i``: its shade before it and the colours after it, joined
    or by "or", "to", "and" ("dark yellow greenish", "clear to white")."""
    lo = i
    while lo > 0 and toks[lo - 1] in _SHADES:
        lo -= 1
    hi = i + 1
    while hi < len(toks):
        if toks[hi] in _COLOURS:
            hi += 1
        elif toks[hi] in ("or", "to", "and") and hi + 1 < len(toks) and toks[hi + 1] in _COLOURS:
            hi += 2
        else:
            break
    return lo, hi


_COUGH_TYPES = frozenset({"dry", "wet", "productive", "chesty"})


_QUALIFIER_SPELLING = {"wet": "productive", "chesty": "productive"}
_TYPE_LEADS = frozenset({"no", "yeah", "yes", "so", "well", "oh", "um", "uh", "and", "but"})
_TYPE_HEDGES = frozenset({"it's", "pretty", "very", "mostly", "really", "quite", "more", "kind", "of", "like", "a",
                          "bit", "just", "been", "always", "usually", "all"})


def _cough_type_answer(ex: _Extractor) -> tuple[str, str] | None:
    """A cough's type said as a reply about the cough ("Is it a dry cough? - No, it's it's dry. It's very
    dry."): (dry / productive, the reply's quote), or None."""
    for s in range(1, len(ex.ctx.sent_start)):
        if ex.ctx.ends_q[s]:
            continue
        plo, phi = ex.sentence_bounds(s - 1)
        if not any(w in _COUGH_WORDS for w in ex.words[plo:phi]):
            continue
        lo, hi = ex.sentence_bounds(s)
        k = lo
        while k < hi and ex.words[k] in _TYPE_LEADS:
            k += 1
        if k >= hi or ex.words[k] not in ("it's", "its", "it"):
            continue
        k += 2 if ex.words[k] == "it" and k + 1 < hi and ex.words[k + 1] in ("is", "was", "has") else 1
        while k < hi and ex.words[k] in _TYPE_HEDGES:
            k += 1
        if k < hi and ex.words[k] in ("dry", "wet", "productive", "chesty") and (
                k + 1 >= hi or ex.words[k + 1] not in ("skin", "throat", "mouth", "eyes", "air")):
            w = ex.words[k]
            return _QUALIFIER_SPELLING.get(w, w), ex.quote(lo, hi, lo, hi)
    return None


def _first_word_near(
    ex: _Extractor, support: list[tuple[Mention, Assertion]], words: frozenset[str], reach: int
) -> str | None:
    """The first of ``words`` within ``reach`` tokens of a supporting mention (or in its answer)."""
    for m, a in support:
        for norm in ex.context_norms(m, a, side=reach):
            for w in norm.split():
                if w in words:
                    return w
    return None


def _pain_quality(ex: _Extractor, support: list[tuple[Mention, Assertion]]) -> str | None:
    """A pain's character said next to it ("a sharp pain", "it's dull and achy"): the first word of
    :data:`_PAIN_QUALITIES` within :data:`_QUALITY_REACH` tokens of a supporting mention, with the qualities
    said right after it ("dull and achy" -> "dull achy")."""
    for m, a in support:
        for norm in ex.context_norms(m, a, side=_QUALITY_REACH):
            toks = norm.split()
            for i, w in enumerate(toks):
                if w in _PAIN_QUALITIES:
                    return " ".join(t for t in toks[i:_qualities_end(toks, i)] if t != "and")
    return None


def _qualities_end(toks: list[str], i: int) -> int:
    """End of the pain qualities said together from ``i`` ("dull achy", "dull and achy", "sharp, stabbing")."""
    hi = i + 1
    while hi < len(toks):
        if toks[hi] in _PAIN_QUALITIES:
            hi += 1
        elif toks[hi] == "and" and hi + 1 < len(toks) and toks[hi + 1] in _PAIN_QUALITIES:
            hi += 2
        else:
            break
    return hi


def _next_sentence_attrs(
    ex: _Extractor, support: list[tuple[Mention, Assertion]], concept: str
) -> tuple[str | None, str | None, str | None, str | None]:
    """(time, value, unit) said right after a statement of the symptom ("he's had this cough... It's been
    happening for the past two days"; "I've lost a lot of weight. Probably like 8 to 10 pounds"): the next
    sentence, when it is a statement that names no other clinical concept. The value must carry a unit
    (a bare number there is rarely the symptom's). The last element is that sentence's quote."""
    for m, a in support:
        if a.source != "statement":
            continue
        s = ex.sentence_of(ex.span(m)[0])
        if ex.ctx.ends_q[s] or s + 1 >= len(ex.ctx.sent_start) or ex.ctx.ends_q[s + 1] or s + 1 in ex.mention_sents:
            continue
        lo, hi = ex.sentence_bounds(s + 1)
        time = value = unit = None
        for q, k in zip(ex.quantities, ex.qty_tok, strict=True):
            if not lo <= k < hi:
                continue
            if q.kind == "time" and (q.value is not None or q.unit_canonical) and time is None:
                time = _fmt_qty(q)  # "... really wheezy. I notice that mostly last night." (an anchor too)
            elif q.kind in ("measure", "dose") and q.value is not None and q.unit_canonical and value is None \
                    and q.unit_canonical != "years of age" and (concept == "fever"
                                                                 or q.unit_canonical not in _TEMPERATURE_UNITS):
                value, unit = _fmt_value(q), q.unit_canonical
        return time, value, unit, ex.quote(lo, hi, lo, hi) if (time or value) else None
    return None, None, None, None


def _social_extras(
    ex: _Extractor, g: _Group, support: list[tuple[Mention, Assertion]], value: str | None, unit: str | None,
    time: str | None,
) -> None:
    """Former smoker / heavy drinking markers on a present social claim (``g.extra``)."""
    norm = " ".join(c for m, a in support for c in ex.context_norms(m, a))
    if any(f" {w} " in norm for w in _FORMER_CUES) and g.concept == "smoking":
        g.extra["former"] = "1"
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


#: Habits whose amount and rate are read from what the patient says about them (:func:`_habit_attributes`).
_HABITS = frozenset({"alcohol", "smoking"})
_HABIT_GAP = frozenset({"uh", "um", "umm", "uhm", "er", "erm", "like"})  # said inside an amount or a rate
_DRINKS = r"(?:(?:red|white) )?(?:wine|beer|beers|whiskey|whisky|vodka|rum|gin|liquor|spirits|champagne|scotch|" \
          r"tequila|cider|sake)"
_HABIT_PERIODS = r"(?:day|week|month|night|weekend|year|evening)"
_ASK_WORDS = frozenset({"do", "does", "did", "are", "is", "was", "were", "have", "has", "any", "how", "what", "when",
                        "would", "could", "can", "so"})


@functools.lru_cache(maxsize=1)
def _habit_res() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """(drink amount, tobacco amount, rate, years smoked) over a sentence's words joined by single spaces."""
    num = r"(?:\d+|" + "|".join(sorted(_number_words(), key=len, reverse=True)) + ")"
    amount = rf"(?:{num}(?: (?:or|to) {num})?|half an?|an?(?: couple(?: of)?| few)?|couple(?: of)?|few|several)"
    drink = rf"\b{amount} (?:(?:glass|glasses|bottle|bottles|pint|pints|shot|shots|drink|drinks|beer|beers)" \
            rf"(?: of {_DRINKS})?|(?:can|cans|cup|cups) of {_DRINKS})(?: or {num})?\b"
    tobacco = rf"\b(?P<n>{amount}) (?P<unit>packs?|cigarettes?|cigs)\b"
    times = rf"(?:once|twice|{num} times|an? (?:couple|few) (?:of )?times|couple (?:of )?times)"
    rate = rf"\b(?:(?:{times} )?(?:a|per|every|each) {_HABIT_PERIODS}|every (?:other|single) {_HABIT_PERIODS}|" \
           rf"every (?:couple(?: of)?|few|{num}) {_HABIT_PERIODS}s|on (?:the )?weekends?|daily|nightly|weekly|" \
           rf"everyday)\b"
    years = rf"\bfor (?:about |around |almost |over |nearly |the (?:past|last) )?(?:{num}|a couple of|a few|many|" \
            rf"several) years\b"
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
            if n < len(ex.ctx.sent_start) and not ex.ctx.ends_q[n] and n not in ex.mention_sents \
                    and not _names_family(ex, n):
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
                    amount = (_fmt_num(float(n[0])) if n[0].isdigit() else _fmt_num(_number_words()[n[0]]),
                              "cigarettes" if cigarettes else None)
        if g.concept == "smoking" and years is None and how != "next":
            y = years_re.search(joined)
            if y:
                years, used = _said(ex, toks, joined, y.start(), y.end()), True
            elif how == "how long":
                lo, hi = ex.sentence_bounds(s)
                for q, k in zip(ex.quantities, ex.qty_tok, strict=True):
                    if lo <= k < hi and q.kind == "time" and q.value is not None and q.unit_canonical in (
                            "years", "months"):
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


_DOSE_ASKS = ("how often", "how many times", "how frequently", "when did you", "when was the last", "how long have",
              "how much", "how many did", "how many have")
_TOOK_IT = re.compile(r"^(?:i|i've|i have|i had)(?: just| only| been| usually| normally)* (?:took|take|taking|takes|"
                      r"used|use|using|tried|had) (?:it|them|that|those|one|some)\b")
_BEDTIME = re.compile(r"\b(?:at bedtime|before (?:going to )?(?:bed|sleep)|before i go to (?:bed|sleep)|"
                      r"before going to bed)\b")


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
            time = next((_fmt_qty(q) for q, k in zip(ex.quantities, ex.qty_tok, strict=True)
                         if alo <= k < ahi and q.kind in ("time", "frequency")), None)
            bedtime = _BEDTIME.search(" ".join(ex.words[alo:ahi]))
            if bedtime:
                time = "at bedtime" + ("" if not time else f" for {time}" if time[0].isdigit() else f" {time}")
            if time:
                return time, [ex.quote(lo, hi, lo, hi), ex.quote(alo, ahi, alo, ahi)]
    return None, []


_PARTNER = re.compile(r"\bwith (?:my |a |one |the same )?(?P<who>boyfriend|girlfriend|husband|wife|partner|spouse|"
                      r"fiance|fiancee|fiancé|fiancée)\b")


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


_WORK_QUESTIONS = ("for work", "for a living", "what do you do", "occupation", "are you working", "do you work",
                   "where do you work", "your job", "employed", "what kind of work", "what type of work",
                   "line of work")
_JOB_PATTERNS = (
    re.compile(r"\b(?:i['\u2019]?m|i am|i work as|working as|work as|job as|i['\u2019]?m currently|i am currently)\s+"
               r"(?:an?|the)\s+(?P<job>[a-z]+(?:\s+[a-z]+){0,3})", re.IGNORECASE),
    re.compile(r"\b(?:work|working|job)\s+(?:(?:at|in|for)\s+)?(?:at|in|for)\s+(?:(?:an?|the|my|this)\s+)?"
               r"(?P<job>[a-z]+(?:\s+[a-z]+)?)", re.IGNORECASE),
    re.compile(r"\b(?P<job>retired(?:\s+[a-z]+)?|unemployed|laid off|student|on disability|stay at home \w+|"
               r"not working)\b", re.IGNORECASE),
)
_JOB_NOUNS = ("worker", "teacher", "nurse", "engineer", "accountant", "student", "driver", "manager", "chef", "cook",
              "cashier", "clerk", "mechanic", "electrician", "plumber", "carpenter", "farmer", "lawyer",
              "secretary", "receptionist", "banker", "consultant", "programmer", "developer", "builder", "labourer",
              "laborer", "painter", "cleaner", "waiter", "waitress", "bartender", "server", "hairdresser",
              "firefighter", "officer", "technician", "assistant", "designer", "pharmacist", "butcher", "baker",
              "janitor", "landscaper", "roofer", "welder", "miner", "soldier", "paramedic", "dentist", "physician")
_WORKPLACES = ("factory", "warehouse", "office", "store", "shop", "restaurant", "hospital", "school", "bank",
               "daycare", "plant", "mine", "farm", "kitchen", "bakery", "hotel", "lab", "laboratory", "clinic",
               "garage", "call centre", "call center", "grocery store", "construction site", "gym", "salon")
#: Job statements clear enough without a work question ("I work as an accountant", "I'm a construction worker").
_JOB_STATEMENTS = (
    re.compile(r"\bi (?:work|worked) as (?:an?|the) (?P<job>[a-z]+(?:\s+[a-z]+)?)", re.IGNORECASE),
    re.compile(r"\bi (?:work|worked) in (?P<job>construction|retail|sales|finance|banking|insurance|accounting|"
               r"healthcare|health care|education|hospitality|manufacturing|landscaping|marketing|real estate|"
               r"it|tech|software|logistics|shipping|transport|administration|childcare|daycare)\b", re.IGNORECASE),
    re.compile(r"\b(?:i'm|i am) (?:an?) (?P<job>(?:[a-z]+\s+)?(?:" + "|".join(_JOB_NOUNS) + r"))\b", re.IGNORECASE),
    re.compile(r"\bi work (?:at|in) (?:an?|the|this) (?P<job>(?:[a-z]+\s+)?(?:" + "|".join(_WORKPLACES) + r"))\b",
               re.IGNORECASE),
)
_JOB_STOP = frozenset({"um", "uh", "like", "so", "and", "but", "right", "now", "currently", "the", "a", "an", "at",
                       "in", "as", "for", "it", "its", "when", "since", "until", "before", "after", "with", "who",
                       "that", "because", "about", "there", "here", "then", "which"})


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
_JOB_HOW_LONG = ("how long have you worked", "how long have you been working", "how long have you been doing",
                 "how long have you had this job", "how long have you been there", "how long have you been in")


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
            answer = " ".join(w for w in ex.text[ex.tokens[alo].start : ex.tokens[ahi - 1].end].split()
                              if w.lower().strip(",.") not in _fillers())
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
            near = [w for s2 in range(s, min(len(ex.ctx.sent_start), s + 2))
                    for w in ex.words[slice(*ex.sentence_bounds(s2))]]
            if _RETIRED & set(near):
                value = f"retired {value}"  # "I worked as a mechanic when I was younger ... ever since retiring"
        return _occupation(ex, value, [ex.quote(lo, hi, lo, hi)], s, ex.tokens[lo].start)
    return []


#: "How is your appetite?" - the noun asked about and the concept its answer decides.
_HOW_IS_TOPICS = {"appetite": "loss of appetite", "sleep": "sleep disturbance", "sleeping": "sleep disturbance",
                  "energy": "fatigue", "bowel": "change in bowel habit", "bowels": "change in bowel habit",
                  "urination": "urinary symptoms", "peeing": "urinary symptoms"}
_NORMAL_WORDS = frozenset({"normal", "fine", "good", "okay", "ok", "great", "same", "usual", "regular", "alright",
                           "unchanged", "well"})
_ABNORMAL_WORDS = frozenset({"poor", "bad", "less", "decreased", "low", "down", "worse", "terrible", "trouble",
                             "lost", "reduced", "hard", "difficult", "barely", "little"})
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
        claim = Claim(id="", category=info.category if info else "symptom", concept=concept,  # type: ignore[arg-type]
                      status=status)
        out.append(_Built(claim, [ex.quote(lo, hi, lo, hi), ex.quote(alo, ahi, alo, ahi)],
                          _Group(claim.category, concept), ex.tokens[lo].start))
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
_NOT_PLACES = frozenset({"I", "The", "OK", "Okay", "Uh", "Um", "So", "And", "But", "It", "My", "Emergency",
                         "Department", "ER", "Hospital", "School", "University", "Work", "Doctor"})


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


_STAY = re.compile(r"\b(?:i|we) (?:was|were|stayed|spent|ve been|have been|had been) (?:down |over |out |up )?"
                   r"there for\b")
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
        times = [(k, q) for q, k in zip(ex.quantities, ex.qty_tok, strict=True)
                 if slo <= k < shi and q.kind == "time" and q.value is not None]
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
        claim = Claim(id="", category="social", concept="travel", status="present", value=place,
                      time=stay[0] if stay else None)
        return built + [_Built(claim, [quote] + ([stay[1]] if stay and stay[1] != quote else []),
                               _Group("social", "travel"), pos)]
    out = []
    for b in built:
        if b.claim.concept == "travel" and b.claim.status != "absent" and not b.claim.value:
            b = _Built(b.claim.model_copy(update={"status": "present", "value": place}),
                       b.evidence + ([quote] if quote not in b.evidence else []), b.group, b.pos)
        if b.claim.concept == "travel" and b.claim.status == "present" and b.claim.time is None and stay:
            b = _Built(b.claim.model_copy(update={"time": stay[0]}),
                       b.evidence + ([stay[1]] if stay[1] not in b.evidence else []), b.group, b.pos)
        out.append(b)
    return out


def _productive_cough(built: list[_Built]) -> list[_Built]:
    """A cough with sputum brought up is a productive cough: the cough's value when nothing else filled it
    (docs/gold.md: cough ``dry`` / ``productive``), with the sputum's evidence."""
    sputum = next((b for b in built if b.claim.concept == "sputum" and b.claim.status == "present"), None)
    if sputum is None:
        return built
    out = []
    for b in built:
        if b.claim.concept == "cough" and b.claim.status == "present" and not b.claim.value and not b.claim.unit:
            b = _Built(b.claim.model_copy(update={"value": "productive"}),
                       b.evidence + [q for q in sputum.evidence[:1] if q not in b.evidence], b.group, b.pos)
        out.append(b)
    return out


def _injury_time(built: list[_Built]) -> list[_Built]:
    """An injury and the pain it caused began together: a present trauma without a time takes the presenting
    pain's (the first present pain at a site), and that pain without a time takes a recent trauma's (at most
    :data:`_ACUTE_INJURY_DAYS` days; an old injury talked about did not start today's pain), with the other
    claim's evidence."""
    trauma = next((b for b in built if b.claim.concept == "trauma" and b.claim.status == "present"), None)
    pain = next((b for b in built if b.claim.category == "symptom" and b.claim.status == "present"
                 and b.claim.concept.endswith(" pain") and not _is_modifier(b.claim.concept)), None)
    if trauma is None or pain is None or bool(trauma.claim.time) == bool(pain.claim.time):
        return built
    if trauma.claim.time and (_hours(trauma.claim.time) or 1e9) > _ACUTE_INJURY_DAYS * 24:
        return built
    src, dst = (pain, trauma) if pain.claim.time else (trauma, pain)
    filled = _Built(dst.claim.model_copy(update={"time": src.claim.time}),
                    dst.evidence + [q for q in src.evidence[:2] if q not in dst.evidence], dst.group, dst.pos)
    return [filled if b is dst else b for b in built]


def _renumber(built: list[_Built]) -> list[_Built]:
    """Claims in text order (of their first supporting mention or question) with ids c1.."""
    ordered = sorted(built, key=lambda b: (b.pos, b.claim.category, b.claim.concept))
    return [
        _Built(b.claim.model_copy(update={"id": f"c{n}"}), b.evidence, b.group, b.pos)
        for n, b in enumerate(ordered, start=1)
    ]


# ---------------------------------------------------------------- pass 6: patient context


@dataclass
class _Patient:
    """Age and vital signs read from the dialogue (for triage and critical-vital flags)."""

    age_years: float | None = None
    age_evidence: list[str] = field(default_factory=list)
    temperature: float | None = None     # highest reading, Celsius
    temp_evidence: list[str] = field(default_factory=list)
    # (name, value text, evidence): vital signs in a critical range
    critical: list[tuple[str, str, list[str]]] = field(default_factory=list)
    child: bool = False  # under 16, or a parent speaking for a son or daughter ("I'm here with my daughter")

    @property
    def is_child(self) -> bool:
        return self.child or (self.age_years is not None and self.age_years < 16)


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
    opening = ex.text[: ex.tokens[ex.sentence_bounds(min(_OPENING_SENTENCES, len(ex.ctx.sent_start)) - 1)[1] - 1].end] \
        if ex.tokens else ""
    p.child = bool(_PARENT_RE.search(opening))
    readings = [(v if v < 50 else (v - 32) * 5 / 9, start) for start, v in ex.temp_at.items()]
    readings += [
        (float(b.claim.value), ex.text.find(b.evidence[0]) if b.evidence else 0) for b in built
        if b.claim.concept == "fever" and b.claim.unit in ("degrees", "°C") and b.claim.value
        and _is_number(b.claim.value) and 35 <= float(b.claim.value) <= 43
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
    re.IGNORECASE)


def _num_word(text: str) -> float | None:
    text = text.lower()
    if text.replace(".", "", 1).isdigit():
        return float(text)
    return _number_words().get(text)


# ---------------------------------------------------------------- pass 7: flags


def _pass_flags(
    ex: _Extractor, built: list[_Built], reactions: dict[str, list[str]], patient: _Patient,
    field_evidence: dict[str, list[str]],
) -> list[tuple[SafetyFlag, list[str], str | None]]:
    """Safety flags (f1.. in text order) with their evidence and triage hint; fills ``field_evidence``.

    Red-flag symptoms present are ``red_flag`` (constitutional ones such as night sweats and weight
    loss only when the presenting complaint is not acute, i.e. not within :data:`_ACUTE_ILLNESS_DAYS`
    days, because an acute febrile illness explains them); a fever in an infant under 3 months is the
    red flag "fever in infant"; critical vital signs are ``critical_vital``.
    """
    present: dict[str, _Built] = {}
    for b in built:
        if b.claim.status == "present":
            present.setdefault(b.claim.concept, b)
    chief = next((b for b in built if b.claim.category == "symptom" and b.claim.status == "present"
                  and not _is_modifier(b.claim.concept)), None)
    acute_illness = chief is not None and (_hours(chief.claim.time) or 1e9) <= _ACUTE_ILLNESS_DAYS * 24
    rows: list[tuple[int, str, str, str | None, list[str], str | None]] = []

    def flag(kind: str, name: str, detail: str | None, ev: list[str], g: _Group, hint: str | None = None) -> None:
        sup = _supporting(g.mentions, "present")
        rows.append((sup[0][0].start if sup else 0, kind, name, detail, ev, hint))

    for b in present.values():
        claim, g = b.claim, b.group
        amount = f"{claim.value} {claim.unit or ''}".strip() if claim.value else None
        det_parts = [p for p in (amount, claim.time) if p]
        detail = "; ".join(det_parts) or None
        if claim.category == "symptom" and claim.concept in ("suicidal ideation", "self-harm"):
            flag("self_harm_risk", claim.concept, detail, b.evidence, g, g.triage_hint)
        elif claim.category == "symptom" and g.red_flag:
            if claim.concept in _CONSTITUTIONAL and acute_illness:
                continue
            if claim.concept == "dysphagia" and present.keys() & _THROAT_PAIN:
                continue  # painful swallowing with a sore throat (odynophagia), not obstructive dysphagia
            flag("red_flag", claim.concept, detail, b.evidence, g, g.triage_hint)
        elif claim.category == "allergy":
            reaction = ", ".join(reactions.get(claim.concept, [])[:3]) or None
            flag("allergy", claim.concept, reaction, b.evidence, g)
        elif claim.category == "medication":
            cls = high_risk_class(claim.concept)
            if cls is not None:
                flag("high_risk_medication", claim.concept, "; ".join([cls, *det_parts]), b.evidence, g)
            else:
                flag("current_medication", claim.concept, detail, b.evidence, g)
        elif claim.category == "social":
            if claim.concept == "smoking" and "former" not in g.extra:
                flag("social_risk", "smoking", detail, b.evidence, g)
            elif claim.concept == "alcohol" and "heavy" in g.extra:
                flag("social_risk", "heavy alcohol use", detail, b.evidence, g)
            elif claim.concept == "recreational drug use":
                flag("social_risk", "recreational drug use", detail, b.evidence, g)
    if "urinary incontinence" in present and present.keys() & {"back pain", "saddle anesthesia"}:
        # Bladder control lost with back pain or saddle numbness: cauda equina until proven otherwise.
        ub = present["urinary incontinence"]
        flag("red_flag", "urinary incontinence", ub.claim.time, ub.evidence, ub.group, "emergency")
    if "fever" in present and patient.age_years is not None and patient.age_years < 0.25:
        fb = present["fever"]
        flag("red_flag", "fever in infant", fb.claim.value and f"{fb.claim.value} {fb.claim.unit or ''}".strip(),
             patient.age_evidence + fb.evidence[:1], fb.group, "emergency")
    present_groups = {c: (b.claim, b.evidence, b.group) for c, b in present.items()}
    for name, hint, ev, g in _composite_red_flags(ex, present_groups):
        flag("red_flag", name, None, ev, g, hint)
    if "tachypnea" in present and ("supplemental oxygen" in present or (
            patient.age_years is not None and patient.age_years < 1)):
        # Fast breathing that needs oxygen, or in an infant, is respiratory distress.
        tb = present["tachypnea"]
        ev = tb.evidence[:1] + (present["supplemental oxygen"].evidence[:1] if "supplemental oxygen" in present
                                else patient.age_evidence)
        flag("red_flag", "respiratory distress", "fast breathing" + (
            " on oxygen" if "supplemental oxygen" in present else " in an infant"), ev, tb.group, "emergency")
    for name, value, ev in patient.critical:
        pos = ex.text.find(value)
        rows.append((pos, "critical_vital", name, value, ev, "emergency"))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    out: list[tuple[SafetyFlag, list[str], str | None]] = []
    seen: set[tuple[str, str]] = set()
    for _pos, kind, name, detail, ev, flag_hint in rows:
        if (kind, name) in seen:
            continue
        seen.add((kind, name))
        f = SafetyFlag(id=f"f{len(out) + 1}", kind=kind, name=name, detail=detail)  # type: ignore[arg-type]
        out.append((f, ev, flag_hint))
        field_evidence[f.id] = ev
    return out


# ---------------------------------------------------------------- pass 8: triage


def _pass_triage(
    ex: _Extractor, built: list[_Built], flags: list[tuple[SafetyFlag, list[str], str | None]],
    patient: _Patient, dialogue: _Dialogue,
) -> tuple[Triage, list[str]]:
    """The triage rule of the module docstring; returns the decision and the quotes that drove it."""
    present = {b.claim.concept: b for b in built if b.claim.status == "present"}
    chief = next((b for b in built if b.claim.category == "symptom" and b.claim.status == "present"
                  and not _is_modifier(b.claim.concept)), None)
    chief_hours = _hours(chief.claim.time) if chief is not None else None
    emergency: list[tuple[str, list[str]]] = []
    urgent: list[tuple[str, list[str]]] = []
    for f, ev, hint in flags:
        if f.kind not in ("red_flag", "self_harm_risk", "critical_vital"):
            continue
        b = present.get(f.name)
        # A red flag without its own onset is dated by the presenting complaint.
        hours = _hours(b.claim.time) if b is not None else None
        hours = hours if hours is not None else chief_hours
        chronic = b is not None and (hours or 0) >= _CHRONIC_DAYS * 24
        if hint == "emergency" and not chronic:
            emergency.append((f.name, ev))
        else:
            urgent.append((f.name + (" (chronic)" if chronic and hint == "emergency" else ""), ev))
    cp = present.get("chest pain")
    if cp is not None:
        hours = _hours(cp.claim.time)
        if hours is not None and hours <= _ACUTE_CHEST_PAIN_HOURS:
            emergency.append((f"acute chest pain ({cp.claim.time})", cp.evidence))
        emergency += _chest_pain_modifiers(ex, cp)
    oxygen = present.get("supplemental oxygen")
    if oxygen is not None:
        emergency.append(("on supplemental oxygen", oxygen.evidence))
    rated = [(v, ev) for v, _key, ev in dialogue.ratings if v >= _SEVERE_RATING]
    rated += [
        (float(b.claim.value.split("-")[-1]), b.evidence) for b in present.values()
        if b.claim.unit == "out of 10" and b.claim.value and _is_number(b.claim.value.split("-")[-1])
        and float(b.claim.value.split("-")[-1]) >= _SEVERE_RATING
    ]
    if rated:
        urgent.append((f"symptom rated {_fmt_num(max(v for v, _ in rated))}/10", rated[0][1]))
    for b in present.values():
        if b.claim.category == "symptom" and _is_severe(ex, b.claim, b.group):
            urgent.append((f"severe {b.claim.concept}", b.evidence))
    fever = present.get("fever")
    if fever is not None:
        age = patient.age_years
        if patient.temperature is not None and patient.temperature >= 38.0:
            urgent.append((f"temperature {_fmt_num(patient.temperature)}", patient.temp_evidence or fever.evidence))
        elif age is not None and (age < 16 or age >= 65):
            urgent.append((f"fever at age {_fmt_num(round(age, 1))}", fever.evidence))
        elif patient.is_child:
            urgent.append(("fever in a child", fever.evidence))
        elif "shortness of breath" in present:
            urgent.append(("fever with shortness of breath", fever.evidence))
        elif any(c in present for c in _FOCAL_WITH_FEVER):
            # docs/gold_guide.md: fever with new focal symptoms is seen the same day (strep throat, cellulitis,
            # COVID-19 testing).
            focal = next(c for c in _FOCAL_WITH_FEVER if c in present)
            urgent.append((f"fever with {focal}", fever.evidence))
    for concept in _HEART_FAILURE:
        if concept in present:
            urgent.append((concept, present[concept].evidence))
    sob = present.get("shortness of breath")
    if sob is not None and not _exertional_only(ex, sob.group, vigorous=True):
        sob_hours = _hours(sob.claim.time)
        if sob_hours is None or sob_hours < _CHRONIC_DAYS * 24 or sob is chief:
            # New (or presenting) breathlessness needs same-day assessment (oxygen saturation, chest exam).
            urgent.append(("shortness of breath", sob.evidence))
    trauma = present.get("trauma")
    if trauma is not None:
        hours = _hours(trauma.claim.time)
        hours = hours if hours is not None else chief_hours
        signs = [c for c in _INJURY_SIGNS if c in present]
        if hours is not None and hours <= _ACUTE_INJURY_DAYS * 24 and signs:
            # An injury of the last days with swelling, bruising, deformity or a limb not used needs a same-day
            # examination and, by the Ottawa-type rules, an X-ray.
            urgent.append((f"acute injury with {signs[0]}", trauma.evidence + present[signs[0]].evidence[:1]))
        elif hours is not None and hours <= _ACUTE_INJURY_DAYS * 24 and patient.is_child \
                and chief is not None and chief.claim.concept.endswith(" pain"):
            # A child in pain after an injury is examined the same day (fracture, pulled elbow).
            urgent.append((f"injury with {chief.claim.concept} in a child", trauma.evidence + chief.evidence[:1]))
    if patient.age_years is not None and patient.age_years >= 65:
        for concept in ("shortness of breath", "chest pain"):
            if concept in present:
                urgent.append((f"{concept} at age {_fmt_num(patient.age_years)}", present[concept].evidence))
    if emergency:
        level, driving, why = "emergency", emergency, "emergency red flag, acute chest pain or critical vital"
    elif urgent:
        level, driving, why = "urgent", urgent, "red flag, severity, fever or age"
    else:
        ev = chief.evidence[:1] if chief else []
        return Triage(level="routine", rationale="routine: no red flag, severe symptom, fever risk or "
                      "critical vital documented."), ev
    names = ", ".join(dict.fromkeys(nm for nm, _ in driving[:4]))
    tri_ev: list[str] = []
    for _, ev in driving:
        for quote in ev[:1]:
            if quote not in tri_ev:
                tri_ev.append(quote)
    return Triage(level=level, rationale=f"{level}: {why}: {names}."), tri_ev  # type: ignore[arg-type]


def _exertional_only(ex: _Extractor, g: _Group, vigorous: bool = False) -> bool:
    """Breathlessness said with exertion words ("when I play hockey", "walking around") and never at rest; with
    ``vigorous``, only with exertion a healthy person may be breathless with (running, stairs, sports)."""
    norms: list[str] = []
    said: list[str] = []  # a question offers both ("during activity, or resting as well?"): only what is said rules out
    for m, a in _supporting(g.mentions, "present"):
        around = ex.context_norms(m, a, side=_EXERTION_REACH)
        norms += around
        said += around if not ex.ctx.ends_q[ex.sentence_of(ex.span(m)[0])] else \
            around[1:] if a.source == "answer" else []
    if any(_has_any(nm, _AT_REST) for nm in said):
        return False
    if vigorous:
        return any(_has_any(nm, _VIGOROUS) for nm in norms) and not any(_has_any(nm, _MILD_EXERTION) for nm in norms)
    return any(_has_any(nm, _EXERTION) for nm in norms)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_severe(ex: _Extractor, claim: Claim, g: _Group) -> bool:
    """Severity words on a present symptom: 'severe' / 'excruciating' / 'worst' right next to it."""
    for m, _a in _supporting(g.mentions, "present"):
        i, j = ex.span(m)
        lo, hi = ex.sentence_bounds(ex.sentence_of(i))
        # Only the words right before the mention or a few after ("severe pain", "the pain is severe").
        near = ex.words[max(lo, i - 3) : i] + ex.words[j : min(hi, j + 3)]
        if any(w in _SEVERE for w in near):
            return True
    return False


def _hours(time: str | None) -> float | None:
    """Rough age of an onset/duration in hours ("30 minutes" 0.5, "last night" 12, "3 days" 72);
    None when it is no duration (a frequency, "since Monday")."""
    if not time:
        return None
    t = time.replace("since ", "")
    if t in _ANCHOR_HOURS:
        return _ANCHOR_HOURS[t]
    parts = t.split()
    if len(parts) != 2:
        return None
    try:
        value = float(parts[0].split("-")[-1])
    except ValueError:
        return None
    unit = parts[1].rstrip("s")
    return value * _UNIT_HOURS[unit] if unit in _UNIT_HOURS else None


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
    """Red flags that need a modifier or a combination of present concepts (chest-pain modifiers are
    triage inputs, see :func:`_chest_pain_modifiers`, not flags of their own)."""
    out: list[tuple[str, str, list[str], _Group]] = []

    def sent_norms(g: _Group) -> list[str]:
        # A tight window: a modifier must be said about this mention, not somewhere in the turn.
        return [c for m, a in _supporting(g.mentions, "present") for c in ex.context_norms(m, a, side=8)]

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
    if "drooling" in present and {"dysphagia", "sore throat", "painful swallowing"} & present.keys():
        # Drooling with a painful throat or trouble swallowing: a threatened airway (epiglottitis, abscess).
        _, ev1, g = present["drooling"]
        out.append(("drooling", "emergency", ev1[:1], g))
    swollen = sorted({"joint swelling", "swelling"} & present.keys())
    if swollen and "warmth" in present and ({"redness", "joint pain"} & present.keys()
                                            or any(c.endswith(_JOINT_PAIN_SITES) for c in present)):
        # A hot, swollen (red or painful) joint: septic arthritis until proven otherwise.
        _, ev1, g = present[swollen[0]]
        out.append(("hot swollen joint", "urgent", ev1[:1] + present["warmth"][1][:1], g))
    return out


def _chest_pain_modifiers(ex: _Extractor, b: _Built) -> list[tuple[str, list[str]]]:
    """Emergency features of a present chest pain, said about it in a statement (not only asked):
    at rest, or radiating to the arm or jaw (acute coronary syndrome)."""
    out: list[tuple[str, list[str]]] = []
    norms = [
        c for m, a in _supporting(b.group.mentions, "present") if a.source == "statement"
        for c in ex.context_norms(m, a, side=8)
    ]
    if any(_has_any(nm, _REST_CUES) for nm in norms):
        out.append(("chest pain at rest", b.evidence))
    if any(any(f" {r} " in nm for r in _RADIATION) and any(f" {s} " in nm for s in _ACS_RADIATION)
           for nm in norms):
        out.append(("chest pain radiating to the arm or jaw", b.evidence))
    return out
