"""Run the moto emulator: ``python -m kccm.emulators.aws [--port P] [--host H]
[--parent-pid PID]``: moto's server (every service on one port) with kccm's teachings
(:mod:`~kccm.emulators.aws.teachings`), a request log and per-call faults.

Set ``MOTO_EC2_LOAD_DEFAULT_AMIS=false`` in its environment to spare each region's EC2 the
~1300 default AMIs. It prints one JSON line on stdout once it listens (``{"url": ..., "pid":
...}``) and stops on SIGTERM, SIGINT, or once ``--parent-pid`` is gone.

Its own API, beside moto's (``/moto-api/reset`` empties moto): ``GET /_kccm/requests?since=N``
(the log: ``{seq, method, path, service, action, status}``), ``GET|POST|DELETE
/_kccm/faults`` (:mod:`~kccm.emulators.aws.faults`).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import re
import signal
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from kccm.emulators.aws import faults
from kccm.emulators.aws.teachings import teach_moto

__all__ = ["RequestLog", "main", "parse_args"]

ADMIN = "/_kccm/"
_ACTION = re.compile(r"(?:^|&)Action=([A-Za-z0-9]+)")
_SERVICE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([a-z0-9-]+)/")
Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class RequestLog:
    """A WSGI layer in front of moto: logs every call, answers the ``/_kccm/`` API."""

    def __init__(self, app: Wsgi) -> None:
        self.app = app
        self.entries: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = str(environ.get("PATH_INFO", ""))
        if path.startswith(ADMIN):
            return self._admin(environ, path[len(ADMIN) :], start_response)
        entry = self._entry(environ, path)

        def logged(status: str, headers: Any, *rest: Any) -> Any:
            entry["status"] = int(status.split(" ", 1)[0])
            return start_response(status, headers, *rest)

        return self.app(environ, logged)

    def _entry(self, environ: dict[str, Any], path: str) -> dict[str, Any]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = b""
        if length:
            body = environ["wsgi.input"].read(length)
            environ["wsgi.input"] = io.BytesIO(body)
        query = str(environ.get("QUERY_STRING", ""))
        action = _ACTION.search(body.decode(errors="replace")) or _ACTION.search(query)
        scope = _SERVICE.search(str(environ.get("HTTP_AUTHORIZATION", "")))
        with self._lock:
            entry = {
                "seq": len(self.entries) + 1,
                "method": environ.get("REQUEST_METHOD", ""),
                "path": path,
                "service": scope.group(1) if scope else "?",
                "action": action.group(1) if action else "?",
                "status": 0,
            }
            self.entries.append(entry)
        return entry

    def _admin(
        self, environ: dict[str, Any], what: str, start_response: Callable[..., Any]
    ) -> list[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            status, body = self._answer(method, what, environ)
        except ValueError as exc:
            status, body = 400, {"error": str(exc)}
        payload = json.dumps(body).encode()
        start_response(
            f"{status} {'OK' if status < 400 else 'Bad Request'}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
        )
        return [payload]

    def _answer(self, method: str, what: str, environ: dict[str, Any]) -> tuple[int, Any]:
        if (method, what) == ("GET", "requests"):
            query = urllib.parse.parse_qs(str(environ.get("QUERY_STRING", "")))
            since = int(query.get("since", ["0"])[0])
            with self._lock:
                return 200, [dict(e) for e in self.entries[since:]]
        if (method, what) == ("GET", "faults"):
            return 200, faults.faults()
        if (method, what) == ("POST", "faults"):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            return 201, faults.add_fault(json.loads(environ["wsgi.input"].read(length) or b"{}"))
        if (method, what) == ("DELETE", "faults"):
            faults.clear_faults()
            return 200, []
        return 404, {"error": f"no {method} /_kccm/{what}"}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kccm.emulators.aws", description="moto's server, taught by kccm"
    )
    parser.add_argument("--port", type=int, default=0, help="0 (the default): any free port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--parent-pid", type=int, default=0, help="stop when this process is gone (the launcher's)"
    )
    return parser.parse_args(argv)


def _watch_parent(pid: int, stop: threading.Event) -> None:
    """Set ``stop`` once ``pid`` is gone (checked every second)."""
    while pid and not stop.wait(1.0):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            stop.set()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    teach_moto()
    app = RequestLog(DomainDispatcherApplication(create_backend_app))
    server = make_server(args.host, args.port, app, True, request_handler=MotoRequestHandler)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    threading.Thread(target=_watch_parent, args=(args.parent_pid, stop), daemon=True).start()
    serving = threading.Thread(target=server.serve_forever, name="moto", daemon=True)
    serving.start()
    host = f"[{args.host}]" if ":" in args.host else args.host
    sys.stdout.write(json.dumps({"url": f"http://{host}:{server.server_port}", "pid": os.getpid()}))
    sys.stdout.write("\n")
    sys.stdout.flush()
    stop.wait()
    server.shutdown()
    serving.join()
    server.server_close()
    return 0
