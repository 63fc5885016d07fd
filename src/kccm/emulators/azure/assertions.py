"""Client assertions (RFC 7523 JWTs) as the sign-in endpoint checks them.

A **certificate** assertion (its header names a certificate: ``x5t`` = the SHA-1 of its DER,
or ``x5t#S256`` = the SHA-256; base64url from MSAL Python, standard base64 from MSAL Go, both
taken) must name a certificate registered for the client (``POST /_emu/clients``
``certificates``), be signed by its key (``RS256``, or ``PS256`` that MSAL Python uses outside
AD FS), be issued by and about the client (``iss``/``sub``), be meant for this authority's
token endpoint (``aud``) and not have expired (``exp``), as AD FS and Entra ID check them.

A **federated** assertion (a Kubernetes service account token, workload identity) is read, not
verified: the emulator models no issuer's keys. Its subject must be one registered for the
client when any is, and, when it has an ``exp``, it must not have expired (a token file the
kubelet stopped rotating).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.serialization import Encoding

from kccm.emulators.azure.world import World

__all__ = ["assertion_source", "register_certificates", "thumbprints"]


def _b64(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def thumbprints(der: bytes) -> tuple[bytes, bytes]:
    """A certificate's SHA-1 (``x5t``) and SHA-256 (``x5t#S256``) digests."""
    return hashlib.sha1(der).digest(), hashlib.sha256(der).digest()


def register_certificates(world: World, client_id: str, pems: list[str]) -> None:
    """The client's certificates (PEM, one or more per string), by both digests."""
    found = world.client_certificates.setdefault(client_id, {})
    for pem in pems:
        for cert in x509.load_pem_x509_certificates(pem.encode()):
            der = cert.public_bytes(Encoding.DER)
            for digest in thumbprints(der):
                found[digest] = der


def _digest(thumbprint: str) -> bytes:
    """A header's thumbprint: base64url as the JWS spec says (MSAL Python pads it), or standard
    base64 as MSAL Go sends it (``urlsafe_b64decode`` takes ``+`` and ``/`` as well)."""
    try:
        return _b64(thumbprint.strip().rstrip("="))
    except (ValueError, binascii.Error):
        return b""


def _parts(assertion: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    parts = assertion.split(".")
    if len(parts) != 3:
        raise ValueError("not a JWT")
    try:
        header, claims = json.loads(_b64(parts[0])), json.loads(_b64(parts[1]))
        signature = _b64(parts[2])
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError(f"not a JWT: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("not a JWT")
    return header, claims, signature, f"{parts[0]}.{parts[1]}".encode()


def _verify_signature(der: bytes, alg: str, signature: bytes, signed: bytes) -> None:
    key = x509.load_der_x509_certificate(der).public_key()
    if not isinstance(key, rsa.RSAPublicKey):
        raise ValueError("the registered certificate's key is not RSA")
    pad: padding.AsymmetricPadding
    if alg == "RS256":
        pad = padding.PKCS1v15()
    elif alg == "PS256":
        pad = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.AUTO)
    else:
        raise ValueError(f"MSIS9626: the signing algorithm {alg!r} is not supported.")
    try:
        key.verify(signature, signed, pad, hashes.SHA256())
    except InvalidSignature as exc:
        raise ValueError("MSIS9626: the client assertion's signature is not valid.") from exc


def _certificate(world: World, client_id: str, header: dict[str, Any]) -> bytes:
    thumbprint = str(header.get("x5t#S256") or header.get("x5t") or "")
    der = world.client_certificates.get(client_id, {}).get(_digest(thumbprint))
    if der is None:
        raise ValueError(
            f"MSIS9625: no certificate with thumbprint {thumbprint!r} is registered for "
            f"the client {client_id!r}."
        )
    return der


def _check_claims(world: World, client_id: str, claims: dict[str, Any]) -> None:
    if claims.get("iss") != client_id or claims.get("sub") != client_id:
        raise ValueError("the certificate assertion is not issued by the client")
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if not any(str(a).startswith(f"{world.base_url}/adfs/oauth2/") for a in audiences):
        raise ValueError(f"MSIS9623: the assertion's audience {audience!r} is not this endpoint.")
    try:
        expires = float(claims["exp"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError("MSIS9623: the assertion has no expiry ('exp').") from exc
    if expires <= world.clock():
        raise ValueError("MSIS9624: the client assertion has expired.")


def assertion_source(world: World, client_id: str, assertion: str) -> str:
    """``certificate`` or ``federated``; ValueError with the text the endpoint answers."""
    try:
        header, claims, signature, signed = _parts(assertion)
    except ValueError as exc:
        raise ValueError(f"the client assertion is malformed: {exc}") from exc
    if "x5t" in header or "x5t#S256" in header:
        der = _certificate(world, client_id, header)
        _verify_signature(der, str(header.get("alg", "")), signature, signed)
        _check_claims(world, client_id, claims)
        return "certificate"
    subjects = world.federated_subjects.get(client_id)
    if subjects and claims.get("sub") not in subjects:
        raise ValueError(f"no federated credential of the client matches {claims.get('sub')!r}")
    expires = claims.get("exp")
    if isinstance(expires, int | float) and expires <= world.clock():
        raise ValueError("AADSTS700024: the client assertion is not within its valid time range.")
    return "federated"
