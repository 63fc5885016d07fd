"""Migrating from the upstream aws-cloud-controller-manager to kccm, on the real apiserver and
moto behind the fault proxy.

Three Services as the upstream CCM leaves them — a Classic ELB (no type annotation), an NLB
and an ``externalTrafficPolicy: Local`` NLB — with their balancers, target groups and
security-group rules laid out as upstream's code lays them out (aws_upstream_layout.py), their
published hostnames and upstream's cleanup finalizer. kccm starts and adopts all three: not a
single mutating AWS request, the hostnames unchanged. Deleting the Services then removes every
balancer, target group, security group and rule of theirs.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_aws_daemon import release_services

from kccm.cloudprovider import default_load_balancer_name
from kccm.emulators import aws as support
from kccm.emulators.aws import readback as sg_support
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import EVENTS, NODES, SERVICES
from kccm.testing.controllers import all_absent
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemons
from kccm.testing.modules import load_module
from kccm.testing.pytest_plugin import KubeCleanup

ROOT = Path(__file__).resolve().parents[2]
FINALIZER = "service.kubernetes.io/load-balancer-cleanup"
TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"
BUDGET = 90.0


layout = load_module("aws_upstream_layout", Path(__file__).parent / "aws_upstream_layout.py")


eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.5)
"""The shared :func:`kccm.testing.controllers.eventually` with this module's bound and pace
(it polls other processes)."""


@pytest.fixture
def moto_url() -> Iterator[str]:
    with support.moto_emulator() as moto, support.no_leaked_balancers(moto.url):
        yield moto.url


@pytest.fixture
def proxy(moto_url: str) -> Iterator[Any]:
    fault = support.FaultProxy(moto_url, support.every_nth(7)).start()
    try:
        yield fault
    finally:
        fault.stop()


@pytest.fixture
async def kccm(
    control_plane: ControlPlane, kube: KubeApiClient, proxy: Any, tmp_path: Path
) -> AsyncIterator[Callable[[Any], None]]:
    """Start kccm (as cluster-admin: RBAC is the daemon test's subject) against a world."""
    daemons = Daemons(tmp_path)

    def start(world: Any) -> None:
        config = tmp_path / "aws.conf"
        config.write_text(world.cloud_config(proxy.url, APIMaxAttempts="6"))
        daemons.start(
            "aws",
            config,
            control_plane.admin_kubeconfig,
            f"--cluster-name={world.cluster_id}",
            "--configure-cloud-routes=false",
            "--leader-elect=false",
            "--controllers=service",
            "--v=2",
            env=support.CREDENTIALS,
            unset=("AWS_PROFILE",),
        )

    yield start
    daemons.stop_all(grace=30)
    await release_services(kube)


def ready_node(world: Any, instance: str) -> Obj:
    """A Node the upstream CCM initialised: providerID set, no uninitialized taint."""
    return {
        "metadata": {"name": world.instances[instance]},
        "spec": {"providerID": support.provider_id_of(world, instance)},
    }


async def _make_ready(kube: KubeApiClient, name: str) -> None:
    # a patch, not get + replace: a running kccm may write the Node in between (409)
    status = {
        "addresses": [{"type": "Hostname", "address": name}],
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "test",
                "lastHeartbeatTime": "2026-11-21T00:00:00Z",
                "lastTransitionTime": "2026-11-21T00:00:00Z",
            }
        ],
    }
    await kube.patch(NODES, name, {"status": status}, subresource="status")


def lb_service(name: str, annotations: dict[str, str], **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "annotations": annotations, "finalizers": [FINALIZER]},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            **spec,
        },
    }


def lay_out(world: Any, service: Obj, node_group: str) -> str:
    """The upstream CCM's balancer for ``service``; returns its DNS name."""
    ec2, elbv2 = support.clients(world.url)
    name = default_load_balancer_name(service)
    if (service["metadata"].get("annotations") or {}).get(TYPE) == "nlb":
        return str(layout.nlb(ec2, elbv2, world, service, name, node_group))
    elb = sg_support.elb_client(world.url)
    return str(layout.classic(ec2, elb, world, service, name, node_group))


async def _ensured(kube: KubeApiClient, ns: str, names: set[str]) -> set[str] | None:
    events = (await kube.list(EVENTS, namespace=ns)).items
    done = {e["involvedObject"]["name"] for e in events if e.get("reason") == "EnsuredLoadBalancer"}
    return done if names <= done else None


def _mutations(proxy: Any) -> dict[str, int]:
    """Every AWS request the proxy saw that is not a read."""
    return {
        action: n
        for action, n in proxy.requests.items()
        if not action.split(":", 1)[1].startswith("Describe")
    }


def _remains(world: Any, node_group: str, names: list[str]) -> dict[str, Any]:
    found = support.leftovers(world.url, world.vpc_id)
    groups = [n for n in names if sg_support.group_named(world.url, world.vpc_id, f"k8s-elb-{n}")]
    return {
        "classic": sg_support.classic_names(world.url, world.vpc_id),
        "nlbs": found["load_balancers"],
        "target_groups": found["target_groups"],
        "security_groups": groups,
        "node_group_rules": sorted(map(str, sg_support.group_rules(world.url, node_group))),
    }


async def test_kccm_adopts_what_the_upstream_ccm_made_and_deletes_it_all(
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
    moto_url: str,
    proxy: Any,
    kccm: Callable[[Any], None],
) -> None:
    ns = kube_namespace
    world = await asyncio.to_thread(
        support.build_world, moto_url, f"mig{uuid.uuid4().hex[:6]}", 3, 40
    )
    node_group = await asyncio.to_thread(sg_support.node_security_group, world)
    for instance in world.instances:
        name = kube_cleanup.add(NODES, world.instances[instance])
        await kube.create(NODES, ready_node(world, instance))
        await _make_ready(kube, name)

    # -- the cluster as the upstream CCM left it -----------------------------------------------
    wanted = {
        "classic": lb_service("classic", {}),
        "nlb": lb_service("nlb", {TYPE: "nlb"}),
        "local": lb_service("local", {TYPE: "nlb"}, externalTrafficPolicy="Local"),
    }
    hostnames = {}
    for name, body in wanted.items():
        created = await kube.create(SERVICES, body, namespace=ns)
        hostnames[name] = await asyncio.to_thread(lay_out, world, created, node_group)
        created["status"] = {"loadBalancer": {"ingress": [{"hostname": hostnames[name]}]}}
        await kube.replace(SERVICES, created, subresource="status")
    balancer_names = [
        default_load_balancer_name(await kube.get(SERVICES, n, namespace=ns)) for n in wanted
    ]
    laid_out = await asyncio.to_thread(_remains, world, node_group, balancer_names)
    assert len(laid_out["classic"]) == 1
    assert len(laid_out["nlbs"]) == 2
    proxy.requests.clear()

    # -- kccm takes over: every balancer adopted, nothing written ------------------------------
    kccm(world)
    await eventually(lambda: _ensured(kube, ns, set(wanted)))
    assert _mutations(proxy) == {}
    for name in wanted:
        svc = await kube.get(SERVICES, name, namespace=ns)
        assert svc["status"]["loadBalancer"]["ingress"] == [{"hostname": hostnames[name]}]
    assert await asyncio.to_thread(_remains, world, node_group, balancer_names) == laid_out
    assert proxy.throttled  # the fault proxy was in the way

    # -- the Services go: nothing of theirs remains --------------------------------------------
    for name in wanted:
        await kube.delete(SERVICES, name, namespace=ns)

    await eventually(lambda: all_absent(kube, SERVICES, wanted, ns))
    assert await asyncio.to_thread(_remains, world, node_group, balancer_names) == {
        "classic": [],
        "nlbs": [],
        "target_groups": [],
        "security_groups": [],
        "node_group_rules": [],
    }


async def _classic_instances(world: Any, name: str, wanted: set[str]) -> bool:
    lb = await asyncio.to_thread(sg_support.classic_state, world.url, name)
    return set(lb["instances"]) == wanted


async def test_fresh_services_get_upstreams_balancers_and_node_rules(
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
    moto_url: str,
    kccm: Callable[[Any], None],
) -> None:
    """kccm on its own: a Service without the type annotation gets a Classic ELB with its
    group and the node rule, an NLB Service gets upstream's node rules; instances follow the
    Nodes; deleting the Services leaves nothing."""
    ns = kube_namespace
    world = await asyncio.to_thread(
        support.build_world, moto_url, f"new{uuid.uuid4().hex[:6]}", 2, 41
    )
    node_group = await asyncio.to_thread(sg_support.node_security_group, world)
    first, second = list(world.instances)
    kube_cleanup.add(NODES, world.instances[first])
    await kube.create(NODES, ready_node(world, first))
    await _make_ready(kube, world.instances[first])
    kccm(world)
    for body in (lb_service("classic", {}), lb_service("nlb", {TYPE: "nlb"})):
        del body["metadata"]["finalizers"]  # new Services: kccm adds the finalizer itself
        await kube.create(SERVICES, body, namespace=ns)

    async def published() -> dict[str, Obj] | None:
        found = {n: await kube.get(SERVICES, n, namespace=ns) for n in ("classic", "nlb")}
        ok = all(
            (s.get("status") or {}).get("loadBalancer", {}).get("ingress") for s in found.values()
        )
        return found if ok else None

    services = await eventually(published)
    classic_name = default_load_balancer_name(services["classic"])
    nlb_name = default_load_balancer_name(services["nlb"])
    lb = await asyncio.to_thread(sg_support.classic_state, world.url, classic_name)
    assert services["classic"]["status"]["loadBalancer"]["ingress"] == [
        {"hostname": lb["lb"]["DNSName"]}
    ]
    own = await asyncio.to_thread(
        sg_support.group_named, world.url, world.vpc_id, f"k8s-elb-{classic_name}"
    )
    assert own is not None
    node_port = services["nlb"]["spec"]["ports"][0]["nodePort"]
    assert await asyncio.to_thread(sg_support.group_rules, world.url, node_group) == {
        ("-1", None, None, own["GroupId"], ""),
        ("tcp", node_port, node_port, "0.0.0.0/0", f"{layout.CLIENT}={nlb_name}"),
        ("icmp", 3, 4, "0.0.0.0/0", layout.MTU),
    }
    assert await _classic_instances(world, classic_name, {first})

    # a Node joins: its instance is registered with the Classic ELB
    kube_cleanup.add(NODES, world.instances[second])
    await kube.create(NODES, ready_node(world, second))
    await _make_ready(kube, world.instances[second])
    await eventually(lambda: _classic_instances(world, classic_name, {first, second}))

    for name in ("classic", "nlb"):
        await kube.delete(SERVICES, name, namespace=ns)

    async def nothing_left() -> bool:
        found = await asyncio.to_thread(_remains, world, node_group, [classic_name, nlb_name])
        return not any(found.values())

    await eventually(nothing_left)
