"""Two NLB Services synced at once against moto: the node security group they share.

Each NLB's client and health rules are its own, but the ICMP rule for MTU discovery is shared
by every NLB (upstream ``NLBMtuDiscoveryRuleDescription``) and derived from the client rules
the group holds: a sync that read the group before another changed it keeps (or adds) the MTU
rule on a stale view. The syncs take turns on the node rules (``SecurityGroups._node_rules``);
the interleavings here are forced (``kccm.testing.interleave``): each sync stops before its
first rule write until the other has read the group or waits for that lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aws_lb import lb_of, nodes

from kccm.cloudprovider import default_load_balancer_name
from kccm.emulators.aws import World
from kccm.emulators.aws.readback import group_rules, node_security_group
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.securitygroups import SecurityGroups
from kccm.testing.interleave import Interleaving, Stop

CLIENT, MTU = "kubernetes.io/rule/nlb/client", "kubernetes.io/rule/nlb/mtu"
WRITES = ("authorize_security_group_ingress", "revoke_security_group_ingress")
ROLES = ("a", "b")


def nlb(role: str, node_port: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": role,
            "namespace": "shop",
            "uid": str(uuid.uuid4()),
            "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": node_port}],
        },
    }


@contextmanager
def watch(order: Interleaving, groups: SecurityGroups) -> Iterator[None]:
    """``read`` after a security-group describe, ``write`` before a rule change; the node
    rules' lock watched for waits."""
    api = groups._api
    pages, call = api.pages, api.call

    def watched_pages(service: str, operation: str, key: str, **params: Any) -> Iterator[Any]:
        items = list(pages(service, operation, key, **params))
        if operation == "describe_security_groups":
            order.mark("read")
        return iter(items)

    def watched_call(service: str, operation: str, **params: Any) -> dict[str, Any]:
        if operation in WRITES:
            order.before("write")
        return call(service, operation, **params)

    lock = groups._node_rules
    api.pages = watched_pages  # type: ignore[method-assign]
    api.call = watched_call  # type: ignore[method-assign]
    groups._node_rules = order.watched(lock)  # type: ignore[assignment]
    try:
        yield
    finally:
        api.pages, api.call = pages, call  # type: ignore[method-assign]
        groups._node_rules = lock


def _each_waits_for_the_other() -> Interleaving:
    other = dict(zip(ROLES, reversed(ROLES), strict=True))
    return Interleaving(
        Stop(role, "write", (f"{other[role]}:read", f"{other[role]}:waits")) for role in ROLES
    )


def _nlb_rules(world: World, group: str) -> set[tuple[Any, ...]]:
    return {r for r in group_rules(world.url, group) if "kubernetes.io/rule/nlb" in r[4]}


def _expected(services: dict[str, dict[str, Any]]) -> set[tuple[Any, ...]]:
    client = {
        ("tcp", port, port, "0.0.0.0/0", f"{CLIENT}={default_load_balancer_name(svc)}")
        for svc in services.values()
        for port in [svc["spec"]["ports"][0]["nodePort"]]
    }
    return client | ({("icmp", 3, 4, "0.0.0.0/0", MTU)} if client else set())


RACES = [
    # id, what each Service does at once: ensure (from nothing) or delete (both made first)
    pytest.param("ensure", id="both-ensured-at-once-each-rule-written-once"),
    pytest.param("delete", id="both-deleted-at-once-the-shared-mtu-rule-goes"),
]


@pytest.mark.parametrize("action", RACES)
def test_two_nlbs_synced_at_once_leave_the_node_group_consistent(
    cloud: AWSCloud, world: World, action: str
) -> None:
    group = node_security_group(world)
    lb = lb_of(cloud)
    services = {role: nlb(role, 30080 + i) for i, role in enumerate(ROLES)}
    syncs: dict[str, Callable[[], Any]] = {
        role: (lambda svc=svc: lb.ensure_load_balancer("k", svc, nodes(world)))
        for role, svc in services.items()
    }
    if action == "delete":
        for sync in syncs.values():
            sync()
        syncs = {
            role: (lambda svc=svc: lb.ensure_load_balancer_deleted("k", svc))
            for role, svc in services.items()
        }
    order = _each_waits_for_the_other()
    with watch(order, lb._groups):
        results = order.run(syncs)
    failed = {role: r for role, r in results.items() if isinstance(r, Exception)}
    assert failed == {}
    assert _nlb_rules(world, group) == _expected(services if action == "ensure" else {})
    for svc in services.values():
        lb.ensure_load_balancer_deleted("k", svc)
    assert _nlb_rules(world, group) == set()
