"""Issue 19's node, annotation and config items through the real daemon (``--cloud-provider=aws``,
real apiserver, moto behind the fault proxy): the zone-id label, a Node whose instance EC2 does
not know is deleted, TLS listeners from annotations, changes AWS cannot make reported as a
Warning naming the annotation, an unknown region refused at start; network topology labels
(moto taught DescribeInstanceTopology, kccm.emulators.aws.topology)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
from test_aws_daemon import (  # the daemon module's environment (fixtures included)
    Env,
    _all_initialised,
    _hostnames,
    _ready,
    delete_services,
    env,
    eventually,
    kubelet_node,
    lb_service,
    moto_url,
    support,
)

from kccm.cloudprovider import default_load_balancer_name
from kccm.kube.client import KubeApiClient
from kccm.kube.errors import NotFound
from kccm.kube.resources import EVENTS, NODES, SERVICES
from kccm.providers.aws.nlbgroups import nlb_group_name
from kccm.testing.pytest_plugin import KubeCleanup

__all__ = ["env", "moto_url"]  # fixtures re-exported for this module

P = "service.beta.kubernetes.io/aws-load-balancer-"
ZONE_ID = "topology.k8s.aws/zone-id"
LAYER = "topology.k8s.aws/network-node-layer-"
GPU = "p5.48xlarge"


def test_an_unknown_region_stops_kccm_with_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "aws.conf"
    config.write_text("[Global]\nRegion = eu-middle-9\n")
    done = subprocess.run(
        [sys.executable, "-m", "kccm", "--cloud-provider=aws", f"--cloud-config={config}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, done.stderr  # the problem, then the CLI's usage hint
    assert lines[0].startswith("Error: --cloud-config: [Global] Region: 'eu-middle-9' is not")
    assert lines[1] == "Run 'kccm --help' for usage."


def _certificate(url: str) -> str:
    acm = boto3.client(
        "acm",
        region_name=support.REGION,
        endpoint_url=url,
        aws_access_key_id=support.CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=support.CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    return str(acm.request_certificate(DomainName="shop.example.com")["CertificateArn"])


def _listeners(env: Env) -> dict[int, tuple[str, list[str]]]:
    _, elbv2 = support.clients(env.world.url)
    found: dict[int, tuple[str, list[str]]] = {}
    for lb in elbv2.describe_load_balancers()["LoadBalancers"]:
        if lb["VpcId"] == env.world.vpc_id:
            for li in elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]:
                certs = [c["CertificateArn"] for c in li.get("Certificates") or ()]
                found[li["Port"]] = (li["Protocol"], certs)
    return found


def _classic_listeners(env: Env) -> dict[int, tuple[str, str, str]]:
    """The Classic ELBs' listeners: port -> (protocol, instance protocol, certificate)."""
    elb = boto3.client(
        "elb",
        region_name=support.REGION,
        endpoint_url=env.world.url,
        aws_access_key_id=support.CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=support.CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    found: dict[int, tuple[str, str, str]] = {}
    for lb in elb.describe_load_balancers()["LoadBalancerDescriptions"]:
        if lb.get("VPCId") == env.world.vpc_id:
            for described in lb["ListenerDescriptions"]:
                li = described["Listener"]
                found[li["LoadBalancerPort"]] = (
                    li["Protocol"].upper(),
                    li["InstanceProtocol"].upper(),
                    li.get("SSLCertificateId") or "",
                )
    return found


async def _events(kube: KubeApiClient, ns: str, name: str) -> list[dict[str, Any]]:
    events = await kube.list(EVENTS, namespace=ns)
    return [e for e in events.items if (e.get("involvedObject") or {}).get("name") == name]


async def test_zone_id_ghost_nodes_tls_and_changes_aws_cannot_make(
    env: Env, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns = kube_namespace
    [gpu] = await asyncio.to_thread(support.add_instances, env.world, 1, instance_type=GPU)
    env.start()
    names = [kube_cleanup.add(NODES, dns) for dns in env.world.instances.values()]
    ghost = kube_cleanup.add(NODES, "ip-10-99-0-1.eu-west-1.compute.internal")
    for i, name in enumerate([*names, ghost]):
        await kube.create(NODES, kubelet_node(name, f"10.244.{i}.0/24"))

    # -- zone-id label; a Node no instance of the cluster answers to is deleted ---------------
    nodes = await eventually(lambda: _all_initialised(kube, names))
    ec2, _ = support.clients(env.world.url)
    zone_ids = {
        z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]
    }
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert labels[ZONE_ID] == zone_ids[labels["topology.kubernetes.io/zone"]]
        zone, instance_id = labels["topology.kubernetes.io/zone"], node["spec"]["providerID"]
        instance_id = instance_id.rsplit("/", 1)[-1]
        layers = {k: v for k, v in labels.items() if k.startswith(LAYER)}
        if instance_id == gpu:  # the network nodes EC2 lists, layer 1 first
            wanted = support.network_nodes_of(gpu, zone, GPU)
            assert layers == {f"{LAYER}{i}": n for i, n in enumerate(wanted, start=1)}
        else:  # m5.large: EC2 lists no topology
            assert layers == {}
    # a patch, not get + replace: kccm may write the Node in between (409)
    unknown = {"status": {"conditions": [_ready("Unknown")]}}
    await kube.patch(NODES, ghost, unknown, subresource="status")

    async def ghost_deleted() -> bool:
        try:
            await kube.get(NODES, ghost)
        except NotFound:
            return True
        return False

    await eventually(ghost_deleted)

    # -- TLS listeners from the annotations: an NLB's TLS, a Classic ELB's SSL ----------------
    cert = await asyncio.to_thread(_certificate, env.world.url)
    tls = {P + "ssl-cert": cert, P + "ssl-ports": "443"}
    services = ["tls", "tls-classic"]
    for name in services:
        svc = lb_service(name)
        if name == "tls-classic":  # no type annotation: upstream's default, a Classic ELB
            svc["metadata"]["annotations"] = {}
        svc["metadata"]["annotations"].update(tls)
        svc["spec"]["ports"].append({"name": "https", "port": 443, "protocol": "TCP"})
        await kube.create(SERVICES, svc, namespace=ns)
    await eventually(lambda: _hostnames(kube, ns, services))

    async def tls_listeners() -> bool:
        found = await asyncio.to_thread(support.read_while_changing, lambda: _listeners(env))
        classic = await asyncio.to_thread(_classic_listeners, env)
        return found == {80: ("TCP", []), 443: ("TLS", [cert])} and classic == {
            80: ("TCP", "TCP", ""),
            443: ("SSL", "TCP", cert),
        }

    await eventually(tls_listeners)

    # -- a change AWS cannot make: a Warning naming the annotation, never "Ensured" -----------
    for name in services:
        # the Ensured event is posted after the status: count from it, not from before it
        before = await eventually(lambda name=name: _ensured(kube, ns, name))
        internal = {"metadata": {"annotations": {P + "internal": "true"}}}
        await kube.patch(SERVICES, name, internal, namespace=ns)
        [warning] = await eventually(lambda name=name: _warned(kube, ns, name, P + "internal"))
        assert warning["reason"] == "SyncLoadBalancerFailed"
        assert await _ensured(kube, ns, name) == before
    await delete_services(kube, ns, services)


async def _ensured(kube: KubeApiClient, ns: str, name: str) -> int:
    return sum(
        int(e.get("count") or 1)
        for e in await _events(kube, ns, name)
        if e["reason"] == "EnsuredLoadBalancer"
    )


async def _warned(kube: KubeApiClient, ns: str, name: str, word: str) -> list[dict[str, Any]]:
    return [
        e
        for e in await _events(kube, ns, name)
        if e.get("type") == "Warning" and word in e.get("message", "")
    ]


def _nlb_groups(env: Env, name: str) -> list[str]:
    _, elbv2 = support.clients(env.world.url)
    found = elbv2.describe_load_balancers(Names=[name])["LoadBalancers"]
    return list(found[0].get("SecurityGroups") or [])


def _group_ids(env: Env, group_name: str) -> list[str]:
    ec2, _ = support.clients(env.world.url)
    filters = [
        {"Name": "group-name", "Values": [group_name]},
        {"Name": "vpc-id", "Values": [env.world.vpc_id]},
    ]
    return [g["GroupId"] for g in ec2.describe_security_groups(Filters=filters)["SecurityGroups"]]


def _delete_nlb(env: Env, name: str) -> None:
    _, elbv2 = support.clients(env.world.url)
    arn = elbv2.describe_load_balancers(Names=[name])["LoadBalancers"][0]["LoadBalancerArn"]
    elbv2.delete_load_balancer(LoadBalancerArn=arn)


async def test_nlb_security_group_mode_managed_gives_the_nlb_its_group_and_deletes_it(
    env: Env, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    """``NLBSecurityGroupMode = Managed`` through the daemon: the NLB is created with the
    group upstream's ``GetSecurityGroupNameForNLB`` names; the Service's delete removes it.
    A second Service's NLB is deleted behind kccm's back, its group left (the state a delete
    that met ``DependencyViolation`` leaves: moto never reports it): the Service's delete
    still removes the group before the finalizer goes."""
    ns = kube_namespace
    env.start(NLBSecurityGroupMode="Managed")
    names = [kube_cleanup.add(NODES, dns) for dns in env.world.instances.values()]
    for i, name in enumerate(names):
        await kube.create(NODES, kubelet_node(name, f"10.244.{i}.0/24"))
    await eventually(lambda: _all_initialised(kube, names))
    created = await kube.create(SERVICES, lb_service("managed-sg"), namespace=ns)
    left = await kube.create(SERVICES, lb_service("managed-left"), namespace=ns)
    await eventually(lambda: _hostnames(kube, ns, ["managed-sg", "managed-left"]))
    lb_name = default_load_balancer_name(created)
    group_name = nlb_group_name(env.world.cluster_id, created)  # --cluster-name=<cluster id>
    [group] = await asyncio.to_thread(_group_ids, env, group_name)
    assert await asyncio.to_thread(_nlb_groups, env, lb_name) == [group]
    left_group = nlb_group_name(env.world.cluster_id, left)
    await asyncio.to_thread(_delete_nlb, env, default_load_balancer_name(left))
    await delete_services(kube, ns, ["managed-sg", "managed-left"])
    assert await asyncio.to_thread(_group_ids, env, group_name) == []
    assert await asyncio.to_thread(_group_ids, env, left_group) == []
