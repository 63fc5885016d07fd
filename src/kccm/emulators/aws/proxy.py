"""A fault proxy in front of a moto emulator: it answers ``Throttling`` (or another refusal)
to the calls a test selects, passes the others on, and counts them all.

It runs in the test's process (a thread), since the tests steer it with functions and read
its counters and ledger directly.
"""

from __future__ import annotations

import http.client
import re
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "EC2_THROTTLING_BODY",
    "THROTTLING_BODY",
    "FaultProxy",
    "ProxyCall",
    "error_body",
    "every_nth",
]

_ACTION = re.compile(r"(?:^|&)Action=([A-Za-z0-9]+)")
_SERVICE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([a-z0-9-]+)/")
_ACCESS_KEY = re.compile(r"Credential=([^/]+)/")


@dataclass(frozen=True)
class ProxyCall:
    """One request the proxy passed on or answered itself: when it arrived and was answered
    (``time.time()``), the caller's access key id (which process sent it, when each has its
    own), the service, the action and the HTTP status answered."""

    arrived: float
    answered: float
    access_key: str
    service: str
    action: str
    status: int


THROTTLING_BODY = (
    '<ErrorResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/">'
    "<Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error>"
    "<RequestId>kccm-fault-proxy</RequestId></ErrorResponse>"
)
EC2_THROTTLING_BODY = (
    "<Response><Errors><Error><Code>Throttling</Code><Message>Rate exceeded</Message></Error>"
    "</Errors><RequestID>kccm-fault-proxy</RequestID></Response>"
)


class _ProxyServer(ThreadingHTTPServer):
    """socketserver listens with a backlog of 5: a burst of connections (six route deletions
    at once) while this process is busy overflows it, and a dropped SYN costs the client
    1 + 2 + 4 ... seconds of retransmission, long enough to stall a controller's reconcile
    for a minute. werkzeug (moto's server) listens with 128."""

    request_queue_size = 128


def error_body(service: str, code: str, message: str) -> str:
    """An AWS error answer with ``code`` as ``service`` (ec2's shape or the query APIs')."""
    if service == "ec2":
        return (
            f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error>"
            "</Errors><RequestID>kccm-fault-proxy</RequestID></Response>"
        )
    return (
        '<ErrorResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/">'
        f"<Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
        "<RequestId>kccm-fault-proxy</RequestId></ErrorResponse>"
    )


@dataclass
class FaultProxy:
    """An HTTP proxy in front of moto that answers ``Throttling`` to the requests ``throttle``
    selects (called with service, action and the request's sequence number), and the error
    code ``refuse`` returns (``AccessDenied``, ...; None: pass) to the others."""

    upstream: str
    throttle: Callable[[str, str, int], bool] = lambda service, action, seq: False
    refuse: Callable[[str, str], str | None] = lambda service, action: None
    refused: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    throttled: Counter[str] = field(default_factory=Counter)
    url: str = ""
    ledger: list[ProxyCall] | None = None
    """When a list, every request is appended to it (:class:`ProxyCall`)."""
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _seq: int = 0

    def decide(self, service: str, action: str) -> bool:
        with self._lock:
            self._seq += 1
            self.requests[f"{service}:{action}"] += 1
            hit = self.throttle(service, action, self._seq)
            if hit:
                self.throttled[f"{service}:{action}"] += 1
            return hit

    def start(self) -> FaultProxy:
        target = urllib.parse.urlsplit(self.upstream)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.arrived = time.time()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                match = _ACTION.search(body.decode(errors="replace"))
                scope = _SERVICE.search(self.headers.get("Authorization", ""))
                service = scope.group(1) if scope else "?"
                action = match.group(1) if match else "?"
                self.call = (service, action)
                if proxy.decide(service, action):
                    text = EC2_THROTTLING_BODY if service == "ec2" else THROTTLING_BODY
                    self._reply(400, text.encode(), "text/xml")
                    return
                code = proxy.refuse(service, action)
                if code is not None:
                    proxy.refused[f"{service}:{action}"] += 1
                    refusal = error_body(service, code, f"kccm fault proxy refuses {action}")
                    self._reply(403, refusal.encode(), "text/xml")
                    return
                conn = http.client.HTTPConnection(
                    target.hostname or "127.0.0.1", target.port, timeout=60
                )
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                headers["Host"] = target.netloc
                conn.request("POST", self.path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
                conn.close()
                self._reply(reply.status, data, reply.getheader("Content-Type") or "text/xml")

            def _reply(self, status: int, data: bytes, content_type: str) -> None:
                if proxy.ledger is not None:
                    key = _ACCESS_KEY.search(self.headers.get("Authorization", ""))
                    proxy.ledger.append(
                        ProxyCall(
                            self.arrived,
                            time.time(),
                            key.group(1) if key else "?",
                            *self.call,
                            status,
                        )
                    )
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = _ProxyServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def every_nth(
    n: int, services: tuple[str, ...] = ("ec2", "elasticloadbalancing")
) -> Callable[[str, str, int], bool]:
    """Throttle every ``n``-th request of the given services."""
    return lambda service, action, seq: service in services and seq % n == 0
