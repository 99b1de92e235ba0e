"""One LLM session for every role (structure, draft, guard, judge, gold draft).

:class:`LLMSession` owns the cache lookups, the lazily started server (a
managed server is only started when some call misses the cache, and is reused
by every role within the session), bounded concurrency and progress. A call is
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
from tqdm import tqdm

from stresstest.cache import KeyValueCache, hash_obj
from stresstest.errors import StructureError
from stresstest.structure.client import CallResult, ChatClient, Endpoint
from stresstest.structure.config import StructureConfig

M = TypeVar("M", bound=BaseModel)

CACHE_CODE_VERSION = 1  # bump when how a cached call is produced changes without a prompt/schema change


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


def decoding_record(config: StructureConfig) -> dict[str, object]:
    """φ as recorded with every output: decoding settings plus how the schema was enforced."""
    d: dict[str, object] = dict(config.decoding.model_dump())
    d["response_format"] = (
        "vllm_structured_outputs" if config.backend == "vllm-offline" else config.resolved_response_format()
    )
    return d


class LLMSession:
    """Cache-first execution of LLM calls against the configured backend ('openai' or 'vllm-offline').

    Use as a context manager; a managed server started inside is stopped on exit.
    """

    def __init__(self, config: StructureConfig, *, cache_dir: str | Path, log_dir: str | Path) -> None:
        if config.backend == "rules":
            raise StructureError(
                "LLMSession: backend 'rules' makes no LLM calls; expected 'openai' or 'vllm-offline'"
            )
        self.config = config
        self.cache_dir = Path(cache_dir)
        self.log_dir = Path(log_dir)
        self._model_id: str | None = None
        self._endpoint_cm: Any = None
        self._endpoint: Endpoint | None = None
        self._client: ChatClient | None = None

    @property
    def model_id(self) -> str:
        """Model identity (see :func:`stresstest.structure.server.model_identity`), computed once."""
        if self._model_id is None:
            from stresstest.structure.server import model_identity

            if self.config.backend == "vllm-offline":
                from stresstest.structure.vllm_offline import offline_model_id

                self._model_id = offline_model_id(self.config)
            else:
                self._model_id = model_identity(self.config)
        return self._model_id

    def __enter__(self) -> LLMSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the client and stop a managed server, if one was started."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._endpoint_cm is not None:
            cm, self._endpoint_cm = self._endpoint_cm, None
            self._endpoint = None
            cm.__exit__(None, None, None)

    def _chat_client(self) -> ChatClient:
        if self._client is None:
            from stresstest.structure.server import open_endpoint

            cm = open_endpoint(self.config, self.log_dir)
            self._endpoint = cm.__enter__()
            self._endpoint_cm = cm
            self._client = ChatClient(self._endpoint, self.config)
        return self._client

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
            from stresstest.structure.vllm_offline import generate_offline

            for j, res in enumerate(
                generate_offline([c.messages for c in calls], model_cls, schema, self.config)
            ):
                done(j, res)
            return
        client = self._chat_client()

        def one(call: LLMCall) -> CallResult[M]:
            return client.complete(
                call.messages, model_cls, schema_name=schema_name, schema=schema, label=call.item_id
            )

        with (
            ThreadPoolExecutor(max_workers=self.config.concurrency) as pool,
            tqdm(total=len(calls), desc=desc, unit="call", leave=False) as bar,
        ):
            futures = {pool.submit(one, c): j for j, c in enumerate(calls)}
            try:
                for fut in as_completed(futures):
                    done(futures[fut], fut.result())
                    bar.update(1)
            except BaseException:
                # Ctrl-C or a bug: do not start the queued calls; finished ones are already cached.
                for fut in futures:
                    fut.cancel()
                raise
