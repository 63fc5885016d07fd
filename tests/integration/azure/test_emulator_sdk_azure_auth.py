"""Every way the provider signs in, through azure-identity against the emulator: a client
secret, a client certificate (MSAL's signed assertion), a federated token (a client assertion
and workload identity's token file), and managed identity from the instance metadata service;
each token then opens ARM."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from azure.core.credentials import TokenCredential
from azure.identity import (
    CertificateCredential,
    ClientAssertionCredential,
    ManagedIdentityCredential,
    WorkloadIdentityCredential,
)
from azure.mgmt.network import NetworkManagementClient
from azure_sdk_support import client_options, credential, leaves_nothing

from kccm.emulators.azure import AzureEmulator, azure_emulator
from kccm.testing.certs import emulator_tls
from kccm.testing.clientcert import ClientCertificate

SERVICE_ACCOUNT_TOKEN = (  # a Kubernetes service account token's shape: header.claims.signature
    "eyJhbGciOiJSUzI1NiIsImtpZCI6Imt1YmUifQ."
    "eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1zeXN0ZW06Y2xvdWQtY29udHJvbGxlci1tYW5hZ2VyIn0."
    "c2lnbmF0dXJl"
)


@pytest.fixture(scope="module")
def emu() -> Iterator[AzureEmulator]:
    with azure_emulator(tls=emulator_tls()) as emulator:
        yield emulator


@pytest.fixture(autouse=True)
def clean(emu: AzureEmulator) -> Iterator[None]:
    yield from leaves_nothing(emu)


def adfs(emu: AzureEmulator) -> dict[str, object]:
    conf = emu.config
    return {
        "tenant_id": conf["tenant"],
        "client_id": conf["client_id"],
        "authority": emu.url,
        "disable_instance_discovery": True,
        "connection_verify": emu.ca_file,
    }


def secret(emu: AzureEmulator, tmp: Path) -> TokenCredential:
    return credential(emu)


def certificate(emu: AzureEmulator, tmp: Path) -> TokenCredential:
    """MSAL's signed assertion, verified by the emulator against the registered certificate."""
    cert, client = ClientCertificate(), f"kccm-cert-{uuid.uuid4().hex[:6]}"
    emu.admin.add_client(client, certificates=[cert.cert_pem()])
    options = {**adfs(emu), "client_id": client}
    return CertificateCredential(certificate_data=cert.pem(), **options)  # type: ignore[arg-type]


def assertion(emu: AzureEmulator, tmp: Path) -> TokenCredential:
    return ClientAssertionCredential(func=lambda: SERVICE_ACCOUNT_TOKEN, **adfs(emu))  # type: ignore[arg-type]


def workload(emu: AzureEmulator, tmp: Path) -> TokenCredential:
    token_file = tmp / "token"
    token_file.write_text(SERVICE_ACCOUNT_TOKEN)
    return WorkloadIdentityCredential(token_file_path=str(token_file), **adfs(emu))  # type: ignore[arg-type]


def managed(emu: AzureEmulator, tmp: Path) -> TokenCredential:
    return ManagedIdentityCredential()


@pytest.mark.parametrize(
    ("make", "signed_at", "source"),
    [
        pytest.param(secret, "adfs", "secret", id="client-secret"),
        pytest.param(certificate, "adfs", "certificate", id="client-certificate"),
        pytest.param(assertion, "adfs", "federated", id="client-assertion"),
        pytest.param(workload, "adfs", "federated", id="workload-identity"),
        pytest.param(managed, "imds", "managed-identity", id="managed-identity"),
    ],
)
def test_each_credential_opens_arm(
    emu: AzureEmulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[AzureEmulator, Path], TokenCredential],
    signed_at: str,
    source: str,
) -> None:
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", emu.imds_url)
    since = emu.admin.last_seq()
    cred = make(emu, tmp_path)
    with NetworkManagementClient(cred, emu.config["subscription"], **client_options(emu)) as client:
        assert client.route_tables.get("kccm-rg", "kccm-rt").name == "kccm-rt"
    services = [r["service"] for r in emu.admin.requests(since)]
    assert signed_at in services
    assert services[-1] == "arm"
    assert emu.admin.tokens()[-1]["source"] == source
