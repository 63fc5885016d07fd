"""The share-group annotation and the framework's admission rules (cloudprovider/sharing.py,
controllers/service_sharing.py): which Services form a group, and why a later one is refused."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.cloudprovider.errors import InvalidServiceConfig
from kccm.cloudprovider.sharing import ANNOTATION_SHARE_GROUP, ShareGroup, share_group_of
from kccm.controllers.service_sharing import group_members, sharing_conflict

GROUP = ShareGroup("ns", "web")


def svc(
    name: str,
    group: str | None = "web",
    *,
    ports: tuple[tuple[int, str], ...] = ((80, "TCP"),),
    created: str = "2026-11-28T10:00:00Z",
    namespace: str = "ns",
    kind: str = "LoadBalancer",
    deleting: bool = False,
    ip: str = "",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "creationTimestamp": created}
    if group is not None:
        meta["annotations"] = {ANNOTATION_SHARE_GROUP: group}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-28T11:00:00Z"
    spec: dict[str, Any] = {
        "type": kind,
        "ports": [{"port": p, "protocol": proto} for p, proto in ports],
    }
    if ip:
        spec["loadBalancerIP"] = ip
    return {"metadata": meta, "spec": spec}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("web", GROUP),
        ("a", ShareGroup("ns", "a")),
        ("web-2", ShareGroup("ns", "web-2")),
        ("x" * 63, ShareGroup("ns", "x" * 63)),
    ],
    ids=["absent", "plain", "one-letter", "with-dash", "63-chars"],
)
def test_a_valid_group_names_namespace_and_label(value: str | None, expected: object) -> None:
    assert share_group_of(svc("s", value)) == expected


@pytest.mark.parametrize(
    "value",
    ["", "Web", "-web", "web-", "a.b", "x" * 64, "web group"],
    ids=["empty", "upper-case", "leading-dash", "trailing-dash", "dot", "64-chars", "space"],
)
def test_an_invalid_group_is_refused_naming_the_annotation(value: str) -> None:
    with pytest.raises(InvalidServiceConfig, match=ANNOTATION_SHARE_GROUP) as err:
        share_group_of(svc("s", value))
    assert err.value.key == ANNOTATION_SHARE_GROUP


def test_members_are_the_groups_load_balancers_by_creation_then_name() -> None:
    services = [
        svc("late", created="2026-11-28T10:00:05Z"),
        svc("b-same-second"),
        svc("a-same-second"),
        svc("other-namespace", namespace="other"),
        svc("other-group", "api"),
        svc("no-group", None),
        svc("cluster-ip", kind="ClusterIP"),
        svc("going", deleting=True),
        svc("bad-group", "Web"),
    ]
    names = [s["metadata"]["name"] for s in group_members(services, GROUP)]
    assert names == ["a-same-second", "b-same-second", "late"]


def _by_ip(service: dict[str, Any]) -> dict[str, str]:
    ip = service["spec"].get("loadBalancerIP")
    return {"spec.loadBalancerIP": ip} if ip else {}


CONFLICTS: dict[str, tuple[dict[str, Any], list[dict[str, Any]], list[str] | None]] = {
    "first-of-its-group": (svc("b"), [], None),
    "other-ports": (svc("b", ports=((443, "TCP"),)), [svc("a")], None),
    "same-port-other-protocol": (svc("b", ports=((80, "UDP"),)), [svc("a")], None),
    "port-clash-names-the-owner": (
        svc("c", ports=((443, "TCP"), (80, "TCP"))),
        [svc("a", ports=((8080, "TCP"),)), svc("b")],
        ["port 80/TCP", "ns/b", "came first"],
    ),
    "settings-differ-names-the-first": (
        svc("b", ports=((443, "TCP"),), ip="10.0.0.9"),
        [svc("a")],
        ["spec.loadBalancerIP", "'10.0.0.9' vs '(unset)'", "ns/a"],
    ),
    "equal-settings": (
        svc("b", ports=((443, "TCP"),), ip="10.0.0.9"),
        [svc("a", ip="10.0.0.9")],
        None,
    ),
}


@pytest.mark.parametrize("case", CONFLICTS.values(), ids=CONFLICTS.keys())
def test_a_later_service_is_refused_naming_what_and_whom(
    case: tuple[dict[str, Any], list[dict[str, Any]], list[str] | None],
) -> None:
    service, earlier, expected = case
    why = sharing_conflict(service, earlier, _by_ip, GROUP)
    if expected is None:
        assert why is None
    else:
        assert why is not None
        for part in expected:
            assert part in why
