"""The kccm daemon with ``--cloud-provider=azure`` when ARM stops taking its token: every
token the Azure emulator issued expires at once (ARM answers 401 ExpiredAuthenticationToken,
as it does past a token's expiry), and kccm must sign in again on its own, whichever way it
signs in: a client secret, a client certificate (PKCS#12 with a password), a user-assigned
managed identity from the VM's metadata service, workload identity from the webhook's
``AZURE_*`` variables (``kccm.testing.azuresignin``; every form is checked without the daemon
in ``tests/unit/providers/azure/test_auth_forms_azure.py``).

A module of its own (emulator, daemon): a daemon that cannot recover would fail every test
that shares it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator

import pytest
from azure_daemon_support import ROOT, World, blocking, start_daemon

from kccm.emulators.azure.launcher import azure_emulator
from kccm.emulators.azure.world import DEFAULTS
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES
from kccm.testing.azuresignin import CERT_PASSWORD, FORMS, SA_TOKEN, SignIn
from kccm.testing.certs import emulator_tls
from kccm.testing.controllers import delete_until_gone, initialised_nodes
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import apply_rbac
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup

SIGN_INS = [
    "client-secret",
    "client-certificate-pfx-with-password",
    "managed-identity-user-assigned-client-id",
    "workload-identity-webhook-env",
]


@pytest.fixture(params=SIGN_INS)
async def signed_in(
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[World, SignIn]]:
    with azure_emulator(tls=emulator_tls()) as emulator:
        baseline = await blocking(emulator.admin.state)
        await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-azure-e2e")
        tmp = tmp_path_factory.mktemp("az-token")
        form = await blocking(FORMS[request.param], emulator, tmp)
        daemons, daemon = start_daemon(emulator, control_plane, tmp, keys=form.keys, env=form.env)
        try:
            yield World(emulator, daemon, baseline), form
        finally:
            daemons.stop_all(grace=30)
            await blocking(form.cleanup)
        emulator.admin.assert_clean(baseline)


async def test_an_expired_token_is_renewed(
    signed_in: tuple[World, SignIn], kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    """A Node initialised (kccm signed in), every token expired, another Node created: kccm
    signs in again the same way (a new token of the same source and identity after a 401) and
    initialises it; its log holds no secret, password, service account token or bearer
    token."""
    world, form = signed_in
    admin, tag = world.admin, uuid.uuid4().hex[:6]
    first, second = (kube_cleanup.add(NODES, f"az-token-{tag}-{i}") for i in range(2))
    machines = [await world.add_machine(name) for name in (first, second)]
    try:
        await kube.create(NODES, kubelet_node(first))
        await world.until(lambda: initialised_nodes(kube, [first]))
        before = await blocking(admin.tokens)
        assert {t["source"] for t in before} == {form.source}
        since = await blocking(admin.last_seq)
        assert await blocking(admin.expire_tokens) > 0
        await kube.create(NODES, kubelet_node(second))
        await world.until(lambda: initialised_nodes(kube, [second]))
        calls = await blocking(admin.requests, since)
        assert any(c["status"] == 401 for c in calls), "no request met the expired token"
        renewed = (await blocking(admin.tokens))[len(before) :]
        assert renewed, "no new token after the expiry"
        assert {(t["source"], t["client_id"]) for t in renewed} == {
            (form.source, before[-1]["client_id"])
        }
        _no_secret_in(world.daemon.logs(), form)
    finally:
        await delete_until_gone(kube, NODES, [first, second])
        for machine in machines:
            await blocking(admin.delete_vm, machine.vm_id)


def _no_secret_in(logs: str, form: SignIn) -> None:
    """The daemon's log names the form it signed in with and nothing secret."""
    assert "azure: signing in with" in logs
    for secret in (DEFAULTS["client_secret"], CERT_PASSWORD, SA_TOKEN, "PRIVATE KEY"):
        assert secret not in logs
    assert not re.search(r"kccm-emu\.[0-9a-f]{8}|eyJ[A-Za-z0-9_-]{8}", logs)
