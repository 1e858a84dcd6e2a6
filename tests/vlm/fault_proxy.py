"""A small HTTP proxy in front of the real vLLM server that injects faults into chat completions.

Faults (``FaultProxy.inject``): ``"500"`` (an HTTP 500 answer), ``"drop"`` (the connection is
reset before any answer), ``"delay"`` (the answer comes after ``delay_s``, past the client's time
limit), ``"truncate"`` (the upstream answer cut in half mid-body) and ``"refuse"`` (the listening
socket closes, so connections are refused, and opens again on the same port after
``relisten_s``; never when that is None). Every other request is forwarded unchanged; the model
list (the engine's health check) is never faulted.
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class FaultProxy:
    """Forwards to ``upstream`` (``http://host:port``); see the module docstring for the faults."""

    def __init__(self, upstream: str, delay_s: float = 5.0, relisten_s: float | None = 1.5) -> None:
        parsed = urlparse(upstream)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.delay_s, self.relisten_s = delay_s, relisten_s
        self.port = 0
        self.counts: Counter[str] = Counter()  # "chat" requests seen, and each fault injected
        self._queue: deque[str] = deque()
        self._always: str | None = None
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.listen()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def inject(self, *faults: str, always: str | None = None) -> None:
        """Fault the next chat requests with ``faults`` in order; with ``always``, every one after them."""
        with self._lock:
            self._queue.extend(faults)
            self._always = always

    def listen(self) -> None:
        """(Re)open the listening socket, on the same port as before if there was one."""
        handler = type("Handler", (_Handler,), {"proxy": self})
        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True).start()

    def refuse(self) -> bool:
        """Close the listening socket: new connections are refused until ``listen()``. Returns
        whether it was open (two requests faulted at once must not schedule two re-listens)."""
        with self._lock:
            server, self._server = self._server, None
        if server is None:
            return False
        server.shutdown()
        server.server_close()
        return True

    def close(self) -> None:
        self.relisten_s = None
        self.refuse()

    def _refuse_for_a_while(self) -> None:
        if self.refuse() and self.relisten_s is not None:
            timer = threading.Timer(self.relisten_s, self.listen)
            timer.daemon = True
            timer.start()

    def next_fault(self) -> str | None:
        with self._lock:
            self.counts["chat"] += 1
            fault = self._queue.popleft() if self._queue else self._always
            if fault:
                self.counts[fault] += 1
            return fault

    def forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list, bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=600)
        try:
            conn.request(method, path, body=body or None, headers=headers)
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            conn.close()


class _Handler(BaseHTTPRequestHandler):
    proxy: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet: the test reads counts instead
        pass

    def do_GET(self) -> None:
        self._serve(None)

    def do_POST(self) -> None:
        fault = self.proxy.next_fault() if self.path.endswith("/chat/completions") else None
        self._serve(fault)

    def _serve(self, fault: str | None) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if fault in ("drop", "refuse"):
            if fault == "refuse":  # from another thread: shutdown() waits for serve_forever to return
                threading.Thread(target=self.proxy._refuse_for_a_while, daemon=True).start()
            self._reset()
            return
        if fault == "500":
            self._answer(500, [("Content-Type", "application/json")], b'{"error": {"message": "injected"}}')
            return
        if fault == "delay":
            time.sleep(self.proxy.delay_s)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        status, upstream_headers, payload = self.proxy.forward(self.command, self.path, headers, body)
        if fault == "truncate":
            self._answer(status, upstream_headers, payload, cut=len(payload) // 2)
            return
        self._answer(status, upstream_headers, payload)

    def _answer(self, status: int, headers: list, payload: bytes, cut: int | None = None) -> None:
        try:
            self.send_response(status)
            for key, value in headers:
                if key.lower() not in _HOP:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload if cut is None else payload[:cut])
            self.wfile.flush()
        except OSError:  # the client gave up (a delayed answer after its time limit)
            return
        if cut is not None:
            self._reset()

    def _reset(self) -> None:
        """Abort the connection with a TCP reset (SO_LINGER 0), as a crashed server would."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()
