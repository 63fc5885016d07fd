"""Logging in through a shared session manager (upstream vclib ``login`` with
``SessionManagerURL``): a fake vc-session-manager logs in to vcsim with user and password and
hands out clone tickets (``AcquireCloneTicket``); kccm fetches one with its bearer token and
calls ``CloneSession``. vcsim's REST endpoints know no SOAP session, so the tagging client's
use of the SOAP session id is shown with a stand-in SOAP session (see the last test).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vsphere_admin import VCAdmin

from kccm.cloudprovider import CloudAPICalls, CloudProviderInitError
from kccm.emulators.vsphere.sessionmanager import FakeSessionManager
from kccm.emulators.vsphere.vcsim import Vcsim
from kccm.providers.vsphere import VSphereCloud
from kccm.providers.vsphere.config import load_vsphere_config
from kccm.providers.vsphere.credentials import CredentialStore
from kccm.providers.vsphere.session import TagClient

BEARER = "sm-bearer-token"


@pytest.fixture(scope="module")
def manager(vcsim: Vcsim) -> Iterator[FakeSessionManager]:
    """The session manager's own vCenter session, from which every ticket is cloned."""
    owner = VCAdmin(vcsim)
    try:
        with FakeSessionManager(BEARER, owner.content.sessionManager.AcquireCloneTicket) as fake:
            yield fake
    finally:
        owner.close()


def _cloud(vcsim: Vcsim, manager: FakeSessionManager, tmp_path: Path, token: str) -> VSphereCloud:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / f"{vcsim.host}.vc-session-manager-url").write_text(manager.url + "\n")
    (secrets / f"{vcsim.host}.vc-session-manager-token").write_text(token + "\n")
    text = (
        f"[Global]\nsecrets-directory = {secrets}\n"
        f'[VirtualCenter "{vcsim.host}"]\nport = {vcsim.port}\ninsecure-flag = true\n'
    )
    return VSphereCloud(load_vsphere_config(text))


@pytest.fixture
def cloud(vcsim: Vcsim, manager: FakeSessionManager, tmp_path: Path) -> Iterator[VSphereCloud]:
    vcsim.clear_faults()
    manager.requests = manager.refused = 0
    cloud = _cloud(vcsim, manager, tmp_path, BEARER)
    try:
        yield cloud
    finally:
        cloud.close()


def _node(vcsim: Vcsim) -> dict[str, Any]:
    return {"metadata": {"name": vcsim.hostname("DC0_C0_RP0_VM0")}, "spec": {}}


def test_logs_in_with_a_clone_ticket_from_the_session_manager(
    cloud: VSphereCloud, vcsim: Vcsim, manager: FakeSessionManager
) -> None:
    vcsim.reset_calls()
    cloud.verify(secret_based=True)
    meta = cloud._instances.instance_metadata(_node(vcsim))
    assert meta.provider_id.startswith("vsphere://")
    soap = vcsim.calls()["soap"]
    assert soap.get("CloneSession") == 1
    assert "Login" not in soap  # no user and password anywhere
    assert manager.requests == 1
    session = cloud.sessions[vcsim.host]
    assert session.logins == 1
    # the id the tagging client sends: the cloned session's cookie
    assert session.session_cookie()[0] == session.content().sessionManager.currentSession.key
    assert cloud.ledger.snapshot().total_writes == 0


def test_not_authenticated_fetches_a_fresh_ticket(
    cloud: VSphereCloud,
    vcsim: Vcsim,
    manager: FakeSessionManager,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cloud.verify(secret_based=True)
    vcsim.reset_calls()
    vcsim.add_fault("RetrievePropertiesEx", "NotAuthenticated", count=1)
    with caplog.at_level(logging.WARNING):
        assert cloud._instances.instance_metadata(_node(vcsim)).provider_id
    assert "session not authenticated" in caplog.text
    assert manager.requests == 2  # a clone ticket is good for one CloneSession only
    assert vcsim.calls()["soap"].get("CloneSession") == 1
    assert cloud.sessions[vcsim.host].logins == 2


def test_a_wrong_session_manager_token_fails_the_start_in_one_line(
    vcsim: Vcsim, manager: FakeSessionManager, tmp_path: Path
) -> None:
    cloud = _cloud(vcsim, manager, tmp_path, "wrong-bearer")
    try:
        with pytest.raises(CloudProviderInitError) as err:
            cloud.verify(secret_based=True)
    finally:
        cloud.close()
    message = str(err.value)
    assert (
        f"vCenter {vcsim.host}:{vcsim.port}: shared session manager refused the token "
        f"(secret key '{vcsim.host}.vc-session-manager-token'): invalid vc session manager "
        f"response from {manager.url}: 401 Unauthorized"
    ) in message
    assert "\n" not in message
    assert "wrong-bearer" not in message
    assert manager.refused >= 1


class _StandInSoap:
    """A SOAP session whose cookie vcsim's REST endpoints accept (a REST session id), as a
    real vCenter accepts the SOAP one; ``renew`` moves to the next id."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self.generation = 0
        self.renewed: list[int] = []

    def session_cookie(self) -> tuple[str, int]:
        return self.ids[self.generation], self.generation

    def renew(self, generation: int) -> None:
        self.renewed.append(generation)
        self.generation += 1


def test_tagging_uses_the_soap_session_and_renews_it_on_401(
    vcsim: Vcsim, manager: FakeSessionManager, tmp_path: Path
) -> None:
    cloud = _cloud(vcsim, manager, tmp_path, BEARER)
    vc = cloud.config.vcenters[vcsim.host]
    rest_id = vcsim._request(
        "POST",
        "/rest/com/vmware/cis/session",
        headers={"Authorization": "Basic dXNlcjpwYXNz"},  # user:pass
    )["value"]
    soap = _StandInSoap(["expired-session-id", rest_id])
    tags = TagClient(
        vc,
        CredentialStore(cloud.config),
        CloudAPICalls(),
        timeout=10,
        soap=soap,  # type: ignore[arg-type]
    )
    tag_id = vcsim.tag("sm-category", "sm-tag", [])
    vcsim.reset_calls()
    assert tags.request("GET", "/com/vmware/cis/tagging/tag") == [tag_id]
    assert soap.renewed == [0]
    rest = vcsim.calls()["rest"]
    assert "POST /rest/com/vmware/cis/session" not in rest  # no REST login of its own
    assert rest.get("GET /rest/com/vmware/cis/tagging/tag") == 2
