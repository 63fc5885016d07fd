"""Upstream ``DelegatingAuthorizationOptions`` (apiserver options/authorization.go)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kccm.app.config import (
    ManagerConfig,
    ServingSettings,
)
from kccm.app.flags import FlagSet, go_quote
from kccm.app.options.checks import (
    not_negative,
    readable,
)


@dataclass
class AuthorizationOptions:
    """Section "authorization" (delegated: SubjectAccessReview)."""

    authorization_kubeconfig: str = ""
    always_allow_paths: list[str] = field(
        default_factory=lambda: list(ServingSettings.always_allow_paths)
    )
    authorized_ttl: float = ServingSettings.authorized_cache_ttl
    unauthorized_ttl: float = ServingSettings.unauthorized_cache_ttl

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("authorization")
        s.duration(
            self,
            "authorized_ttl",
            "authorization-webhook-cache-authorized-ttl",
            "The duration to cache 'authorized' responses from the webhook authorizer.",
        )
        s.duration(
            self,
            "unauthorized_ttl",
            "authorization-webhook-cache-unauthorized-ttl",
            "The duration to cache 'unauthorized' responses from the webhook authorizer.",
        )
        s.string(
            self,
            "authorization_kubeconfig",
            "authorization-kubeconfig",
            "kubeconfig file pointing at the 'core' kubernetes server with enough rights "
            "to create subjectaccessreviews.authorization.k8s.io. Optional: the main "
            "client is used when empty.",
        )
        s.strings(
            self,
            "always_allow_paths",
            "authorization-always-allow-paths",
            "A list of HTTP paths to skip during authorization, i.e. these are "
            "authorized without contacting the 'core' kubernetes server. An entry ending "
            "in '*' is a prefix. kccm skips authentication for them too, and an allowed "
            "health endpoint covers its per-check paths (/healthz/<check>).",
        )

    def validate(self) -> list[str]:
        errors = readable("authorization-kubeconfig", self.authorization_kubeconfig)
        errors += not_negative("authorization-webhook-cache-authorized-ttl", self.authorized_ttl)
        errors += not_negative(
            "authorization-webhook-cache-unauthorized-ttl", self.unauthorized_ttl
        )
        for path in self.always_allow_paths:
            if not path.startswith("/"):
                errors.append(
                    f"--authorization-always-allow-paths: {go_quote(path)} must start with '/'"
                )
            elif "*" in path[:-1]:
                errors.append(
                    f"--authorization-always-allow-paths: only a trailing '*' is allowed in "
                    f"{go_quote(path)}"
                )
        return errors

    def apply_to(self, config: ManagerConfig) -> None:
        config.serving = dataclasses.replace(
            config.serving,
            authorization_kubeconfig=self.authorization_kubeconfig,
            always_allow_paths=tuple(self.always_allow_paths),
            authorized_cache_ttl=self.authorized_ttl,
            unauthorized_cache_ttl=self.unauthorized_ttl,
        )
