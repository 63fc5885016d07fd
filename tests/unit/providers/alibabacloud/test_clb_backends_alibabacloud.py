"""Which Nodes a classic balancer's groups hold, with which weight, in which group (upstream
backend.go GetNodes / needExcludeFromLB, vgroups.go buildVGroupForServicePort v2.14.0)."""

from __future__ import annotations

from typing import Any

import pytest
from slb_fake import FakeSlb
from test_clb_alibabacloud import A, ensure, service, world

from kccm.cloudprovider import InvalidServiceConfig


def node(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"providerID": f"cn-hangzhou.i-{name}", **spec},
    }


NODES = (
    node("a", {"pool": "web"}),
    node("b", {"pool": "web"}, unschedulable=True),
    node("c", {"pool": "db"}),
    node("d", {"node-role.kubernetes.io/master": ""}),
    node("e", taints=[{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]),
    node("f", {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}),
)


def members(slb: FakeSlb) -> dict[str, int]:
    (group,) = slb.vgroups.values()
    return {k: v["Weight"] for k, v in group["backends"].items()}


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({}, {"i-a": 100, "i-b": 100, "i-c": 100}, id="default"),
        pytest.param(
            {f"{A}remove-unscheduled-backend": "on"}, {"i-a": 100, "i-c": 100}, id="unscheduled"
        ),
        pytest.param(
            {f"{A}backend-label": "pool=web"}, {"i-a": 100, "i-b": 100}, id="backend-label"
        ),
        pytest.param(
            {f"{A}default-weight": "30"}, {"i-a": 30, "i-b": 30, "i-c": 30}, id="default-weight"
        ),
    ],
)
def test_members_and_weights(annotations: dict[str, str], expected: dict[str, int]) -> None:
    slb, lbs = world()
    ensure(lbs, service(annotations), NODES)
    assert members(slb) == expected


@pytest.mark.parametrize(
    "annotations",
    [
        pytest.param({f"{A}default-weight": "101"}, id="weight-range"),
        pytest.param({f"{A}backend-label": "pool"}, id="label-format"),
    ],
)
def test_invalid_backend_settings_are_refused(annotations: dict[str, str]) -> None:
    slb, lbs = world()
    with pytest.raises(InvalidServiceConfig):
        ensure(lbs, service(annotations), NODES)
    assert slb.mutating() == []


def test_ignore_weight_update_leaves_a_changed_weight() -> None:
    slb, lbs = world()
    ensure(lbs, service(), NODES)
    slb.calls.clear()
    ensure(lbs, service({f"{A}default-weight": "50", f"{A}ignore-weight-update": "on"}), NODES)
    assert slb.mutating() == []
    ensure(lbs, service({f"{A}default-weight": "50"}), NODES)
    assert set(members(slb).values()) == {50}


def user_balancer(slb: FakeSlb) -> tuple[str, str]:
    lb_id = slb.add_balancer(LoadBalancerName="user-lb")
    group = slb.call(
        "slb", "CreateVServerGroup", {"LoadBalancerId": lb_id, "VServerGroupName": "mine"}
    )
    member = {"ServerId": "i-user", "Port": 8080, "Weight": 100, "Type": "ecs"}
    slb.vgroups[group["VServerGroupId"]]["backends"]["i-user"] = member
    return lb_id, group["VServerGroupId"]


def test_a_reused_group_gets_the_members_and_weight_and_keeps_the_users() -> None:
    slb, lbs = world()
    lb_id, group_id = user_balancer(slb)
    svc = service(
        {
            f"{A}id": lb_id,
            f"{A}vgroup-port": f"{group_id}:80",
            f"{A}weight": "60",
            f"{A}force-override-listeners": "true",
        }
    )
    ensure(lbs, svc, NODES)
    assert list(slb.vgroups) == [group_id]
    assert members(slb) == {"i-user": 100, "i-a": 20, "i-b": 20, "i-c": 20}
    assert slb.listeners[lb_id][(80, "tcp")]["VServerGroupId"] == group_id
    slb.calls.clear()
    ensure(lbs, svc, NODES)
    assert slb.mutating() == []
    lbs.ensure_load_balancer_deleted("kubernetes", svc)
    assert members(slb) == {"i-user": 100}


def test_a_group_a_service_made_can_not_be_reused() -> None:
    slb, lbs = world()
    lb_id, _ = user_balancer(slb)
    made = slb.call(
        "slb", "CreateVServerGroup", {"LoadBalancerId": lb_id, "VServerGroupName": "k8s/1/x/y/z"}
    )
    svc = service({f"{A}id": lb_id, f"{A}vgroup-port": f"{made['VServerGroupId']}:80"})
    with pytest.raises(InvalidServiceConfig, match="cannot reuse a ccm created vgroup"):
        ensure(lbs, svc, NODES)
