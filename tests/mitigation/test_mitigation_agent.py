"""Guard contract (delete-only, enforced in code) and mitigate_many on both backends."""

from __future__ import annotations

import json
import random
from pathlib import Path

from support.llm_stub import Reply, stub_server

from stresstest.llm.config import LLMConfig
from stresstest.mitigation import enforce_guard, mitigate_many, mitigation_fingerprint
from stresstest.schema import Claim, ClinicalRecord, RecordOutput, SafetyFlag, Triage
from stresstest.structure.stage import StructureItem


def _ids(r: ClinicalRecord) -> set[str]:
    return {c.id for c in r.claims} | {f.id for f in r.safety_flags}


def test_guard_cannot_add_or_change_only_delete(record: ClinicalRecord) -> None:
    guarded = record.model_copy(
        update={
            "triage": Triage(level="routine", rationale="guard tried to downgrade"),
            "claims": [
                record.claims[0].model_copy(update={"status": "absent", "time": None}),  # flip (reverted) + null time
                Claim(id="c9", category="allergy", concept="latex", status="present"),  # invented
            ],
            "safety_flags": [
                record.safety_flags[0].model_copy(update={"detail": None}),
                SafetyFlag(id="f7", kind="red_flag", name="syncope"),
            ],
            "field_evidence": {"triage": ["chest pain for two hours", "an added quote"], "c9": ["latex"]},
        }
    )
    out, rep = enforce_guard(record, guarded)
    assert _ids(out) <= _ids(record)
    assert [c.id for c in out.claims] == ["c1"] and out.claims[0].status == "present" and out.claims[0].time is None
    assert [f.id for f in out.safety_flags] == ["f1"] and out.safety_flags[0].detail is None
    assert out.triage == record.triage
    assert out.field_evidence == {"triage": ["chest pain for two hours"]}
    assert rep.added_dropped == ["c9", "f7"]
    assert set(rep.changes_reverted) == {"c1.status", "triage.level"}
    assert rep.removed_claims == ["c2", "c3"] and rep.removed_flags == ["f2"] and rep.fields_removed == 3
    assert set(rep.nulled_values) == {"c1.time", "f1.detail"} and rep.quotes_added_dropped == 2


def test_guard_never_adds_on_random_outputs(record: ClinicalRecord) -> None:
    rng = random.Random(0)
    pool_claims = [
        *record.claims,
        Claim(id="c4", category="plan", concept="ECG", status="present"),
        Claim(id="c1", category="symptom", concept="headache", status="present"),
    ]
    pool_flags = [*record.safety_flags, SafetyFlag(id="f3", kind="self_harm_risk", name="overdose")]
    for _ in range(200):
        claims = {c.id: c for c in rng.sample(pool_claims, rng.randint(0, len(pool_claims)))}
        flags = {f.id: f for f in rng.sample(pool_flags, rng.randint(0, len(pool_flags)))}
        guarded = ClinicalRecord(
            triage=Triage(level=rng.choice(["routine", "urgent", "emergency"])),
            claims=list(claims.values()),
            safety_flags=list(flags.values()),
            field_evidence={k: ["x", *v] for k, v in record.field_evidence.items() if rng.random() < 0.5},
        )
        out, _ = enforce_guard(record, guarded)
        assert _ids(out) <= _ids(record)
        assert all(c in record.claims or c.id in {d.id for d in record.claims} for c in out.claims)
        for key, quotes in out.field_evidence.items():
            assert set(quotes) <= set(record.field_evidence.get(key, []))
        for c in out.claims:  # every surviving field equals the draft's or was nulled
            d = next(x for x in record.claims if x.id == c.id)
            for name in ("category", "concept", "status"):
                assert getattr(c, name) == getattr(d, name)
            for name in ("value", "unit", "time", "laterality"):
                assert getattr(c, name) in (getattr(d, name), None)


ITEMS = [
    StructureItem(encounter_id="E1", condition="babble_5db", transcript_text=""),  # filled below
    StructureItem(encounter_id="E2", condition="babble_5db", transcript_text="Patient: um, um, a a cough."),
]


def test_rules_backend_is_extractor_plus_filter(
    tmp_path: Path, fake_rules: list[str], transcript: str, record: ClinicalRecord
) -> None:
    items = [ITEMS[0].model_copy(update={"transcript_text": transcript}), ITEMS[1]]
    envs = mitigate_many(items, LLMConfig(backend="rules"), cache_dir=tmp_path, log_dir=tmp_path)
    assert fake_rules == [
        items[0].transcript_text,
        items[1].transcript_text,
    ]  # raw text, not the cleaned view
    full, bare = envs
    # transcript 1 contains every quote of the sample record -> only non-quoted values are touched
    assert _ids(full.record) == _ids(record) and full.extra.quotes_discarded == 0
    assert full.extra.guard.startswith("none (rules backend")
    # transcript 2 contains none of them -> every high-stakes item is removed
    assert _ids(bare.record) == {"c1", "c3"}
    assert bare.extra.fields_total == 5 and bare.extra.fields_nulled == 3
    assert bare.extra.abstention_rate == 0.6 and full.extra.abstention_rate == 0.0
    assert bare.extra.quotes_discarded == bare.extra.quotes_total == 4
    assert full.prompt_hash == mitigation_fingerprint(LLMConfig(backend="rules"))["prompt_hash"]


def _role_stub(draft: ClinicalRecord, guard_out: dict) -> Reply:
    """Recorded Draft and Guard outputs (contract v2: quotes inside the items), told apart by the instruction."""

    def respond(body: dict) -> str:
        system = body["messages"][0]["content"]
        if "Guard role" in system:
            # The guard sees the draft exactly as produced, and the raw transcript
            assert "DRAFT record:" in body["messages"][1]["content"]
            return json.dumps(guard_out)
        assert "Draft role" in system and "CLEANED transcript" in body["messages"][1]["content"]
        return RecordOutput.from_record(draft).model_dump_json()

    return Reply(respond=respond)


def test_llm_backend_draft_guard_filter(tmp_path: Path, record: ClinicalRecord, transcript: str) -> None:
    # Recorded-style guard output: it drops c3, invents c9, and keeps the rest with their quotes.
    guard_out = RecordOutput.from_record(record).model_dump(mode="json")
    guard_out["claims"] = [c for c in guard_out["claims"] if c["id"] != "c3"] + [
        {"id": "c9", "category": "allergy", "concept": "latex", "status": "present", "evidence": ["allergic to latex"]}
    ]
    items = [ITEMS[0].model_copy(update={"transcript_text": transcript})]
    cfg = LLMConfig(
        backend="openai",
        concurrency=1,
        max_retries=0,
        server={"mode": "external", "base_url": "http://x", "model": "stub-model"},
    )
    with stub_server([_role_stub(record, guard_out)]) as srv:
        cfg = cfg.model_copy(update={"server": cfg.server.model_copy(update={"base_url": srv.base_url})})
        (env,) = mitigate_many(items, cfg, cache_dir=tmp_path, log_dir=tmp_path)
        assert len(srv.requests) == 2
        # second run: both calls cached
        (again,) = mitigate_many(items, cfg, cache_dir=tmp_path, log_dir=tmp_path)
        assert len(srv.requests) == 2 and again.record == env.record
    assert not env.failed
    assert _ids(env.record) == {"c1", "c2", "f1", "f2"}
    assert env.extra.guard_added_dropped == 1 and env.extra.guard_removed == 1
    assert env.extra.fields_total == 5 and env.extra.fields_nulled == 1
    assert env.extra.draft_record is not None
    assert env.extra.draft_record.model_dump(mode="json") == record.model_dump(mode="json")
    # the guard saw the draft JSON, in the schema it answers in (quotes inside the items)
    guard_req = srv.requests[1]["messages"][1]["content"]
    assert '"concept":"shortness of breath"' in guard_req
    assert '"evidence":["I take warfarin 5 mg daily"]' in guard_req


def test_llm_backend_guard_failure_is_recorded(tmp_path: Path, output_json: str) -> None:
    def respond(body: dict) -> str:
        return "{oops" if "Guard role" in body["messages"][0]["content"] else output_json

    cfg = LLMConfig(
        backend="openai",
        concurrency=1,
        max_retries=0,
        server={"mode": "external", "base_url": "http://x", "model": "stub-model"},
    )
    with stub_server([Reply(respond=respond)]) as srv:
        cfg = cfg.model_copy(update={"server": cfg.server.model_copy(update={"base_url": srv.base_url})})
        (env,) = mitigate_many([ITEMS[1]], cfg, cache_dir=tmp_path, log_dir=tmp_path)
    assert env.failed and env.record is None and env.error.startswith("guard: invalid JSON")
    assert env.raw_text == "{oops" and env.extra.stage == "guard"
