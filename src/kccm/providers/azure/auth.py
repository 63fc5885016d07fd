"""Credentials for ARM, chosen as upstream chooses them, made by azure-identity.

Upstream: ``azclient.NewAuthProvider`` (``pkg/azclient/auth.go``, ``auth_func.go`` and
``auth_conf.go``, v1.36.5). The first that applies wins:

1. workload identity: ``AZURE_FEDERATED_TOKEN_FILE`` set, or
   ``useFederatedWorkloadIdentityExtension`` with ``aadFederatedTokenFile`` ->
   ``WorkloadIdentityCredential`` (client ID ``AZURE_CLIENT_ID`` or ``aadClientId``, tenant
   ``AZURE_TENANT_ID`` or ``tenantId``);
2. ``useManagedIdentityExtension`` -> ``ManagedIdentityCredential`` (IMDS), with
   ``userAssignedIdentityID`` as a resource ID when it contains ``/subscriptions/``, else as a
   client ID;
3. a client secret (``AZURE_CLIENT_SECRET`` or ``aadClientSecret``) ->
   ``ClientSecretCredential``;
4. ``aadClientCertPath`` (PKCS#12 with or without ``aadClientCertPassword``, or PEM with an
   unencrypted key and no password, as Go's ``azidentity.ParseCertificates`` v1.14.0 reads
   them) -> ``CertificateCredential`` sending the certificate chain (``SendCertificateChain``).

A later form's keys are ignored when an earlier one applies, as upstream ignores them. What
upstream refuses when it builds the credential (a certificate file it cannot read or decode,
workload identity without a tenant, client or token file name) stops kccm with one line naming
the key (exit 2); kccm also refuses at start a federated token file that does not exist (Go
reads it at each sign-in, so upstream fails its first ARM call instead).

Every credential signs in at the cloud's authority (:mod:`kccm.providers.azure.cloudenv`).
``tenantId: adfs`` is Azure Stack's AD FS: MSAL then uses ``<authority>/adfs`` (its
``.well-known/openid-configuration`` and ``oauth2/token``), no instance discovery; that is how
both upstream and kccm sign in at kccm's Azure emulator.

Not supported (refused with one line): ``aadMSIDataPlaneIdentityPath`` (msi-dataplane) and a
``networkResourceTenantID`` other than the tenant (multi-tenant network credentials).

No secret is ever logged: azure-identity's and MSAL's loggers are capped at WARNING here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from azure.core.credentials import TokenCredential

from kccm.cloudprovider import CloudConfigError
from kccm.providers.azure.cloudenv import CloudEnvironment
from kccm.providers.azure.config_fields import AzureConfig

__all__ = ["credential_kind", "make_credential"]

log = logging.getLogger(__name__)

_QUIET = ("azure.identity", "msal", "azure.core.pipeline.policies.http_logging_policy")


def _quiet_loggers() -> None:
    for name in _QUIET:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.WARNING:
            logger.setLevel(logging.WARNING)


def _tenant(config: AzureConfig, environ: Mapping[str, str]) -> str:
    return environ.get("AZURE_TENANT_ID") or config.tenant_id


def _client_id(config: AzureConfig, environ: Mapping[str, str]) -> str:
    return environ.get("AZURE_CLIENT_ID") or config.aad_client_id


def _client_secret(config: AzureConfig, environ: Mapping[str, str]) -> str:
    return environ.get("AZURE_CLIENT_SECRET") or config.aad_client_secret


def _federated(config: AzureConfig, environ: Mapping[str, str]) -> tuple[str, bool]:
    path = environ.get("AZURE_FEDERATED_TOKEN_FILE")
    if path:
        return path, True
    return config.aad_federated_token_file, config.use_federated_workload_identity_extension


def credential_kind(config: AzureConfig, environ: Mapping[str, str]) -> str:
    """Which credential upstream would build: ``workload-identity``, ``managed-identity``,
    ``client-secret``, ``client-certificate``, ``msi-data-plane`` or ``none``."""
    if _federated(config, environ)[1]:
        return "workload-identity"
    if config.use_managed_identity_extension:
        return "managed-identity"
    if _client_secret(config, environ):
        return "client-secret"
    if config.aad_client_cert_path:
        return "client-certificate"
    if config.aad_msi_data_plane_identity_path:
        return "msi-data-plane"
    return "none"


def _check_single_tenant(config: AzureConfig, environ: Mapping[str, str]) -> None:
    other = config.network_resource_tenant_id
    if other and other.lower() != _tenant(config, environ).lower():
        raise CloudConfigError(
            [
                '"networkResourceTenantID": a network tenant other than tenantId '
                "(multi-tenant credentials) is not supported by kccm"
            ]
        )


def make_credential(
    config: AzureConfig,
    env: CloudEnvironment,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> TokenCredential:
    """The credential for ``config`` at ``env``'s authority. ``options`` go to the
    azure-identity constructor (tests pass a ``transport``). A credential that cannot be made
    is one :class:`CloudConfigError` line naming the key."""
    from azure.identity import ClientSecretCredential, ManagedIdentityCredential

    _quiet_loggers()
    env_vars = os.environ if environ is None else environ
    _check_single_tenant(config, env_vars)
    kind = credential_kind(config, env_vars)
    tenant, client_id = _tenant(config, env_vars), _client_id(config, env_vars)
    authority = {"authority": env.authority_host}
    log.info("azure: signing in with %s", kind)
    if kind == "workload-identity":
        token_file = _federated(config, env_vars)[0]
        return _workload_identity(tenant, client_id, token_file, {**authority, **options})
    if kind == "managed-identity":
        identity = config.user_assigned_identity_id
        return _managed_identity(identity, ManagedIdentityCredential, options)
    if kind == "client-secret":
        return ClientSecretCredential(
            tenant, client_id, _client_secret(config, env_vars), **authority, **options
        )
    if kind == "client-certificate":
        return _certificate(config, tenant, client_id, {**authority, **options})
    if kind == "msi-data-plane":
        raise CloudConfigError(['"aadMSIDataPlaneIdentityPath": not supported by kccm'])
    raise CloudConfigError(["no Azure credentials in the cloud config"])


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _workload_identity(
    tenant: str, client_id: str, token_file: str, options: Mapping[str, Any]
) -> TokenCredential:
    """Go's ``NewWorkloadIdentityCredential`` refuses a missing tenant, client or token file
    name; the file itself it reads at each sign-in (it is rotated). kccm also refuses, at start,
    a token file that is not there (upstream would fail its first ARM call instead)."""
    from azure.identity import WorkloadIdentityCredential

    missing = [
        (key, what)
        for key, what, value in (
            ("tenantId", "a tenant (or AZURE_TENANT_ID)", tenant),
            ("aadClientId", "a client ID (or AZURE_CLIENT_ID)", client_id),
            ("aadFederatedTokenFile", "a token file (or AZURE_FEDERATED_TOKEN_FILE)", token_file),
        )
        if not value
    ]
    if missing:
        key, what = missing[0]
        raise CloudConfigError([f'"{key}": workload identity needs {what}'])
    if not os.path.isfile(token_file):
        raise CloudConfigError(
            [f'"aadFederatedTokenFile": cannot read the federated token file {token_file}']
        )
    return WorkloadIdentityCredential(
        tenant_id=tenant, client_id=client_id, token_file_path=token_file, **options
    )


def _check_pem(path: str, data: bytes, password: str) -> None:
    """Go's ``azidentity.ParseCertificates`` (v1.14.0, what upstream v1.36.5 builds with) reads
    PEM only without a password, and never decrypts a PEM key: refused alike here, though
    Python could read both."""
    if b"-----BEGIN" not in data:
        return
    if password:
        raise CloudConfigError(
            [
                f'"aadClientCertPassword": given, so {path} is read as PKCS#12 (as upstream); '
                "a PEM file is read without a password"
            ]
        )
    if b"ENCRYPTED PRIVATE KEY" in data or b"Proc-Type: 4,ENCRYPTED" in data:
        raise CloudConfigError(
            [
                f'"aadClientCertPath": {path}: found no private key (an encrypted PEM key is '
                "not read)"
            ]
        )


def _certificate(
    config: AzureConfig, tenant: str, client_id: str, options: Mapping[str, Any]
) -> TokenCredential:
    """PEM (key and certificate) or PKCS#12, read once at start as upstream reads it
    (``newAuthProviderWithServicePrincipalClientCertificate``: ``os.ReadFile`` then
    ``azidentity.ParseCertificates``); errors worded as upstream's."""
    from azure.identity import CertificateCredential

    path = config.aad_client_cert_path
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise CloudConfigError(
            [f'"aadClientCertPath": reading the client certificate from file {path}: {reason}']
        ) from None
    _check_pem(path, data, config.aad_client_cert_password)
    try:
        return CertificateCredential(
            tenant,
            client_id,
            certificate_data=data,
            password=config.aad_client_cert_password or None,
            send_certificate_chain=True,
            **options,
        )
    except (ValueError, TypeError) as err:
        reason = _one_line(str(err))
        key = "aadClientCertPassword" if "password" in reason.lower() else "aadClientCertPath"
        if key == "aadClientCertPath" and config.aad_client_cert_password:
            reason += ' (or "aadClientCertPassword" is not its password)'
        raise CloudConfigError(
            [f'"{key}": decoding the client certificate from file {path}: {reason}']
        ) from None


def _managed_identity(identity: str, cls: Any, options: Mapping[str, Any]) -> TokenCredential:
    if not identity:
        credential: TokenCredential = cls(**options)
    elif "/SUBSCRIPTIONS/" in identity.upper():
        credential = cls(identity_config={"resource_id": identity}, **options)
    else:
        credential = cls(client_id=identity, **options)
    return credential
