"""Role sessions on the run's LLM engine (structure, draft, guard, judges, gold draft).

:class:`LLMSession` owns the cache lookups, bounded concurrency and progress of
one role; the engine (server or offline ``vllm.LLM``) belongs to an
:class:`~stresstest.llm.engine.LLMEngine` that the run creates once and
passes to every role (:func:`open_session` with ``engine=``), and that is only
started when some call misses the cache. A session opened without an engine (a
library caller, ``stresstest gold draft``) owns a private engine and stops it on exit. A call is
cached under ``hash(namespace, role key parts, model id, φ, response-format
mode, output-schema hash)``; the caller's key parts carry the transcript hash
and the prompt hash. Failed calls are not cached, so a re-run retries them.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from stresstest.cache import KeyValueCache, hash_obj
from stresstest.errors import LLMError
from stresstest.llm.client import CallResult
from stresstest.llm.config import LLMConfig
from stresstest.llm.engine import LLMEngine
from stresstest.llm.offline import generate_offline
from stresstest.progress import StageProgress

M = TypeVar("M", bound=BaseModel)

CACHE_CODE_VERSION = 2  # bump when how a cached call is produced changes without a prompt/schema change


@dataclass(frozen=True)
class LLMCall:
    """One request of a role.

    Attributes:
        item_id: id for progress and log lines (never the transcript).
        key_parts: what identifies the request's content besides model/φ/schema (e.g. transcript sha256,
            prompt hash); must determine ``messages``.
        messages: chat messages.
    """

    item_id: str
    key_parts: tuple[Any, ...]
    messages: list[dict[str, str]] = field(repr=False)


def schema_sha256(schema: dict[str, Any]) -> str:
    """sha256 of a JSON Schema's canonical JSON."""
    return hashlib.sha256(json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def decoding_record(config: LLMConfig) -> dict[str, object]:
    """φ as recorded with every output: decoding settings plus how the schema was enforced."""
    d: dict[str, object] = dict(config.decoding.model_dump())
    d["response_format"] = (
        "vllm_structured_outputs" if config.backend == "vllm-offline" else config.resolved_response_format()
    )
    return d


class LLMSession:
    """Cache-first execution of one role's LLM calls on an engine ('openai' or 'vllm-offline').

    Args:
        engine: the engine the calls go to (the run's, passed down by whoever owns it).
        role: the caller's name in the manifest's ``llm_engines[].roles`` (default: the first namespace run).
        owns_engine: close the engine with the session (a private engine: :func:`open_session` without one).

    Use as a context manager; closing never stops an engine the session does not own.
    """

    def __init__(self, engine: LLMEngine, *, role: str | None = None, owns_engine: bool = False) -> None:
        self.engine = engine
        self.config = engine.config
        self.cache_dir = engine.cache_dir
        self.log_dir = engine.log_dir
        self.role = role
        self._owns_engine = owns_engine

    @property
    def model_id(self) -> str:
        """Model identity (see :func:`stresstest.llm.served.model_identity`), computed once."""
        return self.engine.model_id

    def __enter__(self) -> LLMSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the engine if this session owns it (a shared engine is closed by its owner)."""
        if self._owns_engine:
            self.engine.close()

    def cache_key(self, namespace: str, call: LLMCall, schema: dict[str, Any]) -> str:
        """The cache key of one call (see module docstring)."""
        return hash_obj(
            namespace,
            CACHE_CODE_VERSION,
            list(call.key_parts),
            self.model_id,
            decoding_record(self.config),
            schema_sha256(schema),
        )

    def run(
        self,
        calls: Sequence[LLMCall],
        model_cls: type[M],
        *,
        namespace: str,
        schema_name: str,
        schema: dict[str, Any] | None = None,
        desc: str = "llm",
    ) -> list[CallResult[M]]:
        """Run calls (cache first), in input order; failures come back as failed results, never raise.

        Args:
            calls: the requests.
            model_cls: pydantic model every output must validate against.
            namespace: cache namespace (one per role, e.g. ``structure``, ``guard``, ``judge``).
            schema_name: name of the schema in the request.
            schema: JSON Schema enforced (default ``model_cls.model_json_schema()``).
            desc: progress-bar label.
        """
        schema = schema or model_cls.model_json_schema()
        self.engine.note_role(self.role or namespace)
        cache = KeyValueCache(self.cache_dir, f"llm-{namespace}")
        results: list[CallResult[M] | None] = [None] * len(calls)
        keys = [self.cache_key(namespace, c, schema) for c in calls]
        pending: list[int] = []
        for i, key in enumerate(keys):
            # A damaged or foreign entry is a miss (with a warning naming the file): recomputed, overwritten.
            entry = cache.get(key, validate=lambda v: (v, model_cls.model_validate(v["parsed"])))
            if entry is not None:
                hit, parsed = entry
                results[i] = CallResult(
                    parsed,
                    hit.get("raw_text"),
                    None,
                    int(hit.get("attempts", 1)),
                    float(hit.get("elapsed_s", 0.0)),
                    cached=True,
                )
            else:
                pending.append(i)
        if pending:
            # Identical requests in one batch (same key) are sent once and share the result.
            first_of: dict[str, int] = {}
            for i in pending:
                first_of.setdefault(keys[i], i)
            unique = list(first_of.values())
            fresh: dict[int, CallResult[M]] = {}

            def done(j: int, res: CallResult[M]) -> None:
                # Written as each call finishes, so a crash loses only the calls in flight.
                i = unique[j]
                fresh[i] = res
                if res.parsed is not None:
                    cache.put(
                        keys[i],
                        {
                            "parsed": res.parsed.model_dump(mode="json"),
                            "raw_text": res.raw_text,
                            "attempts": res.attempts,
                            "elapsed_s": round(res.elapsed_s, 4),
                            "written": time.time(),
                        },
                    )

            self._execute([calls[i] for i in unique], model_cls, schema_name, schema, desc, done)
            for i in pending:
                results[i] = fresh[first_of[keys[i]]]
        return [r for r in results if r is not None]

    def _execute(
        self,
        calls: Sequence[LLMCall],
        model_cls: type[M],
        schema_name: str,
        schema: dict[str, Any],
        desc: str,
        done: Callable[[int, CallResult[M]], None],
    ) -> None:
        if self.config.backend == "vllm-offline":
            for j, res in enumerate(
                generate_offline([c.messages for c in calls], model_cls, schema, self.config, llm=self.engine.llm())
            ):
                done(j, res)
            return
        client = self.engine.client()

        def one(call: LLMCall) -> CallResult[M]:
            return client.complete(call.messages, model_cls, schema_name=schema_name, schema=schema, label=call.item_id)

        with (
            ThreadPoolExecutor(max_workers=self.engine.concurrency) as pool,
            # a bar on a terminal, plain lines in a log; none when the run's progress is off
            StageProgress(desc, len(calls), unit="call", enabled=self.engine.progress) as bar,
        ):
            futures = {pool.submit(one, c): j for j, c in enumerate(calls)}
            try:
                for fut in as_completed(futures):
                    res = fut.result()
                    done(futures[fut], res)
                    bar.update(1, failed=int(res.failed))
            except BaseException:
                # Ctrl-C or a bug: do not start the queued calls; finished ones are already cached.
                for fut in futures:
                    fut.cancel()
                raise


def open_session(
    config: LLMConfig,
    *,
    cache_dir: str | Path,
    log_dir: str | Path,
    engine: LLMEngine | None = None,
    role: str | None = None,
) -> LLMSession:
    """A session for ``role``: on ``engine`` (the run's) when given, else on a private engine it owns.

    Args:
        config: the LLM config the caller was given; must equal the engine's (one engine per run serves every
            role with the same model and φ).
        cache_dir: cache root of a private engine (a given engine keeps its own).
        log_dir: where a private managed server writes its log.
        engine: the run's engine, or None for a library caller (``stresstest gold draft``, a script).
        role: the caller's name in the manifest.

    Raises:
        LLMError: backend 'rules', or ``config`` differs from the given engine's.
    """
    if config.backend == "rules":
        raise LLMError("LLMSession: backend 'rules' makes no LLM calls; expected 'openai' or 'vllm-offline'")
    if engine is None:
        return LLMSession(LLMEngine(config, cache_dir=cache_dir, log_dir=log_dir), role=role, owns_engine=True)
    if engine.config != config:
        raise LLMError(
            "LLMSession: the session's LLM config differs from the run engine's; one engine per run "
            "serves every role with the same model and φ"
        )
    return LLMSession(engine, role=role)
