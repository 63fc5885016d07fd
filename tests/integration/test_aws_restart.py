"""Restarts of the kccm daemon with ``--cloud-provider=aws`` (real apiserver, moto behind the
fault proxy): drift made while kccm was stopped is repaired by the start-up ensure; a restart
with unchanged balancers sends AWS no mutating request; a changed cloud config reaches the
existing balancers (issue 16's acceptance for aws). One Service has upstream's default, a
Classic ELB, the other asks for an NLB: both kinds are read, compared and repaired."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import boto3
from test_aws_daemon import (  # the daemon module's environment (fixtures included)
    Env,
    _all_initialised,
    _failures,
    _hostnames,
    delete_services,
    env,
    eventually,
    kubelet_node,
    lb_service,
    moto_url,
    support,
)

from kccm.cloudprovider.apicalls import classify_by_verb
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import EVENTS, NODES, SERVICES
from kccm.testing.pytest_plugin import KubeCleanup

__all__ = ["env", "moto_url"]  # fixtures re-exported for this module

ALWAYS_ENSURE = "--reuse-unchanged-load-balancers=false"
"""Every start ensures every balancer (the default once the spec-hash skip is retired)."""


def _elb(env: Env) -> Any:
    return boto3.client(
        "elb",
        region_name=support.REGION,
        endpoint_url=env.world.url,
        aws_access_key_id=support.CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=support.CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def _classics(env: Env) -> list[dict[str, Any]]:
    described = _elb(env).describe_load_balancers()["LoadBalancerDescriptions"]
    return [lb for lb in described if lb.get("VPCId") == env.world.vpc_id]


def _nlbs(env: Env) -> list[dict[str, Any]]:
    _, elbv2 = support.clients(env.world.url)
    described = elbv2.describe_load_balancers()["LoadBalancers"]
    return [lb for lb in described if lb["VpcId"] == env.world.vpc_id]


def _balancers(env: Env) -> dict[str, dict[int, Any]]:
    """Per balancer: listener port -> (health-check protocol, health-check port, sorted
    targets), for the Classic ELB and the NLB alike."""
    found: dict[str, dict[int, Any]] = {}
    for classic in _classics(env):
        protocol, _, port = classic["HealthCheck"]["Target"].partition(":")
        instances = sorted(i["InstanceId"] for i in classic["Instances"])
        found[classic["LoadBalancerName"]] = {
            d["Listener"]["LoadBalancerPort"]: (protocol, port.split("/")[0], instances)
            for d in classic["ListenerDescriptions"]
        }
    _, elbv2 = support.clients(env.world.url)
    for lb in _nlbs(env):
        listeners = elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]
        ports = {}
        for listener in listeners:
            arn = listener["DefaultActions"][0]["TargetGroupArn"]
            group = elbv2.describe_target_groups(TargetGroupArns=[arn])["TargetGroups"][0]
            health = elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
            ports[listener["Port"]] = (
                group["HealthCheckProtocol"],
                group["HealthCheckPort"],
                sorted(t["Target"]["Id"] for t in health),
            )
        found[lb["LoadBalancerName"]] = ports
    return found


def _drift(env: Env) -> None:
    """What an operator might do in the console: delete the Classic ELB's listener and
    deregister its instances, deregister the NLB's targets."""
    [classic] = _classics(env)
    elb = _elb(env)
    name = classic["LoadBalancerName"]
    elb.delete_load_balancer_listeners(LoadBalancerName=name, LoadBalancerPorts=[80])
    elb.deregister_instances_from_load_balancer(
        LoadBalancerName=name, Instances=[{"InstanceId": i} for i in sorted(env.world.instances)]
    )
    [nlb] = _nlbs(env)
    _, elbv2 = support.clients(env.world.url)
    listener = elbv2.describe_listeners(LoadBalancerArn=nlb["LoadBalancerArn"])["Listeners"][0]
    arn = listener["DefaultActions"][0]["TargetGroupArn"]
    health = elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    elbv2.deregister_targets(TargetGroupArn=arn, Targets=[t["Target"] for t in health])


def _writes(requests: Counter[str]) -> dict[str, int]:
    return {op: n for op, n in requests.items() if classify_by_verb(op)}


async def _balancers_now(env: Env) -> dict[str, dict[int, Any]] | None:
    """:func:`_balancers`, or None while kccm replaces what the probe walks through."""
    return await asyncio.to_thread(support.read_while_changing, lambda: _balancers(env))


async def _state_is(env: Env, wanted: dict[str, dict[int, Any]]) -> bool:
    return await _balancers_now(env) == wanted


async def _ensured_since(kube: KubeApiClient, ns: str, count: int) -> bool:
    return await _ensured(kube, ns) >= count


async def _ensured(kube: KubeApiClient, ns: str) -> int:
    """EnsuredLoadBalancer events in ``ns`` (each start-up ensure emits one, as upstream)."""
    events = await kube.list(EVENTS, namespace=ns)
    return sum(
        int(e.get("count") or 1) for e in events.items if e["reason"] == "EnsuredLoadBalancer"
    )


def _services() -> list[Obj]:
    """One Classic ELB (no type annotation, upstream's default) and one NLB."""
    classic, nlb = lb_service("web-classic"), lb_service("web-nlb")
    classic["metadata"]["annotations"] = {}
    return [classic, nlb]


async def test_restarts_repair_drift_write_nothing_when_unchanged_and_apply_config(
    env: Env, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns = kube_namespace
    env.start(ALWAYS_ENSURE)
    names = [kube_cleanup.add(NODES, dns) for dns in env.world.instances.values()]
    for i, name in enumerate(names):
        await kube.create(NODES, kubelet_node(name, f"10.244.{i}.0/24"))
    await eventually(lambda: _all_initialised(kube, names))
    services = ["web-classic", "web-nlb"]
    for body in _services():
        await kube.create(SERVICES, body, namespace=ns)
    hostnames = await eventually(lambda: _hostnames(kube, ns, services))
    everyone = sorted(env.world.instances)

    async def settled() -> dict[str, dict[int, Any]] | None:
        found = await _balancers_now(env)
        ok = (
            found is not None
            and len(found) == 2
            and all([t for _, _, t in lb.values()] == [everyone] for lb in found.values())
        )
        return found if ok else None

    wanted = await eventually(settled)

    # -- drift while kccm is stopped is repaired by the start-up ensure ------------------------
    env.stop()
    await asyncio.to_thread(_drift, env)
    assert not await _state_is(env, wanted)
    env.start(ALWAYS_ENSURE)
    await eventually(lambda: _state_is(env, wanted))
    assert await _hostnames(kube, ns, services) == hostnames

    # -- a restart with nothing changed sends no mutating request to AWS ----------------------
    env.stop()
    ensured = await _ensured(kube, ns)
    before = Counter(env.proxy.requests)
    env.start(ALWAYS_ENSURE)
    await eventually(lambda: _ensured_since(kube, ns, ensured + len(services)))
    await eventually(lambda: _all_initialised(kube, names))
    since = Counter(env.proxy.requests)
    since.subtract(before)
    assert _writes(+since) == {}, since
    assert await _state_is(env, wanted)

    # -- a changed cloud config reaches the existing balancers on restart ---------------------
    env.stop()
    env.start(ALWAYS_ENSURE, ClusterServiceLoadBalancerHealthProbeMode="Shared")
    shared = {
        lb: {port: ("HTTP", "10256", targets) for port, (_, _, targets) in ports.items()}
        for lb, ports in wanted.items()
    }
    await eventually(lambda: _state_is(env, shared))
    assert await _hostnames(kube, ns, services) == hostnames
    assert await _failures(kube, ns) == []
    await delete_services(kube, ns, services)
