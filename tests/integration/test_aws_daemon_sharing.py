"""Shared NLBs (issue 39 item 2) through the real daemon with ``--cloud-provider=aws`` (real
apiserver, moto behind the fault proxy): two NLB Services of one share group on different ports
get ONE NLB with both listeners; a Classic ELB Service asking for the group gets a Warning
naming the annotation and no balancer; deleting one member leaves the other's listener and
target group; deleting the last leaves no NLB, target group or node security-group rule."""

from __future__ import annotations

import asyncio
from typing import Any

from test_aws_daemon import (  # the daemon module's environment (fixtures included)
    Env,
    _all_initialised,
    _failures,
    _hostnames,
    _lbs_where,
    delete_services,
    env,
    eventually,
    kubelet_node,
    lb_service,
    moto_url,
)

from kccm.cloudprovider import ANNOTATION_SHARE_GROUP
from kccm.emulators import aws as support
from kccm.emulators.aws.readback import group_rules, node_security_group
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.pytest_plugin import KubeCleanup

__all__ = ["env", "moto_url"]  # fixtures re-exported for this module

GROUP = "front"


def member(name: str, port: int, *, nlb: bool = True) -> dict[str, Any]:
    svc = lb_service(name)
    svc["spec"]["ports"] = [{"name": "p", "port": port, "protocol": "TCP"}]
    if not nlb:
        svc["metadata"]["annotations"] = {}
    svc["metadata"]["annotations"][ANNOTATION_SHARE_GROUP] = GROUP
    return svc


async def _one_nlb_with(env: Env, ports: list[int]) -> dict[str, dict[str, Any]] | None:
    return await _lbs_where(
        env, lambda lbs: len(lbs) == 1 and next(iter(lbs.values()))["ports"] == ports
    )


async def _warned(kube: KubeApiClient, ns: str, text: str) -> list[str] | None:
    found = [f for f in await _failures(kube, ns) if text in f]
    return found or None


async def _nothing_left(env: Env, node_group: str) -> bool:
    left = await asyncio.to_thread(support.leftovers, env.world.url, env.world.vpc_id)
    rules = await asyncio.to_thread(group_rules, env.world.url, node_group)
    nlb_rules = [r for r in rules if "kubernetes.io/rule/nlb/" in r[4]]
    return not left["load_balancers"] and not left["target_groups"] and not nlb_rules


async def test_a_share_group_gets_one_nlb_and_each_member_keeps_only_its_own(
    env: Env, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns = kube_namespace
    node_group = await asyncio.to_thread(node_security_group, env.world)
    env.start()
    instances = list(env.world.instances)[:2]
    names = [kube_cleanup.add(NODES, env.world.instances[i]) for i in instances]
    for n, name in enumerate(names):
        await kube.create(NODES, kubelet_node(name, f"10.244.{n}.0/24"))
    await eventually(lambda: _all_initialised(kube, names))

    for svc in (member("web", 80), member("api", 443), member("old", 8080, nlb=False)):
        await kube.create(SERVICES, svc, namespace=ns)
    hostnames = await eventually(lambda: _hostnames(kube, ns, ["web", "api"]))
    assert hostnames["web"] == hostnames["api"]
    lbs = await eventually(lambda: _one_nlb_with(env, [80, 443]))
    assert set(lbs) == {hostnames["web"]}
    assert next(iter(lbs.values()))["targets"] == set(instances)
    await eventually(lambda: _warned(kube, ns, f"{ANNOTATION_SHARE_GROUP} needs an NLB"))
    assert not await _hostnames(kube, ns, ["old"])  # a Classic ELB is not shared: none made

    await delete_services(kube, ns, ["web"])
    lbs = await eventually(lambda: _one_nlb_with(env, [443]))
    assert set(lbs) == {hostnames["api"]}
    left = await asyncio.to_thread(support.leftovers, env.world.url, env.world.vpc_id)
    assert len(left["target_groups"]) == 1

    await delete_services(kube, ns, ["api", "old"])
    await eventually(lambda: _nothing_left(env, node_group))
