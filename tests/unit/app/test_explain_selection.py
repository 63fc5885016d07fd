"""``kccm explain`` of a Service with a target-node selector: the chosen Nodes, each Node
left out with why (the selector or upstream's rules), and an invalid selector said so."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.api.wellknown import ANNOTATION_TARGET_NODE_SELECTOR as SELECTOR
from kccm.app.explain_rules import node_set
from kccm.app.explain_text import render

EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"providerID": f"p://{name}"}}


def svc(selector: str | None) -> dict[str, Any]:
    annotations = {} if selector is None else {SELECTOR: selector}
    return {"metadata": {"name": "web", "namespace": "ns", "annotations": annotations}}


NODES = [
    node("a", pool="web"),
    node("b", pool="web"),
    node("c", pool="db"),
    node("d", pool="web", **{EXCLUDE: "true"}),
]


@pytest.mark.parametrize(
    ("selector", "eligible", "excluded"),
    [
        pytest.param(None, ("a", "b", "c"), {"d"}, id="no-selector-upstream-rules"),
        pytest.param("pool=web", ("a", "b"), {"c", "d"}, id="selector-picks-two"),
        pytest.param("pool", ("a", "b", "c"), {"d"}, id="upstream-rule-wins-over-a-match"),
    ],
)
def test_the_chosen_set_and_why_the_others_are_out(
    selector: str | None, eligible: tuple[str, ...], excluded: set[str]
) -> None:
    found = node_set(NODES, svc(selector))
    assert found.eligible == eligible
    assert set(found.excluded) == excluded
    assert found.excluded["d"] == f"label {EXCLUDE}=true"
    if "c" in excluded:
        assert found.excluded["c"] == f"not selected by annotation {SELECTOR}={selector}"
    assert found.selector == selector


def test_an_invalid_selector_is_said_and_leaves_the_upstream_set() -> None:
    found = node_set(NODES, svc("pool in web"))
    assert found.eligible == ("a", "b", "c")
    assert found.selector is not None
    assert found.selector.startswith(f"invalid: annotation {SELECTOR}='pool in web' is not a")
    assert found.selector.endswith("the balancer keeps the Nodes it had")


def test_the_text_names_the_selector_and_the_chosen_nodes() -> None:
    body = {
        "kind": "service",
        "key": "ns/web",
        "now": 0,
        "handled": True,
        "why": "type LoadBalancer",
        "nodes": {
            "eligible": 2,
            "eligible_names": ["a", "b"],
            "excluded": {"c": f"not selected by annotation {SELECTOR}=pool=web"},
            "selector": "pool=web",
        },
    }
    text = render(body)
    assert "  target-node selector: pool=web\n" in text
    assert f"  nodes: 2 eligible (a, b); excluded: c (not selected by annotation {SELECTOR}" in text
