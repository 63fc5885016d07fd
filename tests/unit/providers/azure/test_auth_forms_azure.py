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
from pathlib import Path
from typing import Any

import pytest

from kccm.app.config import ConfigurationError, ManagerConfig
from kccm.app.manager import EXIT_CONFIG, init_provider
from kccm.emulators.azure import AzureEmulator, azure_emulator
from kccm.providers.azure.config import load_azure_config
from kccm.providers.azure.provider import AzureCloud, build_parts
from kccm.testing.azuresignin import CERT_PASSWORD, SA_TOKEN, SignIn
from kccm.testing.azuresignin import FORMS as SIGN_INS
from kccm.testing.certs import emulator_tls
from kccm.testing.clientcert import ClientCertificate

FORMS = [pytest.param(builder, id=name) for name, builder in SIGN_INS.items()]


@pytest.fixture(scope="module")
def emu() -> Iterator[AzureEmulator]:
    with azure_emulator(tls=emulator_tls()) as running:
        yield running


def _cloud(emu: AzureEmulator, tmp: Path, form: SignIn) -> AzureCloud:
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
    make: Callable[[AzureEmulator, Path], SignIn],
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
        form.cleanup()


def test_no_secret_reaches_the_log(
    emu: AzureEmulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every form signs in and renews with every logger at DEBUG: no client secret, certificate
    password or key, service account token, client assertion or bearer token in the log."""
    forms = [make(emu, tmp_path) for make in SIGN_INS.values()]
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
            form.cleanup()
    assert "signing in with client-certificate" in caplog.text  # the log was captured
    for secret in (emu.config["client_secret"], CERT_PASSWORD, SA_TOKEN, "PRIVATE KEY"):
        assert secret not in caplog.text
    assert not re.search(r"kccm-emu\.[0-9a-f]{8}|eyJ[A-Za-z0-9_-]{8}", caplog.text)


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
