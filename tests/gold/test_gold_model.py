"""Gold format: loading, validation messages, saving, audit protection, the audit step."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stresstest.errors import GoldError
from stresstest.gold.model import GoldRecord, Provenance, dump_gold, load_gold, read_gold_file, save_gold
from stresstest.gold.workflow import mark_audited
from stresstest.schema import Claim, SafetyFlag, Triage

GOOD = """\
# a reviewer's comment that must survive mark_audited
schema_version: 1
encounter_id: E1
corpus: osce
scope_turns: 16
chief_complaint: chest pain
triage:
  level: urgent
  rationale: acute chest pain
claims:
- {id: c1, category: symptom, concept: chest pain, status: present, time: 2 hours}
- {id: c2, category: allergy, concept: NKDA, status: absent}
safety_flags:
- {id: f1, kind: red_flag, name: chest pain}
field_evidence:
  c1: ["I have chest pain"]
  f1: ["I have chest pain"]
provenance:
  drafted_by: test
  audited_by: null
  audited: false
  date: '2026-01-01'
  notes: ''
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_load_one_file_and_a_directory(tmp_path: Path) -> None:
    _write(tmp_path, "E1.yaml", GOOD)
    _write(tmp_path, "E2.yml", GOOD.replace("encounter_id: E1", "encounter_id: E2"))
    _write(tmp_path, "notes.txt", "not gold")
    recs = load_gold(tmp_path)
    assert list(recs) == ["E1", "E2"]
    r = recs["E1"]
    assert r.scope_turns == 16 and r.triage.level == "urgent"
    assert r.claims[0] == Claim(id="c1", category="symptom", concept="chest pain", status="present", time="2 hours")
    assert load_gold(tmp_path / "E1.yaml") == {"E1": r}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("status: present, time", "status: presnt, time", "claims[0].status"),
        ("level: urgent", "level: soon", "triage.level"),
        ("  drafted_by: test\n", "", "provenance.drafted_by"),
        ("corpus: osce", "corpus: osce\nextra_key: 1", "extra_key"),
        ("kind: red_flag", "kind: red flag", "safety_flags[0].kind"),
    ],
)
def test_errors_name_file_and_key_path(tmp_path: Path, old: str, new: str, expected: str) -> None:
    p = _write(tmp_path, "E1.yaml", GOOD.replace(old, new))
    with pytest.raises(GoldError) as exc:
        load_gold(p)
    msg = str(exc.value)
    assert str(p) in msg and expected in msg


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    p = _write(tmp_path, "E1.yaml", GOOD.replace("claims:\n", "claims: [\n"))
    with pytest.raises(GoldError, match=r"E1\.yaml:\d+: not valid YAML"):
        read_gold_file(p)


def test_file_name_must_match_id_and_ids_must_be_unique(tmp_path: Path) -> None:
    _write(tmp_path, "E9.yaml", GOOD)
    with pytest.raises(GoldError, match="does not match the file name"):
        load_gold(tmp_path)
    with pytest.raises(GoldError, match="no such gold file"):
        load_gold(tmp_path / "missing")


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(GoldError, match="expected a YAML mapping"):
        read_gold_file(_write(tmp_path, "E1.yaml", "- a\n- b\n"))


def _record(audited: bool = False) -> GoldRecord:
    return GoldRecord(
        encounter_id="E1",
        corpus="osce",
        triage=Triage(level="routine", rationale="r"),
        claims=[Claim(id="c1", category="symptom", concept="cough", status="present")],
        safety_flags=[SafetyFlag(id="f1", kind="allergy", name="penicillin")],
        field_evidence={"f1": ["allergic to penicillin"]},
        provenance=Provenance(
            drafted_by="test", audited=audited, audited_by="Dr X" if audited else None, date="2026-01-01"
        ),
    )


def test_save_round_trips_and_omits_empty_optionals(tmp_path: Path) -> None:
    p = save_gold(_record(), tmp_path)
    assert p == tmp_path / "E1.yaml"
    assert read_gold_file(p) == _record()
    text = p.read_text(encoding="utf-8")
    assert "laterality" not in text and "unit:" not in text  # unset claim fields are left out
    assert "audited_by: null" in text and "scope_turns: null" in text  # slots the auditor fills stay
    assert "- {id: c1, category: symptom, concept: cough, status: present}\n" in text  # one claim per line
    assert 'f1: ["allergic to penicillin"]' in text  # quotes double-quoted, one list per field
    assert yaml.safe_load(dump_gold(_record()))["encounter_id"] == "E1"


def test_save_refuses_to_overwrite_an_audited_file(tmp_path: Path) -> None:
    p = save_gold(_record(audited=True), tmp_path / "E1.yaml")
    with pytest.raises(GoldError, match="refusing to overwrite a clinician-audited"):
        save_gold(_record(), p)
    save_gold(_record(), p, overwrite_audited=True)
    assert read_gold_file(p).provenance.audited is False
    save_gold(_record(), p)  # an unaudited file may be replaced


def test_mark_audited_keeps_comments_and_refuses_twice(tmp_path: Path) -> None:
    p = _write(tmp_path, "E1.yaml", GOOD)
    rec = mark_audited(p, "Dr A. Smith (GP)", date="2026-02-03")
    assert rec.provenance.audited and rec.provenance.audited_by == "Dr A. Smith (GP)"
    assert rec.provenance.date == "2026-02-03"
    text = p.read_text(encoding="utf-8")
    assert text.startswith("# a reviewer's comment")
    assert "- {id: c1, category: symptom" in text  # layout untouched
    with pytest.raises(GoldError, match="already audited by 'Dr A. Smith \\(GP\\)'"):
        mark_audited(p, "Dr B")
    with pytest.raises(GoldError, match="expected the auditor's name"):
        mark_audited(p, " ")


def test_mark_audited_rewrites_when_lines_are_not_plain(tmp_path: Path) -> None:
    flow = GOOD.split("provenance:")[0] + (
        "provenance: {drafted_by: test, audited_by: null, audited: false, date: '2026-01-01'}\n"
    )
    p = _write(tmp_path, "E1.yaml", flow)
    rec = mark_audited(p, "Dr C", date="2026-02-03")
    assert rec.provenance.audited and read_gold_file(p) == rec


def test_mark_audited_writes_through_a_symlink(tmp_path: Path) -> None:
    """Issue 37: auditing a symlinked gold file replaced the link with an audited copy and left the shared file
    unaudited. The shared file is audited, the link stays a link."""
    (tmp_path / "shared").mkdir()
    shared = _write(tmp_path / "shared", "E1.yaml", GOOD)
    (tmp_path / "mine").mkdir()
    link = tmp_path / "mine" / "E1.yaml"
    link.symlink_to(shared)
    mark_audited(link, "Dr A. Smith (GP)", date="2026-02-03")
    assert link.is_symlink() and link.resolve() == shared.resolve()
    assert read_gold_file(shared).provenance.audited_by == "Dr A. Smith (GP)"
