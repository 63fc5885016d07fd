"""The azure provider as the daemon builds it: the entry point's factory from azure.json (signed
in through the emulator's ADFS endpoint), start-up errors as one line and exit 2 with no secret
in the logs, the config read from the ``azure-cloud-provider`` Secret at initialize, and an
ARM 429 pausing the call gate's group (what ``kccm explain`` reports)."""

from __future__ import annotations

import asyncio
import base64
import io
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from az_core_world import node, start_emulator
from prometheus_client import CollectorRegistry

from kccm.app.config import ConfigurationError, ManagerConfig
from kccm.app.manager import EXIT_CONFIG, init_provider
from kccm.cloudprovider import CloudProviderInitError, as_backend_node_selector
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.cloudprovider.registry import known_cloud_providers
from kccm.kube.errors import NotFound
from kccm.providers.azure import AzureCloud, new_azure_cloud
from kccm.providers.azure.arm_errors import ARMThrottled
from kccm.providers.azure.instances import AzureInstances
from kccm.providers.azure.late import LateInstances

SECRET = "kccm-secret"


@pytest.fixture(scope="module")
def emu() -> Iterator[Any]:
    yield from start_emulator()


@pytest.fixture
def files(emu: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The emulator's azure.json and the environment upstream is started with."""
    written = emu.cloud_files(tmp_path)
    for key, value in written.env.items():
        monkeypatch.setenv(key, value)
    return written


def test_azure_is_an_installed_provider() -> None:
    assert "azure" in known_cloud_providers()


def test_the_factory_reads_azure_json_and_signs_in(emu: Any, files: Any) -> None:
    with open(files.azure_json, encoding="utf-8") as stream:
        cloud = new_azure_cloud(stream)
    assert cloud.region_zones == {"eastus": ["1", "2", "3"]}
    assert cloud.provider_name() == "azure"
    assert isinstance(cloud.instances_v2(), AzureInstances)
    assert cloud.instances() is None
    assert cloud.zones() is None
    reads = cloud.cloud_api_calls().snapshot().reads
    assert reads == {"providers.get": 1}
    view = _View()
    cloud.set_cluster_view(view)
    assert cloud.parts is not None
    assert cloud.parts.balancers.cluster_view is view


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param({"aadClientSecret": "not-the-secret"}, "cannot sign in", id="wrong-secret"),
        pytest.param({"vmType": "vmms"}, '"vmType"', id="bad-value"),
        pytest.param({"useInstanceMetadata": "yes"}, '"useInstanceMetadata"', id="bad-type"),
        pytest.param(
            {"subscriptionId": "00000000-0000-0000-0000-000000000000"},
            "SubscriptionNotFound",
            id="unknown-subscription",
        ),
    ],
)
def test_the_daemon_stops_with_one_configuration_error(
    emu: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    overrides: dict[str, Any],
    expected: str,
) -> None:
    """The manager's init_provider: a ConfigurationError is exit code 2 (run_manager)."""
    written = emu.cloud_files(tmp_path, **overrides)
    for key, value in written.env.items():
        monkeypatch.setenv(key, value)
    with caplog.at_level(logging.DEBUG), pytest.raises(ConfigurationError) as caught:
        init_provider(ManagerConfig(cloud_provider="azure", cloud_config=str(written.azure_json)))
    (problem,) = caught.value.problems
    assert expected in problem
    assert "\n" not in problem
    assert EXIT_CONFIG == 2
    for secret in (SECRET, "not-the-secret"):
        assert secret not in problem
        assert secret not in caplog.text


class _Client:
    def __init__(self, secrets: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.secrets = secrets

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        found = self.secrets.get((namespace or "", name))
        if found is None:
            raise NotFound("secrets not found")
        return found


class _Builder:
    def __init__(self, client: _Client) -> None:
        self._client = client

    def client(self, name: str) -> Any:
        return self._client

    def config(self, name: str) -> Any:
        return None


class _View:
    def services(self) -> list[Any]:
        return []

    def nodes(self) -> list[Any]:
        return []

    def has_synced(self) -> bool:
        return False


def _secret(text: str) -> dict[str, Any]:
    return {"data": {"cloud-config": base64.b64encode(text.encode()).decode()}}


async def test_without_a_file_the_config_secret_is_read_at_initialize(emu: Any, files: Any) -> None:
    cloud = new_azure_cloud(None)
    instances = cloud.instances_v2()
    assert isinstance(instances, LateInstances)
    view = _View()
    cloud.set_cluster_view(view)  # before the balancers exist: handed on when built
    text = await asyncio.to_thread(Path(files.azure_json).read_text)
    vm = emu.admin.add_vm("from-secret")
    try:
        builder = _Builder(_Client({("kube-system", "azure-cloud-provider"): _secret(text)}))
        await cloud.initialize(builder, asyncio.Event())
        found = await asyncio.to_thread(instances.instance_metadata, node("from-secret"))
        assert found is not None
        assert found.provider_id == f"azure://{vm['id']}"
        assert cloud.cloud_api_calls().snapshot().reads["providers.get"] == 1
        assert cloud.parts is not None
        assert cloud.parts.balancers.cluster_view is view
        selector = as_backend_node_selector(cloud.load_balancer())
        assert selector is not None
        assert selector.backend_node_exclusion({"metadata": {"name": "s"}, "spec": {}}) is not None
    finally:
        emu.admin.delete_vm(vm["id"])


@pytest.mark.parametrize(
    ("secrets", "expected"),
    [
        pytest.param({}, "no Secret kube-system/azure-cloud-provider", id="no-secret"),
        pytest.param(
            {("kube-system", "azure-cloud-provider"): {"data": {"other": ""}}},
            "no key 'cloud-config'",
            id="no-key",
        ),
        pytest.param(
            {("kube-system", "azure-cloud-provider"): _secret('{"vmType": "x"}')},
            '"vmType"',
            id="bad-value",
        ),
    ],
)
async def test_a_bad_config_secret_stops_the_start(
    files: Any, secrets: dict[tuple[str, str], Any], expected: str
) -> None:
    cloud = new_azure_cloud(None)
    with pytest.raises(CloudProviderInitError, match=expected):
        await cloud.initialize(_Builder(_Client(secrets)), asyncio.Event())


async def test_arm_throttling_pauses_the_group_in_the_call_gate(emu: Any, files: Any) -> None:
    """ARM's 429 with Retry-After: the instances group is paused for that long (``kccm
    explain`` shows ``throttled_for``), and calls meanwhile are not sent to ARM."""
    text = await asyncio.to_thread(Path(files.azure_json).read_text)
    cloud: AzureCloud = new_azure_cloud(io.StringIO(text))
    gate = CallGate(registry=CollectorRegistry())
    gated = GatedCloud(cloud, gate)
    v2 = gated.instances_v2()
    assert v2 is not None
    emu.admin.fault("/virtualMachines/", method="GET", kind="throttle", retry_after=40)
    try:
        with pytest.raises(ARMThrottled):
            await v2.instance_exists(node("throttled-node"))
        (group,) = [g for g in gate.snapshot() if g.group == "instances"]
        assert group.throttled_for > 30
    finally:
        emu.clear_faults()
        gate.close()


def test_a_token_arm_refuses_is_renewed_once(emu: Any, files: Any) -> None:
    """ARM answers 401 for a token it expired early: the provider signs in again (bypassing
    MSAL's cache) and sends the request once more; no error reaches the controller."""
    with open(files.azure_json, encoding="utf-8") as stream:
        cloud = new_azure_cloud(stream)
    assert emu.admin.expire_tokens() > 0
    since = emu.admin.last_seq()
    cloud.verify()
    calls = [(r["method"], r["status"]) for r in emu.admin.requests(since)]
    assert calls == [("GET", 401), ("POST", 200), ("GET", 200)]
