"""Migrating from upstream's openstack-cloud-controller-manager v1.36.0 to kccm, on the real
apiserver and kccm's OpenStack emulator (issue 26's migration acceptance).

OCCM itself makes the cloud a migrating user has: two Nodes of seeded servers initialised,
their pod CIDRs routed on ``router1``, two LoadBalancer Services balanced through Octavia with
floating IPs — ``beta`` picks a floating IP the user allocated beforehand through
``spec.loadBalancerIP`` (``ensureFloatingIP``'s "second attempt"), ``alpha`` gets one OCCM
allocates. OCCM is stopped; kccm's ``openstack`` provider starts on the same cloud.conf and
apiserver and adopts everything: not one mutating OpenStack request (the emulator's request
log), the ingress addresses, balancers, floating IPs and routes unchanged. Deleting the
Services, then the Nodes, while kccm runs leaves the emulator as it was before OCCM ran but
for two things a user of OCCM has too: the user's own floating IP stays, unassociated (it was
not made by the provider: ``deleteFIPIfCreatedByProvider``), and the pod CIDRs stay in the
servers' ports' ``allowed_address_pairs`` (a deleted Node's route is a blackhole, which
``DeleteRoute`` removes without touching the port); both go with the test's own clean-up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from occm_migration_support import (
    BUDGET,
    emulator,
    eventually,
    hand_over,
    ingress_of,
    kccm,
    lb_service,
    occms,
    routes_gone,
    summary,
)
from occm_support import CLUSTER_NAME, CloudReader, OccmProcesses, error_answers, routes_made

from kccm.emulators.openstack.launcher import Emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.controllers import delete_until_gone, initialised_nodes
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemon
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

__all__ = ["emulator", "kccm", "occms"]  # fixtures, from the support module


def cloud_view(reader: CloudReader, lb_names: dict[str, str], router_id: str) -> Obj:
    """What the Services and Nodes have in the cloud, as the demo user reads it (blocking): per
    Service its balancers (id, VIP, status, listeners, pools, members) and their floating IPs;
    the router's routes."""
    routes = reader.router(router_id)["routes"]
    view: Obj = {"routes": sorted((r["destination"], r["nexthop"]) for r in routes)}
    for service, lb_name in lb_names.items():
        view[service] = []
        for lb in reader.load_balancers(lb_name):
            pools = reader.pools(lb["id"])
            fips = reader.floating_ips(port_id=lb["vip_port_id"])
            view[service].append(
                {
                    "id": lb["id"],
                    "vip": lb["vip_address"],
                    "status": (lb["provisioning_status"], lb["operating_status"]),
                    "listeners": sorted(x["id"] for x in lb["listeners"]),
                    "pools": sorted(p["id"] for p in pools),
                    "members": sorted(
                        (m["address"], m["protocol_port"])
                        for p in pools
                        for m in reader.members(p["id"])
                    ),
                    "fips": [(f["id"], f["floating_ip_address"]) for f in fips],
                }
            )
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
    ns, admin, reader = kube_namespace, emulator.admin, CloudReader.of(emulator)
    cloud_conf, router_id = emulator.cloud_conf(), emulator.config["router_id"]
    baseline = admin.state()
    own_fip = (
        await asyncio.to_thread(
            reader.request,
            "POST",
            "/network/v2.0/floatingips",
            {"floatingip": {"floating_network_id": emulator.config["public_network_id"]}},
        )
    )["floatingip"]
    with_own_fip = admin.state()
    mark = admin.last_seq()
    servers, cidrs = {}, {}
    for i in (1, 2):
        name = kube_cleanup.add(NODES, unique_name("occm-mig"))
        servers[name] = admin.add_server(name)
        cidrs[name] = f"10.244.{i}.0/24"
        await kube.create(NODES, kubelet_node(name, cidrs[name]))

    # -- the cloud as OCCM leaves it ---------------------------------------------------------
    occm = occms.start(cloud_conf, control_plane.admin_kubeconfig)
    await eventually(lambda: initialised_nodes(kube, servers))
    wanted = {
        "alpha": lb_service("alpha"),
        "beta": lb_service("beta", loadBalancerIP=own_fip["floating_ip_address"]),
    }
    for body in wanted.values():
        await kube.create(SERVICES, body, namespace=ns)
    ingress = await eventually(lambda: ingress_of(kube, ns, list(wanted)))
    assert ingress["beta"][0]["ip"] == own_fip["floating_ip_address"]
    assert ingress["alpha"][0]["ip"] != own_fip["floating_ip_address"]
    await eventually(lambda: asyncio.to_thread(routes_made, reader, router_id, cidrs.values()))
    lb_names = {name: f"kube_service_{CLUSTER_NAME}_{ns}_{name}" for name in wanted}
    made = await asyncio.to_thread(cloud_view, reader, lb_names, router_id)
    for name in wanted:
        (lb,) = made[name]
        assert lb["status"][0] == "ACTIVE"
        assert [ip for _, ip in lb["fips"]] == [ingress[name][0]["ip"]]
    assert len(made["routes"]) == 2
    occm_requests = admin.requests(mark)
    assert error_answers(occm_requests) == []
    occm.stop()  # SIGTERM: OCCM has no handler for it and ends at once

    # -- kccm takes over: every balancer, floating IP and route adopted, nothing written ------
    daemon, requests = await hand_over(
        kube, ns, list(wanted), list(servers), emulator, kccm, cloud_conf
    )
    print(f"\nOCCM, to make it all: {summary(occm_requests)}")
    print(f"kccm, to adopt it all: {summary(requests)}")
    assert await ingress_of(kube, ns, list(wanted)) == ingress
    assert await asyncio.to_thread(cloud_view, reader, lb_names, router_id) == made

    # -- the Services, then the Nodes, go while kccm runs: nothing of theirs remains ----------
    await delete_until_gone(kube, SERVICES, list(wanted), ns, within=BUDGET)
    await delete_until_gone(kube, NODES, list(servers), within=BUDGET)

    await eventually(lambda: routes_gone(reader, router_id, daemon))
    left = admin.state()
    assert left["floatingips"] == with_own_fip["floatingips"]  # the user's, kept
    (kept,) = await asyncio.to_thread(reader.floating_ips, id=own_fip["id"])
    assert kept["port_id"] is None
    for server in servers.values():
        admin.delete_server(server["id"])  # with its port and the pod CIDR's address pair
    admin.assert_clean(with_own_fip)
    await asyncio.to_thread(reader.request, "DELETE", f"/network/v2.0/floatingips/{own_fip['id']}")
    admin.assert_clean(baseline)


ANNOTATION = "loadbalancer.openstack.org/"
VARIANTS = {
    "multi": lb_service(
        "multi",
        ports=[
            {"name": "http", "port": 80, "protocol": "TCP"},
            {"name": "https", "port": 443, "protocol": "TCP"},
        ],
    ),
    "udp": lb_service("udp", ports=[{"name": "dns", "port": 53, "protocol": "UDP"}]),
    "ranges": lb_service("ranges", loadBalancerSourceRanges=["10.1.0.0/16"]),
    "local": lb_service("local", externalTrafficPolicy="Local"),
    "internal": lb_service("internal"),
    "proxy": lb_service("proxy"),
}
VARIANT_ANNOTATIONS = {
    "internal": {"service.beta.kubernetes.io/openstack-internal-load-balancer": "true"},
    "proxy": {f"{ANNOTATION}proxy-protocol": "true"},
}


async def test_kccm_adopts_occms_service_variants_without_a_write(
    emulator: Emulator,
    occms: OccmProcesses,
    kccm: Callable[[str], Daemon],
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
) -> None:
    """Balancers OCCM made with ``manage-security-groups`` and ``create-monitor`` on, for two
    ports, UDP, source ranges (``allowed_cidrs``), ``externalTrafficPolicy: Local`` (an HTTP
    monitor and members watched on the healthCheckNodePort), an internal one and the PROXY
    protocol: kccm adopts every object (the emulator's inventory unchanged) without a write."""
    ns, admin = kube_namespace, emulator.admin
    conf = {"LoadBalancer": {"manage-security-groups": "true", "create-monitor": "true"}}
    cloud_conf = emulator.cloud_conf(conf)
    baseline = admin.state()
    name = kube_cleanup.add(NODES, unique_name("occm-var"))
    server = admin.add_server(name)
    await kube.create(NODES, kubelet_node(name, "10.244.9.0/24"))
    occm = occms.start(cloud_conf, control_plane.admin_kubeconfig)
    await eventually(lambda: initialised_nodes(kube, [name]))
    for key, body in VARIANTS.items():
        body["metadata"]["annotations"] = VARIANT_ANNOTATIONS.get(key, {})
        await kube.create(SERVICES, body, namespace=ns)
    ingress = await eventually(lambda: ingress_of(kube, ns, list(VARIANTS)))
    reader = CloudReader.of(emulator)
    router_id = emulator.config["router_id"]
    await eventually(lambda: asyncio.to_thread(routes_made, reader, router_id, ["10.244.9.0/24"]))
    made = admin.state()
    assert len(made["loadbalancers"]) == len(VARIANTS)
    assert len(made["security_groups"]) == len(VARIANTS)
    occm.stop()

    daemon, requests = await hand_over(kube, ns, list(VARIANTS), [name], emulator, kccm, cloud_conf)
    print(f"\nkccm, to adopt {len(VARIANTS)} balancers: {summary(requests)}")
    assert await ingress_of(kube, ns, list(VARIANTS)) == ingress
    assert admin.state() == made

    # -- deleted at once, as a user deletes a namespace: the Services' security groups go too --
    await delete_until_gone(kube, SERVICES, list(VARIANTS), ns, within=BUDGET)
    await delete_until_gone(kube, NODES, [name], within=BUDGET)
    await eventually(lambda: routes_gone(reader, router_id, daemon))
    admin.delete_server(server["id"])  # with its port and the pod CIDR's address pair
    admin.assert_clean(baseline)
