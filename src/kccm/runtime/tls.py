"""Serving TLS options with upstream's names: ``--tls-min-version``, ``--tls-cipher-suites``,
``--tls-curve-preferences``, and the client CAs a server verifies client certificates with.

Go names TLS versions ``VersionTLS10`` … ``VersionTLS13`` and cipher suites by their IANA
names (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``); OpenSSL, which Python's ``ssl`` wraps, has
its own names. As in Go, the cipher-suite list only governs TLS 1.2 and older: TLS 1.3 suites
are not configurable, so naming one is accepted and changes nothing.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography import x509

__all__ = [
    "CIPHER_SUITES",
    "CURVE_IDS",
    "INSECURE_CIPHER_SUITES",
    "TLS13_CIPHER_SUITES",
    "TLS_VERSIONS",
    "NamedCertKey",
    "ServingTLS",
    "apply_serving_tls",
    "cipher_suite_errors",
    "curve_errors",
    "load_certificates",
    "min_version_errors",
]

TLS_VERSIONS: dict[str, ssl.TLSVersion] = {
    "VersionTLS10": ssl.TLSVersion.TLSv1,
    "VersionTLS11": ssl.TLSVersion.TLSv1_1,
    "VersionTLS12": ssl.TLSVersion.TLSv1_2,
    "VersionTLS13": ssl.TLSVersion.TLSv1_3,
}
# Go crypto/tls CipherSuites() (TLS 1.0-1.2 part): IANA name -> OpenSSL name
CIPHER_SUITES: dict[str, str] = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    # older Go spellings, still accepted by component-base
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
}
# Go crypto/tls InsecureCipherSuites(): accepted (as upstream), most are absent from a modern
# OpenSSL, which then makes the server fail at start if nothing usable is left
INSECURE_CIPHER_SUITES: dict[str, str] = {
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
}
TLS13_CIPHER_SUITES = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)
# Go tls.CurveID values component-base accepts for --tls-curve-preferences
CURVE_IDS: dict[int, str] = {
    23: "P-256",
    24: "P-384",
    25: "P-521",
    29: "X25519",
    4588: "X25519MLKEM768",
}


def min_version_errors(flag: str, value: str) -> list[str]:
    if not value or value in TLS_VERSIONS:
        return []
    return [f"--{flag}: unknown TLS version {value!r} (allowed: {', '.join(sorted(TLS_VERSIONS))})"]


def cipher_suite_errors(flag: str, names: Iterable[str]) -> list[str]:
    known = CIPHER_SUITES.keys() | INSECURE_CIPHER_SUITES.keys() | TLS13_CIPHER_SUITES
    names = list(names)
    errors = [
        f"--{flag}: cipher suite {name} not supported or doesn't exist"
        for name in names
        if name not in known
    ]
    ciphers = _openssl_names(names)
    if not errors and ciphers:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            errors.append(
                f"--{flag}: this OpenSSL ({ssl.OPENSSL_VERSION}) implements none of "
                f"{', '.join(name for name in names if name not in TLS13_CIPHER_SUITES)}"
            )
    return errors


def curve_errors(flag: str, ids: Iterable[int]) -> list[str]:
    return [
        f"--{flag}: unsupported curve ID {curve} (allowed: "
        f"{', '.join(f'{k} ({v})' for k, v in sorted(CURVE_IDS.items()))})"
        for curve in ids
        if curve not in CURVE_IDS
    ]


@dataclass(frozen=True)
class NamedCertKey:
    """``--tls-sni-cert-key``: a pair served to clients asking for one of ``names``."""

    cert_file: str
    key_file: str
    names: tuple[str, ...] = ()

    @classmethod
    def parse(cls, entry: str) -> NamedCertKey:
        """``cert,key[:name1,name2]`` (component-base ``NamedCertKey`` syntax)."""
        files, _, names = entry.partition(":")
        parts = [part.strip() for part in files.split(",")]
        if len(parts) != 2 or not all(parts):
            raise ValueError(f'{entry!r} is not of the form "certfile,keyfile[:name1,name2]"')
        given = tuple(name.strip().lower() for name in names.split(",") if name.strip())
        return cls(parts[0], parts[1], given)

    def server_names(self) -> tuple[str, ...]:
        """The names given, else those of the certificate (DNS SANs, or its CN)."""
        if self.names:
            return self.names
        with open(self.cert_file, "rb") as stream:
            leaf = load_certificates(stream.read())[0]
        try:
            sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            dns = [name.lower() for name in sans.get_values_for_type(x509.DNSName)]
        except x509.ExtensionNotFound:
            dns = []
        if dns:
            return tuple(dns)
        common = leaf.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
        return tuple(str(attribute.value).lower() for attribute in common)


@dataclass(frozen=True)
class ServingTLS:
    """What the serving socket enforces beyond its certificate."""

    min_version: str = ""  # Go name; "" keeps TLS 1.2 (component-base's default)
    cipher_suites: tuple[str, ...] = ()  # IANA names; () keeps OpenSSL's defaults
    client_ca_pem: bytes = b""  # PEM bundle: client certificates are verified when sent
    sni: tuple[NamedCertKey, ...] = ()  # extra pairs chosen by the client's server name


def _openssl_names(names: Sequence[str]) -> list[str]:
    table = {**CIPHER_SUITES, **INSECURE_CIPHER_SUITES}
    return [table[name] for name in names if name in table]


def apply_serving_tls(context: ssl.SSLContext, options: ServingTLS) -> None:
    """Set the minimum version, TLS <= 1.2 cipher suites, client-certificate verification and
    the SNI certificates (exact server name first, then a ``*.`` wildcard of its parent, as
    component-base picks them; no match serves the default certificate).

    Raises ``ssl.SSLError`` when the local OpenSSL supports none of the named suites, or an
    SNI pair does not load."""
    _apply_options(context, options)
    if not options.sni:
        return
    by_name: dict[str, ssl.SSLContext] = {}
    for pair in options.sni:
        # No system CAs: client certificates are judged against --client-ca-file alone.
        named = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        named.minimum_version = ssl.TLSVersion.TLSv1_2
        named.load_cert_chain(pair.cert_file, pair.key_file)
        _apply_options(named, options)
        for name in pair.server_names():
            by_name.setdefault(name, named)  # the first pair naming a host wins

    def choose(ssl_object: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
        chosen = _match(by_name, server_name)
        if chosen is not None:
            ssl_object.context = chosen

    context.sni_callback = choose


def _match(by_name: dict[str, ssl.SSLContext], server_name: str | None) -> ssl.SSLContext | None:
    if not server_name:
        return None
    name = server_name.lower().rstrip(".")
    if name in by_name:
        return by_name[name]
    _, dot, parent = name.partition(".")
    return by_name.get("*." + parent) if dot else None


def _apply_options(context: ssl.SSLContext, options: ServingTLS) -> None:
    if options.min_version:
        context.minimum_version = TLS_VERSIONS[options.min_version]
    ciphers = _openssl_names(options.cipher_suites)
    if ciphers:
        context.set_ciphers(":".join(ciphers))
    if options.client_ca_pem:
        context.load_verify_locations(cadata=options.client_ca_pem.decode("ascii"))
        context.verify_mode = ssl.CERT_OPTIONAL


def load_certificates(pem: bytes) -> tuple[x509.Certificate, ...]:
    """Every certificate of a PEM bundle (``ValueError`` if there is none)."""
    certificates = tuple(x509.load_pem_x509_certificates(pem))
    if not certificates:
        raise ValueError("no PEM certificate found")
    return certificates
