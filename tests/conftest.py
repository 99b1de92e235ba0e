"""Shared fixtures: a stand-in rules extractor and a sample record + transcript (structure and mitigation tests)."""

from __future__ import annotations

import contextlib
import sys
import types

import pytest

from stresstest.schema import Claim, ClinicalRecord, RecordOutput, SafetyFlag, Triage


def sample_record() -> ClinicalRecord:
    """A small valid record whose quotes come from SAMPLE_TRANSCRIPT."""
    return ClinicalRecord(
        chief_complaint="chest pain",
        triage=Triage(level="emergency", rationale="chest pain radiating to the arm"),
        claims=[
            Claim(id="c1", category="symptom", concept="chest pain", status="present", time="2 hours"),
            Claim(id="c2", category="medication", concept="warfarin", status="present", value="5", unit="mg"),
            Claim(id="c3", category="symptom", concept="shortness of breath", status="absent"),
        ],
        safety_flags=[
            SafetyFlag(id="f1", kind="allergy", name="penicillin", detail="rash"),
            SafetyFlag(id="f2", kind="high_risk_medication", name="warfarin", detail="5 mg daily"),
        ],
        field_evidence={
            "triage": ["chest pain for two hours"],
            "c2": ["I take warfarin 5 mg daily"],
            "f1": ["I'm allergic to penicillin"],
            "f2": ["I take warfarin 5 mg daily"],
        },
    )


SAMPLE_TRANSCRIPT = (
    "Doctor: What brings you in today? Patient: I've had chest pain for two hours, it goes to my left arm. "
    "I'm allergic to penicillin, I get a rash. I take warfarin 5 mg daily. Doctor: Any shortness of breath? "
    "Patient: No."
)


@pytest.fixture
def fake_rules(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Install a stand-in ``stresstest.structure.rules`` (the real one belongs to another module owner);
    returns the list of transcripts it was called with."""
    calls: list[str] = []
    mod = types.ModuleType("stresstest.structure.rules")
    mod.RULES_VERSION = "test1"  # type: ignore[attr-defined]

    def rules_fingerprint() -> str:
        return "fp-test1"

    def extract_record(transcript: str) -> ClinicalRecord:
        calls.append(transcript)
        return sample_record()

    mod.rules_fingerprint = rules_fingerprint  # type: ignore[attr-defined]
    mod.extract_record = extract_record  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "stresstest.structure.rules", mod)
    import stresstest.structure.stage as stage

    monkeypatch.setattr(stage, "rules", mod)  # the stage binds the package at import
    return calls


@pytest.fixture
def record() -> ClinicalRecord:
    return sample_record()


@pytest.fixture
def output_json() -> str:
    """The sample record as an LLM writes it under output contract v2 (quotes inside the items)."""
    return RecordOutput.from_record(sample_record()).model_dump_json()


@pytest.fixture
def transcript() -> str:
    return SAMPLE_TRANSCRIPT


# Skips that CI accepts: data or an engine that is deliberately not on the CI machine. Any other skip there
# (llama.cpp, openai-whisper, ray, piper missing) means `make test` installed less than the suite needs, and a
# skipped test proves nothing, so with CI set the session fails and names the skip.
# The real-vLLM tests need the vLLM CPU venv, which make test builds (make install-vllm): their skip is not
# accepted either. The optional larger GGUF models (make install-llm-0.5b / -1.5b) are extras, never CI's.
_CI_ACCEPTED_SKIPS = ("../shared", "not found at", "make check-vllm", "vllm is installed here", "make install-llm-")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import os

    if not os.environ.get("CI"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    bad = []
    for rep in skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        if not any(ok in reason for ok in _CI_ACCEPTED_SKIPS):
            bad.append(f"{rep.nodeid}: {reason}")
    if bad and reporter is not None:
        reporter.ensure_newline()
        reporter.write_line("CI: these skips mean a missing install (make test should have provided it):", red=True)
        for line in bad:
            reporter.write_line(f"  {line}", red=True)
    if bad:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# --- The suite's budget (issue 35, docs/testing.md) ---------------------------------------------------------------
# `make test` runs the whole suite in one pytest session on two xdist workers with the scheduler below: every test
# that starts an LLM engine (llama.cpp, vLLM) or a Ray cluster is in one group, run on one worker one after
# another, so two engines never compete for the 2 cores and a session fixture that starts an engine starts it
# once; the other worker takes the unit tests and the lighter integration tests (piper, faster-whisper,
# openai-whisper, Chromium) beside them. `demo_scale` tests (a whole shipped demo config) are left out of the
# default run; `pytest --demo-scale` (or STRESSTEST_DEMO_SCALE=1) selects them.

ENGINE_GROUP = "engines"
RAY_GROUP = "ray"
# Modules whose integration tests start an LLM engine (llama.cpp, vLLM; directly or through a `stresstest run`),
# and those that start a Ray cluster: two groups, each run on one worker in order. An LLM engine and a Ray
# cluster may run at the same time (on the two workers); two LLM engines, or two Ray clusters, never do.
ENGINE_MODULES = (
    "tests/core/test_check_llm_prompts.py",
    "tests/core/test_user_caches.py",
    "tests/hostile/test_fault_injection.py",
    "tests/hostile/test_kill_resume.py::test_sigterm_during_structuring_stops_the_managed_llm_server",
    "tests/hostile/test_ownership.py",
    "tests/llm/test_vllm_asr_cpu.py",
    "tests/llm/test_vllm_cpu_offline.py",
    "tests/llm/test_vllm_cpu_served.py",
    "tests/metrics/test_note_quality_llama_integration.py",
    "tests/pipeline/test_demo_vllm.py",
    "tests/structure/test_structure_llama_integration.py",
)
RAY_MODULES = (
    "tests/pipeline/test_demo_ray.py",
    "tests/pipeline/test_executor.py",
    "tests/pipeline/test_ray_two_nodes.py",
)
_GROUPS_ENV = "STRESSTEST_XDIST_GROUPS"  # the file the workers write the engine group's node ids to


def _listed(nodeid: str, entries: tuple[str, ...]) -> bool:
    return any(nodeid == e or nodeid.startswith(f"{e}::") or nodeid.startswith(f"{e}[") for e in entries)


def engine_group(item: pytest.Item) -> str | None:
    """The group of an integration test that starts an LLM engine (its module or test is listed above, or it
    asks for the session's llama.cpp server) or a Ray cluster; None for every other test."""
    if item.get_closest_marker("integration") is None:
        return None
    if _listed(item.nodeid, ENGINE_MODULES) or "llama_server" in getattr(item, "fixturenames", ()):
        return ENGINE_GROUP
    if _listed(item.nodeid, RAY_MODULES):
        return RAY_GROUP
    return None


def pytest_configure(config: pytest.Config) -> None:
    import os
    import tempfile

    # The xdist controller (not a worker, with -n): a fresh file for the workers to name the engine tests in;
    # they inherit the variable when they are started (after this hook).
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        fd, path = tempfile.mkstemp(prefix="stresstest-xdist-", suffix=".groups")
        os.close(fd)
        os.environ[_GROUPS_ENV] = path
        config.stash[_groups_key] = path


def pytest_unconfigure(config: pytest.Config) -> None:
    import os

    path = config.stash.get(_groups_key, None)
    if path:
        os.environ.pop(_GROUPS_ENV, None)
        with contextlib.suppress(OSError):
            os.unlink(path)


_groups_key = pytest.StashKey[str]()


def _write_engine_group(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: write each grouped test's group and node id (every worker collects the same tests,
    so every worker writes the same lines; the last rename wins)."""
    import os

    path = os.environ.get(_GROUPS_ENV)
    if not path or not hasattr(config, "workerinput"):
        return
    tmp = f"{path}.{config.workerinput['workerid']}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("".join(f"{group}\t{it.nodeid}\n" for it in items if (group := engine_group(it))))
    os.replace(tmp, path)


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover - xdist is a dev dependency
    LoadScopeScheduling = None


if LoadScopeScheduling is not None:

    class EngineGroupScheduling(LoadScopeScheduling):  # type: ignore[misc, valid-type]
        """Each test its own work unit, except the groups: one unit each, so one worker runs all of a group in
        order (sorted first, as the largest units, so they start at once) while the other worker takes the rest.
        (xdist's own --dist loadgroup cannot be used: pytest 9.2 ignores the node-id suffix pytest-xdist 3.8
        puts the group in.)"""

        def _split_scope(self, nodeid: str) -> str:
            if not hasattr(self, "_engine_ids"):
                import os

                path = os.environ.get(_GROUPS_ENV, "")
                try:
                    with open(path, encoding="utf-8") as fh:
                        rows = [ln.split("\t", 1) for ln in fh.read().splitlines() if ln]
                except OSError:
                    rows = []
                self._engine_ids = {nid: group for group, nid in rows}
            return self._engine_ids.get(nodeid, nodeid)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
        if config.getoption("dist") != "load":
            return None  # an explicit --dist keeps xdist's own scheduler
        return EngineGroupScheduling(config, log)  # type: ignore[arg-type]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--demo-scale",
        action="store_true",
        default=False,
        help="also run the demo_scale tests (whole shipped demo configs; docs/testing.md)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import os

    if not (config.getoption("--demo-scale") or os.environ.get("STRESSTEST_DEMO_SCALE")):
        _deselect_demo_scale(config, items)
    _write_engine_group(config, items)


def _deselect_demo_scale(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept = [it for it in items if it.get_closest_marker("demo_scale") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[it for it in items if it.get_closest_marker("demo_scale") is not None])
        items[:] = kept


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory):
    """The session's managed llama.cpp servers, one per server config: ``llama_server(cfg)`` starts the server
    ``cfg.server`` describes the first time it is asked for and returns the same running
    :class:`~stresstest.llm.served.ServerProcess` afterwards (a start costs seconds to tens of seconds on 2 busy
    cores). Send a test's requests there with ``server.mode: external`` and the returned server's ``base_url``.
    The start-up timeout is not part of the key.
    Tests whose subject is a server's own life (start failures, SIGKILL, SIGTERM, one engine per run) start their
    own and say why."""
    from stresstest.llm.config import LLMConfig
    from stresstest.llm.served import ServerProcess

    servers: dict[str, ServerProcess] = {}

    def get(cfg: LLMConfig) -> ServerProcess:
        key = cfg.server.model_dump_json(exclude={"startup_timeout_s"})
        if key not in servers:
            logs = tmp_path_factory.mktemp("llama-server-logs")
            servers[key] = ServerProcess(cfg, logs).start()
        return servers[key]

    try:
        yield get
    finally:
        for proc in servers.values():
            proc.stop()


DEMO_AUDIO_IDS = ("CAR0001", "RES0002")
DEMO_AUDIO_TURNS = 40


@pytest.fixture(scope="session")
def demo_speech():
    """The demo's audio at demo scale, rendered once per session: the first 40 turns of two shipped OSCE
    encounters (CAR0001, RES0002), piper TTS, in the stresstest cache (content-addressed and written atomically,
    so xdist workers and the demo share it). Returns ``[(encounter, SpeechAudio), ...]``."""
    from pathlib import Path

    from stresstest.cache import default_cache_dir
    from stresstest.corpus import load_corpus
    from stresstest.speech.render import render_encounter

    repo = Path(__file__).resolve().parents[1]
    encs = load_corpus("osce", repo / "data" / "osce" / "transcripts", ids=list(DEMO_AUDIO_IDS))
    cache = default_cache_dir()
    return [(enc, render_encounter(enc, cache)) for enc in (e.truncated(DEMO_AUDIO_TURNS) for e in encs)]
