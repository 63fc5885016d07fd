"""Where the provider's AccessKey comes from, in upstream's order (``GetTokenAuth`` in
``pkg/provider/alibaba/base/clientMgr.go``, the sources in ``token.go``, v2.14.0):

1. the addon token file ``/var/addon/token-config`` when it exists (``AddonToken``): JSON with
   ``access.key.id``, ``access.key.secret``, ``security.token`` (each AES-CBC encrypted with
   ``keyring``, IV first, base64) and ``expiration`` (an expired token is refused);
2. ``accessKeyID``/``accessKeySecret`` in the cloud config (base64): with ``uid`` set upstream
   runs an external ``servicetoken`` program to assume a role — **kccm refuses** that config
   (one line naming ``uid``); without it the pair is used (``AkAuthToken``);
3. ``ACCESS_KEY_ID``/``ACCESS_KEY_SECRET`` in the environment;
4. the instance's RAM role through the metadata service (``RamRoleToken``).

Upstream reads the source again every 10 minutes (``TokenSyncPeriod``); so does
:class:`Credentials` (and sooner when an STS token says it expires). A source that fails at
start stops kccm with one line (upstream logs it and runs on with placeholder keys).
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from kccm.cloudprovider import CloudConfigError, CloudProviderError
from kccm.providers.alibabacloud.config import AlibabaConfig
from kccm.providers.alibabacloud.metadata import MetadataService

__all__ = [
    "ADDON_TOKEN_PATH",
    "REFRESH_SECONDS",
    "AccessKey",
    "Credentials",
    "decrypt_addon_value",
    "pick_source",
]

ADDON_TOKEN_PATH = Path("/var/addon/token-config")
REFRESH_SECONDS = 600.0
"""``TokenSyncPeriod``."""
EXPIRY_MARGIN = 60.0


@dataclass(frozen=True)
class AccessKey:
    """One set of keys; never shown in a repr."""

    key_id: str = field(repr=False)
    secret: str = field(repr=False)
    security_token: str = field(default="", repr=False)
    expires: float | None = None
    """Unix time the STS token expires, when the source said."""


Source = Callable[[], AccessKey]


def _expiry(text: str) -> float | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except (TypeError, ValueError):
        return None


def decrypt_addon_value(value: str, keyring: bytes) -> str:
    """``Decrypt`` in ``token.go``: base64, AES-CBC with the IV first, PKCS#5 padding."""
    try:
        data = base64.b64decode(value)
        decryptor = Cipher(algorithms.AES(keyring), modes.CBC(data[:16])).decryptor()
        plain = decryptor.update(data[16:]) + decryptor.finalize()
    except (binascii.Error, ValueError) as err:
        raise CloudProviderError(f"addon token: cannot decrypt: {err}") from err
    if not plain:
        return ""
    return plain[: len(plain) - plain[-1]].decode()


def _addon_source(path: Path) -> Source:
    def read() -> AccessKey:
        try:
            info: Any = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise CloudProviderError(f"read file {path} error: {err}") from err
        keyring = str(info.get("keyring", "")).encode()
        expires = _expiry(str(info.get("expiration", "")))
        if expires is not None and expires < time.time():
            raise CloudProviderError("invalid token which is expired")
        return AccessKey(
            decrypt_addon_value(str(info.get("access.key.id", "")), keyring),
            decrypt_addon_value(str(info.get("access.key.secret", "")), keyring),
            decrypt_addon_value(str(info.get("security.token", "")), keyring),
            expires,
        )

    return read


def _role_source(metadata: MetadataService) -> Source:
    def read() -> AccessKey:
        found = metadata.role_credentials()
        return AccessKey(
            str(found.get("AccessKeyId", "")),
            str(found.get("AccessKeySecret", "")),
            str(found.get("SecurityToken", "")),
            _expiry(str(found.get("Expiration", ""))),
        )

    return read


def pick_source(
    config: AlibabaConfig,
    environ: Mapping[str, str],
    metadata: MetadataService,
    addon_token: Path = ADDON_TOKEN_PATH,
) -> tuple[str, Source]:
    """``(name, source)`` as ``GetTokenAuth`` picks it (see the module doc)."""
    if addon_token.exists():
        return "addon token", _addon_source(addon_token)
    key_id, secret = config.access_key_pair()
    if config.access_key_id and config.access_key_secret:
        if config.uid:
            raise CloudConfigError(
                [
                    'cloud config: "Global.uid": assuming a role through upstream\'s external '
                    "servicetoken program is not supported by kccm; remove uid to use the "
                    "AccessKey pair itself"
                ]
            )
        if key_id and secret:
            return "AccessKey (cloud config)", lambda: AccessKey(key_id, secret)
    env_id, env_secret = environ.get("ACCESS_KEY_ID", ""), environ.get("ACCESS_KEY_SECRET", "")
    if env_id and env_secret:
        return "AccessKey (environment)", lambda: AccessKey(env_id, env_secret)
    return "RAM role (metadata service)", _role_source(metadata)


class Credentials:
    """The current keys of one source, read again every :data:`REFRESH_SECONDS` (or before
    an STS token expires); thread-safe."""

    def __init__(
        self, name: str, source: Source, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.name = name
        self._source = source
        self._clock = clock
        self._lock = threading.Lock()
        self._key: AccessKey | None = None
        self._read_at = 0.0

    def __repr__(self) -> str:
        return f"Credentials({self.name})"

    def _stale(self, now: float) -> bool:
        if self._key is None or now - self._read_at >= REFRESH_SECONDS:
            return True
        expires = self._key.expires
        return expires is not None and expires - time.time() < EXPIRY_MARGIN

    def get(self) -> AccessKey:
        with self._lock:
            now = self._clock()
            if self._stale(now):
                try:
                    self._key = self._source()
                    self._read_at = now
                except CloudProviderError:
                    if self._key is None:
                        raise
            assert self._key is not None
            return self._key
