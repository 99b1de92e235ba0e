"""OpenAI-compatible chat-completions client with schema-constrained output.

One client serves every LLM role (structure, mitigation draft/guard, judge,
gold draft). It talks to ``<base_url>/v1/chat/completions`` over httpx, sends
the decoding φ with every request and asks for output constrained by the
pydantic model's JSON Schema:

* ``json_schema`` mode: ``{"type": "json_schema", "json_schema": {"name", "schema"}}``
  (OpenAI, vLLM's server);
* ``json_object`` mode: ``{"type": "json_object", "schema": ...}`` — what
  llama-cpp-python's server understands (it rejects ``json_schema`` with a 500
  "Input should be 'text' or 'json_object'", verified against 0.3.36) and turns
  into a grammar.

Every request carries the whole decoding φ (:func:`phi_payload`: temperature,
top_p, top_k, min_p, the repetition/presence/frequency penalties, seed,
max_tokens) in the server's dialect, so no server default or model generation
config fills a gap.

Retries (exponential backoff ``backoff_s * 2**k``): connection errors,
timeouts, HTTP 5xx/408/429, a malformed response body, invalid JSON and schema
violations. Other 4xx answers are not retried (the request itself is wrong).
Output cut at ``max_tokens`` (``finish_reason == "length"``) is retried only at
temperature > 0: greedy decoding would reproduce the same truncation, so at
temperature 0 it is a failure at once, its reason saying so (and whether the
output ended in a whitespace run, the known runaway of JSON-schema decoding).
Once retries are exhausted the call is a failure carrying the reason, the last
raw text and, for a managed server, the server log's path; it is never replaced
by a default object.

Logs never contain transcripts or model text: only ids, status codes and reasons.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from stresstest.llm.config import LLMConfig
from stresstest.net import trust_env

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

_MAX_BACKOFF_S = 30.0
_RAW_KEEP = 20_000  # characters of raw text kept in a failure record
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*)\n\s*```\s*$", re.DOTALL)


@dataclass(frozen=True)
class Endpoint:
    """A reachable OpenAI-compatible server.

    Attributes:
        base_url: server root without ``/v1`` (e.g. ``http://127.0.0.1:8080``).
        model: model name sent in requests.
        api_key: bearer token (external servers only); excluded from repr so it cannot leak into logs.
        health: optional probe returning None while the server is fine, else why it is not (e.g. a
            managed process that exited); appended to connection-error reasons.
        log_path: the managed server's log file, named in every failure reason (None: external server).
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    health: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)
    log_path: str | None = None


@dataclass
class CallResult(Generic[M]):
    """Outcome of one schema-constrained call (success or recorded failure)."""

    parsed: M | None
    raw_text: str | None
    error: str | None
    attempts: int
    elapsed_s: float
    cached: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None

    @property
    def failed(self) -> bool:
        """True when no valid object was obtained."""
        return self.parsed is None


class _Retryable(Exception):
    def __init__(self, reason: str, raw: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.raw = raw


class _Fatal(_Retryable):
    """A failure that retrying cannot fix (4xx other than 408/429)."""


_WS_RUN = re.compile(r"\s+$")
WHITESPACE_RUNAWAY_CHARS = 64  # a truncated output ending in this much whitespace ran away in whitespace


def truncation_reason(text: str, max_tokens: int, temperature: float, where: str = "") -> str:
    """Reason recorded for an output cut at ``max_tokens``: names the limit, whether the output ended in a
    whitespace run (the runaway JSON-schema decoding is known for) and, at temperature 0, that it was not
    retried because greedy decoding would reproduce it."""
    m = _WS_RUN.search(text)
    tail = len(m.group(0)) if m else 0
    parts = [f"truncated output (finish_reason=length at max_tokens={max_tokens}"]
    if tail >= WHITESPACE_RUNAWAY_CHARS:
        parts.append(f"; whitespace runaway: output ends in {tail} whitespace characters")
    if temperature == 0:
        parts.append("; not retried: at temperature 0 a retry reproduces it")
    if where:
        parts.append(f"; {where}")
    return "".join(parts) + ")"


def phi_payload(config: LLMConfig) -> dict[str, Any]:
    """The sampling fields of every chat-completions request: the whole φ, in the server's dialect.

    vLLM (and the OpenAI schema) name the multiplicative penalty ``repetition_penalty``; llama-cpp-python's
    server calls it ``repeat_penalty`` and silently ignores the other name (its own default is 1.1). This dict
    is exactly what is sent (the manifest records it under ``llm_engines[].phi_sent``).
    """
    d = config.decoding
    penalty_key = "repeat_penalty" if config.server.engine == "llama.cpp" else "repetition_penalty"
    return {
        "temperature": d.temperature,
        "top_p": d.top_p,
        "top_k": d.top_k if config.server.engine == "llama.cpp" or d.top_k > 0 else -1,
        "min_p": d.min_p,
        penalty_key: d.repetition_penalty,
        "presence_penalty": d.presence_penalty,
        "frequency_penalty": d.frequency_penalty,
        "seed": d.seed,
        "max_tokens": d.max_tokens,
    }


def response_format_payload(mode: str, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` request field for a schema, in the server's dialect."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    raise ValueError(f"response_format mode: expected 'json_schema' or 'json_object', got {mode!r}")


def strip_code_fence(text: str) -> str:
    """Remove one surrounding Markdown code fence (unconstrained servers sometimes add one)."""
    m = _FENCE.match(text)
    return m.group(1) if m else text


def parse_output(text: str, model_cls: type[M]) -> M:
    """Parse and validate model text against ``model_cls``.

    Raises:
        ValueError: with a short reason (invalid JSON at position n, or the first schema violations).
    """
    body = strip_code_fence(text)
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg} at char {exc.pos} of {len(body)})") from exc
    try:
        return model_cls.model_validate(obj)
    except ValidationError as exc:
        errs = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()[:3])
        raise ValueError(f"schema violation ({exc.error_count()} errors: {errs})") from exc


class ChatClient:
    """Thread-safe client for one endpoint (one httpx.Client shared by the worker threads)."""

    def __init__(self, endpoint: Endpoint, config: LLMConfig) -> None:
        self.endpoint = endpoint
        self.config = config
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        # The engine fills an unset concurrency before it builds the client; a client built directly gets the
        # default of an engine it did not start.
        pool = config.concurrency or config.resolved_concurrency(gpu=False)[0]
        self._http = httpx.Client(
            base_url=endpoint.base_url.rstrip("/"),
            headers=headers,
            trust_env=trust_env(endpoint.base_url),  # no proxy for a server on 127.0.0.1
            timeout=httpx.Timeout(config.timeout_s),
            limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool),
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request_body(self, messages: list[dict[str, str]], schema_name: str, schema: dict[str, Any]) -> dict[str, Any]:
        """The exact JSON body sent (the whole decoding φ + constrained response format)."""
        return {
            "model": self.endpoint.model,
            "messages": messages,
            **phi_payload(self.config),
            "stream": False,
            "response_format": response_format_payload(self.config.resolved_response_format(), schema_name, schema),
        }

    def complete(
        self,
        messages: list[dict[str, str]],
        model_cls: type[M],
        *,
        schema_name: str,
        schema: dict[str, Any] | None = None,
        label: str = "",
    ) -> CallResult[M]:
        """One constrained call with retries; never raises for server or output faults.

        Args:
            messages: chat messages (system + user).
            model_cls: pydantic model the output must validate against.
            schema_name: name given to the schema in the request.
            schema: JSON Schema to enforce (default: ``model_cls.model_json_schema()``).
            label: item id for log lines (never the transcript).

        Returns:
            A :class:`CallResult`; on failure ``parsed`` is None, ``error`` says why after how many
            attempts and ``raw_text`` holds the last text the server returned.
        """
        body = self.request_body(messages, schema_name, schema or model_cls.model_json_schema())
        t0 = time.monotonic()
        raw: str | None = None
        reason = ""
        attempts = 0
        usage: dict[str, Any] = {}
        for attempt in range(self.config.max_retries + 1):
            attempts = attempt + 1
            if attempt:
                delay = min(self.config.backoff_s * 2 ** (attempt - 1), _MAX_BACKOFF_S)
                log.info(
                    "%s: retry %d/%d in %.2fs after: %s",
                    label,
                    attempt,
                    self.config.max_retries,
                    delay,
                    reason,
                )
                time.sleep(delay)
            try:
                text = self._post(body, usage)
                raw = text
                try:
                    parsed = parse_output(text, model_cls)
                except ValueError as exc:
                    raise _Retryable(str(exc), text) from exc
                return CallResult(parsed, text, None, attempts, time.monotonic() - t0, **_usage_fields(usage))
            except _Fatal as exc:
                reason, raw = exc.reason, exc.raw if exc.raw is not None else raw
                break
            except _Retryable as exc:
                reason = exc.reason
                raw = exc.raw if exc.raw is not None else raw
        url = f"{self.endpoint.base_url.rstrip('/')}/v1/chat/completions"
        where = f"after {attempts} attempt{'s' if attempts > 1 else ''} to {url}"
        if self.endpoint.log_path:
            where += f"; server log: {self.endpoint.log_path}"
        error = f"{reason} ({where})"
        log.warning("%s: failed: %s", label, error)
        return CallResult(
            None,
            raw[:_RAW_KEEP] if raw else raw,
            error,
            attempts,
            time.monotonic() - t0,
            **_usage_fields(usage),
        )

    def prompt_tokens(self, messages: list[dict[str, str]], schema_name: str, schema: dict[str, Any]) -> int:
        """The prompt tokens the server counts for this exact request (chat template, schema and φ included),
        read from ``usage`` of one call capped at a single output token.

        Raises:
            LLMError: the server refused the request (e.g. a prompt longer than its context) or sent no usage;
                the message holds the server's own reason.
        """
        from stresstest.errors import LLMError

        body = {**self.request_body(messages, schema_name, schema), "max_tokens": 1}
        try:
            resp = self._http.post("/v1/chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise LLMError(f"{self.endpoint.base_url}: {type(exc).__name__}: {exc}") from exc
        if resp.status_code != 200:
            raise LLMError(f"HTTP {resp.status_code}: {' '.join(resp.text[:300].split())}")
        try:
            return int(resp.json()["usage"]["prompt_tokens"])
        except (ValueError, KeyError, TypeError) as exc:
            raise LLMError(f"{self.endpoint.base_url} sent no usage.prompt_tokens") from exc

    def _dead_suffix(self) -> str:
        probe = self.endpoint.health
        why = probe() if probe else None
        return f"; {why}" if why else ""

    def _post(self, body: dict[str, Any], usage: dict[str, Any]) -> str:
        """POST one request; returns the message text, fills ``usage`` (token counts, finish reason)."""
        try:
            resp = self._http.post("/v1/chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timeout after {self.config.timeout_s:g}s ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise _Retryable(f"connection error ({type(exc).__name__}: {exc}){self._dead_suffix()}") from exc
        if resp.status_code != 200:
            snippet = resp.text[:500]
            reason = f"HTTP {resp.status_code}: {snippet}"
            if resp.status_code >= 500 or resp.status_code in (408, 429):
                raise _Retryable(reason, resp.text)
            raise _Fatal(reason, resp.text)
        try:
            data = resp.json()
            choice = data["choices"][0]
            text = choice["message"]["content"]
            finish = choice.get("finish_reason")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise _Retryable(
                f"malformed response (expected choices[0].message.content, got {resp.text[:200]!r})",
                resp.text,
            ) from exc
        u = data.get("usage") if isinstance(data, dict) else None
        usage.clear()
        usage["finish_reason"] = finish
        if isinstance(u, dict):
            usage["prompt_tokens"] = u.get("prompt_tokens")
            usage["completion_tokens"] = u.get("completion_tokens")
        if not isinstance(text, str):
            raise _Retryable(f"malformed response (message.content is {type(text).__name__})", resp.text)
        if finish == "length":
            d = self.config.decoding
            reason = truncation_reason(text, d.max_tokens, d.temperature)
            # Greedy decoding reproduces the same truncation: retrying only costs time.
            raise (_Fatal if d.temperature == 0 else _Retryable)(reason, text)
        return text


def _usage_fields(usage: dict[str, Any]) -> dict[str, Any]:
    def _int(v: Any) -> int | None:
        return int(v) if isinstance(v, int) else None

    return {
        "prompt_tokens": _int(usage.get("prompt_tokens")),
        "completion_tokens": _int(usage.get("completion_tokens")),
        "finish_reason": usage.get("finish_reason") if isinstance(usage.get("finish_reason"), str) else None,
    }


def list_models(base_url: str, api_key: str | None = None, timeout_s: float = 10.0) -> list[str]:
    """Model ids a server lists at ``/v1/models`` (raises httpx errors to the caller)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    resp = httpx.get(
        f"{base_url.rstrip('/')}/v1/models", headers=headers, timeout=timeout_s, trust_env=trust_env(base_url)
    )
    resp.raise_for_status()
    return [str(m["id"]) for m in resp.json().get("data", [])]
