"""Tables of the ``rules`` structurer: the quote and quantity windows, the cue words the passes look
for, the clinical thresholds of the flags and the triage rule (acute, chronic, severe), the descriptive
qualifiers, the critical vital-sign ranges and the cached age and number-word patterns.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from stresstest.clinical.vocab import number_words

# Sentences longer than this (run-on ASR text) are quoted as a window around the mention.
_MAX_QUOTE_TOKENS = 30
_QUOTE_SIDE = 12
_QTY_WINDOW = 8  # tokens between a mention and a quantity that may belong to it
_TIME_WINDOW = 12  # ... and for a duration said after it with no other clinical term between

_CATEGORY = {
    "symptom": "symptom",
    "finding": "finding",
    "history": "history",
    "social": "social",
    "risk": "symptom",
}
_PAIN_WORDS = frozenset(
    {
        "pain",
        "pains",
        "painful",
        "ache",
        "aches",
        "aching",
        "hurts",
        "hurt",
        "hurting",
        "sore",
        "soreness",
        "discomfort",
        "tender",
    }
)
_SITE_PAIN = {
    "chest": "chest pain",
    "abdomen": "abdominal pain",
    "back": "back pain",
    "neck": "neck pain",
    "head": "headache",
    "throat": "sore throat",
    "knee": "knee pain",
    "hip": "hip pain",
    "shoulder": "shoulder pain",
    "ankle": "ankle pain",
    "foot": "foot pain",
    "wrist": "wrist pain",
    "hand": "hand pain",
    "elbow": "elbow pain",
    "leg": "leg pain",
    "arm": "arm pain",
}
_FAMILY = frozenset(
    {
        "mother",
        "mom",
        "mum",
        "father",
        "dad",
        "sister",
        "brother",
        "sisters",
        "brothers",
        "parents",
        "parent",
        "grandmother",
        "grandfather",
        "grandma",
        "grandpa",
        "aunt",
        "uncle",
        "cousin",
        "siblings",
        "sibling",
        "family",
        "son",
        "daughter",
        "aunts",
        "uncles",
        "cousins",
        "grandparents",
        "sons",
        "daughters",
        "mother's",
        "father's",
        "mom's",
        "dad's",
        "mum's",
    }
)
_ALLERGY_CUES = frozenset({"allergic", "allergy", "allergies", "anaphylaxis", "anaphylactic"})
_PLAN_CUES = (
    "prescribe",
    "prescribing",
    "i'll give you",
    "we'll start",
    "we will start",
    "i'll start you",
    "start you on",
    "recommend",
    "i'd like you to take",
    "we can try",
    "we could try",
    "i'll send",
    "you can take",
    "you could take",
    "you can try",
    "you could try",
    "try taking",
    "suggest",
    "we'll give",
    "we can give",
    "we could give",
    "we'd give",
    "gon na prescribe",
    "going to prescribe",
    "we can use",
    "we could use",
    "using medications",
    "management",
    "treatment options",
    "options",
)
_FORMER_CUES = frozenset({"quit", "quitted", "stopped", "former", "ex", "used"})
_REST_CUES = (
    "at rest",
    "while resting",
    "when resting",
    "when i'm resting",
    "sitting down",
    "sitting still",
    "lying down",
    "doing nothing",
    "not doing anything",
    "even at rest",
)
_RADIATION = frozenset(
    {"radiate", "radiates", "radiating", "radiated", "spreads", "spreading", "spread", "travels", "moves", "goes"}
)
_ACS_RADIATION = frozenset({"arm", "arms", "jaw"})
_HEAVY_DRINK = ("a lot", "heavily", "heavy", "every day", "every night", "daily", "a bottle", "binge", "too much")
_DRINK_UNITS = frozenset({"drinks", "glasses", "glasses of wine", "bottles"})
#: Hedges that, on a habit or a medication, qualify the amount or frequency, not whether it happens.
_AMOUNT_HEDGES = frozenset({"maybe", "probably", "i think", "i guess", "perhaps"})
_SEVERITY_ASKS = ("how bad", "how severe", "how much pain", "how painful", "how intense", "how strong")
_RATING_WORDS = frozenset({"rate", "rated", "rating", "scale", "severity"})
_SEVERE = frozenset(
    {"severe", "severely", "excruciating", "unbearable", "agonizing", "agonising", "worst", "intense", "terrible"}
)
# Partners more specific than their body-site concept ("ears" is a face site; ear pain is a concept).
_PAIN_WORD_PARTNERS = {
    **dict.fromkeys(("ear", "ears"), "ear pain"),
    **dict.fromkeys(("eye", "eyes"), "eye pain"),
    "jaw": "jaw pain",
    **dict.fromkeys(("tooth", "teeth"), "dental pain"),
    **dict.fromkeys(("calf", "calves"), "calf pain"),
    "groin": "groin pain",
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
_CO_SYMPTOM_WORDS = frozenset(
    {"swelling", "stiffness", "tenderness", "redness", "bruising", "numbness", "tingling", "weakness", "discomfort"}
)
_GI_BLEED = frozenset({"rectal bleeding", "melena", "hematemesis"})
_LIST_ENDINGS = (
    "anything like that",
    "anything of that sort",
    "or anything",
    "any of those",
    "any of these",
    "et cetera",
    "etc",
    "things like that",
    "stuff like that",
    "or something like that",
)
_WH_LEAD = frozenset({"when", "how", "what", "where", "which", "why", "what's", "where's", "how's", "whereabouts"})
_OPENER_WORDS = frozenset(
    {
        "ok",
        "okay",
        "and",
        "but",
        "so",
        "now",
        "alright",
        "all",
        "right",
        "great",
        "good",
        "yeah",
        "yes",
        "sure",
        "then",
        "just",
        "oh",
        "i",
        "see",
        "sorry",
        "hi",
        "hello",
        "hey",
        "well",
    }
)
_PAST_MARKERS = (
    "last week",
    "last month",
    "last year",
    "used to",
    "in the past",
    "not anymore",
    "no longer",
    "anymore",
    "went away",
    "gone away",
    "not right now",
    "not now",
)
_PAIN_QUALITIES = frozenset(
    {
        "sharp",
        "dull",
        "burning",
        "stabbing",
        "throbbing",
        "pressure",
        "shooting",
        "crampy",
        "cramping",
        "tight",
        "squeezing",
        "throbby",
        "achy",
        "aching",
    }
)
_QUALITY_REACH = 5
#: Open questions about a symptom's character ("how would you describe the pain?", "is it dry?").
_DESCRIBE_CUES = (
    "describe",
    "feel like",
    "feels like",
    "what kind of",
    "what type of",
    "what sort of",
    "character",
    "quality of",
    "sharp or dull",
    "dull or sharp",
    "is it dry",
    "dry or",
    "what colour",
    "what color",
)
_COUGH_WORDS = frozenset({"cough", "coughs", "coughing", "coughed", "sputum", "phlegm", "mucus", "spit"})
#: Sentences back in which the topic of an open question ("when did it start?") is looked for.
_TOPIC_SENTENCES = 10
_TEMPERATURE_UNITS = frozenset({"degrees", "degrees celsius", "degrees fahrenheit", "°C", "°F"})
_WEIGHT_UNITS = frozenset({"lb", "kg", "pounds", "kilograms"})
#: A clinician recapping what the patient said ("you said it started ...", "you mentioned ...").
_RECAP = ("you said", "you mentioned", "you told me", "so it started", "so this started")
#: Focal symptoms that make a fever same-day (urgent): a focus of infection to examine or test.
_FOCAL_WITH_FEVER = (
    "sore throat",
    "painful swallowing",
    "loss of smell",
    "loss of taste",
    "rash",
    "lymphadenopathy",
    "ear pain",
    "dysuria",
)
#: Words that make an open question about life, not the symptom ("how long have you worked in this role?").
_NON_SYMPTOM_TOPICS = frozenset(
    {
        "work",
        "worked",
        "working",
        "job",
        "role",
        "live",
        "lived",
        "living",
        "married",
        "smoke",
        "smoked",
        "smoking",
        "drink",
        "drinking",
        "school",
        "retired",
        "moved",
    }
)
#: Words by which a question without a named symptom points at the current topic.
_TOPIC_POINTERS = frozenset(
    {
        "it",
        "it's",
        "this",
        "that",
        "these",
        "those",
        "they",
        "them",
        "symptoms",
        "symptom",
        "pain",
        "pains",
        "problem",
        "problems",
        "issue",
        "issues",
        "breathlessness",
        "discomfort",
    }
)
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
_INJURY_SIGNS = (
    "deformity",
    "joint swelling",
    "swelling",
    "bruising",
    "limited range of motion",
    "inability to bear weight",
)
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
_VIGOROUS = (
    "exercise",
    "exercising",
    "running",
    "when i run",
    "jogging",
    "exertion",
    "playing",
    "sports",
    "hockey",
    "soccer",
    "stairs",
    "climbing",
    "i ran",
    "i run",
    "flights",
    "shovelling",
    "shoveling",
)
#: Everyday exertion (walking, moving around): breathlessness with it stays urgent.
_MILD_EXERTION = ("exert", "exerting", "walk", "walking", "activity", "active", "moving around", "blocks")
#: Any exertion: breathlessness with these (and not at rest) has the value "on exertion".
_EXERTION = _VIGOROUS + _MILD_EXERTION
#: Tokens either side of a breathlessness mention searched for exertion ("I ran to catch the bus yesterday and I
#: was a bit more short of breath").
_EXERTION_REACH = 14
#: Said with breathlessness, these deny that it comes with exertion ("no relationship with activity").
_AT_REST = (
    "at rest",
    "resting",
    "all the time",
    "always",
    "sitting",
    "no relationship",
    "not related",
    "even when i'm not",
    "lying down",
    "laying down",
    "sleeping",
)
_HEART_FAILURE = ("orthopnea", "paroxysmal nocturnal dyspnea")
#: concept -> (descriptive values, token reach) read as the claim's value when no number is.
_QUALIFIERS: dict[str, tuple[frozenset[str], int]] = {
    "sputum": (
        frozenset(
            {
                "yellow",
                "yellowish",
                "green",
                "greenish",
                "white",
                "clear",
                "brown",
                "rusty",
                "frothy",
                "pink",
                "bloody",
                "creamy",
                "thick",
            }
        ),
        6,
    ),
    "cough": (frozenset({"dry", "wet", "productive", "barking", "hacking", "chesty"}), 3),
}
_QUALITY_WORDS = _PAIN_QUALITIES | frozenset(w for words, _reach in _QUALIFIERS.values() for w in words)
_THROAT_PAIN = frozenset({"sore throat", "painful swallowing"})
_ANCHOR_HOURS = {
    "today": 6.0,
    "this morning": 6.0,
    "this afternoon": 3.0,
    "this evening": 2.0,
    "tonight": 2.0,
    "last night": 12.0,
    "yesterday": 24.0,
}
_UNIT_HOURS = {
    "second": 1 / 3600,
    "minute": 1 / 60,
    "hour": 1.0,
    "day": 24.0,
    "week": 168.0,
    "month": 720.0,
    "year": 8760.0,
}


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
    (
        "low oxygen saturation",
        re.compile(
            r"\b(?:sats|saturations?|oxygen levels?|o2 sat\w*|spo2)\D{0,20}?(\d{2,3})\s*(?:%|percent)", re.IGNORECASE
        ),
        lambda v: 50 <= v[0] < 92,
    ),
    ("tachycardia", re.compile(r"\b(?:heart rate|pulse)\D{0,20}?(\d{2,3})\b", re.IGNORECASE), lambda v: v[0] >= 130),
    (
        "tachypnea",
        re.compile(r"\b(?:respiratory rate|breathing rate)\D{0,20}?(\d{1,2})\b", re.IGNORECASE),
        lambda v: v[0] >= 30,
    ),
    (
        "hypotension",
        re.compile(r"\bblood pressure\D{0,20}?(\d{2,3})\s*(?:/|over)\s*(\d{2,3})\b", re.IGNORECASE),
        lambda v: v[0] < 90,
    ),
)
_OXYGEN_RE = re.compile(
    r"\bon\s+(?:(?P<n>\d+(?:\.\d+)?|one|two|three|four|five|six)\s+)?(?:(?:litres?|liters?|l)\s+(?:of\s+)?)?oxygen\b",
    re.IGNORECASE,
)
