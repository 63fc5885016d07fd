"""The azure balancer against kccm's ARM emulator (kccm.emulators.azure, a real HTTPS server
in a subprocess), signed in through its ADFS endpoint, configured from the azure.json the
emulator writes for upstream: create, port change, Nodes joining and leaving, source ranges,
internal, Local policy, two Services changed at once, an unchanged ensure that writes nothing
(the emulator's request log), and a delete that leaves the emulator as it was."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from azure.identity import ClientSecretCredential

from kccm.emulators.azure import AzureEmulator, azure_emulator
from kccm.providers.azure.arm import ARMClient
from kccm.providers.azure.config import load_azure_config
from kccm.providers.azure.loadbalancer import AzureLoadBalancers
from kccm.providers.azure.loadbalancer.armclient import ClientArm, lb_settings
from kccm.providers.azure.versions import API_VERSIONS
from kccm.testing.certs import emulator_tls

CLUSTER = "kubernetes"
UID = "6f1b2c3d-0000-4000-8000-00000000000a"
OTHER = "99999999-0000-4000-8000-000000000009"


@pytest.fixture(scope="module")
def emu() -> Iterator[AzureEmulator]:
    with azure_emulator(tls=emulator_tls()) as running:
        yield running


@pytest.fixture(scope="module")
def lbs(emu: AzureEmulator, tmp_path_factory: pytest.TempPathFactory) -> AzureLoadBalancers:
    files = emu.cloud_files(tmp_path_factory.mktemp("azure"))
    config = load_azure_config(Path(files.azure_json).read_text(), "azure.json", environ=files.env)
    conf = emu.config
    credential = ClientSecretCredential(
        conf["tenant"],
        conf["client_id"],
        conf["client_secret"],
        authority=emu.url,
        disable_instance_discovery=True,
        connection_verify=emu.ca_file,
    )
    client = ARMClient(
        emu.url,
        credential,
        f"{emu.url}/.default",
        subscription_id=config.subscription_id,
        verify=emu.ca_file,
        poll_interval=0.05,
    )
    return AzureLoadBalancers(ClientArm(client, API_VERSIONS), lb_settings(config))


@pytest.fixture
def nodes(emu: AzureEmulator) -> Iterator[list[dict[str, Any]]]:
    """Two VMs for the test, removed after it; the emulator left as it was."""
    baseline = emu.state()
    made = [emu.admin.add_vm(f"node-{i}") for i in range(2)]
    yield [_node(vm) for vm in made]
    for vm in made:
        emu.admin.delete_vm(vm["id"])
    emu.clear_faults()
    emu.assert_clean(baseline)


def _node(vm: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": vm["name"], "labels": {}},
        "spec": {"providerID": f"azure://{vm['id']}"},
        "status": {"addresses": []},
    }


def _service(uid: str = UID, port: int = 80, **extra: Any) -> dict[str, Any]:
    annotations = extra.pop("annotations", {})
    return {
        "metadata": {
            "name": f"svc-{uid[:4]}",
            "namespace": "default",
            "uid": uid,
            "annotations": annotations,
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"protocol": "TCP", "port": port, "nodePort": 30000 + port}],
            **extra,
        },
    }


def _writes(emu: AzureEmulator, since: int) -> list[str]:
    return [f"{r['method']} {r['path']}" for r in emu.admin.mutating(since)]


def _resource(emu: AzureEmulator, kind: str, name: str) -> dict[str, Any]:
    conf = emu.config
    return emu.admin.resource(
        f"/subscriptions/{conf['subscription']}/resourceGroups/{conf['resource_group']}"
        f"/providers/Microsoft.Network/{kind}/{name}"
    )


def test_lifecycle(emu: AzureEmulator, lbs: AzureLoadBalancers, nodes: list[Any]) -> None:
    status = lbs.ensure_load_balancer(CLUSTER, _service(), nodes[:1])
    address = status.ingress[0].ip
    base = "a" + UID.replace("-", "")[:31]
    lb = _resource(emu, "loadBalancers", CLUSTER)
    assert [f["name"] for f in lb["properties"]["frontendIPConfigurations"]] == [base]
    pip = _resource(emu, "publicIPAddresses", f"{CLUSTER}-{base}")
    assert pip["properties"]["ipAddress"] == address

    since = emu.admin.last_seq()
    assert lbs.ensure_load_balancer(CLUSTER, _service(), nodes[:1]) == status
    assert _writes(emu, since) == []

    lbs.ensure_load_balancer(CLUSTER, _service(port=8080), nodes)
    lb = _resource(emu, "loadBalancers", CLUSTER)
    assert [r["name"] for r in lb["properties"]["loadBalancingRules"]] == [f"{base}-TCP-8080"]
    pool = lb["properties"]["backendAddressPools"][0]["properties"]
    assert len(pool["backendIPConfigurations"]) == 2

    lbs.update_load_balancer(CLUSTER, _service(port=8080), nodes[1:])
    lb = _resource(emu, "loadBalancers", CLUSTER)
    assert (
        len(lb["properties"]["backendAddressPools"][0]["properties"]["backendIPConfigurations"])
        == 1
    )

    ranged = _service(port=8080, loadBalancerSourceRanges=["10.0.0.0/8"])
    lbs.ensure_load_balancer(CLUSTER, ranged, nodes)
    rules = _resource(emu, "networkSecurityGroups", emu.config["nsg"])["properties"][
        "securityRules"
    ]
    assert [r["properties"].get("sourceAddressPrefix") for r in rules] == ["10.0.0.0/8"]

    lbs.ensure_load_balancer_deleted(CLUSTER, ranged)
    assert lbs.get_load_balancer(CLUSTER, ranged) == (None, False)


def test_internal_and_local(emu: AzureEmulator, lbs: AzureLoadBalancers, nodes: list[Any]) -> None:
    svc = _service(
        annotations={"service.beta.kubernetes.io/azure-load-balancer-internal": "true"},
        externalTrafficPolicy="Local",
        healthCheckNodePort=32100,
    )
    status = lbs.ensure_load_balancer(CLUSTER, svc, nodes)
    ilb = _resource(emu, "loadBalancers", f"{CLUSTER}-internal")
    frontend = ilb["properties"]["frontendIPConfigurations"][0]["properties"]
    assert status.ingress[0].ip == frontend["privateIPAddress"]
    probe = ilb["properties"]["probes"][0]["properties"]
    assert (probe["protocol"], probe["port"], probe["requestPath"]) == ("Http", 32100, "/healthz")
    lbs.ensure_load_balancer_deleted(CLUSTER, svc)


def test_two_services_at_once(
    emu: AzureEmulator, lbs: AzureLoadBalancers, nodes: list[Any]
) -> None:
    services = [_service(), _service(uid=OTHER, port=443)]
    with ThreadPoolExecutor(2) as pool:
        statuses = list(pool.map(lambda s: lbs.ensure_load_balancer(CLUSTER, s, nodes), services))
    lb = _resource(emu, "loadBalancers", CLUSTER)
    assert len(lb["properties"]["frontendIPConfigurations"]) == 2
    assert len(lb["properties"]["loadBalancingRules"]) == 2
    since = emu.admin.last_seq()
    for svc, status in zip(services, statuses, strict=True):
        assert lbs.ensure_load_balancer(CLUSTER, svc, nodes) == status
    assert _writes(emu, since) == []
    for svc in services:
        lbs.ensure_load_balancer_deleted(CLUSTER, svc)


def test_scale_set_nodes(emu: AzureEmulator, lbs: AzureLoadBalancers) -> None:
    baseline = emu.state()
    made = emu.admin.add_vmss("pool1", capacity=2)
    nodes = [_node(vm) for vm in made["instances"]]
    try:
        lbs.ensure_load_balancer(CLUSTER, _service(), nodes)
        lb = _resource(emu, "loadBalancers", CLUSTER)
        members = lb["properties"]["backendAddressPools"][0]["properties"]
        assert len(members["backendIPConfigurations"]) == 2
        since = emu.admin.last_seq()
        lbs.ensure_load_balancer(CLUSTER, _service(), nodes)
        assert _writes(emu, since) == []
        lbs.ensure_load_balancer_deleted(CLUSTER, _service())
    finally:
        lbs.arm.delete(str(made["id"]))
    emu.assert_clean(baseline)


def test_a_412_on_the_shared_balancer_is_read_again(
    emu: AzureEmulator, lbs: AzureLoadBalancers, nodes: list[Any]
) -> None:
    first = lbs.ensure_load_balancer(CLUSTER, _service(), nodes)
    emu.admin.fault("/loadBalancers/kubernetes$", method="PUT", kind="precondition")
    since = emu.admin.last_seq()
    second = lbs.ensure_load_balancer(CLUSTER, _service(uid=OTHER, port=443), nodes)
    answered = [
        r["status"]
        for r in emu.admin.requests(since)
        if r["method"] == "PUT" and r["path"].endswith("/loadBalancers/kubernetes")
    ]
    assert answered == [412, *answered[1:]]
    assert len(answered) >= 2
    lb = _resource(emu, "loadBalancers", CLUSTER)
    assert len(lb["properties"]["frontendIPConfigurations"]) == 2
    assert lbs.get_load_balancer(CLUSTER, _service()) == (first, True)
    assert lbs.get_load_balancer(CLUSTER, _service(uid=OTHER, port=443)) == (second, True)
    for svc in (_service(), _service(uid=OTHER, port=443)):
        lbs.ensure_load_balancer_deleted(CLUSTER, svc)
