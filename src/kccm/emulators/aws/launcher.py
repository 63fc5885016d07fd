"""Start the moto emulator as a subprocess and steer it.

``with moto_emulator() as moto:`` runs ``python -m kccm.emulators.aws`` on a loopback port of
its own choosing and yields a :class:`MotoEmulator`: ``moto.url`` for clients (every service
on it), its request log, per-call faults (:func:`topology_fault`, :func:`html_500`), its reset
and the leak check of what kccm makes in AWS (:mod:`~kccm.emulators.aws.leaks`).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import urllib.parse
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kccm.emulators import CloudEmulator, leaked
from kccm.emulators.aws.clients import forget, remember
from kccm.emulators.aws.leaks import made_by_kccm
from kccm.emulators.process import EmulatorProcess, child_env, python_module, spawn

__all__ = [
    "MotoEmulator",
    "MotoError",
    "html_500",
    "moto_emulator",
    "reset_moto",
    "start_moto",
    "topology_fault",
]


class MotoError(RuntimeError):
    """The moto emulator could not be started or steered."""


def _call(url: str, method: str, path: str, body: Any = None) -> Any:
    target = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=60)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        payload = reply.read()
    finally:
        conn.close()
    if reply.status >= 300:
        raise MotoError(f"moto at {url}: {method} {path}: {reply.status} {payload!r}")
    return json.loads(payload) if payload and path.startswith("/_kccm/") else None


def reset_moto(url: str) -> None:
    """Empty moto (``POST /moto-api/reset``): every service, account and region back to a
    just-started server's state (faults and the request log stay)."""
    _call(url, "POST", "/moto-api/reset")


def add_fault(url: str, action: str, kind: str, code: str = "") -> None:
    """Fault the EC2 ``action`` (boto3's snake_case name) of the emulator at ``url``
    (:mod:`kccm.emulators.aws.faults`)."""
    _call(
        url,
        "POST",
        "/_kccm/faults",
        {"service": "ec2", "action": action, "kind": kind, "code": code},
    )


def clear_faults(url: str) -> None:
    _call(url, "DELETE", "/_kccm/faults")


@contextlib.contextmanager
def topology_fault(url: str, code: str) -> Iterator[None]:
    """While inside, DescribeInstanceTopology fails with EC2 error ``code``."""
    add_fault(url, "describe_instance_topology", "error", code)
    try:
        yield
    finally:
        clear_faults(url)


@contextlib.contextmanager
def html_500(url: str, action: str = "describe_instance_topology") -> Iterator[None]:
    """While inside, moto answers the EC2 ``action`` with HTTP 500 and an HTML page
    (:data:`kccm.emulators.aws.faults.HTML_500_BODY`); afterwards as before."""
    add_fault(url, action, "html-500")
    try:
        yield
    finally:
        clear_faults(url)


@dataclass(eq=False)
class MotoEmulator(EmulatorProcess):
    """A running moto emulator."""

    url: str

    def requests(self, since: int = 0) -> list[dict[str, Any]]:
        """Calls after sequence number ``since``: ``{seq, method, path, service, action,
        status}``."""
        return list(_call(self.url, "GET", f"/_kccm/requests?since={since}"))

    def reset(self) -> None:
        reset_moto(self.url)

    # -- the shape every emulator shares (kccm.emulators.CloudEmulator) ---------------------

    def call_counts(self) -> dict[str, int]:
        """Logged calls per ``"<service>:<Action>"``."""
        return dict(Counter(f"{r['service']}:{r['action']}" for r in self.requests()))

    def clear_faults(self) -> None:
        clear_faults(self.url)

    def state(self) -> dict[str, list[str]]:
        """What kccm made in moto, by kind (:func:`kccm.emulators.aws.leaks.made_by_kccm`)."""
        found: dict[str, list[str]] = {}
        for kind, ident in sorted(made_by_kccm(self.url)):
            found.setdefault(kind, []).append(ident)
        return found

    def assert_clean(self, baseline: Mapping[str, Iterable[str]]) -> None:
        left = leaked(self.state(), baseline)
        if left:
            raise AssertionError(f"moto left with: {left}")

    def cleanup(self) -> None:
        forget(self.url)


def _implements(moto: MotoEmulator) -> CloudEmulator:
    """Never called: mypy checks that :class:`MotoEmulator` has the shape every emulator
    has."""
    return moto


def start_moto(
    *,
    default_amis: bool = True,
    host: str = "127.0.0.1",
    log_path: str | os.PathLike[str] | None = None,
) -> MotoEmulator:
    """The moto emulator on a port of ``host`` it chooses; without each region's ~1300 default
    AMIs unless ``default_amis``."""
    env = child_env({} if default_amis else {"MOTO_EC2_LOAD_DEFAULT_AMIS": "false"})
    process, ready = spawn(
        python_module("kccm.emulators.aws", "--host", host),
        name="the moto emulator",
        error=MotoError,
        log_path=log_path,
        env=env,
    )
    moto = MotoEmulator(process=process, url=str(ready["url"]))
    remember(moto.url)
    return moto


@contextlib.contextmanager
def moto_emulator(**opts: Any) -> Iterator[MotoEmulator]:
    """A running moto emulator for the block (``opts``: see :func:`start_moto`)."""
    with start_moto(**opts) as moto:
        yield moto
