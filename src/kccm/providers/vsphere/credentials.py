"""vCenter credentials: from the config, a Kubernetes Secret or a secrets directory.

Upstream: ``pkg/common/credentialmanager`` (``parseConfig``: keys ``<server>.username`` /
``<server>.password``, or ``server_<id>`` / ``username_<id>`` / ``password_<id>`` for IPv6
servers, or the shared session manager's ``<server>.vc-session-manager-url`` /
``<server>.vc-session-manager-token``) and ``connectionmanager.Connect`` (an invalid login
re-reads the credentials and tries once more). A Secret is watched, so a rotated password is
used from the next login.

A Secret that does not exist yet is waited for, never a reason to stop (issue 25): upstream's
``GetCredential`` answers ``ErrCredentialsNotFound`` and ``WhichVCandDCByNodeID`` /
``connectionmanager.Connect`` try ``NumConnectionAttempts`` (3) times, ``RetryAttemptDelaySecs``
(1 s) apart (``pkg/common/connectionmanager/search.go``, ``consts_and_errors.go``), so a lookup
started before the Secret appears succeeds as soon as it does. :meth:`CredentialStore.get` does
the same without polling: it waits up to :data:`AWAIT_SECRET_SECONDS` for the Secret's first
version (woken by the watch the moment it arrives), then fails that lookup with an error
naming the Secret; the framework retries the lookup.

Passwords and session manager tokens are never logged, and never appear in a ``repr`` or an
error message.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kccm.cloudprovider import CloudProviderError
from kccm.kube.errors import KubeError, NotFound
from kccm.kube.resources import SECRETS
from kccm.providers.vsphere.configtypes import GLOBAL_SECRET_REF, VCenter, VSphereConfig

__all__ = [
    "Credential",
    "CredentialError",
    "CredentialStore",
    "parse_secret_data",
]

log = logging.getLogger(__name__)

_SERVER, _USER, _PASSWORD = "server_", "username_", "password_"
SESSION_MANAGER_URL = "vc-session-manager-url"
SESSION_MANAGER_TOKEN = "vc-session-manager-token"
# upstream parseConfig's switch: a key ending in one of these names a server's field
_FIELDS = {
    "password": "password",
    "username": "user",
    SESSION_MANAGER_URL: "session_manager_url",
    SESSION_MANAGER_TOKEN: "session_manager_token",
}
_RETRY_SECONDS = 5.0
AWAIT_SECRET_SECONDS = 2.0
"""How long a login waits for a Secret never seen yet: upstream's 3 connection attempts 1 s
apart."""


class CredentialError(CloudProviderError):
    """Credentials are missing or malformed; the message names the key, never a value."""


@dataclass(frozen=True)
class Credential:
    """A vCenter login: user and password, or (upstream ``Credential.VCSessionManagerURL``)
    a shared session manager to fetch a session from, with the bearer token to show it
    (empty: the Pod's service account token, upstream ``GetSharedToken``)."""

    user: str
    password: str = field(repr=False)
    session_manager_url: str = ""
    session_manager_token: str = field(default="", repr=False)


def _text(value: bytes | str) -> str:
    raw = value.decode() if isinstance(value, bytes) else value
    return raw.removesuffix("\n")


def _alt_format(data: Mapping[str, bytes | str], creds: dict[str, Credential]) -> set[str]:
    used: set[str] = set()
    for key in data:
        if not key.startswith(_SERVER):
            continue
        suffix = key[len(_SERVER) :]
        if not suffix:
            raise CredentialError("secret key 'server_' has no identifier suffix")
        for needed in (_USER + suffix, _PASSWORD + suffix):
            if needed not in data:
                raise CredentialError(f"secret key {needed!r} is missing for {key!r}")
        server = _text(data[key])
        creds[server] = Credential(_text(data[_USER + suffix]), _text(data[_PASSWORD + suffix]))
        used |= {key, _USER + suffix, _PASSWORD + suffix}
    return used


def _field_of(key: str) -> tuple[str, str] | None:
    """``(server, field)`` for a ``<server>.<name>`` key (upstream ``strings.HasSuffix``)."""
    for name, attr in _FIELDS.items():
        if key.endswith(name) and key != name and not key.startswith((_USER, _PASSWORD)):
            return key.split("." + name)[0], attr
    return None


def _complete(server: str, fields: Mapping[str, str]) -> Credential:
    """Upstream's last check: user and password, or a session manager URL (the token alone
    is not enough)."""
    url = fields.get("session_manager_url", "")
    if not url and not (fields.get("user") and fields.get("password")):
        if fields.get("session_manager_token"):
            raise CredentialError(
                f"secret key '{server}.{SESSION_MANAGER_URL}' is missing for server "
                f"{server!r} (its '{server}.{SESSION_MANAGER_TOKEN}' needs it)"
            )
        raise CredentialError(
            f"Username/Password is missing for server {server!r} (keys {server}.username and "
            f"{server}.password, or {server}.{SESSION_MANAGER_URL})"
        )
    return Credential(
        fields.get("user", ""),
        fields.get("password", ""),
        url,
        fields.get("session_manager_token", ""),
    )


def parse_secret_data(data: Mapping[str, bytes | str]) -> dict[str, Credential]:
    """Credentials per vCenter server, as upstream ``parseConfig`` reads a Secret."""
    if not data:
        raise CredentialError("the secret holds no credentials (Username/Password is missing)")
    by_server: dict[str, dict[str, str]] = {}
    rest: dict[str, bytes | str] = {}
    for key, value in data.items():
        found = _field_of(key)
        if found is None:
            rest[key] = value
        else:
            by_server.setdefault(found[0], {})[found[1]] = _text(value)
    creds: dict[str, Credential] = {}
    used = _alt_format(rest, creds)
    for key in rest:
        if key not in used:
            raise CredentialError(f"unknown secret key {key!r}")
    for server in sorted(by_server):
        creds[server] = _complete(server, by_server[server])
    return creds


def _decode_secret(secret: Mapping[str, Any]) -> dict[str, bytes]:
    data = secret.get("data") or {}
    out = {k: base64.b64decode(v) for k, v in data.items()}
    for key, value in (secret.get("stringData") or {}).items():
        out[key] = str(value).encode()
    return out


class CredentialStore:
    """The current credentials of every vCenter; thread-safe (logins run in threads)."""

    def __init__(
        self, config: VSphereConfig, *, await_secret: float = AWAIT_SECRET_SECONDS
    ) -> None:
        self._config = config
        self._await_secret = await_secret
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        # secret ref -> server -> credential
        self._by_ref: dict[str, dict[str, Credential]] = {}
        self._versions: dict[str, str] = {}
        self._seen: set[str] = set()
        """The Secrets seen at least once (held credentials or not)."""
        self._listeners: list[Callable[[str], None]] = []
        global_users = any(vc.secret_ref == GLOBAL_SECRET_REF for vc in config.vcenters.values())
        if config.secrets_directory and global_users:  # (the default one may hold anything)
            self._by_ref[GLOBAL_SECRET_REF] = self._read_directory(config.secrets_directory)
            self._seen.add(GLOBAL_SECRET_REF)

    @staticmethod
    def _read_directory(path: str) -> dict[str, Credential]:
        data: dict[str, bytes | str] = {}
        try:
            names = sorted(os.listdir(path))
        except OSError as err:
            raise CredentialError(f"secrets-directory {path!r}: {err.strerror}") from err
        for name in names:
            full = os.path.join(path, name)
            if os.path.isfile(full):
                with open(full, "rb") as f:
                    data[name] = f.read()
        return parse_secret_data(data)

    def secret_refs(self) -> dict[str, tuple[str, str]]:
        """The Secrets to read: ref -> (namespace, name)."""
        refs: dict[str, tuple[str, str]] = {}
        for vc in self._config.vcenters.values():
            if vc.secret_ref and not (
                vc.secret_ref == GLOBAL_SECRET_REF and self._config.secrets_directory
            ):
                refs[vc.secret_ref] = (vc.secret_namespace, vc.secret_name)
        return refs

    def unseen(self) -> dict[str, tuple[str, str]]:
        """The Secrets to read that were never seen (they may not exist yet)."""
        with self._lock:
            return {ref: at for ref, at in self.secret_refs().items() if ref not in self._seen}

    def waiting_for(self, vc: VCenter) -> str:
        """What ``vc`` waits for: its Secret and the keys it needs."""
        return (
            f"vCenter {vc.server}: credentials secret {vc.secret_namespace}/{vc.secret_name} "
            f"does not exist (yet); waiting for it (keys {vc.server}.username and "
            f"{vc.server}.password, or {vc.server}.{SESSION_MANAGER_URL})"
        )

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(ref)`` after each new version of a Secret is taken in."""
        self._listeners.append(listener)

    def update(self, ref: str, secret: Mapping[str, Any] | None) -> None:
        """A new version of a Secret (``None``: deleted; the last credentials stay, as upstream)."""
        if secret is None:
            log.warning("vsphere: credentials secret %s was deleted; keeping the last ones", ref)
            return
        version = str((secret.get("metadata") or {}).get("resourceVersion", ""))
        with self._lock:
            if version and self._versions.get(ref) == version:
                return
        try:
            parsed = parse_secret_data(_decode_secret(secret))
        except CredentialError as err:
            log.error("vsphere: credentials secret %s: %s", ref, err)
            with self._arrived:  # it exists: waiting longer would not help
                self._seen.add(ref)
                self._arrived.notify_all()
            return
        with self._arrived:
            self._by_ref[ref] = parsed
            self._versions[ref] = version
            self._seen.add(ref)
            self._arrived.notify_all()
        log.info("vsphere: read credentials secret %s (resourceVersion %s)", ref, version)
        for listener in self._listeners:
            listener(ref)

    def get(self, vc: VCenter) -> Credential:
        """The credentials to log in to ``vc`` with (CredentialError when there are none);
        waits up to ``await_secret`` seconds for a Secret never seen yet."""
        if not vc.secret_ref:
            return Credential(vc.user, vc.password)
        with self._arrived:
            if vc.secret_ref not in self._seen and vc.secret_ref in self.secret_refs():
                self._arrived.wait_for(lambda: vc.secret_ref in self._seen, self._await_secret)
            seen = vc.secret_ref in self._seen
            found = self._by_ref.get(vc.secret_ref, {}).get(vc.server)
        if found is None and not seen:
            raise CredentialError(self.waiting_for(vc))
        if found is None:
            where = (
                f"secrets-directory {self._config.secrets_directory!r}"
                if vc.secret_ref == GLOBAL_SECRET_REF and self._config.secrets_directory
                else f"secret {vc.secret_namespace}/{vc.secret_name}"
            )
            raise CredentialError(
                f"vCenter {vc.server}: no credentials in {where} "
                f"(keys {vc.server}.username and {vc.server}.password, or "
                f"{vc.server}.{SESSION_MANAGER_URL})"
            )
        return found

    # -- the Secret watch ----------------------------------------------------------------------

    async def load(self, client: Any) -> None:
        """Read every configured Secret once (missing ones are reported, not fatal)."""
        for ref, (namespace, name) in self.secret_refs().items():
            try:
                self.update(ref, await client.get(SECRETS, name, namespace=namespace))
            except NotFound:
                log.error("vsphere: credentials secret %s/%s not found", namespace, name)
            except KubeError as err:
                log.error("vsphere: reading credentials secret %s/%s: %s", namespace, name, err)

    async def watch(self, client: Any, stop: asyncio.Event) -> None:
        """Keep every configured Secret current until ``stop`` is set."""
        tasks = [
            asyncio.create_task(self._watch_one(client, ref, ns, name, stop))
            for ref, (ns, name) in self.secret_refs().items()
        ]
        if not tasks:
            return
        try:
            await stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _watch_one(
        self, client: Any, ref: str, namespace: str, name: str, stop: asyncio.Event
    ) -> None:
        selector = f"metadata.name={name}"
        while not stop.is_set():
            try:
                listed = await client.list(SECRETS, namespace=namespace, field_selector=selector)
                self.update(ref, listed.items[0] if listed.items else None)
                async for event in client.watch(
                    SECRETS,
                    namespace=namespace,
                    field_selector=selector,
                    resource_version=listed.resource_version,
                    timeout_seconds=300,
                ):
                    if event.type in ("ADDED", "MODIFIED"):
                        self.update(ref, event.object)
                    elif event.type == "DELETED":
                        self.update(ref, None)
            except KubeError as err:
                log.warning("vsphere: watching credentials secret %s: %s", ref, err)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), _RETRY_SECONDS)
