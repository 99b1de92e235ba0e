"""The guard shown to act (issue 26): recorded Draft and Guard outputs at the engine boundary (a stub
OpenAI-compatible server; the real engines are tested elsewhere) carry what a small model writes under babble —
a quote "corrected" to a dose that was not said, a claim from background speech, a red flag quoted from nothing,
a claim without a quote — and the Guard and the deterministic filter remove exactly those; the unmitigated row
keeps them, and the report says what was removed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from support.llm_stub import Reply, stub_server

from stresstest.llm.config import LLMConfig
from stresstest.mitigation import mitigate_many
from stresstest.schema import RecordEnvelope
from stresstest.structure.stage import StructureItem, structure_many

RAW = (
    "Doctor: What brings you in today? Patient: I've had chest pain for two hours, it goes to my left arm. "
    "Doctor: Any allergies? Patient: I'm allergic to penicillin, I get a rash. Doctor: Any medicines? "
    "Patient: I take warfarin 5 mg daily. Doctor: Any shortness of breath? Patient: No."
)

# Recorded Draft output (output contract v2).
DRAFT: dict[str, Any] = {
    "chief_complaint": "chest pain",
    "claims": [
        {
            "id": "c1",
            "category": "symptom",
            "concept": "chest pain",
            "status": "present",
            "evidence": ["chest pain for two hours"],
            "time": "2 hours",
        },
        # the dose "corrected" in the quote: not a substring of the raw transcript
        {
            "id": "c2",
            "category": "medication",
            "concept": "warfarin",
            "status": "present",
            "evidence": ["I take warfarin 15 mg daily"],
            "value": "15",
            "unit": "mg",
        },
        # from background speech: its quote exists, but it supports warfarin, not aspirin (the Guard's call)
        {
            "id": "c3",
            "category": "medication",
            "concept": "aspirin",
            "status": "present",
            "evidence": ["I take warfarin 5 mg daily"],
            "value": "75",
            "unit": "mg",
        },
        # a red-flag claim without any quote
        {"id": "c4", "category": "symptom", "concept": "syncope", "status": "present"},
        {"id": "c5", "category": "symptom", "concept": "shortness of breath", "status": "absent"},
    ],
    "safety_flags": [
        {
            "id": "f1",
            "kind": "allergy",
            "name": "penicillin",
            "evidence": ["I'm allergic to penicillin"],
            "detail": "rash",
        },
        # a dose whose number is in none of its quotes
        {
            "id": "f2",
            "kind": "high_risk_medication",
            "name": "warfarin",
            "evidence": ["I take warfarin 5 mg daily"],
            "detail": "15 mg daily",
        },
        # quoted from nothing the patient said
        {"id": "f3", "kind": "red_flag", "name": "syncope", "evidence": ["I passed out"]},
    ],
    "triage": {
        "level": "emergency",
        "rationale": "Chest pain radiating to the left arm.",
        "evidence": ["chest pain for two hours, it goes to my left arm"],
    },
}


def _guard_output() -> dict[str, Any]:
    """Recorded Guard output: it deletes the aspirin claim and tries to add a latex allergy (undone in code)."""
    out = json.loads(json.dumps(DRAFT))
    out["claims"] = [c for c in out["claims"] if c["id"] != "c3"]
    out["safety_flags"].append({"id": "f9", "kind": "allergy", "name": "latex", "evidence": ["latex"]})
    return out


def _stub() -> Reply:
    def respond(body: dict[str, Any]) -> str:
        guard = "Guard role" in body["messages"][0]["content"]
        return json.dumps(_guard_output() if guard else DRAFT)

    return Reply(respond=respond)


def _cfg(url: str) -> LLMConfig:
    return LLMConfig(
        backend="openai",
        concurrency=1,
        max_retries=0,
        server={"mode": "external", "base_url": url, "model": "stub-model"},
    )


def _run(tmp_path: Path) -> tuple[RecordEnvelope, RecordEnvelope]:
    """(guard envelope, unmitigated envelope) of the same transcript."""
    items = [StructureItem(encounter_id="enc000", condition="ambient_5db", transcript_text=RAW)]
    guarded = [it.model_copy(update={"condition": "ambient_5db_guard"}) for it in items]
    with stub_server([_stub()]) as srv:
        (plain,) = structure_many(items, _cfg(srv.base_url), cache_dir=tmp_path / "c", log_dir=tmp_path / "l")
        (env,) = mitigate_many(guarded, _cfg(srv.base_url), cache_dir=tmp_path / "c", log_dir=tmp_path / "l")
    assert not plain.failed and not env.failed, (plain.error, env.error)
    return env, plain


def _ids(env: RecordEnvelope) -> list[str]:
    assert env.record is not None
    return [c.id for c in env.record.claims] + [f.id for f in env.record.safety_flags]


def test_guard_and_filter_remove_unquoted_and_unsupported_items(tmp_path: Path) -> None:
    env, plain = _run(tmp_path)
    assert _ids(plain) == ["c1", "c2", "c3", "c4", "c5", "f1", "f2", "f3"]  # the unmitigated row keeps them all
    assert _ids(env) == ["c1", "c5", "f1", "f2"]
    assert env.record != plain.record
    g, f = env.extra.guard_report, env.extra.filter_report
    assert g is not None and f is not None  # typed reports (issue 38), not dicts to re-validate
    assert g.removed_claims == ["c3"] and g.added_dropped == ["f9"]  # the Guard's deletion; its addition undone
    assert f.removed_claims == ["c2", "c4"] and f.removed_flags == ["f3"]
    assert {(d.field, d.quote, d.reason) for d in f.discarded} == {
        ("c2", "I take warfarin 15 mg daily", "not a substring of the raw transcript"),
        ("f3", "I passed out", "not a substring of the raw transcript"),
    }
    assert f.values_nulled == ["f2.detail"]
    assert env.record is not None and env.record.safety_flags[1].detail is None  # "15 mg" was never said
    assert env.extra.fields_total == 8 and env.extra.fields_nulled == 4 and env.extra.guard_removed == 1
    # every surviving safety item cites a quote that is in the raw transcript
    for key in ("triage", "f1", "f2"):
        assert env.record.field_evidence[key] and all(q in RAW for q in env.record.field_evidence[key])


def test_the_report_says_what_the_guard_removed(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
    from synthetic_run import make_run

    from stresstest.report import build_report

    env, _ = _run(tmp_path)
    rd = make_run(tmp_path / "run", n_encounters=6, seed=5)
    rows = [json.loads(line) for line in (rd / "items.jsonl").read_text("utf-8").splitlines()]
    for r in rows:  # the recorded guard outcome stands in for every ambient guard record
        if r["condition"] == "ambient_5db_guard" and not r.get("failed"):
            r["extra"] = env.extra.model_dump(mode="json")
    (rd / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    n = sum(1 for r in rows if r["condition"] == "ambient_5db_guard" and not r.get("failed"))
    md = build_report(rd, n_resamples=20, seed=0).markdown.read_text("utf-8")
    assert (
        f"- ambient_5db_guard: {n} records, {8 * n} Draft claims and flags; the Guard removed {n}; the evidence "
        f"filter removed {3 * n} ({2 * n} whose quotes are not in the raw transcript, {n} without a quote); "
        f"{n} values set to null; {2 * n} of {6 * n} quotes discarded; {n} Guard additions or changes undone."
    ) in md
    assert "- babble_5db_guard: what the guard removed is not recorded in this run" in md
    assert "### What the guard removed" in md
    assert (
        "| ambient_5db_guard | enc000 | c2 | medication claim: warfarin 15 mg | evidence filter | its quote is not in "
        "the raw transcript: 'I take warfarin 15 mg daily' |"
    ) in md
    assert "| ambient_5db_guard | enc000 | c3 | medication claim: aspirin 75 mg | Guard | deleted by the Guard |" in md
    assert "| ambient_5db_guard | enc000 | c4 | symptom claim: syncope | evidence filter | no quote |" in md
    assert (
        "| ambient_5db_guard | enc000 | f2.detail | high_risk_medication flag: warfarin (15 mg daily) — detail "
        "'15 mg daily' | evidence filter | a number in it is in none of its quotes |"
    ) in md
    table = (rd / "report" / "tables" / "guard_removed.csv").read_text("utf-8").splitlines()
    assert table[0] == "condition,encounter_id,item,what,removed_by,why" and len(table) == 1 + 5 * n


def test_guard_sentences_say_when_nothing_was_removed_or_nothing_recorded(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
    from synthetic_run import make_run

    from stresstest.report.guard import guard_sentences, removals
    from stresstest.report.rundir import load_run

    # The rules backend: no Guard call; its quotes are exact spans and "rash" has no number: the filter keeps all.
    allergy = "Doctor: Any allergies? Patient: I'm allergic to penicillin, I get a rash."
    items = [StructureItem(encounter_id="enc000", condition="babble_5db_guard", transcript_text=allergy)]
    (rules_env,) = mitigate_many(items, LLMConfig(backend="rules"), cache_dir=tmp_path / "c", log_dir=tmp_path / "l")
    rd = make_run(tmp_path / "run", n_encounters=4, seed=5)
    assert guard_sentences(load_run(rd))[0].endswith("what the guard removed is not recorded in this run (4 records).")
    rows = [json.loads(line) for line in (rd / "items.jsonl").read_text("utf-8").splitlines()]
    for r in rows:
        if r["condition"] == "babble_5db_guard":
            r["extra"] = rules_env.extra.model_dump(mode="json")
    (rd / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    run = load_run(rd)
    total = rules_env.extra.fields_total
    assert total and rules_env.extra.fields_nulled == 0
    assert (
        f"babble_5db_guard: 4 records, {4 * total} Draft claims and flags; the Guard did not run (rules backend: "
        "the evidence filter alone), and nothing was removed: every record equals its Draft." in guard_sentences(run)
    )
    assert not [r for r in removals(run) if r.condition == "babble_5db_guard"]
    # on the longer transcript the rules' warfarin detail "anticoagulant; 5 mg; 1 per day" loses its "1" ("daily")
    (env,) = mitigate_many(
        [items[0].model_copy(update={"transcript_text": RAW})],
        LLMConfig(backend="rules"),
        cache_dir=tmp_path / "c",
        log_dir=tmp_path / "l",
    )
    for r in rows:
        if r["condition"] == "babble_5db_guard":
            r["extra"] = env.extra.model_dump(mode="json")
    (rd / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    (sentence,) = [s for s in guard_sentences(load_run(rd)) if s.startswith("babble")]
    assert sentence.endswith(
        "the Guard did not run (rules backend: the evidence filter alone); the evidence filter "
        "removed no item; 4 values set to null; 0 of 36 quotes discarded."
    )


def test_a_draft_with_two_claims_under_one_id_gives_one_removal_row(tmp_path: Path) -> None:
    """Issue 26 (demo-llm, RES0002): the Draft gave two claims one id, the Guard's report listed the id twice, and
    the table showed one claim twice. One row now, naming both Draft claims and the count."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
    from synthetic_run import make_run

    from stresstest.report.guard import removals
    from stresstest.report.rundir import load_run

    def claim(concept: str, category: str) -> dict[str, Any]:
        return {"id": "23845679", "category": category, "concept": concept, "status": "present"}

    extra = {
        "draft_record": {
            "triage": {"level": "routine", "rationale": "r"},
            "claims": [claim("chest pain", "symptom"), claim("blood", "vital")],
        },
        "guard_report": {"removed_claims": ["23845679", "23845679"]},
        "filter_report": {"quotes_total": 0},
    }
    rd = make_run(tmp_path / "run", n_encounters=2, seed=5)
    rows = [json.loads(line) for line in (rd / "items.jsonl").read_text("utf-8").splitlines()]
    for r in rows:
        if r["condition"] == "ambient_5db_guard" and r["encounter_id"] == "enc000":
            r["extra"] = extra
    (rd / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    got = [r for r in removals(load_run(rd)) if r.condition == "ambient_5db_guard" and r.encounter_id == "enc000"]
    assert [r.cells() for r in got] == [
        (
            "ambient_5db_guard",
            "enc000",
            "23845679",
            "symptom claim: chest pain; vital claim: blood (×2; the Draft had 2 items under this id)",
            "Guard",
            "deleted by the Guard",
        )
    ]
