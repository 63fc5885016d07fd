"""Upstream's cloud-node-manager v1.36.5 against kccm's Azure emulator and the real apiserver:
a Node registered uninitialised is initialised as upstream does it.

cloud-node-manager is what real clusters run (a DaemonSet, one per Node) to initialise Nodes:
upstream's CCM never starts the cloud-node controller's workers. In its default mode it asks
only the instance metadata service (``--use-instance-metadata=true``, ``pkg/node/node.go``):
the providerID is ``azure://`` + the instance's resourceId, the addresses its first NIC's,
the instance type and zone ``<location>-<zone>`` from ``compute``. With
``--use-instance-metadata=false`` it asks ARM instead (``pkg/node/nodearm.go``): the VM, its
NIC, and for the zone the VM named like the host it runs on (``GetZone``,
``pkg/provider/azure_zones.go``), so that test's Node is named after this machine's host.
Every call each mode made is checked against the emulator's request log.
"""

from __future__ import annotations

import functools
import re
import socket
from typing import Any

import pytest
from azure_upstream_support import (
    UpstreamProcesses,
    upstream_env,
)
from azure_upstream_world import request_log

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controllers import initialised_nodes
from kccm.testing.controlplane import ControlPlane
from kccm.testing.kubelet import UNINITIALIZED_TAINT, kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

BUDGET = 120.0
eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.25)
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
HOST_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _private_ip(emulator: AzureEmulator, vm: dict[str, Any]) -> str:
    nic_id = vm["properties"]["networkProfile"]["networkInterfaces"][0]["id"]
    nic = emulator.admin.resource(nic_id)
    return str(nic["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"])


def _addresses(node: Obj) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for address in node["status"]["addresses"]:
        found.setdefault(address["type"], set()).add(address["address"])
    return found


def _provider_id(resource_id: str) -> str:
    """``azure://`` + the resource id, its subscription and resource group lower-cased
    (``getLocalInstanceProviderID``; the ARM path lower-cases the same two parts)."""
    parts = resource_id.split("/")
    parts[2], parts[4] = parts[2].lower(), parts[4].lower()
    return "azure://" + "/".join(parts)


def _calls(emulator: AzureEmulator, since: int = 0) -> list[str]:
    return [
        f"{r['service']} {r['method']} {r['path']} {r.get('api_version') or ''}".rstrip()
        for r in emulator.admin.requests(since)
    ]


async def _initialise(kube: KubeApiClient, kube_cleanup: KubeCleanup, name: str, start: Any) -> Obj:
    kube_cleanup.add(NODES, name)
    await kube.create(NODES, kubelet_node(name))
    cnm = start()

    async def initialised() -> list[Obj] | None:
        cnm.alive()
        return await initialised_nodes(kube, [name])

    (node,) = await eventually(initialised)
    return node


def _assert_initialised(node: Obj, vm: dict[str, Any], ip: str, zone: str) -> None:
    assert node["spec"]["providerID"] == _provider_id(vm["id"])
    assert UNINITIALIZED_TAINT["key"] not in {t["key"] for t in node["spec"].get("taints") or []}
    addresses = _addresses(node)
    assert addresses["InternalIP"] == {ip}
    assert addresses["Hostname"] == {node["metadata"]["name"]}
    labels = node["metadata"]["labels"]
    assert labels[INSTANCE_TYPE] == "Standard_D2s_v3"
    assert (labels[ZONE], labels[REGION]) == (zone, "eastus")


async def test_cloud_node_manager_initialises_a_node_from_instance_metadata(
    emulator: AzureEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
) -> None:
    """The DaemonSet's mode: IMDS only (through ``HTTP_PROXY``), not one ARM call."""
    name = unique_name("az-imds")
    vm = emulator.admin.add_vm(name, zone="2")
    emulator.admin.set_imds_vm(vm["id"])
    files = emulator.cloud_files(upstream.tmp / "cloud")
    env = upstream_env(files.env, HTTP_PROXY=emulator.imds_url, NODE_NAME=name)
    kubeconfig = control_plane.admin_kubeconfig
    node = await _initialise(
        kube, kube_cleanup, name, lambda: upstream.start_cnm(name, kubeconfig, env)
    )
    _assert_initialised(node, vm, _private_ip(emulator, vm), "eastus-2")
    print(request_log(emulator))  # shown with -rP: docs/measurements.md's call tables
    calls = _calls(emulator)
    assert {c.split()[0] for c in calls} == {"imds"}, calls
    assert "imds GET /metadata/instance 2021-10-01" in calls


async def test_cloud_node_manager_initialises_a_node_from_arm(
    emulator: AzureEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
) -> None:
    """``--use-instance-metadata=false``: the token, then the VM and its NIC from ARM."""
    name = socket.gethostname().lower()  # GetZone asks ARM for the VM named like the host
    if not HOST_LABEL.fullmatch(name):
        pytest.skip(f"this host's name {name!r} cannot name a Node and a VM (one DNS label)")
    vm = emulator.admin.add_vm(name, availability_set="as-nodes", fault_domain=1)
    files = emulator.cloud_files(upstream.tmp / "cloud")
    env = upstream_env(files.env)
    kubeconfig = control_plane.admin_kubeconfig
    node = await _initialise(
        kube,
        kube_cleanup,
        name,
        lambda: upstream.start_cnm(name, kubeconfig, env, cloud_config=files.azure_json),
    )
    # Not zonal: the zone label is the fault domain read from the VM's instance view
    # (GetZoneByNodeName, azure_standard.go), but upstream GETs the VM without
    # $expand=instanceView (newVMCache, azure_vmsets_repo.go), so it is "0" whatever the VM's
    # fault domain (1 here).
    _assert_initialised(node, vm, _private_ip(emulator, vm), "0")
    print(request_log(emulator))
    calls = _calls(emulator)
    group = emulator.config["resource_group"]
    vm_path = f"/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachines/{name}"
    assert any(c.startswith("arm GET /subscriptions/") and vm_path in c for c in calls), calls
    assert not [c for c in calls if c.startswith("arm") and " GET " not in c], calls
