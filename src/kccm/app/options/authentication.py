"""Upstream ``DelegatingAuthenticationOptions`` (apiserver options/authentication.go)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kccm.app.config import (
    ManagerConfig,
    ServingSettings,
)
from kccm.app.flags import FlagSet
from kccm.app.options.checks import (
    ca_bundle,
    no_blanks,
    not_negative,
    readable,
)


@dataclass
class AuthenticationOptions:
    """Section "authentication" (delegated: TokenReview)."""

    authentication_kubeconfig: str = ""
    authentication_skip_lookup: bool = False
    token_webhook_cache_ttl: float = ServingSettings.token_cache_ttl
    tolerate_lookup_failure: bool = False
    client_ca_file: str = ""
    requestheader_client_ca_file: str = ""
    requestheader_allowed_names: list[str] = field(default_factory=list)
    requestheader_username_headers: list[str] = field(
        default_factory=lambda: list(ServingSettings.requestheader_username_headers)
    )
    requestheader_uid_headers: list[str] = field(default_factory=list)
    requestheader_group_headers: list[str] = field(
        default_factory=lambda: list(ServingSettings.requestheader_group_headers)
    )
    requestheader_extra_headers_prefix: list[str] = field(
        default_factory=lambda: list(ServingSettings.requestheader_extra_headers_prefix)
    )

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("authentication")
        s.duration(
            self,
            "token_webhook_cache_ttl",
            "authentication-token-webhook-cache-ttl",
            "The duration to cache responses from the webhook token authenticator.",
        )
        s.boolean(
            self,
            "tolerate_lookup_failure",
            "authentication-tolerate-lookup-failure",
            "If true, failures to look up missing authentication configuration from the "
            "cluster are not considered fatal. Note that this can result in authentication "
            "that treats all requests as anonymous.",
        )
        s.string(
            self,
            "client_ca_file",
            "client-ca-file",
            "If set, any request presenting a client certificate signed by one of the "
            "authorities in the client-ca-file is authenticated with an identity "
            "corresponding to the CommonName of the client certificate.",
        )
        s.string(
            self,
            "requestheader_client_ca_file",
            "requestheader-client-ca-file",
            "Root certificate bundle to use to verify client certificates on incoming "
            "requests before trusting usernames in headers specified by "
            "--requestheader-username-headers.",
        )
        s.strings(
            self,
            "requestheader_allowed_names",
            "requestheader-allowed-names",
            "List of client certificate common names to allow to provide usernames in "
            "headers specified by --requestheader-username-headers. If empty, any client "
            "certificate validated by the authorities in --requestheader-client-ca-file "
            "is allowed.",
        )
        s.strings(
            self,
            "requestheader_username_headers",
            "requestheader-username-headers",
            "List of request headers to inspect for usernames. X-Remote-User is common.",
        )
        s.strings(
            self,
            "requestheader_uid_headers",
            "requestheader-uid-headers",
            "List of request headers to inspect for UIDs. X-Remote-Uid is suggested.",
        )
        s.strings(
            self,
            "requestheader_group_headers",
            "requestheader-group-headers",
            "List of request headers to inspect for groups. X-Remote-Group is suggested.",
        )
        s.strings(
            self,
            "requestheader_extra_headers_prefix",
            "requestheader-extra-headers-prefix",
            "List of request header prefixes to inspect. X-Remote-Extra- is suggested.",
        )
        s.string(
            self,
            "authentication_kubeconfig",
            "authentication-kubeconfig",
            "kubeconfig file pointing at the 'core' kubernetes server with enough rights "
            "to create tokenreviews.authentication.k8s.io. Optional: the main client "
            "is used when empty.",
        )
        s.boolean(
            self,
            "authentication_skip_lookup",
            "authentication-skip-lookup",
            "If false, the authentication-kubeconfig will be used to lookup missing "
            "authentication configuration from the cluster.",
        )

    def validate(self) -> list[str]:
        errors = readable("authentication-kubeconfig", self.authentication_kubeconfig)
        errors += not_negative(
            "authentication-token-webhook-cache-ttl", self.token_webhook_cache_ttl
        )
        errors += ca_bundle("client-ca-file", self.client_ca_file)
        errors += ca_bundle("requestheader-client-ca-file", self.requestheader_client_ca_file)
        for flag, values in (
            ("requestheader-username-headers", self.requestheader_username_headers),
            ("requestheader-uid-headers", self.requestheader_uid_headers),
            ("requestheader-group-headers", self.requestheader_group_headers),
            ("requestheader-extra-headers-prefix", self.requestheader_extra_headers_prefix),
            ("requestheader-allowed-names", self.requestheader_allowed_names),
        ):
            errors += no_blanks(flag, values)
        uids = [value.lower() for value in self.requestheader_uid_headers]
        if uids and "x-remote-uid" not in uids:
            errors.append(
                "--requestheader-uid-headers is set without specifying the standard "
                "X-Remote-Uid header - API aggregation will not work"
            )
        return errors

    def apply_to(self, config: ManagerConfig) -> None:
        config.serving = dataclasses.replace(
            config.serving,
            authentication_kubeconfig=self.authentication_kubeconfig,
            authentication_skip_lookup=self.authentication_skip_lookup,
            authentication_tolerate_lookup_failure=self.tolerate_lookup_failure,
            token_cache_ttl=self.token_webhook_cache_ttl,
            client_ca_file=self.client_ca_file,
            requestheader_client_ca_file=self.requestheader_client_ca_file,
            requestheader_allowed_names=tuple(self.requestheader_allowed_names),
            requestheader_username_headers=tuple(self.requestheader_username_headers),
            requestheader_uid_headers=tuple(self.requestheader_uid_headers),
            requestheader_group_headers=tuple(self.requestheader_group_headers),
            requestheader_extra_headers_prefix=tuple(self.requestheader_extra_headers_prefix),
        )
