"""Alibaba Cloud's signature v3 (``ACS3-HMAC-SHA256``), which the current Python SDKs
(``alibabacloud-tea-openapi`` 0.4: ``Client.do_request``, ``Utils.get_authorization``) send by
default, RPC APIs included: the action and version in ``x-acs-action``/``x-acs-version``, the
parameters in the query string (and a form body), and

``Authorization: ACS3-HMAC-SHA256 Credential=<key>,SignedHeaders=<h1;h2;...>,Signature=<hex>``

where the signature is ``hex(HMAC-SHA256(secret, "ACS3-HMAC-SHA256\\n" +
hex(SHA256(canonical request))))`` and the canonical request is the method, the path, the
sorted query (``k=pct(v)`` joined by ``&``), each signed header as ``name:value\\n`` (names in
lower case, sorted), the signed header names and ``x-acs-content-sha256`` (the body's SHA-256,
checked here too). The server rebuilds it from what it received.
"""

from __future__ import annotations

import hashlib
import hmac
import urllib.parse
from collections.abc import Mapping

__all__ = ["ALGORITHM", "SignatureRefused", "check_v3", "is_v3"]

ALGORITHM = "ACS3-HMAC-SHA256"


class SignatureRefused(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def is_v3(headers: Mapping[str, str]) -> bool:
    return headers.get("Authorization", "").startswith("ACS3-")


def _fields(authorization: str) -> tuple[str, dict[str, str]]:
    algorithm, _, rest = authorization.partition(" ")
    fields = {}
    for part in rest.split(","):
        key, _, value = part.strip().partition("=")
        fields[key] = value
    return algorithm, fields


def canonical_request(
    method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str], signed: str
) -> str:
    pairs = "&".join(f"{k}={urllib.parse.quote(query[k], safe='~')}" for k in sorted(query))
    lower = {k.lower(): v.strip() for k, v in headers.items()}
    names = signed.split(";")
    canonical_headers = "".join(f"{n}:{lower.get(n, '')}\n" for n in names)
    payload = lower.get("x-acs-content-sha256", "")
    return f"{method}\n{path or '/'}\n{pairs}\n{canonical_headers}\n{signed}\n{payload}"


def check_v3(
    keys: Mapping[str, str],
    method: str,
    path: str,
    query: Mapping[str, str],
    headers: Mapping[str, str],
    body: bytes,
) -> str:
    """The access key of a correctly signed request, else :class:`SignatureRefused`."""
    algorithm, fields = _fields(headers.get("Authorization", ""))
    if algorithm != ALGORITHM:
        raise SignatureRefused("SignatureDoesNotMatch", f"{algorithm} is not served here")
    key = fields.get("Credential", "")
    if key not in keys:
        raise SignatureRefused(
            "InvalidAccessKeyId.NotFound", f"Specified access key is not found: {key!r}", 404
        )
    signed = fields.get("SignedHeaders", "")
    lower = {k.lower(): v for k, v in headers.items()}
    if not {"host", "x-acs-action", "x-acs-content-sha256"} <= set(signed.split(";")):
        raise SignatureRefused("SignatureDoesNotMatch", f"SignedHeaders {signed!r} lack some")
    if hashlib.sha256(body).hexdigest() != lower.get("x-acs-content-sha256"):
        raise SignatureRefused("SignatureDoesNotMatch", "x-acs-content-sha256 is not the body's")
    request = canonical_request(method, path, query, headers, signed)
    to_sign = f"{ALGORITHM}\n{hashlib.sha256(request.encode()).hexdigest()}"
    want = hmac.new(keys[key].encode(), to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, fields.get("Signature", "")):
        raise SignatureRefused(
            "SignatureDoesNotMatch", "Specified signature is not matched with our calculation."
        )
    return key
