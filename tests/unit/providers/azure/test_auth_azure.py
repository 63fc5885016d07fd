"""Which cloud (ARM endpoint, audience, authority) and which credential, chosen as upstream
v1.36.5 chooses them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from azure.identity import (
    CertificateCredential,
    ClientSecretCredential,
    ManagedIdentityCredential,
    WorkloadIdentityCredential,
)

from kccm.cloudprovider import CloudConfigError
from kccm.providers.azure.auth import credential_kind, make_credential
from kccm.providers.azure.cloudenv import cloud_environment, is_stack_cloud
from kccm.providers.azure.config_fields import AzureConfig

CLOUDS = [
    pytest.param("", "https://management.azure.com", "https://management.core.windows.net/",
                 "https://login.microsoftonline.com/", id="default-public"),
    pytest.param("AzurePublicCloud", "https://management.azure.com",
                 "https://management.core.windows.net/", "https://login.microsoftonline.com/",
                 id="public"),
    pytest.param("azurechinacloud", "https://management.chinacloudapi.cn",
                 "https://management.core.chinacloudapi.cn", "https://login.chinacloudapi.cn/",
                 id="china-any-case"),
    pytest.param("AzureUSGovernmentCloud", "https://management.usgovcloudapi.net",
                 "https://management.core.usgovcloudapi.net", "https://login.microsoftonline.us/",
                 id="government"),
    pytest.param("AzureStackCloud", "https://management.azure.com",
                 "https://management.core.windows.net/", "https://login.microsoftonline.com/",
                 id="stack-without-environment-file"),
    pytest.param("SomeOtherCloud", "https://management.azure.com",
                 "https://management.core.windows.net/", "https://login.microsoftonline.com/",
                 id="unknown-is-public"),
]  # fmt: skip


@pytest.mark.parametrize(("cloud", "endpoint", "audience", "authority"), CLOUDS)
def test_named_clouds(cloud: str, endpoint: str, audience: str, authority: str) -> None:
    env = cloud_environment(AzureConfig(cloud=cloud), {})
    assert (env.resource_manager_endpoint, env.audience, env.authority_host) == (
        endpoint,
        audience,
        authority,
    )


@pytest.mark.parametrize(
    ("content", "audience"),
    [
        pytest.param({}, "https://management.azure.com/", id="audience-defaults"),
        pytest.param({"tokenAudience": "https://aud/"}, "https://aud/", id="audience-given"),
    ],
)
def test_azure_stack_reads_the_environment_file(
    tmp_path: Path, content: dict[str, str], audience: str
) -> None:
    path = tmp_path / "env.json"
    path.write_text(
        json.dumps(
            {
                "name": "AzureStackCloud",
                "resourceManagerEndpoint": "https://127.0.0.1:8443/",
                "activeDirectoryEndpoint": "https://127.0.0.1:8443/",
                **content,
            }
        )
    )
    config = AzureConfig(cloud="AzureStackCloud", disable_azure_stack_cloud=True)
    env = cloud_environment(config, {"AZURE_ENVIRONMENT_FILEPATH": str(path)})
    assert env.arm_url == "https://127.0.0.1:8443"
    assert env.authority_host == "https://127.0.0.1:8443/"
    assert env.audience == audience
    assert env.scope == f"{audience.rstrip('/')}/.default"
    assert not is_stack_cloud(config)
    assert is_stack_cloud(AzureConfig(cloud="azurestackcloud"))


def test_an_unreadable_environment_file_is_one_line(tmp_path: Path) -> None:
    config = AzureConfig(cloud="AzureStackCloud")
    with pytest.raises(CloudConfigError, match="AZURE_ENVIRONMENT_FILEPATH"):
        cloud_environment(config, {"AZURE_ENVIRONMENT_FILEPATH": str(tmp_path / "missing")})


KINDS = [
    pytest.param({"aad_client_secret": "x"}, {}, "client-secret", ClientSecretCredential,
                 id="client-secret"),
    pytest.param({}, {"AZURE_CLIENT_SECRET": "x"}, "client-secret", ClientSecretCredential,
                 id="client-secret-from-environment"),
    pytest.param({"use_managed_identity_extension": True, "aad_client_secret": "x"}, {},
                 "managed-identity", ManagedIdentityCredential, id="managed-identity-first"),
    pytest.param({"use_federated_workload_identity_extension": True,
                  "aad_federated_token_file": "TOKEN", "use_managed_identity_extension": True},
                 {}, "workload-identity", WorkloadIdentityCredential,
                 id="workload-identity-first"),
    pytest.param({}, {"AZURE_FEDERATED_TOKEN_FILE": "TOKEN"}, "workload-identity",
                 WorkloadIdentityCredential, id="workload-identity-from-environment"),
    pytest.param({"aad_client_cert_path": "CERT"}, {}, "client-certificate",
                 CertificateCredential, id="client-certificate"),
    pytest.param({"aad_client_cert_path": "CERT", "aad_client_secret": "x"}, {}, "client-secret",
                 ClientSecretCredential, id="client-secret-before-certificate"),
    pytest.param({"aad_client_cert_path": "CERT"}, {"AZURE_CLIENT_SECRET": "x"}, "client-secret",
                 ClientSecretCredential, id="environment-secret-before-certificate"),
    pytest.param({"use_managed_identity_extension": True, "aad_client_cert_path": "CERT"}, {},
                 "managed-identity", ManagedIdentityCredential,
                 id="managed-identity-before-certificate"),
    pytest.param({"use_managed_identity_extension": True}, {"AZURE_FEDERATED_TOKEN_FILE": "TOKEN",
                  "AZURE_CLIENT_SECRET": "x"}, "workload-identity", WorkloadIdentityCredential,
                 id="webhook-token-file-before-everything"),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "environ", "kind", "cls"), KINDS)
def test_the_credential_upstream_would_choose(
    fields: dict[str, Any], environ: dict[str, str], kind: str, cls: type, tmp_path: Path
) -> None:
    if fields.get("aad_client_cert_path") == "CERT":
        fields = {**fields, "aad_client_cert_path": str(_certificate(tmp_path))}
    token = tmp_path / "token"
    token.write_text("a.b.c")
    if fields.get("aad_federated_token_file") == "TOKEN":
        fields = {**fields, "aad_federated_token_file": str(token)}
    if environ.get("AZURE_FEDERATED_TOKEN_FILE") == "TOKEN":
        environ = {**environ, "AZURE_FEDERATED_TOKEN_FILE": str(token)}
    config = AzureConfig(tenant_id="adfs", aad_client_id="client", **fields)
    assert credential_kind(config, environ) == kind
    env = cloud_environment(AzureConfig(), {})
    assert isinstance(make_credential(config, env, environ), cls)


@pytest.mark.parametrize(
    ("identity", "expected"),
    [
        pytest.param("", {}, id="system-assigned"),
        pytest.param("1234-client", {"client_id": "1234-client"}, id="client-id"),
        pytest.param(
            "/subscriptions/s/resourceGroups/r/providers/Microsoft.ManagedIdentity/"
            "userAssignedIdentities/kccm",
            {"identity_config": {"resource_id": "/subscriptions/s/resourceGroups/r/providers/"
                                 "Microsoft.ManagedIdentity/userAssignedIdentities/kccm"}},
            id="resource-id",
        ),
    ],
)  # fmt: skip
def test_user_assigned_identity_is_a_client_or_a_resource_id(
    identity: str, expected: dict[str, Any]
) -> None:
    from kccm.providers.azure.auth import _managed_identity

    seen: dict[str, Any] = {}

    def fake(**kwargs: Any) -> Any:
        seen.update(kwargs)
        return object()

    _managed_identity(identity, fake, {})
    assert seen == expected


def test_a_network_tenant_of_its_own_is_refused() -> None:
    config = AzureConfig(
        tenant_id="t1", network_resource_tenant_id="t2", aad_client_id="c", aad_client_secret="x"
    )
    with pytest.raises(CloudConfigError, match="networkResourceTenantID"):
        make_credential(config, cloud_environment(config, {}), {})


def _certificate(tmp_path: Path) -> Path:
    """A self-signed RSA certificate with its key, PEM (azure-identity signs with RS256)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kccm-test-client")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    path = tmp_path / "client.pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        + cert.public_bytes(serialization.Encoding.PEM)
    )
    return path
