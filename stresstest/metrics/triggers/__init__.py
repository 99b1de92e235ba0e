"""Cause-side trigger events: the transcript distortions that can change a clinical conclusion.

:func:`detect_triggers` aligns a reference and a hypothesis word by word (on the
documented normalisation, :mod:`stresstest.metrics.align`), groups adjacent
edits into *regions*, and types each region by what it does to clinical
content (docs/spec.md §6, §10):

``negation_flip``
    A clinical entity's negation status changes because words changed: a cue
    lost, gained or moved off its target ("I don't see the rash" -> "I see the
    rash"), or a "no" answer to a symptom question dropped. Same decision as
    NegErr (:mod:`stresstest.metrics.negation`), so given the same gold
    concepts the two always agree. A "not"/"never" gained or lost with no
    cue word on the other side counts too ("it's been ongoing" -> "it's not
    going").
``number_unit_conflict``
    A number, dose, count, measure or frequency changes value or unit ("3 or 4
    flights of stairs" -> "three or four steps", "twice a day" -> "twice a
    week", "15 mg" -> "50 mg"), or a number is lost or gained. Equal values in
    other spellings ("3"/"three", "mg"/"milligrams", "1:46"/"146",
    "4/28/07"/"4/28/2007", "17th"/"17") are not conflicts. Numbers inside a
    long inserted run belong to that run (``nonspeech_pollution``); numbers
    and times inside a long deleted run are an omission, not a conflict.
``temporal_distortion``
    A duration or time anchor changes ("two hours" -> "two days", "since
    Monday" -> "since Sunday", "yesterday" -> "today"), is lost or is gained,
    or a time relation is heard as another ("after meals" -> "before meals").
    Frequencies ("twice a day" -> "twice a week") are number/unit conflicts.
``entity_substitution``
    One clinical entity replaced by a different one of the same kind (drug ->
    other drug, symptom -> other symptom, body site -> other site), a
    laterality swap (left <-> right) or a hypo-/hyper- swap; failing those, a
    clinical term heard as one of another kind ("Eucrisa" -> "elbow"); a
    course / severity / frequency qualifier heard as another value of its
    scale ("worse" -> "better", "mild" -> "severe"). Trade
    and generic names of one drug are the same entity; losing a word of a term
    ("chest pain" -> "chest") is not a substitution.
``nonspeech_pollution``
    Content absent from the reference appears in the hypothesis (a background
    talker, a hallucinated phrase): where the hypothesis has more words than
    the reference, either a clinical entity
    or drug that the reference does not mention within 40 words, or a run of
    at least three inserted words of which at least three are content words
    the reference does not have within 40 words. (A like-for-like
    misrecognition such as "mess" -> "mass" is not pollution.)

``clinical_omission``
    A clinical term of the reference (lexicon, drug dictionary, the medwer
    term list behind the project's overlay) lost or turned into other words;
    a short yes/no answer lost with its content, weighted by what the question
    before it asked; a course or severity word lost.

Benign differences produce no event: they vanish in normalisation (casing,
punctuation, contractions, British/American spelling, number words vs digits,
hesitation fillers) or are filtered per region (compound splits such as
"workup"/"work up" and "all right"/"alright", discourse fillers such as "okay",
"you know", immediate word repetitions, function-word edits, unit spellings).

Each event quotes the ORIGINAL texts (``ref_span == ref[ref_start:ref_end]``,
likewise for the hypothesis). A side with no words in the region (a pure
deletion or insertion) is quoted with two words of context either side so a
reader can find the spot. The detector is deterministic: events are sorted by
position and type.

The package holds one module per event kind (:mod:`.number_time` for ``number_unit_conflict`` and
``temporal_distortion``, :mod:`.entity_substitution`, :mod:`.nonspeech_pollution`, :mod:`.clinical_omission`,
:mod:`.negation_flip`, plus :mod:`.qualifiers` and :mod:`.lost_answers`, whose events are substitutions and
omissions), the shared ground they stand on (:mod:`.words`: word classes; :mod:`.regions`: regions, the
clinical annotations of each side and event construction; :mod:`.numbers`: number and time readings) and
:mod:`.detect`, which runs them over a pair. The public names below are the package's interface.
"""

from __future__ import annotations

from stresstest.metrics.triggers.detect import (
    content_word_errors,
    detect_in_pair,
    detect_triggers,
    trigger_counts,
    trigger_risk,
)
from stresstest.metrics.triggers.regions import clinical_mentions
from stresstest.results import TRIGGER_TYPES, TriggerEvent, TriggerType

__all__ = [
    "TRIGGER_TYPES",
    "TriggerEvent",
    "TriggerType",
    "clinical_mentions",
    "content_word_errors",
    "detect_in_pair",
    "detect_triggers",
    "trigger_counts",
    "trigger_risk",
]
