"""Secure serving's authentication material, resolved as upstream's delegating options do.

Client CAs come from ``--client-ca-file`` and ``--requestheader-client-ca-file``. Whatever the
flags leave empty is looked up (unless ``--authentication-skip-lookup``) in the ConfigMap
``kube-system/extension-apiserver-authentication`` that the apiserver publishes: keys
``client-ca-file``, ``requestheader-client-ca-file`` and the ``requestheader-*`` lists (JSON).
A missing ConfigMap is not an error; any other failure is fatal unless
``--authentication-tolerate-lookup-failure``. kccm reads the ConfigMap once at start (upstream
watches it and reloads rotated CAs).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kccm.app.config import ServingSettings
from kccm.kube.errors import KubeError, NotFound
from kccm.kube.interface import KubeClient
from kccm.kube.resources import CONFIG_MAPS
from kccm.runtime.delegated import ClientCertificates, DelegatedAuth, RequestHeaders
from kccm.runtime.tls import NamedCertKey, ServingTLS, load_certificates

__all__ = ["AUTH_CONFIG_MAP", "AuthLookupError", "AuthMaterial", "resolve_auth_material"]

_log = logging.getLogger("kccm.manager")
AUTH_CONFIG_MAP = ("kube-system", "extension-apiserver-authentication")


class AuthLookupError(Exception):
    """The ConfigMap lookup failed and failures are not tolerated (exit 1)."""


@dataclass
class AuthMaterial:
    """The client CA bundles and request-header settings in force."""

    client_ca_pem: bytes = b""
    requestheader_ca_pem: bytes = b""
    requestheader: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def serving_tls(self, settings: ServingSettings) -> ServingTLS:
        bundle = b"\n".join(pem for pem in (self.client_ca_pem, self.requestheader_ca_pem) if pem)
        return ServingTLS(
            min_version=settings.tls_min_version,
            cipher_suites=settings.tls_cipher_suites,
            client_ca_pem=bundle,
            sni=tuple(NamedCertKey.parse(entry) for entry in settings.tls_sni_cert_key),
        )

    def authenticator(
        self, client: KubeClient, settings: ServingSettings, authz: KubeClient | None = None
    ) -> DelegatedAuth:
        """TokenReviews through ``client``, SubjectAccessReviews through ``authz``."""
        certs = (
            ClientCertificates(load_certificates(self.client_ca_pem))
            if self.client_ca_pem
            else None
        )
        headers = None
        if self.requestheader_ca_pem:
            rh = self.requestheader
            headers = RequestHeaders(
                cas=load_certificates(self.requestheader_ca_pem),
                allowed_names=rh.get("allowed-names", ()),
                username_headers=rh.get("username-headers", ()),
                uid_headers=rh.get("uid-headers", ()),
                group_headers=rh.get("group-headers", ()),
                extra_headers_prefixes=rh.get("extra-headers-prefix", ()),
            )
        return DelegatedAuth(
            client,
            authz_client=authz,
            always_allow_groups=settings.always_allow_groups,
            ttl=settings.token_cache_ttl,
            allowed_ttl=settings.authorized_cache_ttl,
            denied_ttl=settings.unauthorized_cache_ttl,
            client_certificates=certs,
            request_headers=headers,
        )


def _from_flags(settings: ServingSettings) -> AuthMaterial:
    material = AuthMaterial()
    if settings.client_ca_file:
        material.client_ca_pem = Path(settings.client_ca_file).read_bytes()
    if settings.requestheader_client_ca_file:
        material.requestheader_ca_pem = Path(settings.requestheader_client_ca_file).read_bytes()
        material.requestheader = {
            "allowed-names": settings.requestheader_allowed_names,
            "username-headers": settings.requestheader_username_headers,
            "uid-headers": settings.requestheader_uid_headers,
            "group-headers": settings.requestheader_group_headers,
            "extra-headers-prefix": settings.requestheader_extra_headers_prefix,
        }
    return material


def _json_list(data: dict[str, Any], key: str) -> tuple[str, ...]:
    raw = data.get(key)
    if not raw:
        return ()
    value = json.loads(raw)
    if not isinstance(value, list):
        raise ValueError(f"{key} is not a JSON list")
    return tuple(str(item) for item in value)


def _apply_config_map(material: AuthMaterial, data: dict[str, Any]) -> None:
    if not material.client_ca_pem and data.get("client-ca-file"):
        material.client_ca_pem = str(data["client-ca-file"]).encode()
    if not material.requestheader_ca_pem and data.get("requestheader-client-ca-file"):
        material.requestheader_ca_pem = str(data["requestheader-client-ca-file"]).encode()
        material.requestheader = {
            name: _json_list(data, f"requestheader-{name}")
            for name in (
                "allowed-names",
                "username-headers",
                "uid-headers",
                "group-headers",
                "extra-headers-prefix",
            )
        }


async def resolve_auth_material(client: KubeClient, settings: ServingSettings) -> AuthMaterial:
    """Flags first, then the cluster's ConfigMap for what they leave empty."""
    material = _from_flags(settings)
    complete = material.client_ca_pem and material.requestheader_ca_pem
    if settings.authentication_skip_lookup or complete:
        return material
    namespace, name = AUTH_CONFIG_MAP
    try:
        config_map = await client.get(CONFIG_MAPS, name, namespace=namespace)
        _apply_config_map(material, config_map.get("data") or {})
        for pem in (material.client_ca_pem, material.requestheader_ca_pem):
            if pem:
                load_certificates(pem)
    except NotFound:
        return material
    except (KubeError, ValueError) as exc:
        message = f"unable to load configmap {namespace}/{name}: {exc}"
        if not settings.authentication_tolerate_lookup_failure:
            raise AuthLookupError(
                f"{message} (grant the Role extension-apiserver-authentication-reader, or pass "
                "--authentication-skip-lookup or --authentication-tolerate-lookup-failure)"
            ) from exc
        _log.warning(
            "%s; continuing without it (--authentication-tolerate-lookup-failure)", message
        )
        return _from_flags(settings)
    return material
