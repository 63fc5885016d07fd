"""Migrating from OCCM v1.36.0 to kccm with the balancer features issue 40 lists, on the real
apiserver and the OpenStack emulator: OCCM (``manage-security-groups = true``, a
``[LoadBalancerClass "office"]``) makes a balancer shared by two Services
(``load-balancer-id``), a TLS-terminated one (``default-tls-container-ref`` naming a Barbican
container, ``container-store = barbican``), ``x-forwarded-for``, a class, a node selector
and the four timeouts. OCCM stops; kccm starts on the same cloud.conf and adopts every one of
them without a mutating request: the ingress addresses and the emulator's whole inventory
unchanged. kccm's ``/metrics`` then shows OCCM's metric names. With the TLS container gone
from Barbican, a Node leaving still leaves the TLS balancer's members (updates never read the
reference, nor touch the listener). Deleting the Services and the other Node while kccm runs
leaves the emulator as it was (the Barbican secret is the test's).

A second test shows one of OCCM's Warning Events recorded by kccm on the real apiserver
(``LoadBalancerAvailabilityZonesIgnored``, an Octavia older than 2.14).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

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
from kccm.testing.controllers import delete_until_gone, event_summaries, initialised_nodes
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemon
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

__all__ = ["emulator", "kccm", "occms"]  # fixtures, from the support module

LB = "loadbalancer.openstack.org/"
OCCM_METRICS = (
    "openstack_api_request_duration_seconds_bucket",
    "openstack_api_requests_total",
    "cloudprovider_openstack_reconcile_duration_seconds_bucket",
    "cloudprovider_openstack_reconcile_total",
)


def _port(name: str, port: int) -> list[dict[str, Any]]:
    return [{"name": name, "port": port, "protocol": "TCP"}]


def _annotated(body: Obj, annotations: dict[str, str]) -> Obj:
    body["metadata"]["annotations"] = annotations
    return body


def scenarios(tls_ref: str) -> dict[str, Obj]:
    """The Services after ``owner`` (whose balancer ``sharer`` shares), by scenario."""
    return {
        "tls": _annotated(
            lb_service("tls", ports=_port("https", 443)),
            {f"{LB}default-tls-container-ref": tls_ref},
        ),
        "xff": _annotated(lb_service("xff"), {f"{LB}x-forwarded-for": "true"}),
        "classy": _annotated(lb_service("classy"), {f"{LB}class": "office"}),
        "picky": _annotated(lb_service("picky"), {f"{LB}node-selector": "env=prod"}),
        "slow": _annotated(
            lb_service("slow"),
            {
                f"{LB}timeout-client-data": "10000",
                f"{LB}timeout-member-connect": "2000",
                f"{LB}timeout-member-data": "20000",
                f"{LB}timeout-tcp-inspect": "100",
            },
        ),
    }


def barbican_container(reader: CloudReader) -> tuple[str, str]:
    """A certificate secret and a container holding it, as a user stores them (blocking)."""
    secret = reader.request(
        "POST",
        "/key-manager/v1/secrets",
        {"name": "web-cert", "payload": "PEM", "payload_content_type": "text/plain"},
    )["secret_ref"]
    container = reader.request(
        "POST",
        "/key-manager/v1/containers",
        {
            "name": "web-tls",
            "type": "certificate",
            "secret_refs": [{"name": "certificate", "secret_ref": secret}],
        },
    )["container_ref"]
    return secret, container


async def _lb_id(kube: KubeApiClient, ns: str, name: str) -> str | None:
    svc = await kube.get(SERVICES, name, namespace=ns)
    return (svc["metadata"].get("annotations") or {}).get(f"{LB}load-balancer-id")


async def _metrics(daemon: Daemon) -> str | None:
    status, text = await asyncio.to_thread(daemon.get, "/metrics")
    return text if status == 200 and 'operation="loadbalancer_ensure"' in text else None


async def test_kccm_adopts_shared_tls_and_annotated_balancers_without_a_write(
    emulator: Emulator,
    occms: OccmProcesses,
    kccm: Callable[[str], Daemon],
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
) -> None:
    ns, admin, reader = kube_namespace, emulator.admin, CloudReader.of(emulator)
    router_id = emulator.config["router_id"]
    cloud_conf = emulator.cloud_conf(
        {
            "LoadBalancer": {"manage-security-groups": "true"},
            'LoadBalancerClass "office"': {
                "floating-network-id": emulator.config["public_network_id"],
                "subnet-id": emulator.config["private_subnet_id"],
            },
        }
    )
    baseline = admin.state()
    secret_ref, container_ref = await asyncio.to_thread(barbican_container, reader)
    servers, cidrs = {}, {}
    for i, labels in ((1, {"env": "prod"}), (2, {})):
        name = kube_cleanup.add(NODES, unique_name("occm-more"))
        servers[name] = admin.add_server(name)
        cidrs[name] = f"10.244.{20 + i}.0/24"
        node = kubelet_node(name, cidrs[name])
        node["metadata"]["labels"].update(labels)
        await kube.create(NODES, node)

    # -- the cloud as OCCM leaves it ---------------------------------------------------------
    occm = occms.start(cloud_conf, control_plane.admin_kubeconfig)
    await eventually(lambda: initialised_nodes(kube, servers))
    await kube.create(SERVICES, lb_service("owner"), namespace=ns)
    await eventually(lambda: ingress_of(kube, ns, ["owner"]))
    owner_lb = await eventually(lambda: _lb_id(kube, ns, "owner"))
    sharer = _annotated(
        lb_service("sharer", ports=_port("alt", 8080)), {f"{LB}load-balancer-id": owner_lb}
    )
    wanted = {"sharer": sharer, **scenarios(container_ref)}
    for body in wanted.values():
        await kube.create(SERVICES, body, namespace=ns)
    names = ["owner", *wanted]
    ingress = await eventually(lambda: ingress_of(kube, ns, names))
    assert ingress["sharer"] == ingress["owner"]
    await eventually(lambda: asyncio.to_thread(routes_made, reader, router_id, cidrs.values()))
    made = admin.state()
    assert len(made["loadbalancers"]) - len(baseline["loadbalancers"]) == len(names) - 1
    listeners = [reader.get(f"/load-balancer/v2/lbaas/listeners/{i}")["listener"]
                 for i in made["listeners"]]  # fmt: skip
    assert {x["protocol"] for x in listeners} >= {"TERMINATED_HTTPS", "HTTP", "TCP"}
    assert [x["default_tls_container_ref"] for x in listeners if x["protocol"] == "TERMINATED_HTTPS"
            ] == [container_ref]  # fmt: skip
    assert error_answers(admin.requests()) == []
    occm.stop()

    # -- kccm takes over ----------------------------------------------------------------------
    daemon, requests = await hand_over(kube, ns, names, list(servers), emulator, kccm, cloud_conf)
    print(f"\nkccm, to adopt {len(names)} Services: {summary(requests)}")
    assert await ingress_of(kube, ns, names) == ingress
    assert admin.state() == made
    assert any(r["service"] == "key-manager" for r in requests)  # the TLS reference was read
    text = await eventually(lambda: _metrics(daemon))
    for family in OCCM_METRICS:
        assert re.search(rf"^{family}{{", text, re.MULTILINE), family

    # -- the container leaves Barbican, a Node leaves: the TLS balancer's members follow ------
    await asyncio.to_thread(reader.request, "DELETE", _path(emulator, container_ref))
    since, (stays, leaves) = admin.last_seq(), list(servers)
    await delete_until_gone(kube, NODES, [leaves], within=BUDGET)
    tls_lb = f"kube_service_{CLUSTER_NAME}_{ns}_tls"
    kept = {_fixed_ip(servers[stays])}
    await eventually(lambda: asyncio.to_thread(_members_are, reader, tls_lb, kept))
    assert [r for r in admin.requests(since) if r["service"] == "key-manager"] == []
    assert [w["path"] for w in admin.mutating(since) if "/listeners" in w["path"]] == []

    # -- the Services and the other Node go while kccm runs -----------------------------------
    await delete_until_gone(kube, SERVICES, ["sharer"], ns, within=BUDGET)
    await delete_until_gone(kube, SERVICES, [n for n in names if n != "sharer"], ns, within=BUDGET)
    await delete_until_gone(kube, NODES, [stays], within=BUDGET)
    await eventually(lambda: routes_gone(reader, router_id, daemon))
    for server in servers.values():
        admin.delete_server(server["id"])
    await asyncio.to_thread(reader.request, "DELETE", _path(emulator, secret_ref))
    admin.assert_clean(baseline)


def _path(emulator: Emulator, ref: str) -> str:
    return ref.removeprefix(emulator.config["base_url"])


def _fixed_ip(server: dict[str, Any]) -> str:
    return str(server["addresses"]["private"][0]["addr"])


def _members_are(reader: CloudReader, lb_name: str, addresses: set[str]) -> bool:
    (lb,) = reader.load_balancers(lb_name)
    found = {m["address"] for p in reader.pools(lb["id"]) for m in reader.members(p["id"])}
    return found == addresses


async def _warned(kube: KubeApiClient, ns: str, name: str, reason: str) -> str | None:
    for source, kind, found, message in await event_summaries(kube, ns, name):
        if (source, kind, found) == ("service-controller", "Warning", reason):
            return message
    return None


async def test_kccm_records_occms_warning_event_on_the_service(
    emulator: Emulator,
    kccm: Callable[[str], Daemon],
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
) -> None:
    """An Octavia older than 2.14 and an ``availability-zone`` annotation: the balancer is
    made without a zone and the Service carries OCCM's ``LoadBalancerAvailabilityZonesIgnored``
    Warning with OCCM's message."""
    ns, admin = kube_namespace, emulator.admin
    baseline, newest = admin.state(), admin.config()["octavia_version"]
    admin.set_config(octavia_version="2.13")
    name = kube_cleanup.add(NODES, unique_name("occm-ev"))
    server = admin.add_server(name)
    try:
        await kube.create(NODES, kubelet_node(name, "10.244.30.0/24"))
        daemon = kccm(emulator.cloud_conf())
        await eventually(lambda: initialised_nodes(kube, [name]))
        body = _annotated(lb_service("zoned"), {f"{LB}availability-zone": "nova"})
        await kube.create(SERVICES, body, namespace=ns)
        message = await eventually(
            lambda: _warned(kube, ns, "zoned", "LoadBalancerAvailabilityZonesIgnored")
        )
        assert message == (
            "LoadBalancer Availability Zones aren't supported. Please, upgrade Octavia API to "
            f"version 2.14 or later (Ussuri release) to use them for Service {ns}/zoned"
        )
        await delete_until_gone(kube, SERVICES, ["zoned"], ns, within=BUDGET)
        await delete_until_gone(kube, NODES, [name], within=BUDGET)
        reader, router_id = CloudReader.of(emulator), emulator.config["router_id"]
        await eventually(lambda: routes_gone(reader, router_id, daemon))
    finally:
        admin.set_config(octavia_version=newest)
        admin.delete_server(server["id"])
    admin.assert_clean(baseline)
