"""A scripted ARM for the ARM client's unit tests: a real HTTP server on a loopback port (one
thread), answering each ``(method, path)`` from a list of scripted answers (the last one
repeats), recording every request it got."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from azure.core.credentials import AccessToken


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Got:
    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: Any


class StaticToken:
    """A TokenCredential handing out one token (no sign-in in these tests)."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **_: Any) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken("stub-token", 4_000_000_000)


class StubARM:
    def __init__(self) -> None:
        self.script: dict[tuple[str, str], list[Answer]] = {}
        self.got: list[Got] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def reset(self) -> None:
        with self._lock:
            self.script.clear()
            self.got.clear()

    def on(self, method: str, path: str, *answers: Answer) -> None:
        self.script[(method, path)] = list(answers)

    def requests(self, method: str | None = None) -> list[Got]:
        with self._lock:
            return [g for g in self.got if method is None or g.method == method]

    def _answer(self, method: str, path: str) -> Answer:
        with self._lock:
            answers = self.script.get((method, path))
            if not answers:
                return Answer(404, {"error": {"code": "NotFound", "message": f"no {path}"}})
            return answers.pop(0) if len(answers) > 1 else answers[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with stub._lock:
                    stub.got.append(
                        Got(
                            self.command,
                            parts.path,
                            parse_qs(parts.query),
                            {k.lower(): v for k, v in self.headers.items()},
                            json.loads(raw) if raw else None,
                        )
                    )
                answer = stub._answer(self.command, parts.path)
                payload = b"" if answer.body is None else json.dumps(answer.body).encode()
                self.send_response(answer.status)
                for key, value in answer.headers.items():
                    self.send_header(key, value.replace("{url}", stub.url))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_DELETE = do_POST = _serve

        return Handler

    def __enter__(self) -> StubARM:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


def stub_arm() -> Iterator[StubARM]:
    """One server (use it module-scoped; :meth:`StubARM.reset` between tests)."""
    with StubARM() as stub:
        yield stub
