"""Upstream's retain pass and kccm's on the same scenario (cloud-provider-azure v1.36.5
``reconcileSecurityGroup``, its ``RetainSecurityGroup`` step), on kccm's ARM emulator and the
real apiserver: a Service's managed security rule also names an address the cluster does not
have (what Services deleted while no controller ran leave behind), and a user's own rule
names one too. Upstream's cloud-controller-manager, made to reconcile the Service (an annotation
change), drops the stale address from its rule and leaves the user's rule; kccm's provider,
handed the cluster's Services and Nodes, does the same in one security group write, and the
rules end identical.

Two stale addresses, not one: upstream's ``RetainDestinationFromRules`` skips a rule when the
count of its destinations found among the kept ones equals the count of its destinations, and
counts the reconciled Service's own address twice (its balancer address and its status), so a
rule holding that address and exactly one stale one is left as it is (seen in its log: no
"Removing destination prefixes" for it); kccm drops the stale address there too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from azure_nsg_support import USER_RULE, drop_user_rule, user_rule
from azure_upstream_support import UpstreamProcesses
from azure_upstream_world import (
    BUDGET,
    World,
    eventually,
    ingress_ip,
    kccm_balancers,
    lb_service,
    open_world,
    published,
)

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.controllers import delete_until_gone
from kccm.testing.controlplane import ControlPlane
from kccm.testing.pytest_plugin import KubeCleanup

STALE = "20.99.0.9"
STALE_TOO = "20.99.0.10"


@dataclass
class View:
    """The cluster as listed from the apiserver (kccm's daemon hands its caches')."""

    services_: Sequence[Any]
    nodes_: Sequence[Any]

    def services(self) -> Sequence[Any]:
        return self.services_

    def nodes(self) -> Sequence[Any]:
        return self.nodes_

    def has_synced(self) -> bool:
        return True


@pytest.fixture
async def world(
    emulator: AzureEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
) -> AsyncIterator[World]:
    """Upstream without its read caches (``disableAPICallCache``; its security group cache
    keeps a read 120 s by default): its reconcile after the poke reads the group as changed
    behind its back."""
    async for opened in open_world(
        emulator,
        upstream,
        control_plane.admin_kubeconfig,
        kube,
        kube_cleanup,
        disableAPICallCache=True,
    ):
        yield opened


def _dsts(props: dict[str, Any]) -> list[str]:
    return sorted(props.get("destinationAddressPrefixes") or [props["destinationAddressPrefix"]])


def _tamper(lbs: Any, world: World, ip: str, *, with_user_rule: bool) -> str:
    """The stale address added to the rule naming ``ip`` (and the user's rule naming it);
    the managed rule's name."""
    path = world.rid("networkSecurityGroups", world.config["nsg"])
    group = lbs.arm.get(path)
    rules = group["properties"]["securityRules"]
    (managed,) = [r for r in rules if ip in _dsts(r["properties"])]
    props = managed["properties"]
    props.pop("destinationAddressPrefix", None)
    props["destinationAddressPrefixes"] = sorted([ip, STALE, STALE_TOO])
    if with_user_rule:
        rules.append(user_rule(STALE))
    lbs.arm.put(path, group, if_match=group.get("etag"))
    return str(managed["name"])


async def test_upstream_and_kccm_drop_a_stale_destination_alike(
    world: World,
    kube: KubeApiClient,
    kube_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns = kube_namespace
    await kube.create(SERVICES, lb_service("web"), namespace=ns)
    svc = await eventually(lambda: published(world, ns, "web"))
    ip = ingress_ip(svc)
    lbs = kccm_balancers(world.emulator, tmp_path / "kccm", monkeypatch)
    try:
        name = await asyncio.to_thread(_tamper, lbs, world, ip, with_user_rule=True)
        poke = {"metadata": {"annotations": {"kccm.test/poke": "1"}}}
        await kube.patch(SERVICES, "web", poke, namespace=ns)

        async def upstream_pruned() -> dict[str, Any] | None:
            world.ccm.alive()
            rules = await asyncio.to_thread(world.security_rules)
            return rules if _dsts(rules[name]) == [ip] else None

        after_upstream = await eventually(upstream_pruned)
        assert _dsts(after_upstream[USER_RULE]) == [STALE], "the user's rule is untouched"

        await asyncio.to_thread(_tamper, lbs, world, ip, with_user_rule=False)
        services = (await kube.list(SERVICES)).items
        nodes = (await kube.list(NODES)).items
        lbs.use_cluster_view(View(services, nodes))
        fresh = await kube.get(SERVICES, "web", namespace=ns)
        since = await asyncio.to_thread(world.emulator.admin.last_seq)
        await asyncio.to_thread(lbs.ensure_load_balancer, "kubernetes", fresh, nodes)
        written = await asyncio.to_thread(world.emulator.admin.mutating, since)
        assert [(r["method"], r["path"].rsplit("/", 1)[1]) for r in written] == [
            ("PUT", world.config["nsg"])
        ]
        assert await asyncio.to_thread(world.security_rules) == after_upstream
    finally:
        path = world.rid("networkSecurityGroups", world.config["nsg"])
        await asyncio.to_thread(drop_user_rule, lbs.arm, path)
    await delete_until_gone(kube, SERVICES, ["web"], ns, within=BUDGET)
    world.emulator.admin.assert_clean(world.ready)
