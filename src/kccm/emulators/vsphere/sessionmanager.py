"""A fake of vSphere's shared session manager (vc-session-manager).

It answers ``GET <url>`` as the real one does for the CPI (upstream
``pkg/common/vclib/vc_session_manager.go`` is its client): it checks the
``Authorization: Bearer <token>`` header and answers ``200 {"token": "<ticket>"}``, or ``401``
for any other bearer. The ticket comes from ``issue`` (the vsphere tests log in to vcsim and
call ``SessionManager.AcquireCloneTicket``, as the real session manager does with vCenter).

Plain HTTP on a loopback port, in a thread of the test's process rather than a child process
of its own like the emulators: its tickets come from a function of the test (the test's own
vCenter session). ``requests`` counts the answered tickets and ``refused`` the 401s.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["FakeSessionManager"]

PATH = "/session"


class FakeSessionManager:
    """Serves clone tickets from ``issue()`` to whoever shows ``Bearer <token>``."""

    def __init__(self, token: str, issue: Callable[[], str]) -> None:
        self.token = token
        self.issue = issue
        self.requests = 0
        self.refused = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{PATH}"

    def _answer(self, path: str, authorization: str) -> tuple[int, dict[str, Any]]:
        if urlsplit(path).path != PATH:
            return 404, {"error": "not found"}
        with self._lock:
            if authorization != f"Bearer {self.token}":
                self.refused += 1
                return 401, {"error": "unauthorized"}
            self.requests += 1
        return 200, {"token": self.issue()}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = fake._answer(self.path, self.headers.get("Authorization", ""))
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler

    def __enter__(self) -> FakeSessionManager:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
