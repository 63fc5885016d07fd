"""Keystone v3 as the emulator answers it (keystone/api/auth.py, keystone/auth/plugins)."""

from __future__ import annotations

from typing import Any

import pytest
from emu_api import NOVA, Api, password_auth

DEMO = {"name": "demo", "domain": {"name": "Default"}}


def app_cred(**ref: Any) -> dict[str, Any]:
    return {"identity": {"methods": ["application_credential"], "application_credential": ref}}


def pw(user: dict[str, Any], password: str, scope: dict[str, Any] | None) -> dict[str, Any]:
    auth: dict[str, Any] = {
        "identity": {"methods": ["password"], "password": {"user": {**user, "password": password}}}
    }
    if scope is not None:
        auth["scope"] = {"project": scope}
    return auth


CASES = [
    pytest.param(password_auth(), 201, ["password"], id="password-by-names"),
    pytest.param(pw(DEMO, "secret", {"id": "<project>"}), 201, ["password"], id="project-by-id"),
    pytest.param(
        pw({"id": "<user>"}, "secret", {"id": "<project>"}), 201, ["password"], id="user-by-id"
    ),
    pytest.param(
        app_cred(id="<ac>", secret="ac-secret"),
        201,
        ["application_credential"],
        id="app-cred-by-id",
    ),
    pytest.param(
        app_cred(name="kccm-ac", user=DEMO, secret="ac-secret"),
        201,
        ["application_credential"],
        id="app-cred-by-name-and-user",
    ),
    pytest.param(password_auth("wrong"), 401, None, id="wrong-password"),
    pytest.param(
        pw({"name": "demo", "domain": {"name": "Other"}}, "secret", {"id": "<project>"}),
        401,
        None,
        id="unknown-domain",
    ),
    pytest.param(
        pw(DEMO, "secret", {"name": "nope", "domain": {"name": "Default"}}),
        401,
        None,
        id="unknown-project",
    ),
    pytest.param(app_cred(id="<ac>", secret="bad"), 401, None, id="app-cred-wrong-secret"),
    pytest.param({"identity": {"methods": []}}, 400, None, id="no-methods"),
    pytest.param(
        {
            **pw({"name": "kccm-trustee", "domain": {"id": "default"}}, "trustee-secret", None),
            "scope": {"OS-TRUST:trust": {"id": "<trust>"}},
        },
        201,
        ["password"],
        id="trust",
    ),
    pytest.param(
        {**pw(DEMO, "secret", None), "scope": {"OS-TRUST:trust": {"id": "<trust>"}}},
        401,
        None,
        id="trust-not-for-the-trustor",
    ),
    pytest.param(
        {
            **pw({"name": "kccm-trustee", "domain": {"id": "default"}}, "trustee-secret", None),
            "scope": {"OS-TRUST:trust": {"id": "nope"}},
        },
        401,
        None,
        id="unknown-trust",
    ),
]


def _fill(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, ids) for v in value]
    return ids.get(value, value) if isinstance(value, str) else value


@pytest.mark.parametrize(("auth", "status", "methods"), CASES)
async def test_token_issue(
    api: Api, auth: dict[str, Any], status: int, methods: list[str] | None
) -> None:
    ids = {
        "<project>": api.cfg["project_id"],
        "<ac>": api.cfg["app_cred_id"],
        "<trust>": api.cfg["trust_id"],
        "<user>": next(iter(api.world.users)),
    }
    got, body, token = await api.auth(_fill(auth, ids))
    assert got == status, body
    if status != 201:
        assert body["error"]["code"] == status
        if status == 401:
            assert body["error"] == {
                "code": 401,
                "title": "Unauthorized",
                "message": "The request you have made requires authentication.",
            }
        return
    assert token.startswith("gAAAAA")
    found = body["token"]
    assert found["methods"] == methods
    assert found["project"]["id"] == api.cfg["project_id"]
    assert found["user"]["name"] == ("kccm-trustee" if "OS-TRUST:trust" in found else "demo")
    assert found["expires_at"].endswith("Z")
    services = {entry["type"]: entry for entry in found["catalog"]}
    assert set(services) == {"identity", "compute", "network", "load-balancer", "key-manager"}
    for entry in services.values():
        assert {e["interface"] for e in entry["endpoints"]} == {"public", "internal", "admin"}
        assert {e["region_id"] for e in entry["endpoints"]} == {"RegionOne"}
    assert services["network"]["endpoints"][0]["url"] == api.world.base_url + "/network"


async def test_unscoped_password_token_has_no_catalog(api: Api) -> None:
    status, body, _ = await api.auth(pw(DEMO, "secret", None))
    assert status == 201
    assert "catalog" not in body["token"]


@pytest.mark.parametrize(
    ("token", "status"),
    [
        pytest.param("", 401, id="missing"),
        pytest.param("bogus", 401, id="unknown"),
        pytest.param(None, 200, id="valid"),
    ],
)
async def test_every_service_checks_the_token(api: Api, token: str | None, status: int) -> None:
    for path in (
        f"{NOVA}/servers/detail",
        "/network/v2.0/ports",
        "/load-balancer/v2/lbaas/loadbalancers",
    ):
        got, body = await api.call("GET", path, token=token)
        assert got == status, (path, body)
        if status == 401:
            assert body["error"]["title"] == "Unauthorized"


async def test_expired_tokens_are_refused_and_a_new_one_works(api: Api) -> None:
    status, _ = await api.call("POST", "/_emu/expire-tokens")
    assert status == 200
    async with api.client.get(f"{NOVA}/servers", headers={"X-Auth-Token": api.token}) as resp:
        assert resp.status == 401
        assert resp.headers["WWW-Authenticate"].startswith("Keystone uri=")
    _, _, api.token = await api.auth(password_auth())
    assert (await api.call("GET", f"{NOVA}/servers"))[0] == 200


async def test_token_ttl_expires_on_the_servers_clock(api: Api) -> None:
    now = [1000.0]
    api.world.clock = lambda: now[0]
    api.world.token_ttl = 60.0
    _, _, token = await api.auth(password_auth())
    assert (await api.call("GET", f"{NOVA}/servers", token=token))[0] == 200
    now[0] += 61.0
    assert (await api.call("GET", f"{NOVA}/servers", token=token))[0] == 401


async def test_token_validation_and_revocation(api: Api) -> None:
    _, _, other = await api.auth(password_auth())
    headers = {"X-Subject-Token": other}
    status, body = await api.call("GET", "/identity/v3/auth/tokens", headers=headers)
    assert status == 200
    assert body["token"]["user"]["name"] == "demo"
    assert (await api.call("DELETE", "/identity/v3/auth/tokens", headers=headers))[0] == 204
    status, body = await api.call("GET", "/identity/v3/auth/tokens", headers=headers)
    assert status == 404
    assert body["error"]["message"] == f"Could not find token: {other}."


async def test_version_documents(api: Api) -> None:
    status, body = await api.call("GET", "/identity/v3", token="")
    assert status == 200
    assert body["version"]["id"] == "v3.14"
    assert body["version"]["links"][0]["href"] == api.world.base_url + "/identity/v3/"
    status, body = await api.call("GET", "/identity/", token="")
    assert status == 300
    assert body["versions"]["values"][0]["id"] == "v3.14"
