"""The shared session manager client: fetch a vCenter clone ticket to log in with.

Upstream: ``pkg/common/vclib/vc_session_manager.go`` ``GetSharedToken``, called by
``VSphereConnection.login`` (``connection.go``) when the credentials hold a
``<server>.vc-session-manager-url``: ``GET <url>`` with ``Authorization: Bearer <token>``
(the ``<server>.vc-session-manager-token``, or, when there is none, the Pod's service account
token from :data:`SA_TOKEN_FILE`), a 5 s timeout, the system's trusted CAs (upstream passes no
``TrustedCertificates`` and verifies; ``SSL_CERT_FILE`` points both Go and Python elsewhere),
and a ``200`` answer ``{"token": "<clone ticket>"}``. The ticket is then used once in
``SessionManager.CloneSession``.

Tokens and tickets are never logged nor put in a message; the URL is shown without its query
or user info.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from kccm.cloudprovider import CloudProviderError
from kccm.providers.vsphere.credentials import CredentialError

__all__ = ["SA_TOKEN_FILE", "SharedSessionError", "SharedTokenRefused", "get_shared_token"]

SA_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
"""Upstream ``saFile``: the bearer token when the Secret has no session manager token."""
TIMEOUT_SECONDS = 5.0
"""Upstream ``SharedTokenOptions.Timeout`` default."""


class SharedSessionError(CloudProviderError):
    """The session manager gave no token (unreachable, bad answer); worth retrying."""


class SharedTokenRefused(SharedSessionError):
    """The session manager refused our bearer token (HTTP 401 or 403)."""


def safe_url(url: str) -> str:
    """``url`` without user info, query or fragment (they may hold secrets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def _bearer(token: str, token_file: str) -> str:
    if token:
        return token
    try:
        with open(token_file, encoding="utf-8") as f:
            return f.read().removesuffix("\n")
    except OSError as err:
        raise CredentialError(
            f"no session manager token and the service account token {token_file} cannot be "
            f"read: {err.strerror}"
        ) from err


def _request(url: str, bearer: str, timeout: float) -> bytes:
    request = urllib.request.Request(url, method="GET")
    request.add_header("Authorization", f"Bearer {bearer}")
    where = safe_url(url)
    try:
        with urllib.request.urlopen(
            request, timeout=timeout, context=ssl.create_default_context()
        ) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as err:
        err.close()
        kind = SharedTokenRefused if err.code in (401, 403) else SharedSessionError
        raise kind(
            f"invalid vc session manager response from {where}: {err.code} {err.reason}"
        ) from err
    except (OSError, ValueError) as err:
        raise SharedSessionError(f"failed calling vc session manager {where}: {err}") from err


def get_shared_token(
    url: str, token: str = "", *, timeout: float = TIMEOUT_SECONDS, token_file: str = ""
) -> str:
    """A clone ticket from the session manager at ``url`` (upstream ``GetSharedToken``);
    ``token_file`` defaults to :data:`SA_TOKEN_FILE`."""
    if not url:
        raise SharedSessionError("URL of session manager cannot be empty")
    payload = _request(url, _bearer(token, token_file or SA_TOKEN_FILE), timeout)
    try:
        found = json.loads(payload)
    except ValueError as err:
        raise SharedSessionError(
            f"failed decoding vc session manager response from {safe_url(url)}: not JSON"
        ) from err
    ticket = found.get("token") if isinstance(found, dict) else None
    if not isinstance(ticket, str) or not ticket:
        raise SharedSessionError(
            f'returned vc session token from {safe_url(url)} is empty (want {{"token": ...}})'
        )
    return ticket
