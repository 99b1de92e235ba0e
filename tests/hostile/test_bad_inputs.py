"""Hostile but fair input, through the real CLI in a subprocess (docs/spec.md §10; docs/reliability.md).

Every case asserts: exit status 2, exactly ONE line on stderr of the form
``stresstest: error: ...`` naming what to fix (an expected substring: the file,
line, key or option), no traceback, and nothing written outside the run
directory and the cache directory — ``$HOME`` is a fresh empty folder and stays
empty, the working directory stays empty, the inputs are not touched.

The cases are built first, then run by two driver processes (``driver.py``:
one import, a fresh HOME/cache/cwd per case, fd 2 captured), so ~90
invocations take seconds rather than minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]

OSCE_TXT = "D: Good morning, what brings you in today?\nP: I have had chest pain since last night.\n"


@dataclass
class Case:
    """One bad input: ``build(root)`` writes inputs under ``root/in`` and returns (argv, expected substring)."""

    name: str
    build: Callable[[Path], tuple[list[str], str]]


# ------------------------------------------------------------------------------------------------ input helpers


def _osce(root: Path) -> Path:
    d = root / "in" / "osce"
    d.mkdir(parents=True, exist_ok=True)
    (d / "CAR0001.txt").write_text(OSCE_TXT)
    return d


def _cfg(root: Path, body: str, name: str = "cfg.yaml", corpus: str | None = None) -> Path:
    """A config file; ``{corpus}`` in ``body`` becomes a working OSCE corpus block."""
    p = root / "in" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    block = corpus or f"corpus: {{kind: osce, path: {_osce(root)}}}"
    p.write_text(body.replace("{corpus}", block))
    return p


def _run(root: Path, body: str, **kw: str) -> list[str]:
    return ["run", str(_cfg(root, body, **kw)), "--out", str(root / "out" / "run")]


def _wav(path: Path, x: np.ndarray, sr: int = 16000) -> Path:
    import soundfile as sf

    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), x, sr, subtype="PCM_16")
    return path


def _speech(root: Path, name: str = "speech.wav") -> Path:
    t = np.arange(16000 * 2) / 16000
    x = (0.3 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 1.5 * t) > 0)).astype(np.float32)
    return _wav(root / "in" / name, x)


def _noise(root: Path) -> Path:
    return _wav(root / "in" / "noise.wav", (0.1 * np.random.default_rng(0).standard_normal(48000)).astype(np.float32))


def _truncated(root: Path, name: str = "trunc.wav") -> Path:
    p = _speech(root, "full_" + name)
    b = p.read_bytes()
    out = root / "in" / name
    out.write_bytes(b[: len(b) // 2])
    return out


def _manifest(root: Path, entries: list[object], audio: bool = True) -> Path:
    if audio:
        _speech(root, "rec.wav")
    p = root / "in" / "manifest.jsonl"
    p.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries))
    return p


def _man_cfg(root: Path, entries: list[object], extra: str = "", audio: bool = True) -> list[str]:
    m = _manifest(root, entries, audio)
    max_turns = ""
    if extra.startswith("corpus_max: "):  # corpus.max_turns, which lives in the corpus block
        max_turns, extra = f", max_turns: {extra.split()[1]}", ""
    return _run(
        root,
        "{corpus}\nnoise: {ambient: {family: ambient, kind: builtin}}\nsnr_db: [5]\n" + extra,
        corpus=f"corpus: {{kind: manifest, path: {m}{max_turns}}}",
    )


def _entry(eid: object, **kw: object) -> dict[str, object]:
    e: dict[str, object] = {"encounter_id": eid, "audio": "rec.wav", "reference_text": "chest pain since last night"}
    e.update(kw)
    return e


def _timed(eid: str, turns: list[dict[str, object]]) -> dict[str, object]:
    """A manifest entry whose reference is its (possibly timed) turns."""
    return {"encounter_id": eid, "audio": "rec.wav", "turns": turns}


def _aci(root: Path, text: str) -> list[str]:
    p = root / "in" / "aci.csv"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return _run(root, "{corpus}\n", corpus=f"corpus: {{kind: aci-bench, path: {p}}}")


def _run_dir(
    root: Path, name: str, conditions: list[str], items: str | None = None, manifest: str | None = None
) -> Path:
    """A minimal finished run directory (manifest.json + items.jsonl) for report/compare cases."""
    d = root / "out" / name
    d.mkdir(parents=True, exist_ok=True)
    conds = [
        {
            "condition": c,
            "family": "clean" if c == "clean" else c.split("_")[0],
            "snr_db": None if c == "clean" else 5.0,
            "mitigated": False,
        }
        for c in conditions
    ]
    (d / "manifest.json").write_text(
        manifest if manifest is not None else json.dumps({"run_id": name, "conditions": conds, "failures": []})
    )
    rows = (
        items
        if items is not None
        else "".join(
            json.dumps(
                {
                    "encounter_id": "E1",
                    "condition": c,
                    "failed": False,
                    "ref_words": 5,
                    "asr_sub": 1,
                    "asr_del": 0,
                    "asr_ins": 0,
                }
            )
            + "\n"
            for c in conditions
        )
    )
    (d / "items.jsonl").write_text(rows)
    return d


def _extends(root: Path, child: str, base: str = "") -> list[str]:
    """``child.yaml`` extending ``base.yaml`` (a working config plus ``base``); child's keys start on line 2."""
    _cfg(root, "{corpus}\n" + base, name="base.yaml")
    return _run(root, "extends: base.yaml\n" + child, name="child.yaml")


def _text(root: Path, name: str, data: bytes) -> Path:
    p = root / "in" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


BOMB = (
    "\n".join(
        ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
        + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    )
    + "\n{corpus}\n"
)

# ------------------------------------------------------------------------------------------------ the cases

CASES: list[Case] = [
    # --- config file: existence, kind, encoding, YAML
    Case(
        "config_missing",
        lambda r: (
            ["run", str(r / "in" / "nope.yaml"), "--out", str(r / "out" / "run")],
            "nope.yaml: config file not found",
        ),
    ),
    Case("config_is_directory", lambda r: (["run", str(_osce(r)), "--out", str(r / "out" / "run")], "is a directory")),
    Case(
        "config_binary",
        lambda r: (
            ["run", str(_text(r, "c.yaml", b"\x7fELF\x00\x01\x02" * 40)), "--out", str(r / "out" / "run")],
            "binary data",
        ),
    ),
    Case(
        "config_latin1",
        lambda r: (
            ["run", str(_text(r, "c.yaml", "corpus: caf\xe9\n".encode("latin-1"))), "--out", str(r / "out" / "run")],
            "UTF-8",
        ),
    ),
    Case("config_bad_yaml", lambda r: (_run(r, "{corpus}\nsnr_db: [5, 10\n"), "cfg.yaml:")),
    Case("config_top_level_list", lambda r: (_run(r, "- a\n- b\n"), "expected a mapping")),
    Case("config_empty", lambda r: (_run(r, ""), "corpus")),
    Case("config_unknown_key", lambda r: (_run(r, "{corpus}\nsnr_dbs: [5]\n"), "cfg.yaml:2: snr_dbs: unknown key")),
    Case("config_unknown_nested_key", lambda r: (_run(r, "{corpus}\nrun:\n  sed: 3\n"), "cfg.yaml:3: run.sed")),
    Case("config_seed_bool", lambda r: (_run(r, "{corpus}\nrun:\n  seed: true\n"), "cfg.yaml:3: run.seed")),
    Case("config_seed_string", lambda r: (_run(r, "{corpus}\nrun:\n  seed: '12'\n"), "run.seed")),
    Case(
        "config_duplicate_key",
        lambda r: (_run(r, "{corpus}\nsnr_db: [5]\nsnr_db: [10]\n"), "cfg.yaml:3: duplicate key 'snr_db'"),
    ),
    Case(
        "config_duplicate_nested_key",
        lambda r: (_run(r, "{corpus}\nrun:\n  seed: 1\n  seed: 2\n"), "cfg.yaml:4: duplicate key 'seed'"),
    ),
    Case("config_alias_bomb", lambda r: (_run(r, BOMB), "alias bomb")),
    Case("config_recursive_alias", lambda r: (_run(r, "{corpus}\nx: &x [*x]\n"), "recursive")),
    Case("config_too_large", lambda r: (_run(r, "{corpus}\n# " + "x" * 2_100_000 + "\n"), "bytes")),
    Case(
        "config_max_failures_negative", lambda r: (_run(r, "{corpus}\nrun: {max_failures: -1}\n"), "run.max_failures")
    ),
    Case("config_progress_not_bool", lambda r: (_run(r, "{corpus}\nrun: {progress: 'yes'}\n"), "run.progress")),
    Case(
        "babble_bank_missing_id",
        lambda r: (
            _run(
                r, "{corpus}\nnoise:\n  babble: {family: babble, kind: builtin, bank_encounters: [CAR0001, RES9999]}\n"
            ),
            "bank_encounters: ['RES9999'] not found in the corpus folder",
        ),
    ),
    # --- extends: validated like a plain config, errors name the file that set the key (issue 25)
    Case("extends_seed_string", lambda r: (_extends(r, "run:\n  seed: '12'\n"), "child.yaml:3: run.seed")),
    Case("extends_unknown_key", lambda r: (_extends(r, "snr_dbs: [5]\n"), "child.yaml:2: snr_dbs: unknown key")),
    Case(
        "extends_base_error_names_the_base",
        lambda r: (_extends(r, "snr_db: [5]\n", base="run: {seed: true}\n"), "base.yaml:2: run.seed"),
    ),
    # --- any path or name: a NUL character is a user error naming the key, never "internal error"
    Case(
        "config_nul_in_path",
        lambda r: (
            _run(r, 'corpus: {kind: osce, path: "in\\0put"}\n'),
            "cfg.yaml:1: corpus.path: contains a NUL character",
        ),
    ),
    Case(
        "config_nul_in_cache_dir",
        lambda r: (_run(r, '{corpus}\nrun:\n  cache_dir: "c\\0"\n'), "cfg.yaml:3: run.cache_dir: contains a NUL"),
    ),
    Case(
        "config_corpus_id_too_long",
        lambda r: (
            _run(r, f"corpus: {{kind: osce, path: {_osce(r)}, ids: [{'x' * 201}]}}\n"),
            "cfg.yaml:1: corpus.ids",
        ),
    ),
    Case(
        "config_corpus_id_traversal",
        lambda r: (_run(r, f"corpus: {{kind: osce, path: {_osce(r)}, ids: ['../x']}}\n"), "path separator"),
    ),
    # --- the SNR grid
    Case("snr_negative_zero_is_zero", lambda r: (_run(r, "{corpus}\nsnr_db: [-0.0, 0]\n"), "SNR 0 dB appears twice")),
    Case("snr_empty", lambda r: (_run(r, "{corpus}\nsnr_db: []\n"), "cfg.yaml:2: snr_db: expected at least one")),
    Case("snr_nan", lambda r: (_run(r, "{corpus}\nsnr_db: [.nan]\n"), "snr_db.0: expected a finite number")),
    Case("snr_inf", lambda r: (_run(r, "{corpus}\nsnr_db: [5, .inf]\n"), "snr_db.1: expected a finite number")),
    Case("snr_duplicate", lambda r: (_run(r, "{corpus}\nsnr_db: [5, 5.0]\n"), "appears twice")),
    Case("snr_out_of_range", lambda r: (_run(r, "{corpus}\nsnr_db: [200]\n"), "between -20 and 50 dB")),
    Case("snr_not_a_list", lambda r: (_run(r, "{corpus}\nsnr_db: '5'\n"), "snr_db")),
    Case("snr_string_items", lambda r: (_run(r, "{corpus}\nsnr_db: ['5']\n"), "snr_db.0")),
    # --- every number has a domain, checked at load with key and line (issue 37)
    Case(
        "asr_window_negative",
        lambda r: (_run(r, "{corpus}\nasr:\n  decoding: {window_s: -30}\n"), "cfg.yaml:3: asr.decoding.window_s"),
    ),
    Case(
        "asr_window_zero",
        lambda r: (_run(r, "{corpus}\nasr:\n  decoding: {window_s: 0}\n"), "cfg.yaml:3: asr.decoding.window_s"),
    ),
    Case(
        "asr_temperature_nan",
        lambda r: (
            _run(r, "{corpus}\nasr:\n  decoding:\n    temperature: .nan\n"),
            "cfg.yaml:4: asr.decoding.temperature: expected a finite number",
        ),
    ),
    Case(
        "llm_temperature_nan",
        lambda r: (
            _run(r, "{corpus}\nstructure:\n  decoding: {temperature: .nan}\n"),
            "cfg.yaml:3: structure.decoding.temperature: expected a finite number",
        ),
    ),
    Case(
        "room_dim_nan",
        lambda r: (
            _run(r, "{corpus}\nchains:\n  conditions:\n    r: [{room: {rt60_s: 0.3, room_dim_m: [.nan, 5, 3]}}]\n"),
            "expected a finite number",
        ),
    ),
    Case(
        "room_dim_inf",
        lambda r: (
            _run(r, "{corpus}\nchains:\n  conditions:\n    r: [{room: {rt60_s: 0.3, room_dim_m: [6, .inf, 3]}}]\n"),
            "expected a finite number",
        ),
    ),
    Case(
        "room_small_with_long_rt60",
        lambda r: (
            _run(
                r,
                "{corpus}\nchains:\n  conditions:\n    r: [{room: "
                "{rt60_s: 3.0, distance_m: 0.5, room_dim_m: [2, 2, 2]}}]\n",
            ),
            "needs image sources up to order 727",
        ),
    ),
    Case("tail_s_huge", lambda r: (_run(r, "{corpus}\nspeech:\n  tail_s: 1.0e+7\n"), "cfg.yaml:3: speech.tail_s")),
    Case(
        "tail_s_yaml11_exponent",
        lambda r: (
            _run(r, "{corpus}\nspeech:\n  tail_s: 1.0e7\n"),
            "cfg.yaml:3: speech.tail_s: Input should be less than or equal to 60",
        ),
    ),
    Case(
        "ir_missing",
        lambda r: (
            _run(r, "{corpus}\nsnr_db: []\nchains:\n  conditions:\n    r: [{room: {ir: no-such-ir.wav}}]\n"),
            "impulse response not found",
        ),
    ),
    Case(
        "ir_not_audio",
        lambda r: (
            _run(
                r,
                "{corpus}\nsnr_db: []\nchains:\n  conditions:\n    r: [{room: "
                f"{{ir: {_text(r, 'ir.wav', b'not a wav file')}}}}}]\n",
            ),
            "cannot read the impulse response",
        ),
    ),
    Case("gold_path_missing", lambda r: (_run(r, "{corpus}\ngold: {path: no-gold-here}\n"), "gold.path")),
    # --- other sections
    Case(
        "n_resamples_unbounded",
        lambda r: (_run(r, "{corpus}\nreport: {n_resamples: 1000000000000}\n"), "report.n_resamples"),
    ),
    Case("n_resamples_too_small", lambda r: (_run(r, "{corpus}\nreport: {n_resamples: 10}\n"), "report.n_resamples")),
    Case("corpus_kind_unknown", lambda r: (_run(r, "corpus: {kind: mimic, path: x}\n"), "corpus.kind")),
    Case("corpus_missing", lambda r: (_run(r, "snr_db: [5]\n"), "corpus")),
    Case("corpus_path_missing", lambda r: (_run(r, "corpus: {kind: osce, path: nowhere}\n"), "nowhere")),
    Case(
        "corpus_limit_zero",
        lambda r: (_run(r, f"corpus: {{kind: osce, path: {_osce(r)}, limit: 0}}\n"), "corpus.limit"),
    ),
    Case(
        "corpus_unknown_id", lambda r: (_run(r, f"corpus: {{kind: osce, path: {_osce(r)}, ids: [XYZ9]}}\n"), "'XYZ9'")
    ),
    Case(
        "mitigation_not_in_grid",
        lambda r: (
            _run(
                r,
                "{corpus}\nnoise: {ambient: {family: ambient, kind: builtin}}\n"
                "snr_db: [5]\nmitigation: {conditions: [babble_5db]}\n",
            ),
            "mitigation",
        ),
    ),
    Case("mitigation_bad_id", lambda r: (_run(r, "{corpus}\nmitigation: {conditions: ['../x']}\n"), "'../x'")),
    Case(
        "noise_unknown_family",
        lambda r: (_run(r, "{corpus}\nnoise: {traffic: {family: ambient, kind: builtin}}\n"), "noise"),
    ),
    # --- the run directory
    Case(
        "out_is_a_file",
        lambda r: (
            ["run", str(_cfg(r, "{corpus}\n")), "--out", str(_text(r, "../out/afile", b"x"))],
            "exists and is not a directory",
        ),
    ),
    Case(
        "out_is_the_cache",
        lambda r: (["run", str(_cfg(r, "{corpus}\n")), "--out", str(r / "cache")], "is the cache directory"),
    ),
    Case(
        "out_in_a_user_folder",
        lambda r: (
            [
                "run",
                str(_cfg(r, "{corpus}\n")),
                "--out",
                str(_text(r, "project/records/clean/CAR0001.json", b"{}").parents[2]),
            ],
            "is not a stresstest run directory",
        ),
    ),
    Case(
        "out_inside_the_corpus",
        lambda r: (["run", str(_cfg(r, "{corpus}\n")), "--out", str(_osce(r) / "run")], "inside the input corpus.path"),
    ),
    Case(
        "out_under_a_file",
        lambda r: (
            ["run", str(_cfg(r, "{corpus}\n")), "--out", str(_text(r, "../out/afile", b"x") / "run")],
            "is a file",
        ),
    ),
    # --- corpora: OSCE
    Case(
        "osce_path_is_a_file",
        lambda r: (
            _run(r, "{corpus}\n", corpus=f"corpus: {{kind: osce, path: {_text(r, 'x.txt', OSCE_TXT.encode())}}}"),
            "is a file",
        ),
    ),
    Case("osce_empty_folder", lambda r: (_osce_run(r, None, None), "found none")),
    Case("osce_bad_first_line", lambda r: (_osce_run(r, "X1.txt", b"hello\n"), "X1.txt:1:")),
    Case("osce_control_char_name", lambda r: (_osce_run(r, "A\x01B.txt", OSCE_TXT.encode()), "control character")),
    Case("osce_not_utf8", lambda r: (_osce_run(r, "X2.txt", b"D: caf\xe9 au lait\nP: no\n"), "X2.txt")),
    # --- corpora: ACI-BENCH
    Case(
        "aci_wrong_header_not_echoed",
        lambda r: (_aci(r, "SECRET-PATIENT-NAME,foo\n1,2\n"), "aci.csv:1: expected a header row"),
    ),
    Case(
        "aci_id_traversal",
        lambda r: (
            _aci(r, "dataset,encounter_id,dialogue,note\naci,../../evil,[doctor] hi,n\n"),
            "aci.csv:2: encounter_id '../../evil' cannot be used as a file name",
        ),
    ),
    Case(
        "aci_id_absolute",
        lambda r: (_aci(r, "dataset,encounter_id,dialogue,note\naci,/tmp/evil,[doctor] hi,n\n"), "aci.csv:2:"),
    ),
    Case(
        "aci_id_dotdot",
        lambda r: (_aci(r, "dataset,encounter_id,dialogue,note\naci,..,[doctor] hi,n\n"), "directory reference"),
    ),
    Case(
        "aci_unknown_tag",
        lambda r: (_aci(r, 'dataset,encounter_id,dialogue,note\naci,D1,"[doctor] hi\n[nurse9] x",n\n'), "[nurse9]"),
    ),
    Case(
        "aci_field_count",
        lambda r: (_aci(r, "dataset,encounter_id,dialogue,note\naci,D1,[doctor] hi\n"), "aci.csv:2: expected 4 fields"),
    ),
    Case(
        "aci_duplicate_id",
        lambda r: (
            _aci(r, "dataset,encounter_id,dialogue,note\naci,D1,[doctor] a,n\naci,D1,[doctor] b,n\n"),
            "'D1' again",
        ),
    ),
    Case("aci_no_tags", lambda r: (_aci(r, "dataset,encounter_id,dialogue,note\naci,D1,no tags,n\n"), "speaker tags")),
    # --- corpora: manifest of the user's recordings
    Case("manifest_bad_json", lambda r: (_man_cfg(r, ["{not json"]), "manifest.jsonl:1: expected one JSON object")),
    Case(
        "manifest_id_traversal",
        lambda r: (_man_cfg(r, [_entry("../../outside")]), "manifest.jsonl:1: encounter id '../../outside'"),
    ),
    Case("manifest_id_absolute", lambda r: (_man_cfg(r, [_entry("ok"), _entry("/etc/passwd")]), "manifest.jsonl:2:")),
    Case("manifest_id_nul", lambda r: (_man_cfg(r, [_entry("a\u0000b")]), "NUL")),
    Case("manifest_id_newline", lambda r: (_man_cfg(r, [_entry("a\nb")]), "control character U+000A")),
    Case("manifest_id_backslash", lambda r: (_man_cfg(r, [_entry("a\\b")]), "path separator")),
    Case("manifest_id_too_long", lambda r: (_man_cfg(r, [_entry("x" * 300)]), "longer than 200")),
    Case("manifest_id_dot", lambda r: (_man_cfg(r, [_entry(".")]), "directory reference")),
    Case("manifest_id_not_string", lambda r: (_man_cfg(r, [_entry(17)]), "encounter_id")),
    Case("manifest_unknown_key", lambda r: (_man_cfg(r, [_entry("a", speaker="x")]), "unknown key 'speaker'")),
    Case("manifest_audio_missing", lambda r: (_man_cfg(r, [_entry("a", audio="gone.wav")]), "audio file not found")),
    Case("manifest_audio_suffix", lambda r: (_man_cfg(r, [_entry("a", audio="rec.txt")]), "expected audio ending")),
    Case("manifest_empty", lambda r: (_man_cfg(r, []), "found none")),
    Case("manifest_duplicate_id", lambda r: (_man_cfg(r, [_entry("a"), _entry("a")]), "manifest.jsonl:2:")),
    # --- inputs checked against each other (issue 25)
    Case(
        "manifest_turns_out_of_order",
        lambda r: (
            _man_cfg(
                r,
                [
                    _timed(
                        "a",
                        [
                            {"speaker": "doctor", "text": "chest pain", "start_s": 1.0, "end_s": 1.5},
                            {"speaker": "patient", "text": "since last night", "start_s": 0.2, "end_s": 0.9},
                        ],
                    )
                ],
            ),
            "manifest.jsonl:1: turn 2: starts at 0.2 s, before turn 1 (1 s)",
        ),
    ),
    Case(
        "manifest_timings_beyond_the_audio",
        lambda r: (
            _man_cfg(
                r,
                [
                    _timed(
                        "a",
                        [
                            {"speaker": "doctor", "text": "chest pain", "start_s": 0.2, "end_s": 1.5},
                            {"speaker": "patient", "text": "since last night", "start_s": 30.0, "end_s": 31.0},
                        ],
                    )
                ],
                extra="run: {max_failures: 0}\n",
            ),
            "turn 2 has start_s=30 s but the recording is 2.00 s long",
        ),
    ),
    Case(
        "max_turns_on_an_untimed_recording",
        lambda r: (
            _man_cfg(
                r,
                [
                    _timed(
                        "a",
                        [
                            {"speaker": "doctor", "text": "chest pain"},
                            {"speaker": "patient", "text": "since last night"},
                        ],
                    )
                ],
                extra="corpus_max: 1\n",
            ),
            "corpus.max_turns=1 keeps 1 of 2 turns, but the recording cannot be cut",
        ),
    ),
    Case(
        "manifest_truncated_recording",
        lambda r: (_man_cfg(r, [_entry("a", audio=str(_truncated(r)))], extra="run: {max_failures: 0}\n"), "truncated"),
    ),
    # --- mix
    Case(
        "mix_speech_missing",
        lambda r: (
            [
                "mix",
                "--speech",
                str(r / "in" / "no.wav"),
                "--noise",
                str(_noise(r)),
                "--snr",
                "5",
                "--out",
                str(r / "out" / "m.wav"),
            ],
            "no.wav",
        ),
    ),
    Case(
        "mix_speech_truncated",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_truncated(r)),
                "--noise",
                str(_noise(r)),
                "--snr",
                "5",
                "--out",
                str(r / "out" / "m.wav"),
            ],
            "truncated",
        ),
    ),
    Case(
        "mix_speech_is_dir",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_osce(r)),
                "--noise",
                str(_noise(r)),
                "--snr",
                "5",
                "--out",
                str(r / "out" / "m.wav"),
            ],
            "is a directory",
        ),
    ),
    Case(
        "mix_noise_not_audio",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_speech(r)),
                "--noise",
                str(_text(r, "n.wav", b"hello, not audio")),
                "--snr",
                "5",
                "--out",
                str(r / "out" / "m.wav"),
            ],
            "n.wav",
        ),
    ),
    Case(
        "mix_snr_nan",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_speech(r)),
                "--noise",
                str(_noise(r)),
                "--snr",
                "nan",
                "--out",
                str(r / "out" / "m.wav"),
            ],
            "--snr",
        ),
    ),
    Case(
        "mix_snr_huge",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_speech(r)),
                "--noise",
                str(_noise(r)),
                "--snr",
                "1000",
                "--out",
                str(r / "out" / "m.wav"),
            ],
            "--snr",
        ),
    ),
    Case(
        "mix_out_is_the_speech",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_speech(r)),
                "--noise",
                str(_noise(r)),
                "--snr",
                "5",
                "--out",
                str(r / "in" / "speech.wav"),
            ],
            "is the --speech input",
        ),
    ),
    Case(
        "mix_out_is_the_noise",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_speech(r)),
                "--noise",
                str(_noise(r)),
                "--snr",
                "5",
                "--out",
                str(r / "in" / ".." / "in" / "noise.wav"),
            ],
            "is the --noise input",
        ),
    ),
    Case(
        "mix_out_is_dir",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_speech(r)),
                "--noise",
                str(_noise(r)),
                "--snr",
                "5",
                "--out",
                str(_mkdir(r / "out" / "d")),
            ],
            "is a directory",
        ),
    ),
    Case(
        "mix_out_not_wav",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_speech(r)),
                "--noise",
                str(_noise(r)),
                "--snr",
                "5",
                "--out",
                str(r / "out" / "m.mp3"),
            ],
            "ending in .wav",
        ),
    ),
    Case(
        "mix_out_folder_missing",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_speech(r)),
                "--noise",
                str(_noise(r)),
                "--snr",
                "5",
                "--out",
                str(r / "out" / "no" / "m.wav"),
            ],
            "does not exist",
        ),
    ),
    Case(
        "mix_silent_speech",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_wav(r / "in" / "silent.wav", np.zeros(16000))),
                "--noise",
                str(_noise(r)),
                "--snr",
                "5",
                "--out",
                str(r / "out" / "m.wav"),
            ],
            "silent.wav: no speech found",
        ),
    ),
    Case(
        "mix_empty_wav",
        lambda r: (
            [
                "mix",
                "--speech",
                str(_wav(r / "in" / "empty.wav", np.zeros(0))),
                "--noise",
                str(_noise(r)),
                "--snr",
                "5",
                "--out",
                str(r / "out" / "m.wav"),
            ],
            "empty.wav",
        ),
    ),
    # --- triggers
    Case(
        "triggers_ref_missing",
        lambda r: (
            ["triggers", "--ref", str(r / "in" / "no.txt"), "--hyp", str(_text(r, "h.txt", b"hi"))],
            "no.txt: file not found",
        ),
    ),
    Case(
        "triggers_ref_dir",
        lambda r: (["triggers", "--ref", str(_osce(r)), "--hyp", str(_text(r, "h.txt", b"hi"))], "is a directory"),
    ),
    Case(
        "triggers_hyp_binary",
        lambda r: (
            ["triggers", "--ref", str(_text(r, "r.txt", b"hi")), "--hyp", str(_text(r, "h.txt", b"\xff\xfe\xfa"))],
            "h.txt: expected UTF-8",
        ),
    ),
    Case(
        "triggers_ref_fifo",
        lambda r: (
            ["triggers", "--ref", str(_fifo(r / "in" / "ref.txt")), "--hyp", str(_text(r, "h.txt", b"hi"))],
            "ref.txt: is a FIFO (named pipe)",
        ),
    ),
    Case(
        "triggers_ref_symlink_loop",
        lambda r: (
            ["triggers", "--ref", str(_loop(r / "in" / "ref.txt")), "--hyp", str(_text(r, "h.txt", b"hi"))],
            "ref.txt: is a symlink loop",
        ),
    ),
    # --- symlink loops as the run directory or the cache (issue 37: were "internal error", exit 3)
    Case(
        "out_symlink_loop",
        lambda r: (["run", str(_cfg(r, "{corpus}\n")), "--out", str(_loop(r / "out" / "run"))], "--out"),
    ),
    Case(
        "cache_symlink_loop",
        lambda r: (_run(r, f"{{corpus}}\nrun: {{cache_dir: {_loop(r / 'cache' / 'c')}}}\n"), "symlink loop"),
    ),
    # --- gold
    Case(
        "gold_check_nothing_matched",
        lambda r: (
            ["gold", "check", str(_cfg(r, "{corpus}\n")), "--gold", str(_mkdir(r / "in" / "gold"))],
            "matches an encounter",
        ),
    ),
    Case(
        "gold_audit_fifo",
        lambda r: (["gold", "audit", str(_fifo(r / "in" / "CAR0001.yaml")), "--by", "Dr A"], "CAR0001.yaml: is a FIFO"),
    ),
    Case(
        "gold_audit_symlink_loop",
        lambda r: (
            ["gold", "audit", str(_loop(r / "in" / "CAR0001.yaml")), "--by", "Dr A"],
            "CAR0001.yaml: is a symlink loop",
        ),
    ),
    # --- report
    Case("report_missing_dir", lambda r: (["report", str(r / "out" / "none")], "does not exist")),
    Case("report_on_a_file", lambda r: (["report", str(_text(r, "../out/f.txt", b"x"))], "is a file")),
    Case("report_empty_dir", lambda r: (["report", str(_mkdir(r / "out" / "empty"))], "manifest.json is missing")),
    Case(
        "report_bad_manifest",
        lambda r: (["report", str(_run_dir(r, "run", ["clean"], manifest="{oops"))], "manifest.json:1: not valid JSON"),
    ),
    Case(
        "report_manifest_not_object",
        lambda r: (["report", str(_run_dir(r, "run", ["clean"], manifest="[1]"))], "expected a JSON object"),
    ),
    Case(
        "report_bad_items_line",
        lambda r: (["report", str(_run_dir(r, "run", ["clean"], items='{"a": 1}\n{bad\n{"b": 2}\n'))], "items.jsonl:2"),
    ),
    Case(
        "report_items_missing_field",
        lambda r: (
            ["report", str(_run_dir(r, "run", ["clean"], items='{"x": 1}\n'))],
            "items.jsonl:1: item row has no 'encounter_id'",
        ),
    ),
    Case("report_no_items", lambda r: (["report", str(_run_dir(r, "run", ["clean"], items=""))], "no item rows")),
    # --- compare
    Case(
        "compare_a_missing",
        lambda r: (["compare", str(r / "out" / "none"), str(_run_dir(r, "b", ["clean"]))], "does not exist"),
    ),
    Case(
        "compare_b_is_file",
        lambda r: (["compare", str(_run_dir(r, "a", ["clean"])), str(_text(r, "../out/f.txt", b"x"))], "is a file"),
    ),
    Case(
        "compare_no_shared_condition",
        lambda r: (
            ["compare", str(_run_dir(r, "a", ["ambient_5db"])), str(_run_dir(r, "b", ["babble_5db"]))],
            "share no condition",
        ),
    ),
    Case(
        "compare_out_is_file",
        lambda r: (
            [
                "compare",
                str(_run_dir(r, "a", ["clean"])),
                str(_run_dir(r, "b", ["clean"])),
                "--out",
                str(_text(r, "../out/f.txt", b"x")),
            ],
            "f.txt",
        ),
    ),
]


def _fifo(p: Path) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(p)
    return p


def _loop(p: Path) -> Path:
    """``p`` → ``p.loop`` → ``p``: a symlink loop."""
    p.parent.mkdir(parents=True, exist_ok=True)
    p.symlink_to(p.with_name(p.name + ".loop"))
    p.with_name(p.name + ".loop").symlink_to(p)
    return p


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _osce_run(root: Path, name: str | None, data: bytes | None) -> list[str]:
    """A run over an OSCE folder holding one file ``name`` (or nothing)."""
    d = root / "in" / "osce_x"
    d.mkdir(parents=True, exist_ok=True)
    if name is not None and data is not None:
        (d / name).write_bytes(data)
    return _run(root, "{corpus}\n", corpus=f"corpus: {{kind: osce, path: {d}}}")


# ------------------------------------------------------------------------------------------------ running them


@dataclass
class Outcome:
    rc: int
    stderr: str
    expect: str
    home_files: list[str]
    stray: list[str]
    out_new: list[str]


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in files + dirs:
            p = Path(dirpath) / n
            try:
                st = p.lstat()
            except OSError:
                continue
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def _allowed(rel: str) -> bool:
    return rel == "out" or rel.startswith("out/") or rel == "cache" or rel.startswith("cache/")


def _prepare(case: Case, root: Path) -> tuple[list[str], str]:
    for d in ("in", "out", "home", "cwd", "cache"):
        (root / d).mkdir(parents=True, exist_ok=True)
    return case.build(root)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Build every case, run them in two driver processes (fresh HOME each), then diff the file trees."""
    roots = {c.name: tmp_path_factory.mktemp(c.name[:40]) for c in CASES}
    built = {c.name: _prepare(c, roots[c.name]) for c in CASES}
    before = {n: _snapshot(roots[n]) for n in roots}
    work = tmp_path_factory.mktemp("driver")
    (work / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MPLCONFIGDIR", "STRESSTEST_"))}
    env.update(
        HOME=str(work / "home"),
        STRESSTEST_CACHE=str(work / "cache"),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    names = [c.name for c in CASES]
    procs = []
    for k in range(2):
        jobs = [{"name": n, "argv": built[n][0], "root": str(roots[n])} for n in names[k::2]]
        (work / f"jobs{k}.json").write_text(json.dumps(jobs))
        procs.append(
            subprocess.Popen(  # noqa: S603 - fixed argument list
                [
                    sys.executable,
                    str(Path(__file__).with_name("driver.py")),
                    str(work / f"jobs{k}.json"),
                    str(work / f"results{k}.json"),
                ],
                cwd=work,
                env=env,
            )
        )
    for p in procs:
        assert p.wait(timeout=600) == 0
    results = {r["name"]: r for k in range(2) for r in json.loads((work / f"results{k}.json").read_text())}
    assert list((work / "home").rglob("*")) == [], "the driver process wrote into its $HOME"
    out: dict[str, Outcome] = {}
    for n in names:
        root, after = roots[n], _snapshot(roots[n])
        stray = sorted(k for k, v in after.items() if not _allowed(k) and before[n].get(k) != v)
        home = sorted(str(p.relative_to(root / "home")) for p in (root / "home").rglob("*"))
        out_new = sorted(k for k, v in after.items() if k.startswith("out/") and before[n].get(k) != v)
        out[n] = Outcome(results[n]["rc"], results[n]["stderr"], built[n][1], home, stray, out_new)
    return out


#: A progress line (stresstest.progress): the run's start line, ``<stage> done/total ...`` and ``<stage> done: ...``.
PROGRESS_LINE = re.compile(r"^stresstest: (run: |[a-z][\w ]* (done[: ]|\d+/\d+ ))")


def test_there_are_at_least_sixty_cases() -> None:
    assert len(CASES) >= 60 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_bad_input_is_one_clear_line(case: str, outcomes: dict[str, Outcome]) -> None:
    o = outcomes[case]
    # The run's start line and stage progress lines (issue 36) may come before the error; nothing else may.
    lines = [ln for ln in o.stderr.splitlines() if ln.strip() and not PROGRESS_LINE.match(ln)]
    assert o.rc == 2, f"exit {o.rc}; stderr: {o.stderr[-2000:]}"
    assert "Traceback" not in o.stderr, o.stderr[-2000:]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {o.stderr[-2000:]}"
    assert lines[0].startswith("stresstest: error: "), lines[0]
    assert "internal error" not in lines[0]
    assert o.expect in lines[0], f"expected {o.expect!r} in: {lines[0]}"
    assert o.home_files == [], f"wrote into $HOME: {o.home_files}"
    assert o.stray == [], f"wrote outside the run and cache dirs: {o.stray}"
    if case == "aci_wrong_header_not_echoed":
        assert "SECRET" not in lines[0]
    if case.startswith("mix_"):
        assert o.out_new == [], f"a failed mix left files behind: {o.out_new}"  # no output, no *.clean.wav
