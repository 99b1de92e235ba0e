"""Shipped clinical lexicon and a longest-match mention finder.

The lexicon (``data/lexicon.tsv``) lists concepts of the five OSCE specialties
(respiratory, cardiovascular, gastrointestinal, musculoskeletal, dermatology),
general red flags, past history, social history and body sites, each with its
lay and clinical surface forms. Matching is case-insensitive, on whole words
(token boundaries), longest match first, with British/American spelling folded
(``data/spelling.tsv``) and a light plural fallback ("headaches" -> "headache").
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from stresstest.clinical.text import Mention as Mention  # re-exported: callers look mentions up here
from stresstest.clinical.text import (
    Token,
    longest_matches,
    norm_phrase,
    prefix_set,
    read_table,
    tokenize,
)


@dataclass(frozen=True, slots=True)
class ConceptInfo:
    """Lexicon facts about one concept."""

    concept: str
    category: str
    red_flag: bool
    triage_hint: str | None


class _Lexicon:
    def __init__(self) -> None:
        self.concepts: dict[str, ConceptInfo] = {}
        self.surfaces: dict[tuple[str, ...], str] = {}
        self.vocab: set[str] = set()
        for row in read_table("lexicon.tsv"):
            concept, category, red, hint, forms = (row + [""] * 5)[:5]
            if concept == "-":
                # Non-clinical phrases ("the confusion about the forms"): matched so that they
                # shadow the clinical word inside them, never reported.
                for form in forms.split("|"):
                    key = tuple(norm_phrase(form).split())
                    if key:
                        self.surfaces.setdefault(key, "")
                        self.vocab.update(key)
                continue
            info = ConceptInfo(concept, category, red == "1", hint or None)
            self.concepts.setdefault(concept, info)
            for form in [concept, *forms.split("|")]:
                key = tuple(norm_phrase(form).split())
                if not key:
                    continue
                # First definition wins so the file order resolves overlaps deterministically.
                self.surfaces.setdefault(key, concept)
                self.vocab.update(key)
        self.prefixes = prefix_set(self.surfaces)

    def token_key(self, tok: Token) -> str:
        """Lookup form with a plural fallback restricted to lexicon words."""
        w = tok.norm
        if w in self.vocab or len(w) < 4:
            return w
        for cut in ("es", "s"):
            if w.endswith(cut) and w[: -len(cut)] in self.vocab:
                return w[: -len(cut)]
        return w


@functools.lru_cache(maxsize=1)
def _lexicon() -> _Lexicon:
    return _Lexicon()


def concept_info(concept: str) -> ConceptInfo | None:
    """Lexicon facts (category, red flag, triage hint) for a concept, or None."""
    return _lexicon().concepts.get(concept)


def lexicon_concepts() -> list[ConceptInfo]:
    """Every concept of the shipped lexicon, in file order."""
    return list(_lexicon().concepts.values())


def surfaces_by_category(category: str) -> dict[str, str]:
    """Normalised surface form -> concept, for every concept of one category (e.g. "body_site")."""
    lex = _lexicon()
    return {
        " ".join(key): concept
        for key, concept in lex.surfaces.items()
        if concept and lex.concepts[concept].category == category
    }


def match_tokens(text: str, tokens: list[Token]) -> list[Mention]:
    """Longest-match lexicon lookup over an already tokenised text.

    Same result as :func:`find_mentions` (body sites included) without tokenising again;
    the structurer and the trigger detector share one token stream this way.

    Args:
        text: The text the tokens were made from.
        tokens: ``tokenize(text)``.

    Returns:
        Mentions in text order, offsets into ``text``.
    """
    lex = _lexicon()
    keys = [lex.token_key(t) for t in tokens]
    out: list[Mention] = []
    for i, j, concept in longest_matches(text, tokens, keys, lex.surfaces, lex.prefixes):
        if not concept:
            continue  # a shadowing non-clinical phrase
        info = lex.concepts[concept]
        start, end = tokens[i].start, tokens[j - 1].end
        out.append(Mention(start, end, text[start:end], concept, info.category, info.red_flag, info.triage_hint))
    return out


def find_mentions(text: str) -> list[Mention]:
    """Find lexicon concepts in ``text``.

    Case-insensitive, whole-word, longest match first (so "chest pain at rest"
    beats "chest pain"), non-overlapping, in text order. British and American
    spellings match the same concept. Drugs are not included: see
    :func:`stresstest.clinical.drugs.find_drugs`.

    Args:
        text: Any text: a transcript, an ASR hypothesis, a single sentence.

    Returns:
        Mentions with character offsets into ``text``.
    """
    return match_tokens(text, tokenize(text))


def canonical_concept(term: str) -> str:
    """Canonical concept name for any surface form, synonym or drug name.

    "breathless", "dyspnoea" and "short of breath" give "shortness of breath";
    "Eliquis" gives "apixaban". A term that is neither a lexicon surface nor a
    known drug is returned normalised (lower case, American spelling, single
    spaces, punctuation dropped), so equal terms still compare equal.

    Args:
        term: A concept or surface form, e.g. from an LLM record or a gold file.

    Returns:
        The canonical concept string.
    """
    norm = norm_phrase(term)
    lex = _lexicon()
    key = tuple(norm.split())
    concept = lex.surfaces.get(key)
    if concept is None and key:
        concept = lex.surfaces.get(tuple(lex.token_key(Token(0, 0, w, w)) for w in key))
    if concept is None and key and len(key[-1]) > 3:
        # "vision change" = "vision changes", "hair change" = "hair changes": the other number of the last word
        last = key[-1]
        other = last[:-1] if last.endswith("s") and not last.endswith("ss") else last + "s"
        concept = lex.surfaces.get((*key[:-1], other))
    if concept:
        return concept
    modifier = _modifier_form(key)
    if modifier is not None:
        return modifier
    # Imported here: the drug dictionary takes a second or two to load.
    from stresstest.clinical.drugs import resolve_drug

    generic = resolve_drug(term)
    return generic if generic is not None else norm


# ------------------------------------------------------------ modifiers of a symptom
_WORSE = frozenset({"worse", "worsened", "worsens", "aggravated", "exacerbated"})
_BETTER = frozenset({"better", "relieved", "eased", "improved", "improves", "eases"})
_LINKS = frozenset({"with", "by", "on", "when", "after", "during", "while", "from", "if", "upon"})
_DETERMINERS = frozenset({"a", "an", "the", "my", "your", "his", "her", "their"})
_TIMES_OF_DAY = {
    ("at", "night"): "at night",
    ("in", "the", "morning"): "in the morning",
    ("in", "the", "evening"): "in the evening",
    ("at", "rest"): "at rest",
}
#: Spellings of the same activity ("deep breathing" = "deep breath", "icing" = "ice").
_ACTIVITY = {
    ("deep", "breathing"): "deep breath",
    ("deep", "breaths"): "deep breath",
    ("breathing", "in"): "deep breath",
    ("breathing", "deeply"): "deep breath",
    ("taking", "a", "deep", "breath"): "deep breath",
    ("icing",): "ice",
    ("ice", "packs"): "ice",
    ("ice", "pack"): "ice",
    ("resting",): "rest",
    ("cough",): "coughing",
    ("lying", "down"): "lying down",
    ("laying", "down"): "lying down",
    ("lying", "flat"): "lying down",
    ("lying",): "lying down",
    ("exercising",): "exercise",
    ("cold", "weather"): "cold air",
    ("cold", "temperatures"): "cold air",
    ("going", "up", "stairs"): "stairs",
    ("going", "down", "stairs"): "stairs",
    ("walking", "upstairs"): "stairs",
    ("climbing", "stairs"): "stairs",
    ("going", "upstairs"): "stairs",
    ("going", "downstairs"): "stairs",
    ("walking", "up", "stairs"): "stairs",
    ("taking", "the", "stairs"): "stairs",
}
_EXERTION = frozenset(
    {"exertion", "exercise", "activity", "physical activity", "walking", "movement", "exercising", "running", "stairs"}
)


def _modifier_form(words: tuple[str, ...]) -> str | None:
    """One spelling for a symptom's aggravating or relieving factor: "<symptom> worse with <activity>" or
    "<symptom> relieved by <activity>" ("pain better with rest" = "pain relieved by rest", "knee pain worse on
    walking" = "pain worse with walking", "shortness of breath worse with exertion" = "shortness of breath on
    exertion"); None when ``words`` is not of that shape."""
    d = next((i for i, w in enumerate(words) if w in _WORSE or w in _BETTER), None)
    if d is None or d == 0 or d + 1 >= len(words):
        return None
    subject, rest = words[:d], words[d + 1 :]
    if subject[-1] in ("pain", "ache", "aches"):
        subj = "pain"  # the site belongs to the pain claim, the factor to every pain
    else:
        subj = _lexicon().surfaces.get(subject) or " ".join(subject)
    if rest in _TIMES_OF_DAY:
        return f"{subj} {words[d]} {_TIMES_OF_DAY[rest]}" if words[d] in ("worse", "better") else None
    if rest[0] in _LINKS:
        rest = rest[1:]
    rest = tuple(w for w in rest if w not in _DETERMINERS)
    if not rest:
        return None
    activity = _ACTIVITY.get(rest, " ".join(rest))
    if words[d] in _WORSE:
        if subj == "shortness of breath" and activity in _EXERTION:
            return "shortness of breath on exertion"
        if subj in ("cough", "wheeze", "chest tightness") and activity in _EXERTION:
            activity = "exertion"
        forms = (f"{subj} worse with {activity}", f"{subj} worse {activity}")
    else:
        forms = (f"{subj} relieved by {activity}", f"{subj} better {activity}")
    surfaces = _lexicon().surfaces
    for form in forms:  # a lexicon concept of that shape keeps its own spelling ("pain worse lying down")
        concept = surfaces.get(tuple(form.split()))
        if concept:
            return concept
    return forms[0]
