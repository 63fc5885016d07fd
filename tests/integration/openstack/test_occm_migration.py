"""Migrating from upstream's openstack-cloud-controller-manager v1.36.0 to kccm, on the real
apiserver and kccm's OpenStack emulator (issue 26's migration acceptance).

OCCM itself makes the cloud a migrating user has: two Nodes of seeded servers initialised,
their pod CIDRs routed on ``router1``, two LoadBalancer Services balanced through Octavia with
floating IPs — one picks a floating IP the user allocated beforehand through
``spec.loadBalancerIP`` (``ensureFloatingIP``'s "second attempt"), the other gets one OCCM
allocates. OCCM is stopped; kccm's ``openstack`` provider starts on the same cloud.conf and
apiserver and adopts everything: not one mutating OpenStack request (the emulator's request
log), the ingress addresses, balancers, floating IPs and routes unchanged. Deleting the
Services (and then the Nodes) while kccm runs leaves the emulator as it was before OCCM ran,
the user's own floating IP aside, which stays as OCCM would leave it (not created by the
provider: ``deleteFIPIfCreatedByProvider``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from occm_support import (
    CLUSTER_CIDR,
    CLUSTER_NAME,
    CloudReader,
    OccmProcesses,
    occm_processes,
    require_occm,
)

from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.controllers import delete_until_gone, event_counts, initialised_nodes
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemon, Daemons
from kccm.testing.kubelet import kubelet_node
from kccm.testing.openstack.launcher import Emulator, openstack_emulator
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

BUDGET = 120.0
eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.25)
SERVICE_CONTROLLER = "service-controller"


def kccm_provider() -> str:
    """``openstack`` where the entry point is installed; else the factory by reference (a
    checkout run on a venv installed before the provider existed)."""
    if entry_points(group="kccm.cloud_providers", name="openstack"):
        return "openstack"
    return "kccm.providers.openstack:new_openstack_cloud"


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    require_occm()
    with openstack_emulator() as emu:
        yield emu


@pytest.fixture
def occms(tmp_path: Path) -> Iterator[OccmProcesses]:
    yield from occm_processes(tmp_path)


@pytest.fixture
def kccm(
    control_plane: ControlPlane, tmp_path: Path
) -> Iterator[Callable[[str], Daemon]]:
    """Start kccm's openstack provider (as cluster-admin) with a cloud.conf text."""
    daemons = Daemons(tmp_path)

    def start(cloud_conf: str) -> Daemon:
        config = tmp_path / "kccm-cloud.conf"
        config.write_text(cloud_conf)
        return daemons.start(
            kccm_provider(),
            config,
            control_plane.admin_kubeconfig,
            f"--cluster-name={CLUSTER_NAME}",
            "--controllers=cloud-node,cloud-node-lifecycle,service,route",
            "--configure-cloud-routes=true",
            "--allocate-node-cidrs=true",
            f"--cluster-cidr={CLUSTER_CIDR}",
            "--route-reconciliation-period=2s",
            "--leader-elect=false",
            "--v=2",
        )

    yield start
    daemons.stop_all(grace=30)


def lb_service(name: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            **spec,
        },
    }


async def _ingress(kube: KubeApiClient, ns: str, names: list[str]) -> dict[str, Any] | None:
    found = {}
    for name in names:
        svc = await kube.get(SERVICES, name, namespace=ns)
        ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
        if not ingress or not ingress[0].get("ip"):
            return None
        found[name] = ingress
    return found


async def _routes(reader: CloudReader, router_id: str, cidrs: set[str]) -> list[Any] | None:
    router = await asyncio.to_thread(reader.router, router_id)
    routes = sorted((r["destination"], r["nexthop"]) for r in router["routes"])
    return routes if {d for d, _ in routes} >= cidrs else None


async def _ensured_again(
    kube: KubeApiClient, ns: str, before: dict[str, int], daemon: Daemon
) -> bool:
    """Every Service got another EnsuredLoadBalancer event (only kccm runs now)."""
    await daemon.logged("")  # fails at once if kccm exited
    for name, count in before.items():
        now = await event_counts(kube, ns, name, SERVICE_CONTROLLER)
        if now["EnsuredLoadBalancer"] <= count:
            return False
    return True


async def _cloud_view(reader: CloudReader, names: dict[str, str], router_id: str) -> Obj:
    """What OCCM made, as the demo user reads it: the balancers (id, VIP, status), their floating
    IPs and the router's routes."""
    view: Obj = {"routes": sorted(map(str, (await asyncio.to_thread(reader.router, router_id))["routes"]))}
    for service, lb_name in names.items():
        lbs = await asyncio.to_thread(reader.load_balancers, lb_name)
        view[service] = [
            (
                lb["id"],
                lb["vip_address"],
                lb["provisioning_status"],
                [
                    (f["id"], f["floating_ip_address"])
                    for f in await asyncio.to_thread(reader.floating_ips, port_id=lb["vip_port_id"])
                ],
            )
            for lb in lbs
        ]
    return view


async def test_kccm_adopts_what_occm_made_without_a_write_and_deletes_it_all(
    emulator: Emulator,
    occms: OccmProcesses,
    kccm: Callable[[str], Daemon],
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
) -> None:
    ns, admin, reader = kube_namespace, emulator.admin, CloudReader(emulator.base_url)
    cloud_conf = emulator.cloud_conf()
    baseline = admin.state()
    (router,) = await asyncio.to_thread(reader.routers, "router1")
    public = await asyncio.to_thread(reader.network_id, "public")
    # the user's own floating IP, for spec.loadBalancerIP
    own_fip = (
        await asyncio.to_thread(
            reader.request,
            "POST",
            "/network/v2.0/floatingips",
            {"floatingip": {"floating_network_id": public, "description": "the user's"}},
        )
    )["floatingip"]
    with_own_fip = admin.state()

    nodes = {}
    for i in (1, 2):
        name = kube_cleanup.add(NODES, unique_name("occm-mig"))
        admin.add_server(name)
        await kube.create(NODES, kubelet_node(name, f"10.244.{i}.0/24"))
        nodes[name] = f"10.244.{i}.0/24"

    # -- the cloud as OCCM leaves it ---------------------------------------------------------
    occm = occms.start(cloud_conf, control_plane.admin_kubeconfig)
    await eventually(lambda: initialised_nodes(kube, nodes))
    wanted = {
        "alpha": lb_service("alpha"),
        "beta": lb_service("beta", loadBalancerIP=own_fip["floating_ip_address"]),
    }
    for body in wanted.values():
        await kube.create(SERVICES, body, namespace=ns)
    ingress = await eventually(lambda: _ingress(kube, ns, list(wanted)))
    assert ingress["beta"] == [{"ip": own_fip["floating_ip_address"], "ipMode": "VIP"}] or ingress[
        "beta"
    ][0]["ip"] == own_fip["floating_ip_address"]
    await eventually(lambda: _routes(reader, router["id"], set(nodes.values())))
    lb_names = {name: f"kube_service_{CLUSTER_NAME}_{ns}_{name}" for name in wanted}
    made = await _cloud_view(reader, lb_names, router["id"])
    assert all(len(made[name]) == 1 and made[name][0][3] for name in wanted), made
    occm.stop()
    ensured = {name: (await event_counts(kube, ns, name, SERVICE_CONTROLLER))["EnsuredLoadBalancer"] for name in wanted}
    since = admin.requests()[-1]["seq"]

    # -- kccm takes over: every balancer, floating IP and route adopted, nothing written ------
    daemon = kccm(cloud_conf)
    await eventually(lambda: _ensured_again(kube, ns, ensured, daemon))
    for name in nodes:
        await eventually(lambda name=name: daemon.logged(f"action for node {name!r} with CIDR"))
    # one more route reconcile after both were judged, so any write of it would be logged
    requests = [r for r in admin.requests(since) if r["service"] != "identity"]
    mutating = admin.mutating(since)
    print(f"kccm's requests after the handover: {len(requests)}, mutating: {len(mutating)}")
    assert mutating == []
    assert await _ingress(kube, ns, list(wanted)) == ingress
    assert await _cloud_view(reader, lb_names, router["id"]) == made

    # -- the Services and Nodes go while kccm runs: nothing of theirs remains -----------------
    await delete_until_gone(kube, SERVICES, list(wanted), ns, within=BUDGET)
    await delete_until_gone(kube, NODES, list(nodes), within=BUDGET)
    assert await asyncio.to_thread(reader.floating_ips, floating_ip_address=own_fip["floating_ip_address"])
    for name in nodes:
        pass
    admin.assert_clean(with_own_fip)
    await asyncio.to_thread(reader.request, "DELETE", f"/network/v2.0/floatingips/{own_fip['id']}")
    admin.assert_clean(baseline)
