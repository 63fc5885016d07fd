"""The azure provider passes the conformance kit against kccm's ARM emulator
(``kccm.emulators.azure``: ARM, ADFS sign-in and IMDS as a real HTTPS server), configured from
the azure.json the emulator writes for upstream's binaries.

One emulator per module with two availability-set VMs; the Nodes are those VMs as kubelet and
kccm make them. The tamper changes and deletes the balancer through ARM as an operator would
(``az network lb rule delete``, ``az network nic ip-config address-pool remove``,
``az network lb delete`` and ``az network public-ip delete``), with a client of its own, never
through the provider. The module leaves the emulator as it found it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider import Interface, Node, Service, default_load_balancer_name
from kccm.providers.azure.arm import ARMClient
from kccm.providers.azure.config import load_azure_config
from kccm.providers.azure.provider import AzureCloud, build_parts
from kccm.testing.conformance import CloudProviderConformance

launcher = pytest.importorskip("kccm.emulators.azure")

VMS = 2
NETWORK = "Microsoft.Network"
VERSION = "2025-05-01"


@dataclass
class World:
    emulator: Any
    vms: list[dict[str, Any]]
    cloud: AzureCloud
    operator: ARMClient
    """An ARM client of the test's own (the operator's), not the provider's."""


def _cloud(emulator: Any, directory: Path) -> AzureCloud:
    files = emulator.cloud_files(directory)
    config = load_azure_config(Path(files.azure_json).read_text(), "azure.json", environ=files.env)
    return AzureCloud(build_parts(config, files.env), environ=files.env)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from kccm.testing.certs import emulator_tls

    with launcher.azure_emulator(tls=emulator_tls()) as emulator:
        baseline = emulator.state()
        tag = uuid.uuid4().hex[:6]
        vms = [emulator.admin.add_vm(f"conf-{tag}-{i}") for i in range(VMS)]
        cloud = _cloud(emulator, tmp_path_factory.mktemp("azure"))
        operator = _cloud(emulator, tmp_path_factory.mktemp("operator")).parts
        assert cloud.parts is not None
        assert operator is not None
        cloud.parts.inventory.cache.ttl = 0.0
        yield World(emulator, vms, cloud, operator.arm)
        for vm in vms:
            emulator.admin.delete_vm(vm["id"])
        emulator.assert_clean(baseline)


def node_of(vm: dict[str, Any]) -> Node:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": vm["name"], "uid": str(uuid.uuid4()), "labels": {}},
        "spec": {"providerID": f"azure://{vm['id']}"},
        "status": {"addresses": []},
    }


@dataclass
class ArmTamper:
    """The kit's ``LoadBalancerTamper``: an operator at ARM."""

    world: World

    def _lb_path(self, cluster_name: str) -> str:
        return self.world.operator.resource_id(
            self.world.emulator.config["resource_group"], f"{NETWORK}/loadBalancers", cluster_name
        )

    def _nics(self) -> list[str]:
        return [
            ref["id"]
            for vm in self.world.vms
            for ref in vm["properties"]["networkProfile"]["networkInterfaces"]
        ]

    def change(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        """Drop the Service's rules from the balancer and take the Nodes out of its pool."""
        base = default_load_balancer_name(service).lower()

        def without_rules(lb: dict[str, Any]) -> dict[str, Any]:
            props = lb["properties"]
            props["loadBalancingRules"] = [
                r
                for r in props.get("loadBalancingRules") or ()
                if not r["name"].lower().startswith(base)
            ]
            return lb

        op = self.world.operator
        op.update(self._lb_path(cluster_name), VERSION, without_rules, operation="tamper")
        for nic in self._nics():
            op.update(nic, VERSION, _out_of_pools, operation="tamper")

    def delete(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        """Take the Nodes out of the pool, delete the balancer, then the Service's public IPs."""
        op = self.world.operator
        for nic in self._nics():
            op.update(nic, VERSION, _out_of_pools, operation="tamper")
        op.delete(self._lb_path(cluster_name), VERSION, operation="tamper")
        base = default_load_balancer_name(service).lower()
        group = self.world.emulator.config["resource_group"]
        for pip in op.list(
            op.collection(group, f"{NETWORK}/publicIPAddresses"), VERSION, operation="tamper"
        ):
            if base in str(pip["name"]).lower():
                op.delete(pip["id"], VERSION, operation="tamper")

    def is_intact(
        self, cloud: Interface, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> bool:
        """A rule per Service port, and every Node's NIC in the balancer's pool."""
        op = self.world.operator
        lb = op.find(self._lb_path(cluster_name), VERSION, operation="check")
        if lb is None:
            return False
        base = default_load_balancer_name(service).lower()
        rules = [
            r
            for r in lb["properties"].get("loadBalancingRules") or ()
            if r["name"].lower().startswith(base)
        ]
        ports = {p["port"] for p in service["spec"]["ports"]}
        if {r["properties"]["frontendPort"] for r in rules} != ports:
            return False
        pools = {p["id"].lower() for p in lb["properties"].get("backendAddressPools") or ()}
        for nic_id in self._nics():
            nic = op.get(nic_id, VERSION, operation="check")
            used = {
                ref["id"].lower()
                for config in nic["properties"]["ipConfigurations"]
                for ref in config["properties"].get("loadBalancerBackendAddressPools") or ()
            }
            if not used & pools:
                return False
        return True


def _out_of_pools(nic: dict[str, Any]) -> dict[str, Any] | None:
    changed = False
    for config in nic["properties"]["ipConfigurations"]:
        if config["properties"].get("loadBalancerBackendAddressPools"):
            config["properties"]["loadBalancerBackendAddressPools"] = []
            changed = True
    return nic if changed else None


class TestAzureCloud(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, world: World) -> AzureCloud:
        return world.cloud

    @pytest.fixture
    def lb_nodes(self, world: World) -> list[Node]:
        return [node_of(vm) for vm in world.vms]

    @pytest.fixture
    def known_node(self, world: World) -> Node:
        return node_of(world.vms[0])

    @pytest.fixture
    def unknown_provider_id(self, world: World) -> str:
        """Well-formed (a VM of the resource group) and naming no VM."""
        group = world.emulator.config["resource_group"]
        sub = world.emulator.config["subscription"]
        return (
            f"azure:///subscriptions/{sub}/resourceGroups/{group}/providers/"
            f"Microsoft.Compute/virtualMachines/ghost-{uuid.uuid4().hex[:8]}"
        )

    @pytest.fixture
    def load_balancer_tamper(self, world: World) -> ArmTamper:
        return ArmTamper(world)
