"""One small cold run (issue 37): nothing left in the temporary folder, and swapped cache entries are refused.

A text encounter → piper TTS → built-in ambient noise at 5 dB → bundled Whisper tiny → rules → report, from an
empty cache. Where ``unshare -rm`` works (a user + mount namespace), the run gets a fresh tmpfs as ``/tmp`` and
``TMPDIR`` unset, so a write to ``/tmp`` by any library is seen; elsewhere it gets a private ``TMPDIR``. Then the
two transcript cache entries (clean and ambient 5 dB) are swapped — one of them also stripped of its recorded key,
as an entry written by an earlier version would be — and the run is repeated: both entries must be refused,
counted in the manifest and recomputed, so ``summary.csv`` is byte-identical (before: exit 0, swapped WERs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TEXT = "D: What brings you in today?\nP: I have had chest pain since last night.\n"


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs tmpfs /tmp"],  # noqa: S607
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


def _run(root: Path, cfg: Path, out: Path, private_ns: bool) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``stresstest run``; return the process and what it left in the temporary folder."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("XDG_", "MPLCONFIGDIR", "STRESSTEST_")) and k != "TMPDIR"
    }
    env.update(
        HOME=str(root / "home"),
        STRESSTEST_CACHE=str(root / "cache"),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    cmd = [sys.executable, "-m", "stresstest.cli", "run", str(cfg), "--out", str(out)]
    listing = root / "tmp-listing.txt"
    if private_ns:
        # The test's own folder may lie under /tmp: keep it as the working directory, mount a fresh tmpfs on
        # /tmp, bind the (now hidden) working directory back at the same path, run, then list everything in /tmp
        # except the path down to the test's folder.
        script = (
            'set -e; cd "$ROOT"; mount -t tmpfs tmpfs /tmp; mkdir -p "$ROOT"; '
            'mount --no-canonicalize --bind . "$ROOT"; cd "$ROOT"; set +e; "$@"; rc=$?; '
            'find /tmp -mindepth 1 | while read -r p; do case "$ROOT/" in "$p"/*) ;; *) '
            'case "$p" in "$ROOT"|"$ROOT"/*) ;; *) echo "$p";; esac;; esac; done > "$ROOT/tmp-listing.txt"; exit $rc'
        )
        env["ROOT"] = str(root)
        cmd = ["unshare", "-rm", "sh", "-c", script, "sh", *cmd]
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False)
        left = [ln for ln in listing.read_text().splitlines() if ln.strip()]
    else:
        private = root / "private-tmp"
        private.mkdir(exist_ok=True)
        env["TMPDIR"] = str(private)
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False)
        left = sorted(str(p) for p in private.rglob("*"))
    return proc, left


def test_cold_run_leaves_no_temp_files_and_swapped_transcripts_are_refused(tmp_path: Path) -> None:
    corpus = tmp_path / "osce"
    corpus.mkdir()
    (corpus / "CAR0001.txt").write_text(TEXT)
    (tmp_path / "home").mkdir()
    cfg = tmp_path / "small.yaml"
    cfg.write_text(f"""run: {{seed: 3, progress: false}}
corpus: {{kind: osce, path: {corpus}}}
noise: {{ambient: {{family: ambient, kind: builtin}}}}
snr_db: [5]
asr: {{backend: faster-whisper, compute_type: int8, batch_size: 1}}
structure: {{backend: rules}}
judge: {{backend: rules}}
report: {{n_resamples: 100}}
""")
    out = tmp_path / "run"
    ns = _unshare_works()
    proc, left = _run(tmp_path, cfg, out, ns)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert left == [], f"a cold run left files in the temporary folder ({'/tmp' if ns else 'TMPDIR'}): {left}"
    summary = (out / "summary.csv").read_bytes()

    entries = sorted((tmp_path / "cache" / "transcripts").rglob("*.c2.json"))
    assert len(entries) == 2  # clean and ambient_5db
    a, b = (json.loads(p.read_text()) for p in entries)
    assert a["value"]["text"] != b["value"]["text"] or a["value"]["audio_sha256"] != b["value"]["audio_sha256"]
    b.pop("key", None)  # an entry from before keys were recorded: caught by the inputs its value records
    entries[0].write_text(json.dumps(b))
    entries[1].write_text(json.dumps(a))

    proc2, _ = _run(tmp_path, cfg, out, False)
    assert proc2.returncode == 0, proc2.stderr[-3000:]
    assert (out / "summary.csv").read_bytes() == summary  # not the swapped WERs
    warnings = [ln for ln in proc2.stderr.splitlines() if "cache entry" in ln and "recomputing" in ln]
    assert len(warnings) == 2, proc2.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert sum(manifest["cache_rejected"].values()) == 2, manifest["cache_rejected"]
