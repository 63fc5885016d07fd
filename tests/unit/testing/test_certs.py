"""The throw-away PKI passes OpenSSL's strict verification (VERIFY_X509_STRICT), which Python
3.13 turns on in ``ssl.create_default_context`` (issue 13, point 8: ``kccm dev up`` failed
there with "Missing Authority Key Identifier")."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509

from kccm.testing.certs import CertificateAuthority, KeyPair


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority()


def _files(tmp_path: Path, name: str, pair: KeyPair) -> tuple[str, str]:
    cert, key = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    cert.write_bytes(pair.cert_pem)
    key.write_bytes(pair.key_pem)
    return str(cert), str(key)


def _strict_handshake(ca: CertificateAuthority, tmp_path: Path, host: str) -> list[BaseException]:
    """A mutual-TLS handshake over a socket pair, both sides verifying strictly."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(*_files(tmp_path, "server", ca.serving(("localhost", "127.0.0.1"))))
    server.load_verify_locations(cadata=ca.cert_pem.decode())
    server.verify_mode = ssl.CERT_REQUIRED
    client = ssl.create_default_context(cadata=ca.cert_pem.decode())
    client.load_cert_chain(*_files(tmp_path, "client", ca.client("admin", ("system:masters",))))
    for context in (server, client):
        context.verify_flags |= ssl.VERIFY_X509_STRICT
    errors: list[BaseException] = []
    left, right = socket.socketpair()

    def serve() -> None:
        try:
            with server.wrap_socket(left, server_side=True) as conn:
                conn.recv(1)
        except (ssl.SSLError, OSError) as err:
            errors.append(err)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(right, server_hostname=host) as conn:
            conn.sendall(b"x")
    except (ssl.SSLError, OSError) as err:
        errors.append(err)
    thread.join(10)
    return errors


@pytest.mark.parametrize(
    "host", [pytest.param("127.0.0.1", id="ip"), pytest.param("localhost", id="dns")]
)
def test_mutual_tls_passes_strict_verification(
    ca: CertificateAuthority, tmp_path: Path, host: str
) -> None:
    assert _strict_handshake(ca, tmp_path, host) == []


def _extensions(pem: bytes) -> dict[str, x509.Extension[x509.ExtensionType]]:
    cert = x509.load_pem_x509_certificate(pem)
    return {type(ext.value).__name__: ext for ext in cert.extensions}


def test_the_ca_has_what_strict_verification_wants(ca: CertificateAuthority) -> None:
    found = _extensions(ca.cert_pem)
    assert found["BasicConstraints"].critical
    assert found["BasicConstraints"].value.ca is True  # type: ignore[attr-defined]
    assert found["KeyUsage"].critical
    assert found["KeyUsage"].value.key_cert_sign  # type: ignore[attr-defined]
    assert "SubjectKeyIdentifier" in found


@pytest.mark.parametrize("kind", ["serving", "client"])
def test_issued_certificates_name_the_ca_key(ca: CertificateAuthority, kind: str) -> None:
    pair = ca.serving() if kind == "serving" else ca.client("someone")
    found = _extensions(pair.cert_pem)
    ca_key_id = _extensions(ca.cert_pem)["SubjectKeyIdentifier"].value.digest  # type: ignore[attr-defined]
    assert found["AuthorityKeyIdentifier"].value.key_identifier == ca_key_id  # type: ignore[attr-defined]
    assert found["BasicConstraints"].critical
    assert found["BasicConstraints"].value.ca is False  # type: ignore[attr-defined]
    assert found["KeyUsage"].critical
    assert "SubjectKeyIdentifier" in found
