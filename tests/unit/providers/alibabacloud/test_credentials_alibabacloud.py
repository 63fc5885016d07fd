"""The credential sources in upstream's order (base/clientMgr.go GetTokenAuth, token.go)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from kccm.cloudprovider import CloudConfigError, CloudProviderError
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.credentials import (
    REFRESH_SECONDS,
    AccessKey,
    Credentials,
    decrypt_addon_value,
    pick_source,
)
from kccm.providers.alibabacloud.metadata import MetadataService

KEYRING = b"0123456789abcdef"


def encrypt(text: str) -> str:
    iv = os.urandom(16)
    padder = padding.PKCS7(128).padder()
    data = padder.update(text.encode()) + padder.finalize()
    encryptor = Cipher(algorithms.AES(KEYRING), modes.CBC(iv)).encryptor()
    return base64.b64encode(iv + encryptor.update(data) + encryptor.finalize()).decode()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class RoleMetadata(MetadataService):
    def __init__(self) -> None:
        super().__init__({})
        self.asked = 0

    def role_credentials(self) -> dict[str, str]:
        self.asked += 1
        return {"AccessKeyId": "STS.id", "AccessKeySecret": "s", "SecurityToken": "tok"}


def addon_file(tmp_path: Path, expiration: str = "2999-01-01T00:00:00Z") -> Path:
    path = tmp_path / "token-config"
    path.write_text(
        json.dumps(
            {
                "access.key.id": encrypt("ADDON-ID"),
                "access.key.secret": encrypt("ADDON-SECRET"),
                "security.token": encrypt("ADDON-TOKEN"),
                "expiration": expiration,
                "keyring": KEYRING.decode(),
            }
        )
    )
    return path


CONFIG_PAIR = f"Global:\n  accessKeyID: {b64('CFG-ID')}\n  accessKeySecret: {b64('CFG-SECRET')}\n"
ENV_PAIR = {"ACCESS_KEY_ID": "ENV-ID", "ACCESS_KEY_SECRET": "ENV-SECRET"}


@pytest.mark.parametrize(
    ("addon", "config_text", "environ", "name", "key_id"),
    [
        pytest.param(True, CONFIG_PAIR, ENV_PAIR, "addon token", "ADDON-ID", id="addon-first"),
        pytest.param(
            False, CONFIG_PAIR, ENV_PAIR, "AccessKey (cloud config)", "CFG-ID", id="config-pair"
        ),
        pytest.param(
            False, "Global: {}\n", ENV_PAIR, "AccessKey (environment)", "ENV-ID", id="environment"
        ),
        pytest.param(
            False, "Global: {}\n", {}, "RAM role (metadata service)", "STS.id", id="ram-role"
        ),
    ],
)
def test_source_order(
    tmp_path: Path, addon: bool, config_text: str, environ: dict[str, str], name: str, key_id: str
) -> None:
    token = addon_file(tmp_path) if addon else tmp_path / "absent"
    picked, source = pick_source(load_alibaba_config(config_text), environ, RoleMetadata(), token)
    assert picked == name
    assert source().key_id == key_id


def test_addon_token_is_decrypted(tmp_path: Path) -> None:
    _, source = pick_source(
        load_alibaba_config("Global: {}\n"), {}, RoleMetadata(), addon_file(tmp_path)
    )
    key = source()
    assert (key.key_id, key.secret, key.security_token) == (
        "ADDON-ID",
        "ADDON-SECRET",
        "ADDON-TOKEN",
    )
    assert decrypt_addon_value(encrypt(""), KEYRING) == ""


def test_an_expired_addon_token_is_refused(tmp_path: Path) -> None:
    path = addon_file(tmp_path, "2001-01-01T00:00:00Z")
    _, source = pick_source(load_alibaba_config("Global: {}\n"), {}, RoleMetadata(), path)
    with pytest.raises(CloudProviderError, match="expired"):
        source()


def test_uid_is_refused_naming_the_key(tmp_path: Path) -> None:
    config = load_alibaba_config(CONFIG_PAIR + "  uid: '42'\n")
    with pytest.raises(CloudConfigError, match=r"Global\.uid"):
        pick_source(config, {}, RoleMetadata(), tmp_path / "absent")


def test_keys_are_read_again_after_the_refresh_period() -> None:
    now = [0.0]
    reads = []

    def source() -> AccessKey:
        reads.append(now[0])
        return AccessKey("id", "secret")

    credentials = Credentials("test", source, clock=lambda: now[0])
    credentials.get()
    now[0] = REFRESH_SECONDS - 1
    credentials.get()
    now[0] = REFRESH_SECONDS
    credentials.get()
    assert reads == [0.0, REFRESH_SECONDS]
    assert "secret" not in repr(credentials)
    assert "secret" not in repr(credentials.get())
