"""The scale-set scenarios of bench/azure_side_by_side.py (``"vmType": "vmss"``), as
tests/integration/azure/test_upstream_vmss.py runs them: a two-instance scale set whose
Nodes are registered as cloud-node-manager leaves them, a public Service made and deleted, an
instance deallocated (the shutdown taint) and running again."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Awaitable, Callable

from azure_sbs_scenarios import (
    POD_CIDRS,
    Machine,
    Run,
    Scenario,
    create,
    delete,
    gone,
    published,
    register_node,
)

from kccm.kube.interface import PatchType
from kccm.kube.resources import NODES
from kccm.testing.kubelet import ready_condition

VMSS_JSON = {
    "vmType": "vmss",
    "vmssCacheTTLInSeconds": 2,
    "vmssVirtualMachinesCacheTTLInSeconds": 2,
}
"""azure.json keys as the upstream test sets them: upstream caches the scale-set lists 600 s by
default, which would hide a power change that long."""
SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"


def imds_private_ip(run: Run, vm_id: str) -> str:
    """The instance's address as its metadata service reports it."""
    run.emu.admin.set_imds_vm(vm_id)
    proxy = urllib.request.ProxyHandler({"http": run.emu.imds_url})
    request = urllib.request.Request(
        "http://169.254.169.254/metadata/instance?api-version=2021-10-01&format=json",
        headers={"Metadata": "True"},
    )
    with urllib.request.build_opener(proxy).open(request, timeout=30) as answer:
        found = json.load(answer)
    return str(found["network"]["interface"][0]["ipv4"]["ipAddress"][0]["privateIpAddress"])


async def seed_scale_set(run: Run) -> None:
    seeded = await asyncio.to_thread(run.emu.admin.add_vmss, "sbsss", capacity=2, zones=["1", "2"])
    run.scale_set = str(seeded["id"])
    for cidr, vm in zip(POD_CIDRS, seeded["instances"], strict=False):
        node = vm["properties"]["osProfile"]["computerName"].lower()
        ip = await asyncio.to_thread(imds_private_ip, run, vm["id"])
        await register_node(run, Machine(node, vm["id"], "", ip, cidr))


def _power(state: str, ready: str) -> Callable[[Run], Awaitable[None]]:
    async def act(run: Run) -> None:
        machine = next(iter(run.machines.values()))
        await asyncio.to_thread(run.emu.admin.set_power, machine.vm_id, state)
        patch = {"status": {"conditions": [ready_condition(ready)]}}
        await run.kube.patch(NODES, machine.node, patch, patch_type=PatchType.STRATEGIC,
                             subresource="status")  # fmt: skip

    return act


def _tainted(wanted: bool) -> Callable[[Run], Awaitable[bool]]:
    async def done(run: Run) -> bool:
        node = await run.kube.get(NODES, next(iter(run.machines)))
        return (SHUTDOWN in {t["key"] for t in node["spec"].get("taints") or []}) == wanted

    return done


VMSS_SCENARIOS = (
    Scenario("public Service created", create("web", 80), published("web", 80)),
    Scenario("that Service deleted", delete("web"), gone("web")),
    Scenario(
        "an instance deallocated → shutdown taint", _power("deallocated", "Unknown"), _tainted(True)
    ),
    Scenario("running again → untainted", _power("running", "True"), _tainted(False)),
)
