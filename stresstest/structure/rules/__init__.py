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
    breathing on oxygen or in an infant, in place of the tachypnea flag); critical vital sign ->
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

Modules (internal; import :func:`extract_record`, :data:`RULES_VERSION` and
:func:`rules_fingerprint` from this package)
    ``tables`` (windows, cue words, thresholds), ``common`` (the token stream
    and what several passes share), one module a pass - ``mentions``,
    ``assertions``, ``groups``, ``dialogue``, ``claims`` (with ``history``:
    habits, medication timing, occupation, travel), ``patient``, ``flags``,
    ``triage`` - and this one, which runs them.
"""

from __future__ import annotations

import hashlib
from importlib import metadata, resources

from stresstest.schema import ClinicalRecord
from stresstest.structure.rules.assertions import _pass_assertions
from stresstest.structure.rules.claims import _injury_time, _pass_claims, _productive_cough, _renumber
from stresstest.structure.rules.common import _Extractor, _is_modifier
from stresstest.structure.rules.dialogue import _pass_dialogue
from stresstest.structure.rules.flags import _pass_flags
from stresstest.structure.rules.groups import _pass_groups
from stresstest.structure.rules.history import _how_is_claims, _occupation_claims, _travel
from stresstest.structure.rules.mentions import _pass_mentions
from stresstest.structure.rules.patient import _pass_patient
from stresstest.structure.rules.triage import _pass_triage

__all__ = ["RULES_VERSION", "extract_record", "rules_fingerprint"]


#: Bump on any behaviour change: it is part of the structure cache key.
RULES_VERSION = 6


def rules_fingerprint() -> str:
    """sha256 of the rules version, the extractor's code (every module of this package), every shipped
    clinical data file and the drug dictionary version.

    Code is hashed too so that a behaviour change that forgot to bump :data:`RULES_VERSION`
    still invalidates cached records.
    """
    h = hashlib.sha256(f"rules-{RULES_VERSION}".encode())
    clinical = resources.files("stresstest.clinical")
    data = clinical.joinpath("data")
    files = [(f"data/{e.name}", e) for e in data.iterdir() if e.name.endswith(".tsv")]
    files += [(e.name, e) for e in clinical.iterdir() if e.name.endswith(".py")]
    package = resources.files("stresstest.structure.rules")
    files += [(f"rules/{e.name}", e) for e in package.iterdir() if e.name.endswith(".py")]
    for name, entry in sorted(files, key=lambda t: t[0]):
        h.update(name.encode())
        h.update(entry.read_bytes())
    try:
        h.update(metadata.version("drug-named-entity-recognition").encode())
    except metadata.PackageNotFoundError:  # pragma: no cover - it is a hard dependency
        h.update(b"no-drug-ner")
    return h.hexdigest()


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
    built = _renumber(
        _travel(ex, _injury_time(_productive_cough(built))) + _occupation_claims(ex, have) + _how_is_claims(ex, have)
    )
    patient = _pass_patient(ex, built)
    field_evidence: dict[str, list[str]] = {b.claim.id: b.evidence for b in built}
    flags = _pass_flags(ex, built, reactions, patient, field_evidence)
    triage, triage_ev = _pass_triage(ex, built, flags, patient, dialogue)
    if triage_ev:
        field_evidence["triage"] = triage_ev
    chief = next(
        (
            b.claim
            for b in built
            if b.claim.category == "symptom" and b.claim.status == "present" and not _is_modifier(b.claim.concept)
        ),
        None,
    )
    # Guarantee the exact-substring contract even if a helper above misbehaves.
    field_evidence = {k: [q for q in v if q and q in transcript] for k, v in field_evidence.items()}
    return ClinicalRecord(
        chief_complaint=chief.concept if chief else None,
        triage=triage,
        claims=[b.claim for b in built],
        safety_flags=[f for f, _ev, _hint in flags],
        field_evidence=field_evidence,
    )
