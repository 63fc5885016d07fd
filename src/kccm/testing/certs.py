"""Throw-away PKI for a test control plane: a CA, serving and client certificates, SA keys.

The certificates pass OpenSSL's strict verification (``VERIFY_X509_STRICT``, on by default in
Python 3.13's ``ssl.create_default_context``): the CA has a critical basicConstraints
(CA:TRUE), a critical keyUsage (certSign, cRLSign, digitalSignature) and a Subject Key
Identifier; every issued certificate has an Authority Key Identifier naming the CA's key, its
own Subject Key Identifier, a critical keyUsage (digitalSignature for ECDSA), an
extendedKeyUsage and critical basicConstraints CA:FALSE.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kccm.emulators.process import ServingTls

__all__ = ["CertificateAuthority", "KeyPair", "emulator_tls", "generate_key_pem"]

_VALIDITY = dt.timedelta(days=7)


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def generate_key_pem() -> tuple[bytes, bytes]:
    """A fresh ECDSA P-256 key as (private PEM, public PEM) — e.g. for service-account tokens."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _key_pem(key), public


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    return x509.Name(attrs)


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        key_cert_sign=ca,
        crl_sign=ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )


def _subject_key_id(public: ec.EllipticCurvePublicKey) -> x509.SubjectKeyIdentifier:
    return x509.SubjectKeyIdentifier.from_public_key(public)


def _authority_key_id(issuer: ec.EllipticCurvePublicKey) -> x509.AuthorityKeyIdentifier:
    return x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer)


class CertificateAuthority:
    """A self-signed ECDSA P-256 CA that issues serving and client certificates."""

    def __init__(self, common_name: str = "kccm-test-ca") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self._name = _name(common_name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_key_usage(ca=True), critical=True)
            .add_extension(_subject_key_id(self._key.public_key()), critical=False)
            .add_extension(_authority_key_id(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def _issue(
        self,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName] | None = None,
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(ca=False), critical=True)
            .add_extension(_subject_key_id(key.public_key()), critical=False)
            .add_extension(_authority_key_id(self._key.public_key()), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def serving(self, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> KeyPair:
        """A server certificate valid for each of ``hosts`` (DNS names or IP addresses)."""
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        return self._issue(_name(hosts[0]), ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def client(self, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        """A client certificate: CN is the user name, O entries are the groups."""
        return self._issue(_name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)


def emulator_tls(
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1"), ca_name: str = "kccm-emulator-ca"
) -> ServingTls:
    """A throw-away CA and its serving certificate for ``hosts``, for an HTTPS emulator
    (``openstack_emulator(tls=emulator_tls())``)."""
    authority = CertificateAuthority(ca_name)
    pair = authority.serving(hosts)
    return ServingTls(ca_pem=authority.cert_pem, cert_pem=pair.cert_pem, key_pem=pair.key_pem)
