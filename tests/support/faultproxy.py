"""An HTTP proxy between the LLM client and a real server that injects faults (the fault-injection suite).

Every ``period``-th POST (``k % period == offset``, so 20% with the default
period of 5) gets a fault instead of a clean answer; the kinds rotate, so five
consecutive faulted requests cover all of them:

* ``http_5xx``    — 503 with a JSON error body;
* ``drop``        — the connection is closed without any response;
* ``invalid_json`` — 200 with a body that is not JSON;
* ``truncated_json`` — the real answer, cut in half (Content-Length matches the cut);
* ``timeout``     — the connection is held open for ``hold_s`` seconds, then closed.

GET requests (``/v1/models``) are forwarded untouched. The proxy binds
127.0.0.1 only and records what it did in ``log`` (request number, fault kind).
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

FAULT_KINDS: tuple[str, ...] = ("http_5xx", "drop", "invalid_json", "truncated_json", "timeout")


class FaultProxy:
    """Start with ``FaultProxy(upstream).start()``; ``base_url`` is what the client should use."""

    def __init__(
        self,
        upstream: str,
        *,
        period: int = 5,
        offset: int = 1,
        hold_s: float = 12.0,
        kinds: tuple[str, ...] = FAULT_KINDS,
    ) -> None:
        u = urlsplit(upstream)
        self.up_host, self.up_port = u.hostname or "127.0.0.1", int(u.port or 80)
        self.period, self.offset, self.hold_s, self.kinds = period, offset, hold_s, kinds
        self.lock = threading.Lock()
        self.n_posts = 0
        self.n_faults = 0
        self.log: list[tuple[int, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _forward(self, body: bytes | None) -> tuple[int, list[tuple[str, str]], bytes]:
                conn = http.client.HTTPConnection(proxy.up_host, proxy.up_port, timeout=600)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                hdrs = [
                    (k, v)
                    for k, v in resp.getheaders()
                    if k.lower() not in ("content-length", "transfer-encoding", "connection")
                ]
                return resp.status, hdrs, data

            def _send(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
                try:
                    self.send_response(status)
                    for k, v in headers:
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                    self.close_connection = True

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                self._send(*self._forward(None))

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    k = proxy.n_posts
                    proxy.n_posts += 1
                    kind = None
                    if k % proxy.period == proxy.offset:
                        kind = proxy.kinds[proxy.n_faults % len(proxy.kinds)]
                        proxy.n_faults += 1
                    proxy.log.append((k, kind or "ok"))
                if kind is None:
                    self._send(*self._forward(body))
                elif kind == "http_5xx":
                    self._send(503, [("Content-Type", "application/json")], b'{"error": "injected 503"}')
                elif kind == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                elif kind == "invalid_json":
                    self._send(200, [("Content-Type", "application/json")], b"<html>not json at all")
                elif kind == "truncated_json":
                    status, hdrs, data = self._forward(body)
                    self._send(status, hdrs, data[: len(data) // 2])
                elif kind == "timeout":
                    time.sleep(proxy.hold_s)
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> FaultProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
