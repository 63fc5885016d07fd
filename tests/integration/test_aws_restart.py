"""Restarts of the kccm daemon with ``--cloud-provider=aws`` (real apiserver, moto behind the
fault proxy): drift made while kccm was stopped is repaired by the start-up ensure; a restart
with unchanged balancers sends AWS no mutating request; a changed cloud config reaches the
existing balancers (issue 16's acceptance for aws)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

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
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.pytest_plugin import KubeCleanup

__all__ = ["env", "moto_url"]  # fixtures re-exported for this module

ALWAYS_ENSURE = "--reuse-unchanged-load-balancers=false"
"""Every start ensures every balancer (the default once the spec-hash skip is retired)."""


def _balancers(env: Env) -> dict[str, dict[str, Any]]:
    """Per NLB: listener port -> (target-group health check, sorted targets)."""
    _, elbv2 = support.clients(env.world.url)
    found = {}
    for lb in elbv2.describe_load_balancers()["LoadBalancers"]:
        if lb["VpcId"] != env.world.vpc_id:
            continue
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
    """What an operator might do in the console: delete one NLB's listener, deregister the
    other's targets."""
    _, elbv2 = support.clients(env.world.url)
    lbs = sorted(
        (
            lb
            for lb in elbv2.describe_load_balancers()["LoadBalancers"]
            if lb["VpcId"] == env.world.vpc_id
        ),
        key=lambda lb: lb["LoadBalancerName"],
    )
    first = elbv2.describe_listeners(LoadBalancerArn=lbs[0]["LoadBalancerArn"])["Listeners"][0]
    elbv2.delete_listener(ListenerArn=first["ListenerArn"])
    second = elbv2.describe_listeners(LoadBalancerArn=lbs[1]["LoadBalancerArn"])["Listeners"][0]
    arn = second["DefaultActions"][0]["TargetGroupArn"]
    health = elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    elbv2.deregister_targets(TargetGroupArn=arn, Targets=[t["Target"] for t in health])


def _writes(requests: Counter[str]) -> dict[str, int]:
    return {op: n for op, n in requests.items() if classify_by_verb(op)}


async def _state_is(env: Env, wanted: dict[str, dict[str, Any]]) -> bool:
    return await asyncio.to_thread(_balancers, env) == wanted


async def _ensures_done(env: Env, count: int, before: Counter[str]) -> bool:
    """Each ensure ends by reading the balancer's attributes."""
    op = "elasticloadbalancing:DescribeLoadBalancerAttributes"
    return env.proxy.requests[op] - before[op] >= count


async def test_restarts_repair_drift_write_nothing_when_unchanged_and_apply_config(
    env: Env, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns = kube_namespace
    env.start(ALWAYS_ENSURE)
    names = [kube_cleanup.add(NODES, dns) for dns in env.world.instances.values()]
    for i, name in enumerate(names):
        await kube.create(NODES, kubelet_node(name, f"10.244.{i}.0/24"))
    await eventually(lambda: _all_initialised(kube, names))
    services = ["web-a", "web-b"]
    for name in services:
        await kube.create(SERVICES, lb_service(name), namespace=ns)
    hostnames = await eventually(lambda: _hostnames(kube, ns, services))
    everyone = sorted(env.world.instances)

    async def settled() -> dict[str, dict[str, Any]] | None:
        found = await asyncio.to_thread(_balancers, env)
        ok = len(found) == 2 and all(
            [t for _, _, t in lb.values()] == [everyone] for lb in found.values()
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
    before = Counter(env.proxy.requests)
    env.start(ALWAYS_ENSURE)
    await eventually(lambda: _ensures_done(env, len(services), before))
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
