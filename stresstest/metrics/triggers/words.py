"""Word classes of normalised tokens that the trigger detectors share, and small tests on words.

Fillers, function words, time and quantity cue words, negation cues and hedges; :func:`_is_content` (a word
that carries content of its own), :func:`_stem` and :func:`_ratio` (a spelling's closeness).
"""

from __future__ import annotations

from collections.abc import Sequence

from stresstest.clinical.numbers import is_number_token, small_number_digits
from stresstest.clinical.vocab import all_fillers

# --- word classes (normalised tokens) -------------------------------------------------------------

# Discourse fillers and backchannels that ASR drops or adds freely; the normaliser already removes
# um/uh/hmm. Polarity words (no, yes, not) are NOT here: negation is judged separately.
_FILLERS = all_fillers()  # data/fillers.tsv: hesitations, discourse fillers, backchannels
_FILLER_BIGRAMS = frozenset({("you", "know"), ("i", "mean"), ("kind", "of"), ("sort", "of"), ("all", "right")})

# Function words: edits confined to these carry no clinical content of their own.
_FUNCTION = frozenset(
    """a an the this that these those there here it its it's i me my mine we us our you your yours he him his
    she her they them their what which who whom whose where when why how whatever whenever
    am is are was were be been being do does did done have has had having will would shall should can could
    may might must ca wo let lets gonna wanna gotta na
    and or but if then than because as so of to in on at by for with from up down out over into onto about
    off through just also too very much more most some any all each both either such only own same other
    another again still even ever yet already not no yes yeah nope
    go going goes went get got gets getting make made take took say said says tell told see saw seen know
    knew think thought want wanted need needed feel felt look looking looks come came coming back
    thing things stuff something anything nothing everything lot bit little kind sort way time
    good great fine nice sure oh okay ok alright well like right now then today um uh hmm""".split()
)
_TIME_WORDS = frozenset(
    """minute minutes hour hours day days week weeks month months year years decade decades fortnight
    yesterday today tomorrow tonight overnight morning mornings afternoon afternoons evening evenings night
    nights weekend weekends midnight noon monday tuesday wednesday thursday friday saturday sunday
    january february april june july august september october november december""".split()
)

# Words that start or make a quantity without being a digit or a time word.
_QUANTITY_CUES = frozenset(
    """once twice thrice daily nightly weekly monthly hourly yearly annually od bd bid tds tid qds qid qd prn
    nocte since last ago half couple few several dozen hundred thousand""".split()
)

# Time relations: they count when one is heard as another ("after meals" -> "before meals"); ASR
# drops and adds them too often for a lone deletion to mean anything.
_RELATIONS = frozenset({"before", "after", "until", "during"})

# "am"/"pm" are clock times only after a number ("i am" is not a time).
_CLOCK = frozenset({"am", "pm"})

# Time words that also start greetings ("good morning") are not time expressions there.
_GREETING = frozenset({"good"})
_LATERALITY = {"left": "left", "right": "right", "bilateral": "bilateral", "both": "bilateral"}
_SIDE_NOUNS = frozenset(
    """side sided arm arms leg legs knee knees ankle ankles foot feet hand hands hip hips shoulder shoulders
    eye eyes ear ears lung lungs kidney breast chest wrist wrists elbow elbows lower upper flank""".split()
)
_ENTITY_GROUPS = {
    "medication": "medication",
    "body_site": "body_site",
    "symptom": "clinical",
    "finding": "clinical",
    "history": "clinical",
    "risk": "clinical",
    "social": "clinical",
}

# Inserted material is "absent from the reference" when not found within this many reference tokens.
_NOVELTY_WINDOW = 40
_POLLUTION_MIN_WORDS = 3
_CONTEXT = 2


def _strip_fillers(words: Sequence[str]) -> list[str]:
    out: list[str] = []
    k = 0
    while k < len(words):
        if k + 1 < len(words) and (words[k], words[k + 1]) in _FILLER_BIGRAMS:
            k += 2
            continue
        if words[k] not in _FILLERS:
            out.append(small_number_digits(words[k]))
        k += 1
    return out


def _is_content(tok: str) -> bool:
    return tok not in _FUNCTION and tok not in _FILLERS and not is_number_token(tok) and len(tok) > 1


# --- negation cues, hedges, closeness of spellings ------------------------------------------------------

# Negation cues (normalised tokens: the normaliser spells "don't" as "do not").
_NEG_CUES = frozenset(
    {
        "no",
        "not",
        "never",
        "without",
        "denies",
        "denied",
        "deny",
        "none",
        "nothing",
        "nor",
        "nah",
        "nope",
    }
)

# Negation cues that are also bare answer particles: they negate a verb only with content near them.
# "not" / "never" always negate what follows ("it's been ongoing" -> "it's not going").
_ANSWER_PARTICLES = frozenset({"no", "nope", "nah"})

# Hedges: words that qualify a whole answer, no content for a negation cue to bear on ("no, probably").
_HEDGES = frozenset({"probably", "guess", "maybe", "perhaps", "suppose", "possibly", "mean"})
# Two spellings this close (:func:`_ratio`) are one word heard a little differently.
_CLOSE = 0.8


def _stem(w: str) -> str:
    for suf in ("ing", "ed", "es", "s"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)]
    return w


def _ratio(a: str, b: str) -> float:
    """Indel similarity in [0, 1] ("tacrolimus" / "tacromilius" 0.86, "eucrisa" / "urethra" 0.57)."""
    from rapidfuzz.distance import Indel

    return float(Indel.normalized_similarity(a, b))
