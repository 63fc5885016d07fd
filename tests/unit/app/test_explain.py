"""kccm explain: the rules it words (who handles a Service, the node set, a Node's
initialisation, who serves a class), the CLI's arguments (refused as cobra refuses them) and
the text rendering. The endpoint and the CLI end to end: tests/integration/daemon_e2e/
test_explain_real.py."""

from __future__ import annotations

import io
from typing import Any

import pytest

from kccm.app import cli
from kccm.app.explain_cli import parse, run_explain
from kccm.app.explain_rules import class_owners, handling, node_initialisation, node_set
from kccm.app.explain_text import render
from kccm.controllers.service_predicates import LoadBalancerClasses

EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"
UNINIT = "node.cloudprovider.kubernetes.io/uninitialized"


def svc(**spec: Any) -> dict[str, Any]:
    annotations = spec.pop("annotations", {})
    return {"metadata": {"annotations": annotations}, "spec": {"type": "LoadBalancer", **spec}}


@pytest.mark.parametrize(
    ("service", "classes", "handled", "why"),
    [
        pytest.param(svc(), LoadBalancerClasses(), True, "without spec", id="class-less-is-ours"),
        pytest.param(
            svc(type="NodePort"), LoadBalancerClasses(), False, "NodePort", id="not-a-balancer"
        ),
        pytest.param(
            svc(loadBalancerClass=""),
            LoadBalancerClasses(),
            False,
            "another load-balancer implementation",
            id="even-an-empty-class-is-another-implementations",
        ),
        pytest.param(
            svc(loadBalancerClass="a"),
            LoadBalancerClasses.of(["a"]),
            True,
            "'a' is served here",
            id="served-class",
        ),
        pytest.param(
            svc(),
            LoadBalancerClasses.of(["a"], class_only=True),
            False,
            "serves only spec.loadBalancerClass in [a]",
            id="class-only-leaves-class-less-services",
        ),
    ],
)
def test_handling(
    service: dict[str, Any], classes: LoadBalancerClasses, handled: bool, why: str
) -> None:
    verdict = handling(service, classes)
    assert verdict.handled is handled
    assert why in verdict.why


def test_the_class_annotation_is_noted_not_obeyed() -> None:
    verdict = handling(svc(annotations={"service.kubernetes.io/load-balancer-class": "x"}))
    assert verdict.handled
    assert "is not read" in verdict.notes[0]


def node(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def test_node_set_names_each_exclusion() -> None:
    found = node_set(
        [
            node("a", providerID="p://a"),
            node("b", {EXCLUDE: "true"}),
            node("c", {EXCLUDE: "maybe"}),
            node("d", taints=[{"key": "ToBeDeletedByClusterAutoscaler"}]),
            node("e", {EXCLUDE: "false"}, taints=[{"key": UNINIT}]),
        ]
    )
    assert found.eligible == ("a", "e")
    assert found.excluded == {
        "b": f"label {EXCLUDE}=true",
        "c": f"label {EXCLUDE}='maybe' (not a bool: excludes)",
        "d": "taint ToBeDeletedByClusterAutoscaler (the autoscaler removes it)",
    }
    assert found.uninitialised == ("e",)


@pytest.mark.parametrize(
    ("spec", "initialised", "why"),
    [
        pytest.param({"taints": [{"key": UNINIT}]}, False, "still present", id="tainted"),
        pytest.param({}, False, "no spec.providerID", id="no-provider-id"),
        pytest.param({"providerID": "p://a"}, True, "initialised", id="done"),
        pytest.param(
            {
                "providerID": "p://a",
                "taints": [{"key": "node.cloudprovider.kubernetes.io/shutdown"}],
            },
            True,
            "shut down",
            id="done-but-shut-down",
        ),
    ],
)
def test_node_initialisation(spec: dict[str, Any], initialised: bool, why: str) -> None:
    assert node_initialisation(node("n", **spec))[0] is initialised
    assert why in node_initialisation(node("n", **spec))[1]


def lease(name: str, classes: str, renewed: str, holder: str = "h_1") -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "kube-system",
            "name": name,
            "annotations": {"kccm.io/load-balancer-classes": classes},
        },
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": renewed},
    }


NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
FRESH, OLD = "2027-01-15T08:00:00.000000Z", "2027-01-15T07:00:00.000000Z"


@pytest.mark.parametrize(
    ("leases", "serving", "none"),
    [
        pytest.param([lease("a", "x,y", FRESH)], {"kube-system/a": "h_1"}, False, id="served"),
        pytest.param([lease("a", "x", OLD)], {}, True, id="stale-lease-serves-nothing"),
        pytest.param([lease("a", "xx", FRESH)], {}, True, id="names-are-exact"),
        pytest.param([], {}, True, id="no-lease"),
    ],
)
def test_class_owners(leases: list[dict[str, Any]], serving: dict[str, str], none: bool) -> None:
    owners = class_owners(leases, "x", NOW)
    assert owners["serving"] == serving
    assert ("none" in owners) is none


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        pytest.param(["svc/x"], 'unknown command "svc/x" for "kccm explain"', id="unknown-sub"),
        pytest.param([], "needs a sub-command", id="no-sub-command"),
        pytest.param(["service", "a/b", "c"], "accepts 1 arg(s), received 2", id="stray-arg"),
        pytest.param(["service"], "accepts 1 arg(s), received 0", id="missing-name"),
        pytest.param(["service", "b"], "takes NAMESPACE/NAME", id="service-needs-namespace"),
        pytest.param(["node", "a/b"], "takes a Node NAME", id="node-takes-a-name"),
        pytest.param(["node", "a", "--bogus"], "unknown flag: --bogus", id="unknown-flag"),
        pytest.param(["node", "a", "-o", "yaml"], "text or json", id="unknown-output"),
        pytest.param(["node", "a", "--kubeconfig"], "flag needs an argument", id="flag-value"),
        pytest.param(
            ["openstack-annotations", "a", "b"],
            "accepts at most 1 arg(s), received 2",
            id="preflight-one-namespace",
        ),
    ],
)
def test_arguments_are_refused_by_name_with_exit_2(argv: list[str], error: str) -> None:
    err = io.StringIO()
    assert run_explain(argv, stdout=io.StringIO(), stderr=err) == 2
    assert error in err.getvalue()
    assert "Run 'kccm explain --help' for usage." in err.getvalue()


def test_flags_in_either_form_and_the_help() -> None:
    args = parse(["node", "--output=json", "n1", "--namespace", "ccm", "-ojson"])
    assert (args.kind, args.target, args.output, args.namespace) == ("node", "n1", "json", "ccm")
    out = io.StringIO()
    assert run_explain(["--help"], stdout=out) == 0
    assert "kccm explain service NAMESPACE/NAME" in out.getvalue()


@pytest.mark.parametrize(
    ("argv", "namespace"),
    [
        pytest.param(["openstack-annotations"], "", id="every-namespace"),
        pytest.param(["openstack-annotations", "shop", "-o", "json"], "shop", id="one-namespace"),
    ],
)
def test_the_preflight_takes_an_optional_namespace(argv: list[str], namespace: str) -> None:
    args = parse(argv)
    assert (args.kind, args.target) == ("openstack-annotations", namespace)


def test_explain_is_a_sub_command_not_the_daemon(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", "svc/x"]) == 2
    err = capsys.readouterr().err
    assert 'unknown command "svc/x" for "kccm explain"' in err
    assert "--cloud-provider" not in err


def test_text_rendering_of_a_failed_sync() -> None:
    answer = {
        "kind": "service",
        "key": "ns/web",
        "leader": {"identity": "vm_1"},
        "provider": "fake",
        "now": 100.0,
        "handled": True,
        "why": "type LoadBalancer without spec.loadBalancerClass",
        "syncs": [
            {
                "controller": "service-lb-controller",
                "at": 90.0,
                "ok": False,
                "attempts": 3,
                "reason": "quota-exceeded",
                "message": "too many balancers",
                "next_retry_at": 110.0,
                "detail": {"eligible_nodes": 0, "excluded": {"n1": "label x=true"}},
            }
        ],
        "nodes": {"eligible": 0, "excluded": {"n1": "label x=true"}},
        "balancer": {"available": False, "note": "provider fake does not describe its balancers"},
        "call_budget": [
            {"group": "load_balancer", "recent_rate": 0.1, "budget_qps": 2, "throttled_for": 4}
        ],
    }
    assert render(answer).splitlines() == [
        "Service ns/web: leader vm_1, provider fake",
        "  handled here: type LoadBalancer without spec.loadBalancerClass",
        "  ingress: <pending>",
        "  last sync (service-lb-controller): FAILED 10s ago, attempt 3: quota-exceeded: "
        "too many balancers; next retry in 10s",
        "  nodes: 0 eligible; excluded: n1 (label x=true)",
        "  balancer: provider fake does not describe its balancers",
        "  call budget (last 60s): load_balancer 0.1/s (budget 2/s) THROTTLED for 4s",
    ]
