"""A client certificate for signing in with a certificate (Azure's ``aadClientCertPath``): a
self-signed RSA certificate (MSAL signs client assertions with RS256/PS256), written as upstream
reads it (PKCS#12 with a password, or PEM with the key), and the assertions it signs."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

__all__ = ["ClientCertificate"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class ClientCertificate:
    """A key and its self-signed certificate, valid for an hour around now."""

    name: str = "kccm-client"
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    cert: x509.Certificate = field(init=False)

    def __post_init__(self) -> None:
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.name)])
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .sign(self.key, hashes.SHA256())
        )

    def cert_pem(self) -> str:
        """The certificate alone (what is registered with the identity provider)."""
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    def pem(self, password: str = "") -> bytes:
        """Key (encrypted when ``password``) and certificate, PEM."""
        encryption: serialization.KeySerializationEncryption = serialization.NoEncryption()
        if password:
            encryption = serialization.BestAvailableEncryption(password.encode())
        key = self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        return key + self.cert_pem().encode()

    def pfx(self, password: str = "") -> bytes:
        """PKCS#12 with a SHA-1 MAC and 3DES (what Go's ``azidentity.ParseCertificates`` can
        decode; it cannot the SHA-256 MAC of newer tools)."""
        encryption: serialization.KeySerializationEncryption = serialization.NoEncryption()
        if password:
            encryption = (
                serialization.PrivateFormat.PKCS12.encryption_builder()
                .kdf_rounds(2048)
                .key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC)
                .hmac_hash(hashes.SHA1())
                .build(password.encode())
            )
        return pkcs12.serialize_key_and_certificates(
            self.name.encode(), self.key, self.cert, None, encryption
        )

    def go_x5t(self) -> str:
        """The ``x5t`` as MSAL Go writes it: standard base64, unpadded."""
        sha1 = hashlib.sha1(self.cert.public_bytes(serialization.Encoding.DER)).digest()
        return base64.b64encode(sha1).decode().rstrip("=")

    def assertion(
        self,
        client_id: str,
        audience: str,
        *,
        alg: str = "RS256",
        lifetime: float = 600,
        now: float | None = None,
        go_thumbprint: bool = False,
    ) -> str:
        """A client assertion (RFC 7523) as MSAL signs it, made at ``now`` (default: the
        clock's time); ``go_thumbprint``: ``x5t`` in standard base64, as MSAL Go writes it."""
        der = self.cert.public_bytes(serialization.Encoding.DER)
        header: dict[str, Any] = {"alg": alg, "typ": "JWT"}
        if alg == "PS256":
            header["x5t#S256"] = _b64(hashlib.sha256(der).digest())
        else:
            sha1 = hashlib.sha1(der).digest()
            header["x5t"] = self.go_x5t() if go_thumbprint else _b64(sha1)
        now = time.time() if now is None else now
        claims = {
            "aud": audience,
            "iss": client_id,
            "sub": client_id,
            "jti": _b64(hashlib.sha256(str(now).encode()).digest()),
            "nbf": int(now),
            "exp": int(now + lifetime),
        }
        signed = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        pad: padding.AsymmetricPadding = padding.PKCS1v15()
        if alg == "PS256":
            pad = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
        signature = self.key.sign(signed.encode(), pad, hashes.SHA256())
        return f"{signed}.{_b64(signature)}"
