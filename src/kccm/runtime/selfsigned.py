"""Self-signed serving certificates, as the apiserver's ``MaybeDefaultWithSelfSignedCerts``.

When no certificate and key files are given, upstream generates a throw-away CA named
``<host>-ca@<unix time>`` and a serving certificate ``<host>@<unix time>`` signed by it, valid
for a year, naming the host plus the alternate IPs and DNS names; with a certificate directory
the pair is written there as ``<pair>.crt`` / ``<pair>.key`` (and reused on the next start),
otherwise it lives in memory only. kccm does the same with ECDSA P-256 keys.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertKey", "generate_self_signed", "load_or_generate", "server_ssl_context"]

_VALIDITY = timedelta(days=365)
_IP = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class CertKey:
    """PEM serving certificate chain (leaf then CA), its key, and the CA alone."""

    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes


def generate_self_signed(
    host: str, *, alt_ips: tuple[str, ...] = (), alt_dns: tuple[str, ...] = (), now: datetime
) -> CertKey:
    """A CA and a serving certificate for ``host`` (a name or an IP) and the alternates."""
    stamp = int(now.timestamp())
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _ca_certificate(f"{host}-ca@{stamp}", ca_key, now)
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _leaf_builder(f"{host}@{stamp}", ca_cert, key, now)
    builder = builder.add_extension(_subject_alt_names(host, alt_ips, alt_dns), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    ca_pem = _cert_pem(ca_cert)
    return CertKey(_cert_pem(cert) + ca_pem, _key_pem(key), ca_pem)


def load_or_generate(
    cert_dir: Path, pair_name: str, host: str, *, alt_ips: tuple[str, ...] = (), now: datetime
) -> tuple[Path, Path]:
    """Reuse ``<cert_dir>/<pair_name>.crt|.key`` if both are readable, else generate them."""
    cert_file, key_file = cert_dir / f"{pair_name}.crt", cert_dir / f"{pair_name}.key"
    if os.access(cert_file, os.R_OK) and os.access(key_file, os.R_OK):
        return cert_file, key_file
    pair = generate_self_signed(host, alt_ips=alt_ips, now=now)
    cert_dir.mkdir(parents=True, exist_ok=True)
    cert_file.write_bytes(pair.cert_pem)
    _write_private(key_file, pair.key_pem)
    return cert_file, key_file


def server_ssl_context(
    *, cert_file: Path | None = None, key_file: Path | None = None, pair: CertKey | None = None
) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2+) from files or from an in-memory pair."""
    # No system CAs: client certificates are judged against --client-ca-file alone.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if pair is not None:
        _load_pair(context, pair)
    elif cert_file is not None and key_file is not None:
        context.load_cert_chain(cert_file, key_file)
    else:
        raise ValueError("a certificate and key (files or an in-memory pair) are required")
    return context


def _load_pair(context: ssl.SSLContext, pair: CertKey) -> None:
    """The ssl module reads key material only from files: use a private temporary directory."""
    with tempfile.TemporaryDirectory(prefix="kccm-tls-") as tmp:
        cert_file, key_file = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert_file.write_bytes(pair.cert_pem)
        _write_private(key_file, pair.key_pem)
        context.load_cert_chain(cert_file, key_file)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca_certificate(cn: str, key: ec.EllipticCurvePrivateKey, now: datetime) -> x509.Certificate:
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    return (
        _base_builder(_name(cn), _name(cn), key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False
        )
        .sign(key, hashes.SHA256())
    )


def _leaf_builder(
    cn: str, ca: x509.Certificate, key: ec.EllipticCurvePrivateKey, now: datetime
) -> x509.CertificateBuilder:
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    return (
        _base_builder(_name(cn), ca.subject, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        # Python 3.13 verifies strictly (VERIFY_X509_STRICT): the issuer's key must be named
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca.public_key()  # type: ignore[arg-type]
            ),
            critical=False,
        )
    )


def _base_builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, now: datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + _VALIDITY)
    )


def _subject_alt_names(
    host: str, alt_ips: tuple[str, ...], alt_dns: tuple[str, ...]
) -> x509.SubjectAlternativeName:
    ips: list[_IP] = [ipaddress.ip_address(ip) for ip in alt_ips]
    dns = list(alt_dns)
    try:
        ips.insert(0, ipaddress.ip_address(host))
    except ValueError:
        dns.insert(0, host)
    names: list[x509.GeneralName] = [x509.IPAddress(ip) for ip in ips]
    names += [x509.DNSName(name) for name in dns]
    return x509.SubjectAlternativeName(names)


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
