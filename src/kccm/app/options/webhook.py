"""Upstream ``WebhookOptions`` and ``WebhookServingOptions`` (options/webhook.go)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kccm.app.config import (
    ManagerConfig,
)
from kccm.app.flags import FlagSet, go_quote
from kccm.app.options.checks import (
    IGNORED,
    ip,
    port,
    readable,
    sni_errors,
)
from kccm.app.options.serving import SecureServingOptions
from kccm.runtime.tls import (
    cipher_suite_errors,
    curve_errors,
    min_version_errors,
)


@dataclass
class WebhookOptions:
    """Sections "webhook" and "webhook serving": kccm has no webhooks (like upstream's
    ``NewCloudControllerManagerCommand``), so only an empty list or ``*`` is valid."""

    serving: SecureServingOptions = field(default_factory=SecureServingOptions, compare=False)
    """The main secure serving group (its port must differ from the webhook port)."""
    webhooks: list[str] = field(default_factory=list)
    webhook_bind_address: str = "0.0.0.0"
    webhook_secure_port: int = 10260
    webhook_cert_dir: str = ""
    webhook_tls_cert_file: str = ""
    webhook_tls_private_key_file: str = ""
    webhook_tls_min_version: str = ""
    webhook_tls_cipher_suites: list[str] = field(default_factory=list)
    webhook_tls_curve_preferences: list[int] = field(default_factory=list)
    webhook_tls_sni_cert_key: list[str] = field(default_factory=list)
    webhook_disable_http2_serving: bool = False

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("webhook")
        s.strings(
            self,
            "webhooks",
            "webhooks",
            "A list of webhooks to enable ('*', 'foo', '-foo'). kccm has no webhooks, "
            "so only '*' or an empty list is valid.",
        )
        s = fs.section("webhook serving")
        s.string(
            self,
            "webhook_bind_address",
            "webhook-bind-address",
            f"The IP address on which to listen for the --webhook-secure-port port. {IGNORED}",
        )
        s.integer(
            self,
            "webhook_secure_port",
            "webhook-secure-port",
            "Secure port to serve cloud provider webhooks. kccm serves none; the value "
            "is only checked.",
            type_name="int",
        )
        unused = "Checked, then ignored: kccm serves no webhooks."
        s.string(
            self, "webhook_cert_dir", "webhook-cert-dir", f"Webhook certificate directory. {unused}"
        )
        s.string(
            self,
            "webhook_tls_cert_file",
            "webhook-tls-cert-file",
            f"x509 certificate file for the webhook server. {unused}",
        )
        s.string(
            self,
            "webhook_tls_private_key_file",
            "webhook-tls-private-key-file",
            f"Private key file matching --webhook-tls-cert-file. {unused}",
        )
        s.string(
            self,
            "webhook_tls_min_version",
            "webhook-tls-min-version",
            f"Minimum TLS version of the webhook server. {unused}",
        )
        s.strings(
            self,
            "webhook_tls_cipher_suites",
            "webhook-tls-cipher-suites",
            f"Cipher suites of the webhook server. {unused}",
        )
        s.int_list(
            self,
            "webhook_tls_curve_preferences",
            "webhook-tls-curve-preferences",
            f"Curve IDs of the webhook server. {unused}",
        )
        s.repeated(
            self,
            "webhook_tls_sni_cert_key",
            "webhook-tls-sni-cert-key",
            f"SNI certificate/key pairs of the webhook server. {unused}",
            type_name="namedCertKey",
        )
        s.boolean(
            self,
            "webhook_disable_http2_serving",
            "webhook-disable-http2-serving",
            f"Disable HTTP/2 on the webhook server. {unused}",
        )

    def validate(self) -> list[str]:
        errors = [
            f"--webhooks: {go_quote(entry.removeprefix('-'))} is not in the list of known "
            "webhooks (kccm has none)"
            for entry in self.webhooks
            if entry != "*"
        ]
        errors += port("webhook-secure-port", self.webhook_secure_port)
        errors += ip("webhook-bind-address", self.webhook_bind_address)
        if self.webhook_secure_port and self.webhook_secure_port == self.serving.secure_port:
            errors.append("--webhook-secure-port: must differ from --secure-port")
        if bool(self.webhook_tls_cert_file) != bool(self.webhook_tls_private_key_file):
            errors.append(
                "--webhook-tls-cert-file and --webhook-tls-private-key-file must be given together"
            )
        errors += readable("webhook-tls-cert-file", self.webhook_tls_cert_file)
        errors += readable("webhook-tls-private-key-file", self.webhook_tls_private_key_file)
        errors += min_version_errors("webhook-tls-min-version", self.webhook_tls_min_version)
        errors += cipher_suite_errors("webhook-tls-cipher-suites", self.webhook_tls_cipher_suites)
        errors += curve_errors("webhook-tls-curve-preferences", self.webhook_tls_curve_preferences)
        return errors + sni_errors("webhook-tls-sni-cert-key", self.webhook_tls_sni_cert_key)

    def apply_to(self, config: ManagerConfig) -> None:
        return None
