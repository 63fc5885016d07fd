"""Sign-in (ADFS) and ARM's bearer-token check."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from azure_api import NET, Api, secret_form

from kccm.emulators.azure.assertions import register_certificates
from kccm.emulators.azure.world import DEFAULTS
from kccm.testing.clientcert import ClientCertificate


def jwt(header: dict[str, Any], claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part(header)}.{part(claims)}.c2ln"


def assertion_form(assertion: str) -> dict[str, str]:
    form = secret_form()
    del form["client_secret"]
    form["client_assertion"] = assertion
    form["client_assertion_type"] = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    return form


CLIENT = DEFAULTS["client_id"]


async def test_the_openid_configuration_names_the_token_endpoint(api: Api) -> None:
    async with api.client.get("/adfs/.well-known/openid-configuration") as response:
        body = await response.json()
    assert response.status == 200
    assert body["token_endpoint"] == f"{api.world.base_url}/adfs/oauth2/token/"
    assert body["issuer"] == f"{api.world.base_url}/adfs"


CERT = ClientCertificate()
OTHER = ClientCertificate("someone-else")
# one whose x5t in standard base64 differs from base64url (has a '+' or '/')
GO_CERT = next(c for c in iter(ClientCertificate, None) if set(c.go_x5t()) & set("+/"))
Form = Callable[[Api], dict[str, str]]  # the sign-in form, given the emulator


def signed(cert: ClientCertificate = CERT, client: str = CLIENT, **kw: Any) -> Form:
    def form(api: Api) -> dict[str, str]:
        audience = kw.get("aud") or f"{api.world.base_url}/adfs/oauth2/token/"
        options = {k: v for k, v in kw.items() if k != "aud"}
        return assertion_form(cert.assertion(client, audience, now=api.clock.now, **options))

    return form


def forged(api: Api) -> dict[str, str]:
    """A valid assertion naming the registered certificate, signed by another key."""
    good = signed()(api)["client_assertion"]
    other = signed(OTHER)(api)["client_assertion"]
    return assertion_form(f"{good.rsplit('.', 1)[0]}.{other.rsplit('.', 1)[1]}")


def fixed(form: dict[str, str]) -> Form:
    return lambda _: form


@pytest.mark.parametrize(
    ("form", "status", "source"),
    [
        pytest.param(fixed(secret_form()), 200, "secret", id="client-secret"),
        pytest.param(fixed(secret_form("wrong")), 401, "", id="wrong-secret"),
        pytest.param(signed(), 200, "certificate", id="certificate-rs256-x5t"),
        pytest.param(signed(alg="PS256"), 200, "certificate", id="certificate-ps256-x5t-s256"),
        pytest.param(
            signed(GO_CERT, go_thumbprint=True), 200, "certificate",
            id="certificate-x5t-standard-base64"
        ),
        pytest.param(signed(OTHER), 401, "", id="certificate-not-registered"),
        pytest.param(
            forged,
            401,
            "",
            id="certificate-signed-by-another-key",
        ),
        pytest.param(signed(lifetime=-60), 401, "", id="certificate-assertion-expired"),
        pytest.param(signed(aud="https://elsewhere/adfs/oauth2/token"), 401, "",
                     id="certificate-assertion-for-another-audience"),
        pytest.param(signed(client="x"), 401, "", id="certificate-assertion-of-another-client"),
        pytest.param(
            fixed(assertion_form(jwt({"alg": "RS256", "kid": "k"}, {"sub": "system:sa:kccm"}))),
            200,
            "federated",
            id="federated-token",
        ),
        pytest.param(fixed(assertion_form("not-a-jwt")), 401, "", id="malformed-assertion"),
        pytest.param(fixed({**secret_form(), "client_id": "nobody"}), 401, "", id="unknown-client"),
        pytest.param(fixed({**secret_form(), "grant_type": "password"}), 400, "", id="wrong-grant"),
    ],
)  # fmt: skip
async def test_sign_in(api: Api, form: Form, status: int, source: str) -> None:
    register_certificates(api.world, CLIENT, [CERT.cert_pem(), GO_CERT.cert_pem()])
    found, body = await api.sign_in(form(api))
    assert found == status, body
    if status == 200:
        assert body["token_type"] == "Bearer"
        assert body["expires_in"] == 3600
        assert api.world.tokens[body["access_token"]].source == source
    else:
        assert body["error"]
        assert body["error_description"]


async def test_a_federated_subject_must_be_registered_when_any_is(api: Api) -> None:
    api.world.federated_subjects[CLIENT] = {"system:serviceaccount:kube-system:ccm"}
    wrong = assertion_form(jwt({"alg": "RS256"}, {"sub": "system:serviceaccount:x:y"}))
    right = assertion_form(jwt({"alg": "RS256"}, {"sub": "system:serviceaccount:kube-system:ccm"}))
    assert (await api.sign_in(wrong))[0] == 401
    assert (await api.sign_in(right))[0] == 200


@pytest.mark.parametrize(
    ("offset", "status"),
    [pytest.param(600, 200, id="valid"), pytest.param(-1, 401, id="expired")],
)
async def test_an_expired_federated_token_is_refused(api: Api, offset: int, status: int) -> None:
    claims = {"sub": "system:serviceaccount:kube-system:ccm", "exp": int(api.clock.now) + offset}
    found, body = await api.sign_in(assertion_form(jwt({"alg": "RS256"}, claims)))
    assert found == status, body


@pytest.mark.parametrize(
    ("token", "code"),
    [
        pytest.param("", "AuthenticationFailed", id="no-header"),
        pytest.param("forged", "InvalidAuthenticationToken", id="unknown-token"),
    ],
)
async def test_arm_refuses_a_call_without_a_live_token(api: Api, token: str, code: str) -> None:
    answer = await api.call("GET", f"{NET}/loadBalancers", token=token)
    assert answer.status == 401
    assert answer.body["error"]["code"] == code
    assert answer.headers["WWW-Authenticate"].startswith("Bearer authorization_uri=")


async def test_a_token_expires_after_its_ttl(api: Api) -> None:
    assert (await api.call("GET", f"{NET}/loadBalancers")).status == 200
    api.clock.now += 3600
    answer = await api.call("GET", f"{NET}/loadBalancers")
    assert answer.status == 401
    assert answer.body["error"]["code"] == "ExpiredAuthenticationToken"
    assert "earlier than current UTC time" in answer.body["error"]["message"]


async def test_expire_tokens_ends_every_live_token(api: Api) -> None:
    assert api.world.expire_tokens() == 1
    answer = await api.call("GET", f"{NET}/loadBalancers")
    assert answer.body["error"]["code"] == "ExpiredAuthenticationToken"
