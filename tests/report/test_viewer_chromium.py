"""A small real run through the CLI, its log, and its item viewer in headless Chromium.

One module-scoped run (TTS speech of a short recorded dialogue with a gold record, ambient noise at 10 and
0 dB, the guard at 0 dB, faster-whisper, the rules structurer and judge, the report) with stderr sent to a
file, as a batch job does: the log must hold a start line, progress and one end line per stage, and no
transcript. Its viewer is then opened in Chromium: the index lists every item, an item page's audio loads
a file that exists, the highlighted trigger events are the ones ``stresstest triggers`` finds for that pair,
and no page logs a console message.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from chromium import NEEDS_CHROMIUM, run_chromium

from stresstest.audio import write_wav

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

TURNS = [
    ("doctor", "What brings you in today?"),
    ("patient", "I have had chest pain for two hours and I feel short of breath."),
    ("doctor", "Do you have any allergies?"),
    ("patient", "No, I don't have any allergies. I take warfarin five milligrams every day."),
]
GOLD = """schema_version: 1
encounter_id: ENC1
corpus: manifest
triage: {level: emergency, rationale: chest pain for two hours with breathlessness}
claims:
- {id: c1, category: symptom, concept: chest pain, status: present, time: two hours}
- {id: c2, category: symptom, concept: shortness of breath, status: present}
- {id: c3, category: allergy, concept: allergies, status: absent}
- {id: c4, category: medication, concept: warfarin, status: present, value: '5', unit: mg, time: every day}
safety_flags:
- {id: f1, kind: red_flag, name: chest pain, detail: for two hours}
field_evidence:
  c1: ["I have had chest pain for two hours"]
provenance: {drafted_by: test, date: '2026-12-06'}
"""
SECRET = "warfarin five milligrams"  # transcript words that must never reach the log


def _corpus(root: Path) -> None:
    import numpy as np

    from stresstest.audio import SAMPLE_RATE_HZ as SR
    from stresstest.speech import SpeakerVoice, synthesize

    pieces, t, turns = [], 0.3, []
    for spk, text in TURNS:
        x = synthesize(text, SpeakerVoice(pitch_factor=0.92 if spk == "doctor" else 1.1))
        turns.append({"speaker": spk, "text": text, "start_s": round(t, 3), "end_s": round(t + x.size / SR, 3)})
        pieces += [np.zeros(int(0.3 * SR) if not pieces else int(0.4 * SR), np.float32), x]
        t += x.size / SR + 0.4
    write_wav(root / "enc1.wav", np.concatenate(pieces + [np.zeros(SR // 4, np.float32)]))
    (root / "manifest.jsonl").write_text(
        json.dumps({"encounter_id": "ENC1", "audio": "enc1.wav", "turns": turns}) + "\n"
    )
    (root / "gold").mkdir()
    (root / "gold" / "ENC1.yaml").write_text(GOLD)
    (root / "run.yaml").write_text("""
run: {seed: 5, cache_dir: cache}
corpus: {kind: manifest, path: manifest.jsonl}
gold: {path: gold}
noise:
  ambient: {family: ambient, kind: builtin}
snr_db: [10, 0]
structure: {backend: rules}
judge: {backend: rules}
mitigation: {conditions: [ambient_0db]}
report: {n_resamples: 100}
""")


@pytest.fixture(scope="module")
def viewer_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(run directory, its stderr log) of one real run through the CLI, stderr sent to a file."""
    root = tmp_path_factory.mktemp("viewer")
    _corpus(root)
    log = root / "run.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    with open(log, "w") as fh:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "stresstest.cli",
                "run",
                str(root / "run.yaml"),  # noqa: S603
                "--out",
                str(root / "out"),
            ],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=fh,
            timeout=900,
            check=False,
        )
    text = log.read_text("utf-8")
    assert proc.returncode == 0, text[-3000:]
    return root / "out", text


def _dom(page: Path, profile: Path) -> str:
    """The page's DOM after its script ran (and its media had time to load); no console message allowed."""
    return _dom_url(page.resolve().as_uri(), profile)


def _dom_url(url: str, profile: Path) -> str:
    res = run_chromium(["--enable-logging=stderr", "--v=0", "--virtual-time-budget=4000", "--dump-dom", url], profile)
    assert res.returncode == 0, res.stderr[-2000:]
    console = [ln for ln in res.stderr.splitlines() if ":CONSOLE" in ln]
    assert not console, console
    return res.stdout


class _Elements(HTMLParser):
    """Every start tag as (tag, attributes, enclosing section's condition)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str], str | None]] = []
        self.section: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "section":
            self.section = a.get("data-condition")
        self.found.append((tag, a, self.section))


def _elements(html: str) -> list[tuple[str, dict[str, str], str | None]]:
    p = _Elements()
    p.feed(html)
    return p.found


def test_the_log_of_a_batch_run_shows_what_runs_and_each_stage(viewer_run: tuple[Path, str]) -> None:
    _, log = viewer_run
    lines = log.splitlines()
    assert re.match(
        r"stresstest: run: 1 encounters × 4 conditions = 4 items \(clean, ambient_10db, ambient_0db, "
        r"ambient_0db_guard\); [\d.]+ h \(\d+s\) of speech; .*; ASR faster-whisper .*; "
        r"structure rules; judge rules; executor inprocess",
        lines[0],
    ), lines[0]
    assert "; 1 recordings; ASR" in lines[0]
    for stage, n, unit in (
        ("speech", 1, "encounter"),
        ("mix", 2, "item"),
        ("asr", 3, "item"),
        ("structure", 4, "item"),
        ("score", 4, "item"),
    ):
        ends = [ln for ln in lines if ln.startswith(f"stresstest: {stage} done: ")]
        assert len(ends) == 1, (stage, lines)
        assert re.fullmatch(rf"stresstest: {stage} done: {n}/{n} {unit}s in \d+s \(.*\), 0 failed", ends[0]), ends
        progress = [ln for ln in lines if ln.startswith(f"stresstest: {stage} ") and ln not in ends]
        assert all(
            re.fullmatch(rf"stresstest: {stage} \d+/{n} {unit}s \(\d+%\), .*, elapsed \d+s, ETA \d+s", ln)
            for ln in progress
        ), progress
    assert re.fullmatch(r"stresstest: report done in \d+s: .*report\.html, items in .*items/index\.html", lines[-1])
    assert len(lines) < 60, lines
    assert SECRET not in log and "allergies" not in log  # no transcript in the log


@NEEDS_CHROMIUM
def test_viewer_in_chromium(viewer_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stresstest.cli import main
    from stresstest.results import ItemScore

    out, _ = viewer_run
    items = [ItemScore.model_validate_json(x) for x in (out / "items.jsonl").read_text().splitlines()]
    report = (out / "report" / "report.html").read_text("utf-8")
    index = out / "report" / "items" / "index.html"
    assert "items/index.html" in report  # the report links to the viewer

    rows = [a for tag, a, _ in _elements(_dom(index, tmp_path / "p1")) if tag == "tr" and "data-c" in a]
    assert sorted((a["data-e"], a["data-c"]) for a in rows) == sorted(it.key for it in items)

    # A view in the link: one condition's rows, or every row sorted by WER (column 2), highest first.
    wer = {it.condition: it for it in items}
    view = f"{index.resolve().as_uri()}#condition=ambient_0db"
    shown = [
        a["data-c"]
        for tag, a, _ in _elements(_dom_url(view, tmp_path / "p4"))
        if tag == "tr" and "data-c" in a and "hide" not in a.get("class", "")
    ]
    assert shown == ["ambient_0db"]
    view = f"{index.resolve().as_uri()}#sort=2&dir=desc"
    shown = [a["data-c"] for tag, a, _ in _elements(_dom_url(view, tmp_path / "p5")) if tag == "tr" and "data-c" in a]
    assert [wer[c].item_wer for c in shown] == sorted((it.item_wer for it in items), reverse=True)

    page = out / "report" / "items" / "ENC1.html"
    els = _elements(_dom(page, tmp_path / "p2"))
    audios = [(a, sec) for tag, a, sec in els if tag == "audio"]
    sources = [a["src"] for tag, a, _ in els if tag == "source"]
    assert len(audios) == 2 * 4 - 1  # each condition's audio, and the clean speech beside every other one
    for src in sources:
        assert (page.parent / src).is_file(), src
    assert all(a.get("data-state") == "loaded" and float(a["data-duration"]) > 1 for a, _ in audios), audios
    assert not [a for tag, a, _ in els if "miss" in a.get("class", "") and "block" in a.get("style", "")]

    # The highlighted events of each condition are `stresstest triggers` for (reference, that transcript).
    n_events = 0
    for it in items:
        if it.mitigated:  # a guard row shows its base's alignment (same transcript), linked
            assert [
                a
                for tag, a, sec in els
                if tag == "a" and sec == it.condition and a.get("href") == f"#c-{it.condition.removesuffix('_guard')}"
            ]
            continue
        listed = [
            (
                a["data-type"],
                int(a["data-ref-start"]),
                int(a["data-ref-end"]),
                int(a["data-hyp-start"]),
                int(a["data-hyp-end"]),
                float(a["data-weight"]),
            )
            for tag, a, sec in els
            if tag == "li" and a.get("data-view") == "ref" and sec == it.condition
        ]
        (tmp_path / "ref.txt").write_text(it.reference_text or "")
        (tmp_path / "hyp.txt").write_text(it.hypothesis_text or "")
        assert (
            main(
                [
                    "triggers",
                    "--ref",
                    str(tmp_path / "ref.txt"),
                    "--hyp",
                    str(tmp_path / "hyp.txt"),
                    "--gold",
                    "ENC1",
                    "--gold-dir",
                    str(out.parent / "gold"),
                ]
            )
            == 0
        )
        want = [
            (e["type"], e["ref_start"], e["ref_end"], e["hyp_start"], e["hyp_end"], float(e["weight"]))
            for e in json.loads(capsys.readouterr().out)
        ]
        assert listed == want, it.condition
        marked = {
            k
            for tag, a, sec in els
            if tag == "span" and sec == it.condition and a.get("data-view") == "ref"
            for k in a["data-ev"].split()
        }
        assert {str(k) for k in range(1, len(want) + 1)} <= marked, (it.condition, marked)
        n_events += len(want)
    assert n_events > 0  # the check above compared something

    shot = tmp_path / "item-page.png"
    res = run_chromium([f"--screenshot={shot}", "--window-size=1400,2000", page.resolve().as_uri()], tmp_path / "p3")
    assert res.returncode == 0 and shot.stat().st_size > 10_000, res.stderr[-2000:]
