"""Every way kccm's azure provider signs in, end to end against kccm's Azure emulator (a real
HTTPS server in a subprocess), from an ``azure.json`` as a user writes it: a client secret, a
client certificate (PKCS#12 with a password, PEM), a managed identity (system-assigned, or a
user-assigned one by client ID or resource ID) from the VM's own metadata service, and workload
identity (the keys, or the ``AZURE_*`` variables the webhook injects). Each signs in, opens ARM
(the start-up check and a route-table read), shows in the emulator's token ledger with the
right ``source`` and identity, and signs in again after its token expires."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kccm.app.config import ConfigurationError, ManagerConfig
from kccm.app.manager import EXIT_CONFIG, init_provider
from kccm.emulators.azure import AzureEmulator, azure_emulator
from kccm.providers.azure.config import load_azure_config
from kccm.providers.azure.provider import AzureCloud, build_parts
from kccm.testing.certs import emulator_tls
from kccm.testing.clientcert import ClientCertificate

SUBJECT = "system:serviceaccount:kube-system:cloud-controller-manager"
# a Kubernetes service account token's shape (the emulator reads, not verifies, it)
SA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1zeXN0ZW06Y2xvdWQtY29udHJvbGxlci1tYW5hZ2VyIn0.c2ln"  # noqa: E501
CERT_PASSWORD = "kccm-cert-pw-4d1f"


@pytest.fixture(scope="module")
def emu() -> Iterator[AzureEmulator]:
    with azure_emulator(tls=emulator_tls()) as running:
        yield running


@dataclass
class Form:
    """What a sign-in form needs: ``azure.json`` keys, environment, who the token is for."""

    keys: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    source: str = ""
    client_id: str = ""
    undo: list[Callable[[], None]] = field(default_factory=list)


def secret(emu: AzureEmulator, tmp: Path) -> Form:
    return Form(source="secret", client_id=emu.config["client_id"])


def _certificate_form(emu: AzureEmulator, tmp: Path, kind: str) -> Form:
    cert, client = ClientCertificate(), f"kccm-cert-{uuid.uuid4().hex[:6]}"
    emu.admin.add_client(client, certificates=[cert.cert_pem()])
    path = tmp / f"client.{kind}"
    path.write_bytes(cert.pfx(CERT_PASSWORD) if kind == "pfx" else cert.pem())
    keys = {"aadClientSecret": None, "aadClientId": client, "aadClientCertPath": str(path)}
    if kind == "pfx":
        keys["aadClientCertPassword"] = CERT_PASSWORD
    return Form(keys, source="certificate", client_id=client)


def certificate_pfx(emu: AzureEmulator, tmp: Path) -> Form:
    return _certificate_form(emu, tmp, "pfx")


def certificate_pem(emu: AzureEmulator, tmp: Path) -> Form:
    return _certificate_form(emu, tmp, "pem")


def _managed(emu: AzureEmulator, system: bool, pick: str) -> Form:
    """A VM with a system-assigned identity (``system``) and a user-assigned one; ``pick``:
    ``""`` (no userAssignedIdentityID), ``clientId`` or ``id`` (resource ID)."""
    admin, tag = emu.admin, uuid.uuid4().hex[:6]
    vm = admin.add_vm(f"mi-{tag}")
    uai = admin.add_identity(f"kccm-uai-{tag}")
    admin.assign_identity(vm["id"], system=system, user=[uai["id"]])
    # without a pick, the VM's own identity: any client id but the user-assigned one's
    expected = "" if system and not pick else uai["clientId"]
    keys: dict[str, Any] = {"aadClientSecret": None, "useManagedIdentityExtension": True}
    if pick:
        keys["userAssignedIdentityID"] = uai[pick]
    env = {"AZURE_POD_IDENTITY_AUTHORITY_HOST": admin.imds_for(vm["id"])}
    return Form(keys, env, "managed-identity", expected, [lambda: admin.delete_vm(vm["id"])])


def managed_system(emu: AzureEmulator, tmp: Path) -> Form:
    return _managed(emu, True, "")


def managed_by_client_id(emu: AzureEmulator, tmp: Path) -> Form:
    return _managed(emu, True, "clientId")


def managed_by_resource_id(emu: AzureEmulator, tmp: Path) -> Form:
    return _managed(emu, True, "id")


def _federated_client(emu: AzureEmulator, tmp: Path) -> tuple[str, Path]:
    client = f"kccm-wi-{uuid.uuid4().hex[:6]}"
    emu.admin.add_client(client, federated_subjects=[SUBJECT])
    token = tmp / "sa-token"
    token.write_text(SA_TOKEN)
    return client, token


def workload_keys(emu: AzureEmulator, tmp: Path) -> Form:
    client, token = _federated_client(emu, tmp)
    keys = {
        "aadClientSecret": None,
        "aadClientId": client,
        "useFederatedWorkloadIdentityExtension": True,
        "aadFederatedTokenFile": str(token),
    }
    return Form(keys, source="federated", client_id=client)


def workload_webhook_env(emu: AzureEmulator, tmp: Path) -> Form:
    """The webhook's variables win over the file's client (``aadClientId`` stays the secret
    client's) and switch workload identity on by themselves."""
    client, token = _federated_client(emu, tmp)
    env = {
        "AZURE_CLIENT_ID": client,
        "AZURE_TENANT_ID": emu.config["tenant"],
        "AZURE_FEDERATED_TOKEN_FILE": str(token),
    }
    return Form(env=env, source="federated", client_id=client)


FORMS = [
    pytest.param(secret, id="client-secret"),
    pytest.param(certificate_pfx, id="client-certificate-pfx-with-password"),
    pytest.param(certificate_pem, id="client-certificate-pem"),
    pytest.param(managed_system, id="managed-identity-system-assigned"),
    pytest.param(managed_by_client_id, id="managed-identity-user-assigned-client-id"),
    pytest.param(managed_by_resource_id, id="managed-identity-user-assigned-resource-id"),
    pytest.param(workload_keys, id="workload-identity-keys"),
    pytest.param(workload_webhook_env, id="workload-identity-webhook-env"),
]


def _cloud(emu: AzureEmulator, tmp: Path, form: Form) -> AzureCloud:
    files = emu.cloud_files(tmp, **form.keys)
    environ = {**files.env, **form.env}
    config = load_azure_config(files.azure_json.read_text(), "azure.json", environ=environ)
    return AzureCloud(build_parts(config, environ), environ)


def _read_route_table(cloud: AzureCloud) -> str:
    parts = cloud.parts
    assert parts is not None
    path = (
        f"/subscriptions/{parts.config.subscription_id}/resourceGroups/"
        f"{parts.config.route_table_resource_group}/providers/Microsoft.Network/routeTables/"
        f"{parts.config.route_table_name}"
    )
    return str(parts.arm.get(path, parts.versions.route_tables, operation="routes.get")["name"])


@pytest.mark.parametrize("make", FORMS)
def test_signs_in_opens_arm_and_renews(
    emu: AzureEmulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[AzureEmulator, Path], Form],
) -> None:
    form = make(emu, tmp_path)
    for name, value in form.env.items():  # azure-identity reads some from os.environ itself
        monkeypatch.setenv(name, value)
    try:
        before = len(emu.admin.tokens())
        cloud = _cloud(emu, tmp_path, form)
        cloud.verify()  # the start-up check: GET providers/Microsoft.Compute
        assert _read_route_table(cloud) == emu.config["route_table"]
        first = emu.admin.tokens()[before:]
        assert [t["source"] for t in first] == [form.source]
        if form.client_id:
            assert first[0]["client_id"] == form.client_id
        else:
            assert first[0]["client_id"] not in ("", emu.config["client_id"])

        since = emu.admin.last_seq()
        assert emu.admin.expire_tokens() > 0
        assert _read_route_table(cloud) == emu.config["route_table"]
        renewed = emu.admin.tokens()[before + 1 :]
        assert [(t["source"], t["client_id"]) for t in renewed] == [
            (form.source, first[0]["client_id"])
        ]
        statuses = [(r["service"], r["status"]) for r in emu.admin.requests(since)]
        assert statuses[0] == ("arm", 401)
        assert statuses[-1] == ("arm", 200)
    finally:
        for undo in form.undo:
            undo()


def test_no_secret_reaches_the_log(
    emu: AzureEmulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every form signs in and renews with every logger at DEBUG: no client secret, certificate
    password or key, service account token, client assertion or bearer token in the log."""
    makers = [param.values[0] for param in FORMS]
    forms = [make(emu, _dir(tmp_path / str(i))) for i, make in enumerate(makers)]  # type: ignore[operator]
    try:
        with caplog.at_level(logging.DEBUG):
            for form in forms:
                with monkeypatch.context() as env:
                    for name, value in form.env.items():
                        env.setenv(name, value)
                    cloud = _cloud(emu, tmp_path / uuid.uuid4().hex, form)
                    cloud.verify()
                    emu.admin.expire_tokens()
                    _read_route_table(cloud)
    finally:
        for form in forms:
            for undo in form.undo:
                undo()
    assert "signing in with client-certificate" in caplog.text  # the log was captured
    for secret in (emu.config["client_secret"], CERT_PASSWORD, SA_TOKEN, "PRIVATE KEY"):
        assert secret not in caplog.text
    assert not re.search(r"kccm-emu\.[0-9a-f]{8}|eyJ[A-Za-z0-9_-]{8}", caplog.text)


def _dir(path: Path) -> Path:
    path.mkdir()
    return path


def _missing(tmp: Path) -> str:
    return str(tmp / "missing")


def _encrypted_pem(tmp: Path) -> str:
    path = tmp / "encrypted.pem"
    path.write_bytes(ClientCertificate().pem(CERT_PASSWORD))
    return str(path)


def _garbage(tmp: Path) -> str:
    path = tmp / "garbage"
    path.write_bytes(b"not a certificate")
    return str(path)


def _pfx(tmp: Path) -> str:
    path = tmp / "client.pfx"
    path.write_bytes(ClientCertificate().pfx(CERT_PASSWORD))
    return str(path)


BAD = [
    pytest.param({"aadClientCertPath": _missing}, '"aadClientCertPath": reading the client '
                 "certificate from file", id="certificate-file-missing"),
    pytest.param({"aadClientCertPath": _pfx, "aadClientCertPassword": "wrong-pw-1"},
                 '"aadClientCertPath": decoding the client certificate', id="pfx-wrong-password"),
    pytest.param({"aadClientCertPath": _encrypted_pem}, '"aadClientCertPath": ',
                 id="encrypted-pem-without-password"),
    pytest.param({"aadClientCertPath": _encrypted_pem, "aadClientCertPassword": CERT_PASSWORD},
                 '"aadClientCertPassword": given, so', id="pem-with-a-password"),
    pytest.param({"aadClientCertPath": _garbage}, '"aadClientCertPath": decoding', id="garbage"),
    pytest.param({"useFederatedWorkloadIdentityExtension": True,
                  "aadFederatedTokenFile": _missing}, '"aadFederatedTokenFile": cannot read',
                 id="federated-token-file-missing"),
    pytest.param({"useFederatedWorkloadIdentityExtension": True}, '"aadFederatedTokenFile": '
                 "workload identity needs a token file", id="federated-token-file-not-named"),
    pytest.param({"useFederatedWorkloadIdentityExtension": True, "aadClientId": None,
                  "aadFederatedTokenFile": _pfx}, '"aadClientId": workload identity needs',
                 id="workload-identity-without-client"),
    pytest.param({"useManagedIdentityExtension": True, "userAssignedIdentityID": "nobody"},
                 "Identity not found", id="managed-identity-not-on-the-vm"),
]  # fmt: skip


@pytest.mark.parametrize(("keys", "expected"), BAD)
def test_bad_auth_input_is_one_line_and_exit_2(
    emu: AzureEmulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    keys: dict[str, Any],
    expected: str,
) -> None:
    """As the daemon starts (the manager's init_provider; ConfigurationError is exit 2)."""
    vm = emu.admin.add_vm(f"bad-{uuid.uuid4().hex[:6]}")
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", emu.admin.imds_for(vm["id"]))
    values = {k: v(tmp_path) if callable(v) else v for k, v in keys.items()}
    files = emu.cloud_files(tmp_path, aadClientSecret=None, **values)
    for name, value in files.env.items():
        monkeypatch.setenv(name, value)
    try:
        with caplog.at_level(logging.DEBUG), pytest.raises(ConfigurationError) as caught:
            init_provider(ManagerConfig(cloud_provider="azure", cloud_config=str(files.azure_json)))
    finally:
        emu.admin.delete_vm(vm["id"])
    (problem,) = caught.value.problems
    assert expected in problem
    assert "\n" not in problem
    assert EXIT_CONFIG == 2
    for secret in (CERT_PASSWORD, "wrong-pw-1"):
        assert secret not in problem
        assert secret not in caplog.text
