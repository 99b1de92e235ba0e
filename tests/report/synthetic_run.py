"""A seeded, realistic synthetic run directory for the report tests.

Real runs need TTS, Whisper and an LLM; the report only reads the run
directory, so the tests build one here with the layout the runner writes
(manifest.json, items.jsonl, summary.csv, records/, transcripts/), written through the models and writers the
runner uses (``RunManifest``, ``ItemScore`` rows, ``SummaryRow``s, ``RecordEnvelope``, ``Transcript``), so a
row the models would refuse cannot get into a test run (docs/run-format.md).

Each encounter is a short dialogue built from *facts* whose clean sentence an
ASR error can turn into one of the five trigger types. Whether a fact is
corrupted in a condition is decided by one uniform draw per (encounter,
family, fact) compared with a rate that grows as SNR falls, so a fact corrupted
at 15 dB stays corrupted at 10 and 5 dB — as with real noise, the SNR is the
only thing that changes between the conditions of a family. Records are
derived from the (possibly corrupted) facts, and every item-level metric is
computed from those records against the gold record, as docs/spec.md §6 defines them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jiwer
import numpy as np

from stresstest.asr.base import DecodingOptions
from stresstest.cache import atomic_write_json, atomic_write_text
from stresstest.grid import ConditionGrid
from stresstest.metrics.summary import summary_rows
from stresstest.pipeline.runner import _summary_csv
from stresstest.pipeline.score import extra_summary_columns
from stresstest.records import Transcript
from stresstest.results import MANIFEST_SCHEMA_VERSION, ItemScore, RunManifest, items_jsonl
from stresstest.schema import (
    CRITICAL_FLAG_KINDS,
    TRIAGE_LEVELS,
    Claim,
    ClinicalRecord,
    RecordEnvelope,
    SafetyFlag,
    Triage,
    flag_key,
)

# Bootstrap settings of the shared report fixture: enough for stable tests, fast on two cores.
REPORT_RESAMPLES = 200
REPORT_SEED = 5

TRIGGER_TYPES = (
    "negation_flip",
    "number_unit_conflict",
    "temporal_distortion",
    "nonspeech_pollution",
    "entity_substitution",
    "clinical_omission",
)
ClaimT = tuple[str, str, str, str | None, str | None, str | None]  # category, concept, status, value, unit, time
FlagT = tuple[str, str, str | None]  # kind, name, detail


@dataclass(frozen=True)
class Fact:
    """One clinically relevant sentence and what an ASR error does to it."""

    kind: str
    clean: str
    noisy: str
    ref_span: str
    hyp_span: str
    concept: str
    claim: ClaimT | None
    noisy_claim: ClaimT | None
    flag: FlagT | None = None
    noisy_flag: FlagT | None = None
    triage_shift: int = 0


FACTS: tuple[Fact, ...] = (
    Fact(
        "negation_flip",
        "I haven't had any chest pain.",
        "I have had any chest pain.",
        "haven't had",
        "have had",
        "chest pain",
        ("symptom", "chest pain", "absent", None, None, None),
        ("symptom", "chest pain", "present", None, None, None),
        None,
        ("red_flag", "chest pain", None),
        1,
    ),
    Fact(
        "negation_flip",
        "It looks a little red but I don't see that larger circular rash.",
        "It looks a little red but I see that larger circular rash.",
        "don't see",
        "see",
        "rash",
        ("finding", "circular rash", "absent", None, None, None),
        ("finding", "circular rash", "present", None, None, None),
    ),
    Fact(
        "negation_flip",
        "There's no blood in my stool.",
        "There's blood in my stool.",
        "no blood",
        "blood",
        "blood in stool",
        ("symptom", "blood in stool", "absent", None, None, None),
        ("symptom", "blood in stool", "present", None, None, None),
        None,
        ("red_flag", "rectal bleeding", None),
        1,
    ),
    Fact(
        "number_unit_conflict",
        "I can walk about 3 or 4 flights of stairs before I get breathless.",
        "I can walk about three or four steps before I get breathless.",
        "3 or 4 flights of stairs",
        "three or four steps",
        "exercise tolerance",
        ("finding", "exercise tolerance", "present", "3-4", "flights of stairs", None),
        ("finding", "exercise tolerance", "present", "3-4", "steps", None),
        None,
        None,
        1,
    ),
    Fact(
        "number_unit_conflict",
        "I take 5 mg of warfarin every evening.",
        "I take 50 mg of warfarin every evening.",
        "5 mg",
        "50 mg",
        "warfarin",
        ("medication", "warfarin", "present", "5", "mg", "every evening"),
        ("medication", "warfarin", "present", "50", "mg", "every evening"),
        ("high_risk_medication", "warfarin", "5 mg"),
        ("high_risk_medication", "warfarin", "50 mg"),
    ),
    Fact(
        "number_unit_conflict",
        "My temperature was 38.5 this morning.",
        "My temperature was 35.8 this morning.",
        "38.5",
        "35.8",
        "temperature",
        ("vital", "temperature", "present", "38.5", "C", "this morning"),
        ("vital", "temperature", "present", "35.8", "C", "this morning"),
        None,
        None,
        -1,
    ),
    Fact(
        "temporal_distortion",
        "The pain has been really intense for the last two hours.",
        "The pain has been really intense for the last two days.",
        "two hours",
        "two days",
        "abdominal pain",
        ("symptom", "abdominal pain", "present", "severe", None, "2 hours"),
        ("symptom", "abdominal pain", "present", "severe", None, "2 days"),
        None,
        None,
        -1,
    ),
    Fact(
        "temporal_distortion",
        "The headache came on suddenly about ten minutes ago.",
        "The headache came on suddenly about ten days ago.",
        "ten minutes",
        "ten days",
        "headache",
        ("symptom", "headache", "present", "sudden", None, "10 minutes"),
        ("symptom", "headache", "present", "sudden", None, "10 days"),
        ("red_flag", "thunderclap headache", None),
        None,
        -1,
    ),
    Fact(
        "temporal_distortion",
        "I've been coughing for three days.",
        "I've been coughing for three weeks.",
        "three days",
        "three weeks",
        "cough",
        ("symptom", "cough", "present", None, None, "3 days"),
        ("symptom", "cough", "present", None, None, "3 weeks"),
    ),
    Fact(
        "entity_substitution",
        "I'm allergic to penicillin, it gives me hives.",
        "I'm allergic to cephalexin, it gives me hives.",
        "penicillin",
        "cephalexin",
        "penicillin",
        ("allergy", "penicillin", "present", None, None, None),
        ("allergy", "cephalexin", "present", None, None, None),
        ("allergy", "penicillin", "hives"),
        ("allergy", "cephalexin", "hives"),
    ),
    Fact(
        "entity_substitution",
        "I use a salbutamol inhaler when I'm wheezy.",
        "I use a salmeterol inhaler when I'm wheezy.",
        "salbutamol",
        "salmeterol",
        "salbutamol",
        ("medication", "salbutamol", "present", None, None, "as needed"),
        ("medication", "salmeterol", "present", None, None, "as needed"),
    ),
    Fact(
        "entity_substitution",
        "I was started on metoprolol last month.",
        "I was started on metformin last month.",
        "metoprolol",
        "metformin",
        "metoprolol",
        ("medication", "metoprolol", "present", None, None, "last month"),
        ("medication", "metformin", "present", None, None, "last month"),
        ("current_medication", "metoprolol", None),
        ("current_medication", "metformin", None),
    ),
)

# Background-talker utterances that babble can inject into the transcript.
POLLUTION: tuple[Fact, ...] = (
    Fact(
        "nonspeech_pollution",
        "",
        "Have you noticed blood in your stool at all? I take metformin.",
        "",
        "I take metformin",
        "metformin",
        None,
        ("medication", "metformin", "present", None, None, None),
        None,
        ("current_medication", "metformin", None),
    ),
    Fact(
        "nonspeech_pollution",
        "",
        "I'm on warfarin since my valve surgery.",
        "",
        "I'm on warfarin",
        "warfarin",
        None,
        ("medication", "warfarin", "present", None, None, None),
        None,
        ("high_risk_medication", "warfarin", None),
        1,
    ),
    Fact(
        "nonspeech_pollution",
        "",
        "Sometimes I feel like I want to hurt myself.",
        "",
        "I want to hurt myself",
        "self-harm",
        None,
        ("symptom", "self-harm ideation", "present", None, None, None),
        None,
        ("self_harm_risk", "self-harm ideation", None),
        2,
    ),
)

FILLER = (
    "Good morning, what brings you in today?",
    "Okay, and when did this start?",
    "Any other medical problems I should know about?",
    "It's been bothering me quite a lot.",
    "Do you smoke or drink alcohol?",
    "I stopped smoking five years ago.",
    "Your oxygen was < 92% on arrival & we gave you some.",
    "Thank you, let me examine you now.",
    "Is there anything else you're worried about?",
    "Not really, I just want it sorted.",
)
NOISE_WORDS = ("yeah", "the", "uh", "and", "so", "right", "okay", "is")

FLAT_P = {"clean": 0.04, 15: 0.15, 10: 0.3, 5: 0.5}
WORD_Q = {"ambient": {15: 0.02, 10: 0.03, 5: 0.05}, "babble": {15: 0.04, 10: 0.08, 5: 0.15}}
POLLUTION_P = {15: 0.15, 10: 0.35, 5: 0.6}


def default_conditions(mitigation: bool = True) -> list[dict[str, Any]]:
    """The paper's grid: clean, babble and ambient at 15/10/5 dB, guard at 5 dB."""
    conds: list[dict[str, Any]] = [{"condition": "clean", "family": "clean", "snr_db": None, "mitigated": False}]
    for fam in ("babble", "ambient"):
        for snr in (15, 10, 5):
            conds.append({"condition": f"{fam}_{snr}db", "family": fam, "snr_db": float(snr), "mitigated": False})
    if mitigation:
        for fam in ("babble", "ambient"):
            conds.append({"condition": f"{fam}_5db_guard", "family": fam, "snr_db": 5.0, "mitigated": True})
    return conds


def _claims(cs: list[ClaimT]) -> list[Claim]:
    return [
        Claim(id=f"c{i + 1}", category=c[0], concept=c[1], status=c[2], value=c[3], unit=c[4], time=c[5])
        for i, c in enumerate(cs)
    ]  # type: ignore[arg-type]


def _flags(fs: list[FlagT]) -> list[SafetyFlag]:
    return [SafetyFlag(id=f"f{i + 1}", kind=f[0], name=f[1], detail=f[2]) for i, f in enumerate(fs)]  # type: ignore[arg-type]


def _record(claims: list[ClaimT], flags: list[FlagT], triage: int) -> ClinicalRecord:
    return ClinicalRecord(
        triage=Triage(level=TRIAGE_LEVELS[triage], rationale="synthetic"),  # type: ignore[arg-type]
        claims=_claims(claims),
        safety_flags=_flags(flags),
    )


def _crit(flags: list[FlagT]) -> set[str]:
    return {flag_key(f) for f in _flags(flags) if f.kind in CRITICAL_FLAG_KINDS}


def _jitter(text: str, q: float, family: str, rng: np.random.Generator) -> str:
    out: list[str] = []
    for w in text.split():
        u = rng.random()
        if u < q / 3:
            continue  # deletion
        if u < 2 * q / 3:
            out.append(str(rng.choice(NOISE_WORDS)))  # substitution
            continue
        out.append(w)
        if u > 1 - q / 3 and family == "babble":
            out.append(str(rng.choice(NOISE_WORDS)))  # insertion
    return " ".join(out)


def _norm(text: str) -> str:
    return " ".join("".join(ch.lower() if ch.isalnum() or ch in " .'" else " " for ch in text).split())


def make_run(  # noqa: C901 - one linear recipe reads better than many small helpers here
    run_dir: Path,
    *,
    n_encounters: int = 14,
    seed: int = 7,
    with_judge: bool = True,
    mitigation: bool = True,
    failed: tuple[tuple[str, str], ...] = (("enc003", "babble_10db"),),
    asr_model: str = "whisper-small.en",
    write_summary: bool = True,
) -> Path:
    """Write a synthetic run directory and return it.

    Args:
        run_dir: where to write (created).
        n_encounters: number of dialogues.
        seed: everything random derives from it.
        with_judge: False leaves ``judge_score`` uncomputed (None) everywhere.
        mitigation: include the ``*_5db_guard`` conditions.
        failed: (encounter, condition) pairs whose structuring failed.
        asr_model: recorded in the manifest (compare tests vary it).
        write_summary: False omits summary.csv.
    """
    rng = np.random.default_rng(seed)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    conds = default_conditions(mitigation)
    items: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    for e in range(n_encounters):
        eid = f"enc{e:03d}"
        erng = np.random.default_rng([seed, e])
        facts = [FACTS[i] for i in sorted(erng.choice(len(FACTS), size=int(erng.integers(3, 6)), replace=False))]
        fillers = [FILLER[i] for i in erng.choice(len(FILLER), size=4, replace=False)]
        gold_triage = int(erng.integers(0, 3))
        clean_base = gold_triage - (1 if erng.random() < 0.15 and gold_triage > 0 else 0)
        u = {fam: erng.random(len(facts)) for fam in ("babble", "ambient")}
        u_clean = erng.random(len(facts))
        u_poll = erng.random(len(POLLUTION))
        poll_pos = erng.integers(0, 4, size=len(POLLUTION))
        jitter_seed = int(erng.integers(0, 2**31))
        reference_text = " ".join(fillers[:2] + [f.clean for f in facts] + fillers[2:])
        gold_claims = [f.claim for f in facts if f.claim]
        gold_flags = [f.flag for f in facts if f.flag]
        gold_crit = _crit(gold_flags)
        gold_claim_set = set(gold_claims)

        def render(
            family: str,
            snr: float | None,
            *,
            _facts: list[Fact] = facts,
            _fillers: list[str] = fillers,
            _u: dict[str, np.ndarray] = u,
            _uc: np.ndarray = u_clean,
            _up: np.ndarray = u_poll,
            _pp: np.ndarray = poll_pos,
            _js: int = jitter_seed,
        ) -> tuple[str, list[Fact], list[Fact]]:
            corrupted = [
                f
                for k, f in enumerate(_facts)
                if _uc[k] < FLAT_P["clean"] or (snr is not None and _u[family][k] < FLAT_P[int(snr)])
            ]
            polluted = (
                [p for k, p in enumerate(POLLUTION) if _up[k] < POLLUTION_P[int(snr)]]
                if family == "babble" and snr is not None
                else []
            )
            jr = np.random.default_rng([_js, 0 if snr is None else int(snr), 1 if family == "babble" else 2])
            q = 0.01 if snr is None else WORD_Q[family][int(snr)]
            fill = [_jitter(s, q, family, jr) for s in _fillers]
            body = [f.noisy if f in corrupted else f.clean for f in _facts]
            sents = fill[:2] + body + fill[2:]
            for k, p in enumerate(POLLUTION):
                if p in polluted:
                    sents.insert(min(int(_pp[k]) + 2, len(sents)), p.noisy)
            return " ".join(sents), corrupted, polluted

        def state(
            corrupted: list[Fact],
            polluted: list[Fact],
            guard: bool,
            _facts: list[Fact] = facts,
            _base: int = clean_base,
        ) -> tuple[list[ClaimT], list[FlagT], int]:
            claims: list[ClaimT] = []
            flags: list[FlagT] = []
            shift = 0
            for f in _facts:
                bad = f in corrupted
                c = f.noisy_claim if bad else f.claim
                fl = f.noisy_flag if bad else f.flag
                if c:
                    claims.append(c)
                if fl:
                    flags.append(fl)
                shift += f.triage_shift if bad else 0
            for p in polluted:
                if guard:
                    continue  # the guard finds no clean-speech evidence and abstains
                if p.noisy_claim:
                    claims.append(p.noisy_claim)
                if p.noisy_flag:
                    flags.append(p.noisy_flag)
                shift += p.triage_shift
            return claims, flags, max(0, min(2, _base + shift))

        clean_text, clean_corr, _ = render("clean", None)
        clean_claims, clean_flags, clean_t = state(clean_corr, [], False)
        clean_E = None
        clean_err = set(clean_claims) ^ gold_claim_set
        clean_dg = _crit(clean_flags) - gold_crit
        for cond in conds:
            name, fam, snr = cond["condition"], cond["family"], cond["snr_db"]
            if fam == "clean":
                text, corr, poll = clean_text, clean_corr, []
            else:
                text, corr, poll = render(fam, snr)
            claims, flags, t = state(corr, poll, bool(cond["mitigated"]))
            wo = jiwer.process_words(_norm(reference_text), _norm(text))
            E = wo.substitutions + wo.deletions + wo.insertions
            if clean_E is None:
                clean_E = E
            err = set(claims) ^ gold_claim_set
            dg = _crit(flags) - gold_crit
            judge = 5
            if err:
                judge = 4 if len(err) <= 2 else 3
            if t < gold_triage:
                judge = min(judge, 2)
            if dg:
                judge = 1 if len(dg) > 1 else min(judge, 2)
            record_rel = f"records/{name}/{eid}.json"
            tr_rel = f"transcripts/{name}/{eid}.json"
            is_failed = (eid, name) in failed
            env = RecordEnvelope(
                encounter_id=eid,
                condition=name,
                backend="rules",
                model="synthetic-structurer",
                prompt_hash="p" * 64,
                schema_hash="s" * 64,
                decoding={"temperature": 0.0, "seed": 0},
                transcript_sha256="0" * 64,
                record=None if is_failed else _record(claims, flags, t),
                failed=is_failed,
                error="structure: the model output was not valid JSON after 3 attempts" if is_failed else None,
                extra={"mitigation": True} if cond["mitigated"] else {},
            )
            atomic_write_json(run_dir / record_rel, env.model_dump(mode="json"))
            transcript = Transcript.model_validate(
                {
                    "encounter_id": eid,
                    "condition": name,
                    "text": text,
                    "backend": "faster-whisper",
                    "model": asr_model,
                    "decoding": DecodingOptions().model_dump(mode="json"),
                    "audio_sha256": "0" * 64,
                }
            )
            atomic_write_json(run_dir / tr_rel, transcript.model_dump(mode="json"))
            trig_ref = dict.fromkeys(TRIGGER_TYPES, 0)
            for f in corr + poll:
                trig_ref[f.kind] += 1
            events = (
                []
                if fam == "clean"
                else [
                    {
                        "type": f.kind,
                        "ref_span": f.ref_span,
                        "hyp_span": f.hyp_span,
                        "concept": f.concept,
                        "explanation": f"{f.kind.replace('_', ' ')}: '{f.ref_span}' -> '{f.hyp_span}'",
                        # offsets that point nowhere: the report finds the spans in the texts
                        "ref_start": 0,
                        "ref_end": 0,
                        "hyp_start": 0,
                        "hyp_end": 0,
                    }
                    for f in facts + list(poll)
                    if (f in corr and f not in clean_corr) or f in poll
                ]
            )
            row: dict[str, Any] = {
                "encounter_id": eid,
                "condition": name,
                "family": fam,
                "snr_db": snr,
                "target_snr_db": snr,
                "measured_snr_db": None if snr is None else round(snr + float(rng.normal(0, 0.02)), 3),
                "reference_text": reference_text,
                "hypothesis_text": text,
                "audio_path": f"audio/{name}/{eid}.wav",
                "transcript_path": tr_rel,
                "record_path": record_rel,
                "scores_path": f"scores/{name}/{eid}.json",
                "failed": is_failed,
                "error": env.error,
                "mitigated": bool(cond["mitigated"]),
                "asr_sub": wo.substitutions,
                "asr_del": wo.deletions,
                "asr_ins": wo.insertions,
                "ref_words": len(_norm(reference_text).split()),
                "neg_err": int(any(f.kind == "negation_flip" for f in corr)),
                "item_wer": 100.0 * E / len(_norm(reference_text).split()),
                "trigger_counts": trig_ref,
                "triggers_vs_clean": events,
                "triage": TRIAGE_LEVELS[t],
                "triage_clean": TRIAGE_LEVELS[clean_t],
                "triage_gold": TRIAGE_LEVELS[gold_triage],
                "triage_match": int(t == clean_t),
                "under_triage_new": int(t < gold_triage and not clean_t < gold_triage),
                "scer_new": int(bool(dg - clean_dg)),
                "new_critical_flags": sorted(dg - clean_dg),
                "err_new": None if fam == "clean" else len(err - clean_err),
                "asr_delta_e": None if fam == "clean" else max(0, E - clean_E),
                "judge_score": judge if with_judge else None,
                "judge": {"model": "synthetic-judge", "score": judge} if with_judge else None,
            }
            if cond["mitigated"]:
                row["abstention_rate"] = round(float(rng.uniform(0.02, 0.2)), 3)
                row["quotes_discarded"] = int(rng.integers(0, 4))
            if is_failed:
                for k in ("triage_match", "under_triage_new", "scer_new", "err_new", "judge_score"):
                    row[k] = None
                failures.append({"encounter_id": eid, "condition": name, "stage": "structure", "error": env.error})
            items.append(row)
    scored = [ItemScore.model_validate(row) for row in items]
    atomic_write_text(run_dir / "items.jsonl", items_jsonl(scored))
    if write_summary:
        grid = ConditionGrid.from_json(conds)
        rows = extra_summary_columns(scored, summary_rows(scored, grid))
        atomic_write_text(run_dir / "summary.csv", _summary_csv(rows))
    manifest = RunManifest.model_validate(
        {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "run_id": f"synthetic-{seed}",
            "created": "2026-11-30T10:00:00Z",
            "stresstest_version": "0.1.0",
            "seed": seed,
            "corpus": {
                "kind": "osce",
                "path": "corpora/synthetic",
                "n_encounters": n_encounters,
                "encounter_ids": [f"enc{e:03d}" for e in range(n_encounters)],
            },
            "asr": {
                "backend": "faster-whisper",
                "model": asr_model,
                "decoding": {"temperature": 0.0, "beam_size": 1, "language": "en"},
            },
            "structure": {
                "backend": "rules",
                "model": "synthetic-structurer",
                "prompt_hash": "p" * 64,
                "schema_hash": "s" * 64,
                "decoding": {"temperature": 0.0, "seed": 0},
            },
            "judge": {"backend": "openai", "model": "synthetic-judge"} if with_judge else None,
            "conditions": conds,
            "failures": failures,
            "stage_seconds": {"speech": 12.5, "mix": 3.25, "asr": 140.0, "structure": 88.0, "score": 6.0},
            "noise": {
                "ambient": {"family": "ambient", "kind": "builtin"},
                "babble": {"family": "babble", "kind": "builtin"},
            },
        }
    )
    atomic_write_json(run_dir / "manifest.json", manifest.to_json())
    atomic_write_text(run_dir / "config.resolved.yaml", f"seed: {seed}\n")
    return run_dir
