"""``kccm explain service``'s share-group part (explain_rules.share_group, explain_text): the
group, its members in the order that decides who keeps a port, or why there is none."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.app.explain_rules import share_group
from kccm.app.explain_text import render
from kccm.cloudprovider.sharing import ANNOTATION_SHARE_GROUP


def svc(name: str, group: str | None, created: str = "2026-11-28T10:00:00Z") -> dict[str, Any]:
    annotations = {} if group is None else {ANNOTATION_SHARE_GROUP: group}
    return {
        "metadata": {
            "name": name,
            "namespace": "d",
            "annotations": annotations,
            "creationTimestamp": created,
        },
        "spec": {"type": "LoadBalancer"},
    }


CLUSTER = [svc("b", "web"), svc("a", "web", "2026-11-28T10:00:09Z"), svc("c", "api")]

EXPLAINED = {
    "no-annotation": (svc("x", None), True, None, None),
    "member": (CLUSTER[0], True, ["d/b", "d/a"], "one balancer and one address for the 2"),
    "provider-without-sharing": (CLUSTER[0], False, ["d/b", "d/a"], "not supported by provider"),
    "invalid": (svc("x", "Web"), True, [], "not a valid group name"),
}


@pytest.mark.parametrize(
    ("service", "supported", "members", "says"), EXPLAINED.values(), ids=EXPLAINED.keys()
)
def test_explain_names_the_group_and_its_members_in_order(
    service: dict[str, Any], supported: bool, members: list[str] | None, says: str | None
) -> None:
    answer = share_group(service, CLUSTER, supported, "fake")
    if members is None:
        assert answer is None
        return
    assert answer is not None
    assert answer["members"] == members
    assert says is not None
    assert says in answer["note"]


def test_the_text_lists_the_members() -> None:
    shared = share_group(CLUSTER[0], CLUSTER, True, "local")
    text = render({"kind": "service", "key": "d/b", "handled": True, "share_group": shared})
    assert "  share group: one balancer and one address" in text
    assert "    member: d/b\n    member: d/a" in text
