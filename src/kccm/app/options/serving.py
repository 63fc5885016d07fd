"""Upstream ``SecureServingOptions`` (apiserver options/serving.go)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kccm.app.config import (
    ManagerConfig,
    ServingSettings,
)
from kccm.app.flags import FlagSet
from kccm.app.options.checks import (
    ip,
    not_negative,
    port,
    readable,
    sni_errors,
)
from kccm.runtime.tls import (
    CIPHER_SUITES,
    INSECURE_CIPHER_SUITES,
    cipher_suite_errors,
    curve_errors,
    min_version_errors,
)


@dataclass
class SecureServingOptions:
    """Section "secure serving"."""

    bind_address: str = ServingSettings.bind_address
    secure_port: int = ServingSettings.secure_port
    cert_dir: str = ""
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    tls_min_version: str = ""
    tls_cipher_suites: list[str] = field(default_factory=list)
    tls_curve_preferences: list[int] = field(default_factory=list)
    tls_sni_cert_key: list[str] = field(default_factory=list)
    http2_max_streams_per_connection: int = 0
    disable_http2_serving: bool = False
    permit_port_sharing: bool = False
    permit_address_sharing: bool = False

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("secure serving")
        s.string(
            self,
            "tls_min_version",
            "tls-min-version",
            "Minimum TLS version supported. Possible values: VersionTLS10, VersionTLS11, "
            "VersionTLS12, VersionTLS13. Empty: TLS 1.2.",
        )
        s.strings(
            self,
            "tls_cipher_suites",
            "tls-cipher-suites",
            "Comma-separated list of cipher suites for the server (TLS 1.2 and older; TLS "
            "1.3 suites are not configurable, as in Go). Empty: OpenSSL's defaults. "
            f"Preferred values: {', '.join(CIPHER_SUITES)}. Insecure values: "
            f"{', '.join(INSECURE_CIPHER_SUITES)}.",
        )
        s.int_list(
            self,
            "tls_curve_preferences",
            "tls-curve-preferences",
            "Comma-separated list of numeric Go crypto/tls CurveID values (23, 24, 25, 29, "
            "4588). Checked, then ignored: kccm uses OpenSSL's key-exchange group order.",
        )
        s.repeated(
            self,
            "tls_sni_cert_key",
            "tls-sni-cert-key",
            "A pair of x509 certificate and private key file paths, optionally suffixed "
            'with a list of domain patterns, e.g. "example.crt,example.key:*.foo.com". '
            "Without patterns, the certificate's DNS names (or CN) are used. A client asking "
            "for a matching server name gets this pair; others get the default certificate. "
            "The flag may be given several times.",
            type_name="namedCertKey",
        )
        s.integer(
            self,
            "http2_max_streams_per_connection",
            "http2-max-streams-per-connection",
            "The limit that the server gives to clients for the maximum number of streams "
            "in an HTTP/2 connection. Ignored: kccm serves HTTP/1.1 only.",
            type_name="int",
        )
        s.boolean(
            self,
            "disable_http2_serving",
            "disable-http2-serving",
            "If true, HTTP2 serving will be disabled. kccm never serves HTTP/2, so this "
            "is always in effect.",
        )
        s.boolean(
            self,
            "permit_port_sharing",
            "permit-port-sharing",
            "If true, SO_REUSEPORT will be used when binding the port, which allows more "
            "than one instance to bind on the same address and port.",
        )
        s.boolean(
            self,
            "permit_address_sharing",
            "permit-address-sharing",
            "If true, SO_REUSEADDR will be used when binding the port (on Unix it always "
            "is, as Go does).",
        )
        s.string(
            self,
            "bind_address",
            "bind-address",
            "The IP address on which to listen for the --secure-port port.",
        )
        s.integer(
            self,
            "secure_port",
            "secure-port",
            "The port on which to serve HTTPS with authentication and authorization. "
            "If 0, don't serve HTTPS at all.",
            type_name="int",
        )
        s.string(
            self,
            "cert_dir",
            "cert-dir",
            "The directory where the TLS certs are located. Ignored if --tls-cert-file "
            "and --tls-private-key-file are provided; when all are empty a self-signed "
            "certificate is generated in memory.",
        )
        s.string(
            self,
            "tls_cert_file",
            "tls-cert-file",
            "File containing the default x509 certificate for HTTPS (CA cert, if any, "
            "concatenated after server cert).",
        )
        s.string(
            self,
            "tls_private_key_file",
            "tls-private-key-file",
            "File containing the default x509 private key matching --tls-cert-file.",
        )

    def validate(self) -> list[str]:
        errors = port("secure-port", self.secure_port) + ip("bind-address", self.bind_address)
        if bool(self.tls_cert_file) != bool(self.tls_private_key_file):
            errors.append("--tls-cert-file and --tls-private-key-file must be given together")
        errors += readable("tls-cert-file", self.tls_cert_file)
        errors += readable("tls-private-key-file", self.tls_private_key_file)
        errors += min_version_errors("tls-min-version", self.tls_min_version)
        errors += cipher_suite_errors("tls-cipher-suites", self.tls_cipher_suites)
        errors += curve_errors("tls-curve-preferences", self.tls_curve_preferences)
        errors += not_negative(
            "http2-max-streams-per-connection", self.http2_max_streams_per_connection
        )
        return errors + sni_errors("tls-sni-cert-key", self.tls_sni_cert_key)

    def apply_to(self, config: ManagerConfig) -> None:
        config.serving = dataclasses.replace(
            config.serving,
            bind_address=self.bind_address,
            secure_port=self.secure_port,
            cert_dir=self.cert_dir,
            tls_cert_file=self.tls_cert_file,
            tls_private_key_file=self.tls_private_key_file,
            tls_min_version=self.tls_min_version,
            tls_cipher_suites=tuple(self.tls_cipher_suites),
            tls_sni_cert_key=tuple(self.tls_sni_cert_key),
            permit_port_sharing=self.permit_port_sharing,
            permit_address_sharing=self.permit_address_sharing,
        )
        if self.tls_curve_preferences:
            config.warn(
                "--tls-curve-preferences is ignored: kccm uses OpenSSL's key-exchange groups"
            )
        if self.http2_max_streams_per_connection:
            config.warn("--http2-max-streams-per-connection is ignored: kccm serves HTTP/1.1 only")
