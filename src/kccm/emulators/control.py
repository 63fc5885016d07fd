"""What a test holds of an aiohttp emulator the same way whichever cloud it plays.

Each of :mod:`kccm.emulators.openstack` and :mod:`kccm.emulators.azure` serves a test API
under ``/_emu/`` beside its cloud's (see :mod:`kccm.emulators.control_routes` for the part they
share) and runs as ``python -m kccm.emulators.<cloud>``:

- :class:`EmulatorControl` is the client of that API (blocking calls): the world's settings,
  the request log, faults, token expiry and the leak check; each cloud's subclass adds its
  seeding, its fault shape and what it calls a write.
- :class:`ControlledEmulator` is the running process with its control, in the shape every
  emulator has (:class:`kccm.emulators.CloudEmulator`).
- :func:`start_python_emulator` starts one (over HTTPS when given a certificate) and waits
  until it listens; :func:`running` holds it for a ``with`` block.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from kccm.emulators import leaked
from kccm.emulators.process import EmulatorProcess, ServingTls, child_env, python_module, spawn

__all__ = [
    "ControlError",
    "ControlledEmulator",
    "EmulatorControl",
    "Started",
    "running",
    "start_python_emulator",
]


class ControlError(RuntimeError):
    """An emulator could not be started or steered (each cloud's error derives from it)."""


@dataclass
class EmulatorControl:
    """The ``/_emu`` test API of a running emulator (blocking calls)."""

    base_url: str
    ca_file: str = ""

    error: ClassVar[type[ControlError]] = ControlError
    """What a refused call raises."""
    title: ClassVar[str] = "emulator"
    """How :meth:`assert_clean`'s message names the emulator."""

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        context = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None
        try:
            with urllib.request.urlopen(request, timeout=30, context=context) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            raise self.error(f"{method} {path}: {exc.code} {exc.read().decode()}") from exc
        return json.loads(payload) if payload else None

    # -- the world ------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """Ids, names and credentials of the default world, and the settings (see the
        cloud's ``admin.config``)."""
        return dict(self._call("GET", "/_emu/config"))

    def set_config(self, **values: Any) -> dict[str, Any]:
        """Change settings of the running server (the cloud's ``admin`` module lists them);
        the config as it is now."""
        return dict(self._call("PATCH", "/_emu/config", values))

    # -- observation --------------------------------------------------------------------------

    def requests(self, since: int = 0) -> list[dict[str, Any]]:
        """Calls after sequence number ``since`` (each cloud's log entry: ``seq``,
        ``service``, ``method``, ``path``, ``query``, ``status`` and its own)."""
        return list(self._call("GET", f"/_emu/requests?since={since}"))

    def last_seq(self) -> int:
        """The sequence number of the last logged call: ``requests(since=last_seq())``
        later lists what came after."""
        return int(self._call("GET", "/_emu/seq")["seq"])

    def state(self) -> dict[str, list[Any]]:
        """What tests make and must remove, by kind (the cloud's ``admin.state``)."""
        return {k: list(v) for k, v in self._call("GET", "/_emu/state").items()}

    def assert_clean(self, baseline: Mapping[str, Iterable[Any]]) -> None:
        """AssertionError naming everything :meth:`state` has that ``baseline`` had not."""
        left = leaked(self.state(), baseline)
        if left:
            raise AssertionError(f"{self.title} left with: {left}")

    # -- faults and tokens --------------------------------------------------------------------

    def faults(self) -> list[dict[str, Any]]:
        """The faults not yet met."""
        return list(self._call("GET", "/_emu/faults"))

    def clear_faults(self) -> None:
        self._call("DELETE", "/_emu/faults")

    def expire_tokens(self) -> int:
        """Every token issued so far expires now (the next call with one is refused); how
        many."""
        return int(self._call("POST", "/_emu/expire-tokens")["expired"])


ControlT = TypeVar("ControlT", bound=EmulatorControl)


@dataclass(eq=False)
class ControlledEmulator(EmulatorProcess, Generic[ControlT]):
    """A running emulator process and its control (``admin``)."""

    base_url: str
    ca_file: str = ""  # the CA of its HTTPS certificate ("" for HTTP)
    admin: ControlT = field(init=False)
    _config: dict[str, Any] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.admin = self.control(self.base_url, self.ca_file)

    def control(self, base_url: str, ca_file: str) -> ControlT:
        """The cloud's control of this process."""
        raise NotImplementedError

    @property
    def url(self) -> str:
        return self.base_url

    @property
    def config(self) -> dict[str, Any]:
        """:meth:`EmulatorControl.config`, read once."""
        if not self._config:
            self._config = self.admin.config()
        return self._config

    # -- the shape every emulator shares (kccm.emulators.CloudEmulator) ---------------------

    def call_counts(self) -> dict[str, int]:
        """Logged calls per ``"<service> <METHOD> <path>"``."""
        found = Counter(f"{r['service']} {r['method']} {r['path']}" for r in self.admin.requests())
        return dict(found)

    def clear_faults(self) -> None:
        self.admin.clear_faults()

    def state(self) -> dict[str, list[str]]:
        return {kind: [str(item) for item in items] for kind, items in self.admin.state().items()}

    def assert_clean(self, baseline: Mapping[str, Iterable[str]]) -> None:
        self.admin.assert_clean(baseline)

    def cleanup(self) -> None:
        if self.ca_file:
            shutil.rmtree(Path(self.ca_file).parent, ignore_errors=True)


@dataclass(frozen=True)
class Started:
    """A Python emulator that listens: its process, its ready line, its CA file ("" for
    HTTP)."""

    process: subprocess.Popen[str]
    ready: dict[str, Any]
    ca_file: str


def start_python_emulator(
    module: str,
    options: Sequence[str],
    *,
    name: str,
    error: type[ControlError],
    tls: ServingTls | None = None,
    log_path: str | os.PathLike[str] | None = None,
) -> Started:
    """``python -m module options...`` (its stderr appended to ``log_path``) awaited until
    it listens (``error`` when it does not); HTTPS with ``tls``'s certificate, written into a
    fresh directory that the emulator's :meth:`~ControlledEmulator.cleanup` removes."""
    args = python_module(module, *options)
    ca_file = ""
    if tls is not None:
        directory = Path(tempfile.mkdtemp(prefix=f"kccm-{module.rsplit('.', 1)[-1]}-emulator-"))
        ca_file, cert_file, key_file = tls.write(directory)
        args += ["--cert-file", cert_file, "--key-file", key_file]
    process, ready = spawn(args, name=name, error=error, log_path=log_path, env=child_env())
    return Started(process, ready, ca_file)


EmulatorT = TypeVar("EmulatorT", bound=EmulatorProcess)


@contextlib.contextmanager
def running(start: Callable[..., EmulatorT], **opts: Any) -> Iterator[EmulatorT]:
    """``start(**opts)``'s emulator for the block, stopped at its end."""
    emulator = start(**opts)
    try:
        yield emulator
    finally:
        emulator.stop()
