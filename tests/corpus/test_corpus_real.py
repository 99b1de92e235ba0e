"""Every loader survives every file of the real corpora in ../shared/corpora."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from stresstest.corpus import load_corpus
from stresstest.records import Encounter

Real = Callable[[str, str], list[Encounter]]

# What must never reach a reference transcript: transcriber tags, bracketed speaker
# tags, PTB-split clitics, a space before punctuation, ragged whitespace.
_DEBRIS = re.compile(r"</?\w+/?>|\[\w+\]| n't\b|\s[,.?!]|\s{2}|^\s|\s$")


def _check_clean(encounters: list[Encounter]) -> None:
    ids = [e.encounter_id for e in encounters]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    for e in encounters:
        assert e.turns, e.encounter_id
        for t in e.turns:
            assert t.text and not _DEBRIS.search(t.text), (e.encounter_id, t.text)
            assert re.search(r"\w", t.text), (e.encounter_id, t.text)
        assert e.reference_text() == " ".join(t.text for t in e.turns)


def test_osce_all_files(corpora: Path, real: Real) -> None:
    folder = corpora / "osce" / "transcripts"
    encounters = real("osce", "osce")
    assert len(encounters) == len(list(folder.glob("*.txt"))) == 218
    _check_clean(encounters)
    by_id = {e.encounter_id: e for e in encounters}
    assert {e.specialty for e in encounters} == {"CAR", "DER", "GAS", "GEN", "MSK", "RES"}
    assert all(e.specialty == e.encounter_id[:3] for e in encounters)
    # UTF-16-LE with BOM (RES0002, RES0054) decodes to plain text.
    assert by_id["RES0002"].turns[0].text == "Could you tell me what brought you in today?"
    # Typographic apostrophes are mapped to ASCII; accented letters are kept.
    assert "’" not in " ".join(e.reference_text() for e in encounters)
    assert "fiancé" in by_id["RES0044"].reference_text()
    # Mistyped labels: "DL OK" (MSK0014), "P. Uh, no." (RES0183), "D : OK" (MSK0007).
    assert any(t.speaker == "doctor" and t.text.startswith("OK, uh. And any allergies") for t in by_id["MSK0014"].turns)
    assert any(t.speaker == "patient" and t.text == "Uh, no." for t in by_id["RES0183"].turns)
    # A turn wrapped onto the next line is one turn.
    assert any(t.text.endswith("I don't like I don't calculate it like to the day.") for t in by_id["GAS0001"].turns)
    # A trailing line after a blank line continues the last turn (RES0194 "Hey.").
    assert by_id["RES0194"].turns[-1].text.endswith("take care. Hey.")


def test_primock57_all_files(corpora: Path, real: Real) -> None:
    encounters = real("primock57", "primock57")
    assert len(encounters) == 57
    assert len(list((corpora / "primock57" / "transcripts").glob("*.TextGrid"))) == 2 * 57
    _check_clean(encounters)
    for e in encounters:
        assert e.reference_note, e.encounter_id
        starts = [t.start_s if t.start_s is not None else -1.0 for t in e.turns]
        assert min(starts) >= 0 and starts == sorted(starts)
        assert all(t.end_s is not None and t.start_s is not None and t.end_s >= t.start_s for t in e.turns)
        assert {t.speaker for t in e.turns} == {"doctor", "patient"}
    first = encounters[0]
    assert first.encounter_id == "day1_consultation01"
    # "<UNSURE>Hello how</UNSURE>" keeps its words; "<UNIN/>" vanishes.
    assert first.turns[0].text.startswith("Hello? Hi. Um, should we start? Yeah, okay. Hello how um.")
    assert (first.reference_note or "").startswith("3/7 hx of diarrhea")


def test_acibench_challenge_data(real: Real) -> None:
    encounters = real("aci-bench", "aci-bench")
    assert len(encounters) == 67 + 20 + 40 + 40
    _check_clean(encounters)
    assert all(e.reference_note and len(e.reference_note) > 200 for e in encounters)
    assert _note_first_lines(encounters) >= {"CHIEF COMPLAINT", "HISTORY OF PRESENT ILLNESS", "CC:"}
    by_id = {e.encounter_id: e for e in encounters}
    # D2N131 opens without a tag; the next tag is [patient], so the opener is the doctor.
    assert by_id["D2N131"].turns[0].speaker == "doctor"
    assert by_id["D2N131"].turns[0].text == "hi, susan, how are you?"
    # [patient_guest] is a companion: speaker "other".
    assert any(t.speaker == "other" for e in encounters for t in e.turns)
    # PTB tokens are joined back.
    text = " ".join(e.reference_text() for e in encounters)
    assert "don't" in text and "gonna" in text and "inaudible" not in text


def test_acibench_src_experiment_data_ids_prefixed(corpora: Path) -> None:
    folder = corpora / "aci-bench" / "src_experiment_data"
    encounters = load_corpus("aci-bench", folder)
    n_rows = 2 * (22 + 22 + 8 + 8)
    assert len(encounters) == n_rows
    _check_clean(encounters)
    ids = {e.encounter_id for e in encounters}
    assert "test1_virtscribe_asr-VS000" in ids and "test1_virtscribe_humantrans-VS000" in ids
    # A single file keeps its bare ids.
    one = load_corpus("aci-bench", folder / "test1_virtscribe_humantrans.csv")
    assert len(one) == 8 and all(re.fullmatch(r"VS\d+", e.encounter_id) for e in one)


def _note_first_lines(encounters: list[Encounter]) -> set[str]:
    return {(e.reference_note or "").split("\n")[0] for e in encounters}


def test_selection_on_real_corpus(corpora: Path, real: Real) -> None:
    everything = real("osce", "osce")
    pick = [everything[3].encounter_id, everything[1].encounter_id]
    chosen = load_corpus("osce", corpora / "osce", ids=pick, limit=1)
    assert [e.encounter_id for e in chosen] == [everything[1].encounter_id]
