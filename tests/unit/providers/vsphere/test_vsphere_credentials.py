"""Credentials Secrets read as upstream's credentialmanager parseConfig reads them."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor

import pytest

from kccm.providers.vsphere.config import load_vsphere_config
from kccm.providers.vsphere.credentials import (
    Credential,
    CredentialError,
    CredentialStore,
    parse_secret_data,
)

SM_TOKEN = "vc1.vc-session-manager-token"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"vc1.username": b"a\n", "vc1.password": b"b"},
            {"vc1": Credential("a", "b")},
        ),
        (
            {"server_x": "fd01::1", "username_x": "u", "password_x": "p"},
            {"fd01::1": Credential("u", "p")},
        ),
        (
            {"vc1.vc-session-manager-url": b"https://sm/session\n", SM_TOKEN: b"hunter2\n"},
            {"vc1": Credential("", "", "https://sm/session", "hunter2")},
        ),
        (
            {"vc1.vc-session-manager-url": "https://sm/session"},
            {"vc1": Credential("", "", "https://sm/session", "")},
        ),
        (
            {"vc1.username": "a", "vc1.vc-session-manager-url": "https://sm/session"},
            {"vc1": Credential("a", "", "https://sm/session", "")},
        ),
    ],
    ids=[
        "dotted-keys",
        "ipv6-alternative-keys",
        "session-manager-url-and-token",
        "session-manager-url-only-uses-service-account",
        "session-manager-url-beside-an-incomplete-user",
    ],
)
def test_secret_formats(data: dict[str, bytes | str], expected: dict[str, Credential]) -> None:
    assert parse_secret_data(data) == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "no credentials"),
        ({"vc1.username": b"a"}, "Username/Password is missing for server 'vc1'"),
        ({"server_x": "h", "username_x": "u"}, "'password_x' is missing"),
        ({"surprise": "v"}, "unknown secret key 'surprise'"),
        (
            {SM_TOKEN: "hunter2"},
            "secret key 'vc1.vc-session-manager-url' is missing for server 'vc1'",
        ),
        (
            {"vc1.vc-session-manager-url": "", SM_TOKEN: "hunter2"},
            "secret key 'vc1.vc-session-manager-url' is missing for server 'vc1'",
        ),
        ({"vc-session-manager-url": "https://sm"}, "unknown secret key 'vc-session-manager-url'"),
    ],
    ids=[
        "empty",
        "no-password",
        "alt-missing-password",
        "unknown-key",
        "session-manager-token-without-url",
        "session-manager-url-empty",
        "session-manager-key-without-server",
    ],
)
def test_bad_secrets_name_the_key_not_the_value(data: dict[str, bytes | str], message: str) -> None:
    with pytest.raises(CredentialError, match=message) as err:
        parse_secret_data(data)
    assert "hunter" not in str(err.value)


def test_session_manager_token_is_not_in_the_repr() -> None:
    cred = parse_secret_data({"vc1.vc-session-manager-url": "https://sm", SM_TOKEN: "hunter2"})
    assert "hunter2" not in repr(cred)


def _secret(version: str, password: str) -> dict[str, object]:
    enc = base64.b64encode
    return {
        "metadata": {"resourceVersion": version},
        "data": {
            "vc.example.username": enc(b"admin").decode(),
            "vc.example.password": enc(password.encode()).decode(),
        },
    }


def test_store_follows_the_secret_and_keeps_the_last_on_delete() -> None:
    config = load_vsphere_config(
        '[Global]\nsecret-name = c\nsecret-namespace = ns\n[VirtualCenter "vc.example"]\n'
    )
    store = CredentialStore(config, await_secret=0)
    vc = config.vcenters["vc.example"]
    with pytest.raises(CredentialError, match=r"secret ns/c does not exist \(yet\); waiting"):
        store.get(vc)
    store.update("Global", _secret("1", "one"))
    assert store.get(vc).password == "one"
    store.update("Global", _secret("2", "two"))
    assert store.get(vc).password == "two"
    store.update("Global", None)
    assert store.get(vc).password == "two"
    assert "two" not in repr(store.get(vc))


def test_a_login_waiting_for_the_secret_gets_it_the_moment_it_comes() -> None:
    """Issue 25: upstream's lookups retry the login while the Secret does not exist; kccm's
    wait on its arrival (bounded by ``await_secret``, far above this test's duration)."""
    config = load_vsphere_config(
        '[Global]\nsecret-name = c\nsecret-namespace = ns\n[VirtualCenter "vc.example"]\n'
    )
    store = CredentialStore(config, await_secret=300)
    assert store.unseen() == {"Global": ("ns", "c")}
    with ThreadPoolExecutor(max_workers=1) as pool:
        login = pool.submit(store.get, config.vcenters["vc.example"])
        store.update("Global", _secret("1", "one"))
        assert login.result(timeout=30).password == "one"
    assert store.unseen() == {}


def test_a_secret_without_this_vcenters_keys_is_not_waited_for() -> None:
    config = load_vsphere_config(
        '[Global]\nsecret-name = c\nsecret-namespace = ns\n[VirtualCenter "other.example"]\n'
    )
    store = CredentialStore(config, await_secret=300)
    store.update("Global", _secret("1", "one"))  # keys of vc.example only
    with pytest.raises(CredentialError, match="no credentials in secret ns/c"):
        store.get(config.vcenters["other.example"])


def test_secrets_directory(tmp_path: pytest.TempPathFactory) -> None:
    directory = tmp_path
    (directory / "vc.example.username").write_text("admin\n")  # type: ignore[operator]
    (directory / "vc.example.password").write_text("pw\n")  # type: ignore[operator]
    config = load_vsphere_config(
        f'[Global]\nsecrets-directory = {directory}\n[VirtualCenter "vc.example"]\n'
    )
    assert CredentialStore(config).get(config.vcenters["vc.example"]) == Credential("admin", "pw")


def test_secrets_directory_with_a_session_manager(tmp_path: pytest.TempPathFactory) -> None:
    directory = tmp_path
    (directory / "vc.example.vc-session-manager-url").write_text("http://sm/s\n")  # type: ignore[operator]
    (directory / "vc.example.vc-session-manager-token").write_text("tok\n")  # type: ignore[operator]
    config = load_vsphere_config(
        f'[Global]\nsecrets-directory = {directory}\n[VirtualCenter "vc.example"]\n'
    )
    found = CredentialStore(config).get(config.vcenters["vc.example"])
    assert found == Credential("", "", "http://sm/s", "tok")
