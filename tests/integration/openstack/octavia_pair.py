"""Two Octavia APIs side by side: the real one (octavia from PyPI, hack/openstack/octavia-api.sh)
and kccm's emulator (kccm.emulators.openstack). A sequence of calls runs on each; their
transcripts, normalised, must be equal.

- :class:`RealOctavia`: ``octavia-api.sh serve`` on a free loopback port (SQLite, noauth, the
  amphora provider with no-op network/compute drivers). noauth takes the project from the
  ``X-Project-Id`` header; this sends the emulator's project id, so ``project_id`` compares
  as is. ``settle()`` is the server's ``POST /_kccm/settle`` (the driver-agent status update
  a provider makes: PENDING_CREATE/UPDATE -> ACTIVE, PENDING_DELETE -> gone).
- :class:`EmulatedOctavia`: the emulator's ``load-balancer`` endpoint with a Keystone token;
  its timer is set far off and ``settle()`` is its ``POST /_emu/settle`` (every pending
  balancer finishes now), so both servers move on exactly where the sequence says.
- :func:`normalise` masks what legitimately differs: UUIDs (named when the sequence saved
  them: ``<lb>``, ``<pool>``; ``<uuid>`` otherwise, also inside error texts), timestamps
  (their format only: every digit a 9; null stays null), the VIP's network, subnet and port
  ids and its address (the no-op network driver invents them and gives 198.51.100.1, the
  emulator takes them from its Neutron; the address also inside error texts) and the
  servers' own URLs.
- :func:`differences` lists every path where two transcripts differ.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kccm.emulators.openstack.launcher import EmulatorAdmin
from kccm.testing.ports import free_port

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "hack" / "openstack" / "octavia-api.sh"
READY_TIMEOUT = 120.0
"""How long the real API may take to import and create its schema (about 10 s here)."""
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME_KEYS = frozenset({"created_at", "updated_at"})
ADDRESS_KEYS = frozenset({"vip_address"})
VIP_KEYS = frozenset({"vip_network_id", "vip_subnet_id", "vip_port_id"})
"""What the no-op network driver invents for a VIP (its network, and its subnet when only a
network is given), where the emulator answers with its Neutron's: masked as ``<vip>``."""
LB = "/v2.0/lbaas/loadbalancers"
ONE_OF = re.compile(r"(Value should be one of: )([A-Z_, -]+)")
"""WSME's enum error lists the values in set order, which differs per process: sorted here."""


class OctaviaNotInstalled(RuntimeError):
    """hack/openstack/octavia-api.sh has not installed its venv."""


# -- steps ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One request. ``path``, ``params`` and string values in ``body`` are ``str.format``
    templates over the sequence's saved names (and ``subnet``, ``project``); ``save`` maps a
    name to a dotted path into the JSON answer (``loadbalancer.listeners.0.id``); ``unstable``
    names dotted paths (``*`` for any key or index) whose value the real API itself answers
    differently from run to run, masked as ``<unstable>`` on both servers."""

    method: str
    path: str
    body: Any = None
    params: Mapping[str, str] | None = None
    save: Mapping[str, str] = field(default_factory=dict)
    unstable: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settle:
    """Let the provider finish: every PENDING_* object moves on."""


Step = Call | Settle


class Backend(Protocol):
    name: str
    root: str

    def call(
        self, method: str, path: str, body: Any, params: Mapping[str, str] | None
    ) -> tuple[int, Any]: ...

    def settle(self) -> None: ...


# -- HTTP -----------------------------------------------------------------------------------------


def http(
    method: str, url: str, headers: Mapping[str, str], body: Any = None
) -> tuple[int, Any, Mapping[str, str]]:
    """(status, decoded JSON or text or None, headers) of one request."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    for key, value in {"Accept": "application/json", **headers}.items():
        request.add_header(key, value)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, raw, got = response.status, response.read(), response.headers
    except urllib.error.HTTPError as exc:
        status, raw, got = exc.code, exc.read(), exc.headers
    if not raw:
        return status, None, got
    try:
        return status, json.loads(raw), got
    except ValueError:
        return status, raw.decode(errors="replace"), got


def _query(params: Mapping[str, str] | None) -> str:
    if not params:
        return ""
    return "?" + "&".join(f"{k}={urllib.request.quote(v, safe=',')}" for k, v in params.items())


def _wait_until(probe: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {within:g}s")
        time.sleep(0.05)


# -- the real Octavia -----------------------------------------------------------------------------


def octavia_venv() -> Path:
    """The installed venv, or OctaviaNotInstalled saying how to install it."""
    out = subprocess.run(
        ["bash", str(SCRIPT), "--print-dir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    venv = Path(out)
    if not (venv / ".build-complete").is_file() or not os.access(venv / "bin/python", os.X_OK):
        raise OctaviaNotInstalled(
            f"the real Octavia API is not installed in {venv}; run `make octavia-api`"
        )
    return venv


@dataclass
class RealOctavia:
    process: subprocess.Popen[bytes]
    root: str
    project: str
    log: Path
    name: str = "octavia"

    def call(
        self, method: str, path: str, body: Any, params: Mapping[str, str] | None
    ) -> tuple[int, Any]:
        status, answer, _ = http(
            method, self.root + path + _query(params), {"X-Project-Id": self.project}, body
        )
        return status, answer

    def settle(self) -> None:
        status, answer, _ = http("POST", self.root + "/_kccm/settle", {})
        assert status == 200, answer

    def state(self) -> dict[str, dict[str, str]]:
        status, answer, _ = http("GET", self.root + "/_kccm/state", {})
        assert status == 200, answer
        return {kind: objs for kind, objs in answer.items() if objs}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _die_with_parent() -> None:  # in the child between fork and exec, as controlplane.py
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def start_real_octavia(state_dir: Path, project: str) -> RealOctavia:
    """``octavia-api.sh serve`` on a free port; returns once it answers version discovery."""
    octavia_venv()
    port = free_port("127.0.0.1")
    log = state_dir / "octavia-api.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            ["bash", str(SCRIPT), "serve", "--port", str(port), "--state-dir", str(state_dir)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    real = RealOctavia(process, f"http://127.0.0.1:{port}", project, log)

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"octavia-api exited ({process.returncode}); see {log}")
        return "octavia-api ready on" in log.read_text(errors="replace")

    try:
        _wait_until(ready, READY_TIMEOUT, "octavia-api's readiness")
    except BaseException:
        real.stop()
        raise
    return real


# -- the emulator ---------------------------------------------------------------------------------


@dataclass
class EmulatedOctavia:
    root: str
    token: str
    admin: EmulatorAdmin
    name: str = "emulator"

    def call(
        self, method: str, path: str, body: Any, params: Mapping[str, str] | None
    ) -> tuple[int, Any]:
        status, answer, _ = http(
            method, self.root + path + _query(params), {"X-Auth-Token": self.token}, body
        )
        return status, answer

    def settle(self) -> None:
        self.admin.settle()


def emulator_token(auth_url: str, config: Mapping[str, Any]) -> str:
    """A project-scoped Keystone token of the emulator's default user."""
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {
                        "name": config["user"],
                        "domain": {"name": config["domain"]},
                        "password": config["password"],
                    }
                },
            },
            "scope": {"project": {"name": config["project"], "domain": {"name": config["domain"]}}},
        }
    }
    status, answer, headers = http("POST", auth_url + "/auth/tokens", {}, body)
    assert status == 201, answer
    return str(headers["X-Subject-Token"])


# -- running and comparing ------------------------------------------------------------------------


def _dig(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def _fill(value: Any, names: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return value.format_map(names)
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    return value


def run(backend: Backend, steps: Sequence[Step], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """The transcript of ``steps`` on ``backend``: per call its request line, status and answer
    (normalised); ids saved under their names."""
    saved = dict(names)
    transcript: list[dict[str, Any]] = []
    for index, step in enumerate(steps):
        if isinstance(step, Settle):
            backend.settle()
            continue
        path = _fill(step.path, saved)
        status, answer = backend.call(
            step.method, path, _fill(step.body, saved), _fill(step.params, saved)
        )
        for dotted in step.unstable:
            _mask_path(answer, dotted.split("."))
        for name, dotted in step.save.items():
            try:
                saved[name] = _dig(answer, dotted)
            except (KeyError, IndexError, TypeError):
                saved[name] = f"<{name}: not in {backend.name}'s answer>"
        request = f"{step.method} {step.path}" + (_query(step.params) if step.params else "")
        transcript.append({"step": index, "request": request, "status": status, "body": answer})
    ids = {value: f"<{name}>" for name, value in saved.items() if UUID.fullmatch(str(value))}
    literals = {backend.root: "<root>"}
    for entry in transcript:
        literals.update(dict.fromkeys(_values(entry["body"], ADDRESS_KEYS), "<vip-address>"))
    return [{**entry, "body": normalise(entry["body"], ids, literals)} for entry in transcript]


def _mask_path(value: Any, parts: list[str]) -> None:
    """Replace the value at the dotted ``parts`` (``*``: every key or index) with
    ``<unstable>``, wherever it exists."""
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict):
        keys = list(value) if head == "*" else [head] if head in value else []
    elif isinstance(value, list):
        keys = list(range(len(value))) if head == "*" else [int(head)] if head.isdigit() else []
    else:
        return
    for key in keys:
        if rest:
            _mask_path(value[key], rest)
        else:
            value[key] = "<unstable>"


def _values(value: Any, keys: frozenset[str]) -> Iterator[str]:
    """Every string under one of ``keys`` anywhere in ``value``."""
    if isinstance(value, dict):
        for key, sub in value.items():
            if key in keys and isinstance(sub, str):
                yield sub
            else:
                yield from _values(sub, keys)
    elif isinstance(value, list):
        for sub in value:
            yield from _values(sub, keys)


def _mask(text: str, ids: Mapping[str, str], literals: Mapping[str, str]) -> str:
    for literal, mask in literals.items():
        text = text.replace(literal, mask)
    text = ONE_OF.sub(lambda m: m.group(1) + ", ".join(sorted(m.group(2).split(", "))), text)
    return UUID.sub(lambda m: ids.get(m.group(0), "<uuid>"), text)


def normalise(
    value: Any, ids: Mapping[str, str], literals: Mapping[str, str], key: str = ""
) -> Any:
    """``value`` with UUIDs named (``ids``) or masked, ``literals`` (the server's URL, VIP
    addresses) masked inside strings, timestamps masked, lists of objects sorted."""
    if key in TIME_KEYS:  # the format compared, not the time: 9999-99-99T99:99:99.999999
        return None if value is None else re.sub(r"\d", "9", str(value))
    if key in VIP_KEYS and value is not None:
        return "<vip>"
    if isinstance(value, str):
        return _mask(value, ids, literals)
    if isinstance(value, dict):
        return {k: normalise(v, ids, literals, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [normalise(v, ids, literals) for v in value]
        if items and all(isinstance(i, dict) for i in items):
            return sorted(items, key=lambda i: json.dumps(i, sort_keys=True))
        return items
    return value


def differences(real: Any, emulated: Any, path: str = "") -> Iterator[str]:
    """``path: octavia=... emulator=...`` for every leaf where the two differ."""
    if isinstance(real, dict) and isinstance(emulated, dict):
        for key in sorted(set(real) | set(emulated)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in emulated:
                yield f"{sub}: octavia={real[key]!r} emulator=<absent>"
            elif key not in real:
                yield f"{sub}: octavia=<absent> emulator={emulated[key]!r}"
            else:
                yield from differences(real[key], emulated[key], sub)
    elif isinstance(real, list) and isinstance(emulated, list) and len(real) == len(emulated):
        for index, (a, b) in enumerate(zip(real, emulated, strict=True)):
            label = a.get("id") if isinstance(a, dict) and a.get("id") == b.get("id") else None
            yield from differences(a, b, f"{path}[{label or index}]")
    elif real != emulated:
        yield f"{path}: octavia={real!r} emulator={emulated!r}"
