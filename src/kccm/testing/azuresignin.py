"""The ways to sign in to Azure that upstream's ``azure.json`` offers, set up on kccm's Azure
emulator for a test: each builder registers what the identity provider must know (a client's
certificate or federated subject, a VM's managed identities) and returns the ``azure.json``
keys and environment a client (kccm, or upstream's binaries) starts with, and what the
emulator's token ledger must then show."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.testing.clientcert import ClientCertificate

__all__ = [
    "CERT_PASSWORD",
    "FORMS",
    "SA_TOKEN",
    "SUBJECT",
    "SignIn",
    "certificate_pem",
    "certificate_pfx",
    "managed_by_client_id",
    "managed_by_resource_id",
    "managed_system",
    "secret",
    "workload_keys",
    "workload_webhook_env",
]

SUBJECT = "system:serviceaccount:kube-system:cloud-controller-manager"
# a Kubernetes service account token's shape, about SUBJECT (the emulator reads, not verifies, it)
SA_TOKEN = (
    "eyJhbGciOiJSUzI1NiJ9."
    "eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1zeXN0ZW06Y2xvdWQtY29udHJvbGxlci1tYW5hZ2VyIn0."
    "c2ln"
)
CERT_PASSWORD = "kccm-cert-pw-4d1f"


@dataclass
class SignIn:
    """``keys``: azure.json overrides (None drops a key); ``env``: the environment for Python's
    azure-identity; ``go_env``: for upstream's Go binaries; ``source`` and ``client_id``: the
    token the emulator must issue (``client_id`` "" = any but the secret client's); ``undo``:
    what removes the world it made."""

    keys: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    go_env: dict[str, str] = field(default_factory=dict)
    source: str = ""
    client_id: str = ""
    undo: list[Callable[[], None]] = field(default_factory=list)

    def cleanup(self) -> None:
        for undo in self.undo:
            undo()


Builder = Callable[[AzureEmulator, Path], SignIn]


def _tag() -> str:
    return uuid.uuid4().hex[:6]


def secret(emu: AzureEmulator, tmp: Path) -> SignIn:
    return SignIn(source="secret", client_id=str(emu.config["client_id"]))


def _certificate(emu: AzureEmulator, tmp: Path, kind: str) -> SignIn:
    cert, client = ClientCertificate(), f"kccm-cert-{_tag()}"
    emu.admin.add_client(client, certificates=[cert.cert_pem()])
    path = tmp / f"client-{client}.{kind}"
    path.write_bytes(cert.pfx(CERT_PASSWORD) if kind == "pfx" else cert.pem())
    keys = {"aadClientSecret": None, "aadClientId": client, "aadClientCertPath": str(path)}
    if kind == "pfx":
        keys["aadClientCertPassword"] = CERT_PASSWORD
    return SignIn(keys, source="certificate", client_id=client)


def certificate_pfx(emu: AzureEmulator, tmp: Path) -> SignIn:
    """PKCS#12 with a password."""
    return _certificate(emu, tmp, "pfx")


def certificate_pem(emu: AzureEmulator, tmp: Path) -> SignIn:
    """PEM key and certificate, no password."""
    return _certificate(emu, tmp, "pem")


def _managed(emu: AzureEmulator, system: bool, pick: str) -> SignIn:
    """A VM with a system-assigned identity (``system``) and a user-assigned one; ``pick``:
    ``""`` (no ``userAssignedIdentityID``), ``clientId`` or ``id`` (its resource ID). The
    VM's own metadata service: Python's azure-identity finds it through
    ``AZURE_POD_IDENTITY_AUTHORITY_HOST``, Go's default transport through ``HTTP_PROXY``."""
    admin, tag = emu.admin, _tag()
    vm = admin.add_vm(f"mi-{tag}")
    uai = admin.add_identity(f"kccm-uai-{tag}")
    admin.assign_identity(vm["id"], system=system, user=[uai["id"]])
    expected = "" if system and not pick else str(uai["clientId"])
    keys: dict[str, Any] = {"aadClientSecret": None, "useManagedIdentityExtension": True}
    if pick:
        keys["userAssignedIdentityID"] = uai[pick]
    imds = admin.imds_for(vm["id"])
    return SignIn(
        keys,
        {"AZURE_POD_IDENTITY_AUTHORITY_HOST": imds},
        {"HTTP_PROXY": imds},
        "managed-identity",
        expected,
        [lambda: admin.delete_vm(vm["id"])],
    )


def managed_system(emu: AzureEmulator, tmp: Path) -> SignIn:
    return _managed(emu, True, "")


def managed_by_client_id(emu: AzureEmulator, tmp: Path) -> SignIn:
    return _managed(emu, True, "clientId")


def managed_by_resource_id(emu: AzureEmulator, tmp: Path) -> SignIn:
    return _managed(emu, True, "id")


def _federated_client(emu: AzureEmulator, tmp: Path) -> tuple[str, Path]:
    client = f"kccm-wi-{_tag()}"
    emu.admin.add_client(client, federated_subjects=[SUBJECT])
    token = tmp / f"sa-token-{client}"
    token.write_text(SA_TOKEN)
    return client, token


def workload_keys(emu: AzureEmulator, tmp: Path) -> SignIn:
    client, token = _federated_client(emu, tmp)
    keys = {
        "aadClientSecret": None,
        "aadClientId": client,
        "useFederatedWorkloadIdentityExtension": True,
        "aadFederatedTokenFile": str(token),
    }
    return SignIn(keys, source="federated", client_id=client)


def workload_webhook_env(emu: AzureEmulator, tmp: Path) -> SignIn:
    """The webhook's variables win over the file's client (``aadClientId`` stays the secret
    client's, and the secret stays too) and switch workload identity on by themselves."""
    client, token = _federated_client(emu, tmp)
    env = {
        "AZURE_CLIENT_ID": client,
        "AZURE_TENANT_ID": str(emu.config["tenant"]),
        "AZURE_FEDERATED_TOKEN_FILE": str(token),
    }
    return SignIn(env=env, go_env=dict(env), source="federated", client_id=client)


FORMS: dict[str, Builder] = {
    "client-secret": secret,
    "client-certificate-pfx-with-password": certificate_pfx,
    "client-certificate-pem": certificate_pem,
    "managed-identity-system-assigned": managed_system,
    "managed-identity-user-assigned-client-id": managed_by_client_id,
    "managed-identity-user-assigned-resource-id": managed_by_resource_id,
    "workload-identity-keys": workload_keys,
    "workload-identity-webhook-env": workload_webhook_env,
}
