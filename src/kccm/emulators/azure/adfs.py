"""Sign-in as an Azure Stack (ADFS) authority answers it: ``GET
/adfs/.well-known/openid-configuration`` (what MSAL reads first for the ``adfs`` tenant) and
``POST /adfs/oauth2/token`` with the client-credentials grant, authenticated by a client
secret, a certificate's signed assertion or a federated token (workload identity; Python's
``ClientAssertionCredential`` posts to ``/adfs/oauth2/v2.0/token``, served alike). The bearer
tokens it issues live ``token_ttl`` seconds; ARM answers a call without a live one with 401,
as ARM does (``AuthenticationFailed``, ``InvalidAuthenticationToken``,
``ExpiredAuthenticationToken``).

Client assertions are checked in :mod:`kccm.emulators.azure.assertions`: a certificate's is
verified against the certificates registered for the client; a federated token's subject must
be one registered for the client when any is.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from kccm.emulators.azure.assertions import assertion_source
from kccm.emulators.azure.errors import ArmError
from kccm.emulators.azure.rest import WORLD, reply
from kccm.emulators.azure.world import Token, World

__all__ = [
    "openid_configuration",
    "require_token",
    "routes",
    "token_body",
]

routes = web.RouteTableDef()

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def openid_configuration(base_url: str) -> dict[str, Any]:
    adfs = f"{base_url}/adfs"
    return {
        "issuer": adfs,
        "authorization_endpoint": f"{adfs}/oauth2/authorize/",
        "token_endpoint": f"{adfs}/oauth2/token/",
        "jwks_uri": f"{adfs}/discovery/keys",
        "token_endpoint_auth_methods_supported": [
            "client_secret_post",
            "client_secret_basic",
            "private_key_jwt",
        ],
        "response_types_supported": ["code", "id_token", "code id_token", "token"],
        "response_modes_supported": ["query", "fragment", "form_post"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "subject_types_supported": ["pairwise"],
        "scopes_supported": ["openid", "profile", "email", "allatclaims"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "access_token_issuer": f"{base_url}/adfs/services/trust",
        "end_session_endpoint": f"{adfs}/oauth2/logout",
        "device_authorization_endpoint": f"{adfs}/oauth2/devicecode",
    }


@routes.get("/adfs/.well-known/openid-configuration")
async def get_openid_configuration(request: web.Request) -> web.Response:
    return reply(openid_configuration(request.app[WORLD].base_url))


def _oauth_error(status: int, error: str, description: str) -> web.Response:
    return reply({"error": error, "error_description": description}, status)


def _authenticate(world: World, form: dict[str, str]) -> tuple[str, str]:
    """The client and how it proved itself; ValueError with the text ADFS answers."""
    client_id = form.get("client_id", "")
    if client_id not in world.clients:
        raise ValueError(f"MSIS9607: The 'client_id' {client_id!r} is not registered.")
    if form.get("client_assertion"):
        if form.get("client_assertion_type") != ASSERTION_TYPE:
            raise ValueError("MSIS9622: The 'client_assertion_type' is not supported.")
        return client_id, assertion_source(world, client_id, form["client_assertion"])
    secret = world.clients[client_id]
    if not secret or form.get("client_secret") != secret:
        raise ValueError("MSIS9622: Client authentication failed. Please verify the credential.")
    return client_id, "secret"


def token_body(token: Token, resource: str = "") -> dict[str, Any]:
    ttl = max(0, int(token.expires - token.issued))
    body: dict[str, Any] = {
        "access_token": token.value,
        "token_type": "Bearer",
        "expires_in": ttl,
        "ext_expires_in": ttl,
    }
    if resource:
        body["resource"] = resource
    return body


@routes.post("/adfs/oauth2/token")
@routes.post("/adfs/oauth2/token/")
@routes.post("/adfs/oauth2/v2.0/token")  # azure-identity's assertion credentials (no MSAL)
async def post_token(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    form = {k: str(v) for k, v in (await request.post()).items()}
    if form.get("grant_type") != "client_credentials":
        return _oauth_error(
            400, "unsupported_grant_type", f"MSIS9612: grant {form.get('grant_type')!r}"
        )
    if not form.get("scope") and not form.get("resource"):
        return _oauth_error(400, "invalid_request", "MSIS9609: 'scope' or 'resource' missing.")
    try:
        client_id, source = _authenticate(world, form)
    except ValueError as exc:
        return _oauth_error(401, "invalid_client", str(exc))
    return reply(token_body(world.issue_token(client_id, source)))


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%m/%d/%Y %H:%M:%S")


def require_token(request: web.Request) -> Token:
    """The caller's live token, or ARM's 401."""
    world = request.app[WORLD]
    header = request.headers.get("Authorization", "")
    challenge = {
        "WWW-Authenticate": f'Bearer authorization_uri="{world.base_url}/adfs", '
        'error="invalid_token", error_description="The authentication failed."'
    }
    if not header:
        raise ArmError(
            401,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing.",
            headers=challenge,
        )
    scheme, _, value = header.partition(" ")
    token = world.tokens.get(value.strip()) if scheme.lower() == "bearer" else None
    if token is None:
        raise ArmError(
            401, "InvalidAuthenticationToken", "The access token is invalid.", headers=challenge
        )
    now = world.clock()
    if token.expires <= now:
        challenge["WWW-Authenticate"] = challenge["WWW-Authenticate"].replace(
            "The authentication failed.", "The access token has expired."
        )
        raise ArmError(
            401,
            "ExpiredAuthenticationToken",
            f"The access token expiry UTC time '{_utc(token.expires)}' is earlier than current "
            f"UTC time '{_utc(now)}'.",
            headers=challenge,
        )
    return token
