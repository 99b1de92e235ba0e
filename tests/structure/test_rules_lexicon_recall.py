"""Lexicon wording the ``rules`` structurer used to miss (dev split only): how clinicians ask and patients say
standard history items (sick contacts, limb swelling, coughed-up blood, swallowing, weight changes, admissions,
bowel habit, nocturnal or morning cough, ...). Each snippet is short and in the dialogue's own words."""

from __future__ import annotations

import pytest
from rules_claims import grounded_claims as _claims

from stresstest.clinical.lexicon import canonical_concept


@pytest.mark.parametrize(
    ("text", "concept", "status"),
    [
        # sick contacts, asked the many ways clinicians ask it
        (
            "D: Have you been in contact with anyone who has been ill recently? P: No, I don't think so.",
            "sick contacts",
            "absent",
        ),
        ("D: OK, and has anybody in the house been sick? P: No, no one.", "sick contacts", "absent"),
        (
            "D: And have you been around anyone that has been sick recently? P: Not that I know of.",
            "sick contacts",
            "absent",
        ),
        ("D: Have you been in contact with anyone who's sick? P: No, I went straight home.", "sick contacts", "absent"),
        # peripheral edema asked as "swelling in your limbs"
        ("D: Any swelling in your limbs? P: No.", "leg swelling", "absent"),
        (
            "D: Have you noticed any swelling in your limbs? P: Uh yeah, maybe a little bit in my feet.",
            "leg swelling",
            "present",
        ),
        ("D: Any blood that you bring up? P: No, nothing like that.", "hemoptysis", "absent"),
        ("D: Have you had any racing of your heart? P: No, nothing like that.", "palpitations", "absent"),
        (
            "D: Have you had any problems with swallowing, like food or liquids? P: No, I don't think so.",
            "dysphagia",
            "absent",
        ),
        ("D: Have you noticed any changes to your weight recently? P: No.", "weight loss", "absent"),
        (
            "D: Has there been any reason for being in the hospital before? P: No, not at all.",
            "hospitalization",
            "absent",
        ),
        ("D: Any pain in your joints at all? P: No.", "joint pain", "absent"),
        ("D: Any swelling of your lymph nodes? P: No, not that I noticed.", "lymphadenopathy", "absent"),
        ("D: Do you have any environmental allergies? P: No, I don't.", "seasonal allergies", "absent"),
        ("P: She says it just hurts too much to put any weight on that leg.", "inability to bear weight", "present"),
        ("D: Have you had any injuries to your knee before? P: No, not that I can think of.", "trauma", "absent"),
        ("P: It's really painful. The movement's really limited.", "limited range of motion", "present"),
        ("D: Any changes in your bowel movement? P: No, nothing like that.", "change in bowel habit", "absent"),
        ("D: Have you had any changes to bowel patterns? P: No, I don't think so.", "change in bowel habit", "absent"),
        (
            "D: Have you had any symptoms like this before? P: No, nothing like this.",
            "previous similar episode",
            "absent",
        ),
        ("D: Has she mentioned anything about losing smell? P: No.", "loss of smell", "absent"),
        ("P: It's been impacting my sleep because I've been coughing at night too.", "cough worse at night", "present"),
        ("P: I think the coughs worse at night.", "cough worse at night", "present"),
        ("P: I've had a morning cough for a couple of years now.", "cough worse in the morning", "present"),
    ],
)
def test_history_items_in_everyday_wording(text: str, concept: str, status: str) -> None:
    got = _claims(text)
    assert concept in got, sorted(got)
    assert got[concept].status == status


@pytest.mark.parametrize(
    ("text", "concept", "status"),
    [
        ("D: And do you use protection while having sex? P: Yeah, we just use condoms.", "condom use", "present"),
        ("D: OK, so are you left handed? P: Yes, I'm left handed.", "handedness", "present"),
        ("P: It's really annoying 'cause I'm right handed, so it's causing problems.", "handedness", "present"),
        (
            "P: She was walking a little bit funny and kind of having a limp when she came back from school.",
            "limp",
            "present",
        ),
        ("P: It's giving her a lot of discomfort and she's been crying as well.", "crying", "present"),
        (
            "D: Any paleness or blueness in her skin? P: She's not blue. She's looking a little pale though.",
            "pallor",
            "present",
        ),
        ("P: Three days ago I started to feel like my throat was dry.", "dry throat", "present"),
        (
            "D: Any urinary issues? P: Only at night time I seem to have to get up a lot to use the bathroom.",
            "nocturia",
            "present",
        ),
        (
            "D: Have you noticed any sensory loss over your leg or ankle? P: No, no sensory loss.",
            "sensory loss",
            "absent",
        ),  # its own concept: the writers keep it apart from numbness when both are asked
    ],
)
def test_social_and_paediatric_items(text: str, concept: str, status: str) -> None:
    got = _claims(text)
    assert concept in got, sorted(got)
    assert got[concept].status == status


def test_special_senses_are_not_sensory_loss() -> None:
    # "sensory changes like vision or hearing" asks about the special senses, not numbness
    got = _claims("D: Any sensory changes like things to her vision or hearing? P: No.")
    assert "numbness" not in got, sorted(got)


def test_fewer_wet_diapers_is_not_read_as_a_denial() -> None:
    got = _claims("P: He hasn't gone through as many wet diapers as he normally does.")
    assert got.get("decreased urine output") is None or got["decreased urine output"].status == "present"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("nocturnal cough", "cough worse at night"),  # two gold spellings of one fact fold together
        ("limb swelling", "leg swelling"),
        ("other joint pain", "joint pain"),
        ("environmental allergies", "seasonal allergies"),
        ("joint stiffness", "stiffness"),
        ("joint warmth", "warmth"),
        ("hand dominance", "handedness"),
        ("reduced urine output", "decreased urine output"),
    ],
)
def test_clinical_and_lay_names_fold(a: str, b: str) -> None:
    assert canonical_concept(a) == canonical_concept(b) == b
