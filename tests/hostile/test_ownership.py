"""Run-directory ownership (docs/reliability.md promise 17): nothing a user owns is ever lost.

Through the real CLI in subprocesses: a non-empty folder that is not a stresstest run is refused and left
byte-for-byte as it was (no lock file either); a finished run of another config is refused; a run whose
corpus fails leaves the earlier run's manifest, resolved config and marker as they were; two writers on one
run directory: the second gets one line naming the first's pid, and a SIGKILLed holder blocks nobody.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OSCE_TXT = "D: Good morning, what brings you in today?\nP: I have had chest pain since last night.\n"


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MPLCONFIGDIR", "STRESSTEST_"))}
    (tmp / "home").mkdir(exist_ok=True)
    env.update(
        HOME=str(tmp / "home"),
        STRESSTEST_CACHE=str(tmp / "cache"),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    return env


def _cli(tmp: Path, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - fixed argument list
        [sys.executable, "-m", "stresstest.cli", *argv],
        cwd=cwd or tmp,
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _one_error_line(p: subprocess.CompletedProcess[str], expect: str) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("stresstest: error: "), p.stderr[-2000:]
    assert expect in lines[0], lines[0]
    return lines[0]


def _snapshot(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = (
            "<dir>"
            if p.is_dir() and not p.is_symlink()
            else (f"-> {os.readlink(p)}" if p.is_symlink() else p.read_bytes())
        )
    return out


def _config(tmp: Path, body: str = "", name: str = "cfg.yaml", corpus: Path | None = None) -> Path:
    if corpus is None:
        corpus = tmp / "osce"
        corpus.mkdir(exist_ok=True)
        (corpus / "CAR0001.txt").write_text(OSCE_TXT)
    p = tmp / name
    p.write_text(f"corpus: {{kind: osce, path: {corpus}}}\n" + body)
    return p


def _project(root: Path) -> Path:
    """A user's project folder that happens to use the per-item folder names of a run."""
    for rel, text in (
        ("records/clean/CAR0001.json", '{"mine": 1}'),
        ("scores/clean/CAR0001.json", "{}"),
        ("transcripts/clean/CAR0001.json", "{}"),
        ("notes.txt", "my notes"),
        ("manifest.json", '{"project": "mine"}'),
    ):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _finished_run(tmp: Path, cfg_path: Path, name: str = "run", completed: bool = True) -> Path:
    """A finished run directory of ``cfg_path``, as the runner leaves one (marker, manifest, resolved config)."""
    import yaml

    from stresstest.config import load_config
    from stresstest.pipeline.ownership import MARKER, config_sections

    resolved = load_config(cfg_path).model_dump(mode="json")
    d = tmp / name
    (d / "records" / "clean").mkdir(parents=True)
    (d / "records" / "clean" / "CAR0001.json").write_text('{"record": "finished"}')
    (d / "config.resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
    (d / "manifest.json").write_text(
        json.dumps(
            {
                "schema_version": 2,
                "run_id": name,
                "stresstest_version": "0",
                "conditions": [{"condition": "clean", "family": "clean"}],
                "corpus": {"encounter_ids": ["CAR0001"]},
                "invocations": [{"started": "2024-01-01T00:00:00+00:00", "seconds": 1.0, "completed": completed}],
            }
        )
    )
    (d / MARKER).write_text(
        json.dumps(
            {
                "tool": "stresstest",
                "schema_version": 1,
                "config_sections": config_sections(resolved),
                "conditions": ["clean"],
                "encounter_ids": ["CAR0001"],
            }
        )
    )
    return d


def test_run_into_a_user_folder_refuses_and_deletes_nothing(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    project = _project(tmp_path / "project")
    before = _snapshot(project)
    _one_error_line(_cli(tmp_path, "run", str(cfg), "--out", str(project)), "is not a stresstest run directory")
    assert _snapshot(project) == before  # not one file changed, added (no lock file) or removed
    # `--out .` from inside the folder: the same
    _one_error_line(_cli(tmp_path, "run", str(cfg), "--out", ".", cwd=project), "is not a stresstest run")
    assert _snapshot(project) == before


@pytest.mark.parametrize(
    "where, expect",
    [
        ("cache", "is the cache directory"),
        ("cache/sub", "is inside the cache directory"),
        ("osce/run", "inside the input corpus.path"),
        ("cfg.yaml", "exists and is not a directory"),
    ],
)
def test_out_may_not_be_the_cache_or_an_input(tmp_path: Path, where: str, expect: str) -> None:
    cfg = _config(tmp_path)
    (tmp_path / "cache" / "sub").mkdir(parents=True)
    (tmp_path / "cache" / "sub" / "entry.c2.json").write_text("{}")
    before = _snapshot(tmp_path)
    _one_error_line(_cli(tmp_path, "run", str(cfg), "--out", str(tmp_path / where)), expect)
    after = _snapshot(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("home")} == {
        k: v for k, v in before.items() if not k.startswith("home")
    }


def test_out_containing_the_cache_is_refused(tmp_path: Path) -> None:
    cfg = _config(tmp_path, f"run: {{cache_dir: {tmp_path / 'runs' / 'r' / 'cache'}}}\n")
    _one_error_line(
        _cli(tmp_path, "run", str(cfg), "--out", str(tmp_path / "runs" / "r")), "contains the cache directory"
    )


def test_a_finished_run_of_another_config_is_refused(tmp_path: Path) -> None:
    cfg_a = _config(tmp_path, "snr_db: [5]\nnoise: {ambient: {family: ambient}}\n", name="a.yaml")
    run = _finished_run(tmp_path, cfg_a)
    before = _snapshot(run)
    cfg_b = _config(tmp_path, "snr_db: [10]\nnoise: {ambient: {family: ambient}}\nrun: {seed: 7}\n", name="b.yaml")
    line = _one_error_line(_cli(tmp_path, "run", str(cfg_b), "--out", str(run)), "holds a finished run of another")
    assert "differs in run, snr_db" in line and "--replace-run" in line
    assert _snapshot(run) == before


def test_a_failing_config_replaces_nothing_of_a_finished_run(tmp_path: Path) -> None:
    """The outside test's case: a different grid and a bad corpus, even with --replace-run, change nothing."""
    cfg_a = _config(tmp_path, "snr_db: [5]\nnoise: {ambient: {family: ambient}}\n", name="a.yaml")
    run = _finished_run(tmp_path, cfg_a)
    before = _snapshot(run)
    (tmp_path / "empty_corpus").mkdir()
    cfg_b = _config(
        tmp_path, "snr_db: [10]\nnoise: {ambient: {family: ambient}}\n", name="b.yaml", corpus=tmp_path / "empty_corpus"
    )
    _one_error_line(_cli(tmp_path, "run", str(cfg_b), "--out", str(run), "--replace-run"), "found none")
    after = _snapshot(run)
    assert after.pop(".stresstest.lock", None) is not None  # the lock file stays (removing it would race)
    assert after == before  # manifest.json, config.resolved.yaml, marker, records: as they were
    p = _cli(tmp_path, "report", str(run))  # and the report still reads the finished run's grid (or fails alike)
    assert "ambient_10db" not in p.stdout + p.stderr


def test_an_unfinished_run_may_be_resumed_with_a_corrected_config(tmp_path: Path) -> None:
    from stresstest.pipeline.ownership import claim_run_dir, config_sections

    cfg_a = _config(tmp_path, "snr_db: [5]\n", name="a.yaml")
    run = _finished_run(tmp_path, cfg_a, completed=False)
    claim = claim_run_dir(run, config_sections({"snr_db": [10]}))  # another config: allowed, the run never finished
    claim.release()


def test_a_run_directory_without_a_marker_is_refused_untouched(tmp_path: Path) -> None:
    """Issue 38: a run directory of a version before markers (manifest.json, config.resolved.yaml, no marker) is
    not resumed as one: it is refused with one line that says why, and nothing in it changes."""
    from stresstest.config import load_config
    from stresstest.errors import RunError
    from stresstest.pipeline.ownership import LOCK_NAME, MARKER, claim_run_dir, config_sections

    cfg = _config(tmp_path, name="a.yaml")
    run = _finished_run(tmp_path, cfg)
    (run / MARKER).unlink()  # as a version without markers left it
    (run / LOCK_NAME).unlink(missing_ok=True)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    with pytest.raises(RunError, match="before run-directory markers") as exc:
        claim_run_dir(run, config_sections(load_config(cfg).model_dump(mode="json")))
    assert "\n" not in str(exc.value)
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


_HOLDER = """
import sys, time
from pathlib import Path
from stresstest.pipeline.ownership import claim_run_dir
claim = claim_run_dir(Path(sys.argv[1]), {})
print("locked", flush=True)
time.sleep(120)
"""


def test_a_second_writer_gets_one_line_naming_the_first(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(run)],
        env=_env(tmp_path),  # noqa: S603
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        line = _one_error_line(_cli(tmp_path, "run", str(cfg), "--out", str(run)), "another stresstest process")
        assert f"pid {holder.pid}" in line
        (run / "manifest.json").write_text("{}")  # `report` waits for the writer too
        _one_error_line(_cli(tmp_path, "report", str(run)), "is writing this run directory")
        (run / "manifest.json").unlink()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    # The kernel dropped the dead holder's lock: the stale lock file blocks nobody.
    from stresstest.pipeline.ownership import claim_run_dir

    t0 = time.monotonic()
    claim = claim_run_dir(run, {})
    claim.release()
    assert time.monotonic() - t0 < 5


def test_mix_out_may_not_be_an_input(tmp_path: Path) -> None:
    import numpy as np
    import soundfile as sf

    t = np.arange(32000) / 16000
    sf.write(str(tmp_path / "speech.wav"), (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 16000)
    sf.write(str(tmp_path / "noise.wav"), (0.1 * np.random.default_rng(0).standard_normal(48000)), 16000)
    os.link(tmp_path / "noise.wav", tmp_path / "noise_link.wav")
    before = _snapshot(tmp_path)
    for out, opt in (("speech.wav", "--speech"), ("./noise.wav", "--noise"), ("noise_link.wav", "--noise")):
        _one_error_line(
            _cli(tmp_path, "mix", "--speech", "speech.wav", "--noise", "noise.wav", "--snr", "5", "--out", out),
            f"is the {opt} input",
        )
    assert {k: v for k, v in _snapshot(tmp_path).items() if not k.startswith("home")} == {
        k: v for k, v in before.items() if not k.startswith("home")
    }


@pytest.mark.parametrize(
    "kind",
    ["user_folder", "cache", "inside_corpus", "a_file", "finished_other_config", "report_links_out", "symlink_loop"],
)
def test_check_and_run_agree_on_every_out_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Issue 37: ``check --out DIR`` said "ready" where ``run --out DIR`` was refused. Both now apply
    ``ownership.out_problem``: the check's finding is the run's error, word for word."""
    from stresstest.config import load_config
    from stresstest.errors import RunError
    from stresstest.pipeline.preflight import run_checks
    from stresstest.pipeline.runner import run

    monkeypatch.setenv("STRESSTEST_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    cfg_path = _config(tmp_path, "snr_db: [10]\nnoise: {ambient: {family: ambient}}\n", name="b.yaml")
    if kind == "user_folder":
        out = _project(tmp_path / "project")
    elif kind == "cache":
        out = tmp_path / "cache"
    elif kind == "inside_corpus":
        out = tmp_path / "osce" / "run"
    elif kind == "a_file":
        out = tmp_path / "afile"
        out.write_text("x")
    elif kind == "finished_other_config":
        out = _finished_run(
            tmp_path, _config(tmp_path, "snr_db: [5]\nnoise: {ambient: {family: ambient}}\n", name="a.yaml")
        )
    elif kind == "report_links_out":
        out = _finished_run(tmp_path, cfg_path)
        (tmp_path / "elsewhere").mkdir()
        (out / "report").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    else:
        out = tmp_path / "loop"
        out.symlink_to(tmp_path / "loop")
    cfg = load_config(cfg_path)
    finding = next(
        f
        for f in run_checks(cfg, out=out, cache=tmp_path / "cache", deep=False, config_path=cfg_path)
        if f.check == "run dir"
    )
    assert not finding.ok, finding
    with pytest.raises(RunError) as err:
        run(cfg_path, out)
    assert str(err.value) == finding.line
    assert not (tmp_path / "elsewhere").exists() or list((tmp_path / "elsewhere").iterdir()) == []


class _Ok(BaseHTTPRequestHandler):
    """Another local server: answers 200 to everything, listing a model that is not ours."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b'{"data": [{"id": "someone-elses-model"}]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_fixed_llm_port_in_use_is_refused_before_the_server_starts(tmp_path: Path) -> None:
    """Issue 37: ``llm serve`` on a port another local server answers on said "ready" (any HTTP 200 counted)."""
    from stresstest.errors import LLMError
    from stresstest.llm.config import LLMConfig
    from stresstest.llm.served import port_problem, serve

    other = HTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    port = other.server_address[1]
    try:
        assert port_problem(port) is not None and f"127.0.0.1:{port} is in use" in str(port_problem(port))
        cfg = LLMConfig.model_validate({"backend": "openai", "server": {"port": port}})
        with pytest.raises(LLMError, match="in use by another process"):
            serve(cfg, foreground=False, log_dir=tmp_path / "logs")
        assert not (tmp_path / "logs").exists()  # nothing was started
    finally:
        other.shutdown()
        other.server_close()


@pytest.mark.integration
def test_a_managed_server_is_recognised_by_the_name_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another server that takes the port after the free-port check (a race) answers 200 too: the real llama.cpp
    server is only "ready" when /v1/models lists the name it was started with. The port check is bypassed here
    (it is tested for real above) so that the other server is there when the probe comes."""
    pytest.importorskip("llama_cpp")
    from stresstest.errors import LLMError
    from stresstest.llm import served
    from stresstest.llm.config import LLMConfig

    other = HTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    monkeypatch.setattr(served, "port_problem", lambda port: None)
    cfg = LLMConfig.model_validate({"backend": "openai", "server": {"port": other.server_address[1]}})
    proc = served.ServerProcess(cfg, tmp_path / "logs")
    try:
        with pytest.raises(LLMError, match="another server answers on .* not '"):
            proc.start()
        assert proc.proc is not None and proc.proc.poll() is not None  # ours was stopped
    finally:
        proc.stop()
        other.shutdown()
        other.server_close()


def test_an_interrupt_while_the_server_loads_stops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C or SIGTERM (raised as KeyboardInterrupt) while the managed server is still loading stops the server:
    it runs in a session of its own, so nothing else would (seen: `stresstest llm serve` killed while vLLM loaded
    left the vLLM server running). The server here is a real process that never answers, as a slow first load;
    the interrupt arrives in the readiness loop (its third health check), in the thread that runs the start,
    whichever thread that is (under pytest-xdist a test need not run in the main thread)."""
    from stresstest import children
    from stresstest.llm import served
    from stresstest.llm.config import LLMConfig

    never_ready = [sys.executable, "-c", "import time; time.sleep(600)"]
    monkeypatch.setattr(served, "server_command", lambda config, port: never_ready)
    cfg = LLMConfig.model_validate({"backend": "openai", "server": {"engine": "llama.cpp", "port": 0}})
    proc = served.ServerProcess(cfg, tmp_path / "logs")
    checks: list[str | None] = []
    real_health = proc.health

    def health() -> str | None:
        checks.append(real_health())
        if len(checks) == 3:
            raise KeyboardInterrupt
        return checks[-1]

    monkeypatch.setattr(proc, "health", health)
    try:
        with pytest.raises(KeyboardInterrupt):
            proc.start()
        assert checks == [None, None, None]  # it was still loading (alive, not answering) when interrupted
        assert proc.proc is not None and proc.proc.poll() is not None  # stopped, not left loading
        with pytest.raises(ProcessLookupError):
            os.killpg(proc.proc.pid, 0)  # its whole process group is gone
        assert proc.proc.pid not in children._LIVE
    finally:
        proc.stop()
