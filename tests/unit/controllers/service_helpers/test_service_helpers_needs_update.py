"""Pure helpers of the service controller, as upstream's tables: TestNeedsUpdate."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from service_objects import (
    BASE,
    svc,
    with_meta,
)

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.controllers.service_predicates import (
    needs_update,
)

# -- TestNeedsUpdate ----------------------------------------------------------------------------


TWO_PORTS = [
    {"name": "a", "protocol": "TCP", "port": 80, "targetPort": 80},
    {"name": "b", "protocol": "TCP", "port": 81, "targetPort": 81},
]


@pytest.mark.parametrize(
    ("old", "new", "update", "logged"),
    [
        pytest.param(
            svc(type="ClusterIP"), svc(type="NodePort"), False, None, id="neither-wants-an-lb"
        ),
        pytest.param(
            svc(type="ClusterIP"),
            BASE,
            True,
            "Service default/s wants load balancer changed from ClusterIP to LoadBalancer",
            id="type-changed-to-loadbalancer",
        ),
        pytest.param(
            BASE,
            svc(loadBalancerClass="x.io/lb"),
            True,
            "Service default/s wants load balancer changed from LoadBalancer to LoadBalancer",
            id="class-set-changes-eligibility",
        ),
        pytest.param(
            BASE,
            svc(loadBalancerSourceRanges=["10.0.0.0/8"]),
            True,
            "Service default/s LoadBalancerSourceRanges changed from [] to [10.0.0.0/8]",
            id="source-ranges-changed",
        ),
        pytest.param(
            BASE,
            svc(ports=[{"name": "http", "protocol": "UDP", "port": 80, "targetPort": 8080}]),
            True,
            None,
            id="port-protocol-changed",
        ),
        pytest.param(
            BASE,
            svc(ports=[{"name": "web", "protocol": "TCP", "port": 80, "targetPort": 8080}]),
            True,
            None,
            id="port-name-changed",
        ),
        pytest.param(
            BASE,
            svc(ports=[{"name": "http", "protocol": "TCP", "port": 81, "targetPort": 8080}]),
            True,
            None,
            id="port-number-changed",
        ),
        pytest.param(
            BASE,
            svc(
                ports=[
                    {
                        "name": "http",
                        "protocol": "TCP",
                        "port": 80,
                        "targetPort": 8080,
                        "nodePort": 30001,
                    }
                ]
            ),
            True,
            None,
            id="node-port-changed",
        ),
        pytest.param(
            BASE,
            svc(ports=[{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 9090}]),
            True,
            None,
            id="target-port-changed",
        ),
        pytest.param(
            BASE,
            svc(
                ports=[
                    {
                        "name": "http",
                        "protocol": "TCP",
                        "port": 80,
                        "targetPort": 8080,
                        "appProtocol": "http",
                    }
                ]
            ),
            True,
            None,
            id="app-protocol-changed",
        ),
        pytest.param(
            svc(ports=TWO_PORTS),
            svc(ports=list(reversed(TWO_PORTS))),
            True,
            None,
            id="ports-reordered-is-a-change",
        ),
        pytest.param(BASE, svc(ports=TWO_PORTS), True, None, id="port-added"),
        pytest.param(BASE, svc(sessionAffinity="ClientIP"), True, None, id="session-affinity"),
        pytest.param(
            BASE,
            svc(sessionAffinityConfig={"clientIP": {"timeoutSeconds": 10}}),
            True,
            None,
            id="session-affinity-config",
        ),
        pytest.param(
            BASE,
            svc(loadBalancerIP="1.2.3.4"),
            True,
            "Service default/s LoadBalancerIP changed from  to 1.2.3.4",
            id="load-balancer-ip-changed",
        ),
        pytest.param(
            BASE,
            svc(externalIPs=["1.1.1.1"]),
            True,
            "Service default/s ExternalIPs' count changed from 0 to 1",
            id="external-ip-added",
        ),
        pytest.param(
            svc(externalIPs=["1.1.1.1"]),
            svc(externalIPs=["2.2.2.2"]),
            True,
            "Service default/s ExternalIPs[0] changed from 1.1.1.1 to 2.2.2.2",
            id="external-ip-replaced",
        ),
        pytest.param(
            BASE,
            with_meta(BASE, annotations={"a": "b"}),
            True,
            None,
            id="annotation-added",
        ),
        pytest.param(
            with_meta(BASE, annotations={"a": "b"}),
            with_meta(BASE, annotations={"a": "c"}),
            True,
            None,
            id="annotation-value-changed",
        ),
        pytest.param(
            BASE,
            with_meta(BASE, uid="uid-2"),
            True,
            "Service default/s UID changed from uid-1 to uid-2",
            id="uid-changed",
        ),
        pytest.param(
            BASE,
            svc(externalTrafficPolicy="Local"),
            True,
            "Service default/s ExternalTrafficPolicy changed from Cluster to Local",
            id="external-traffic-policy-changed",
        ),
        pytest.param(
            BASE,
            svc(healthCheckNodePort=30123),
            True,
            "Service default/s HealthCheckNodePort changed from 0 to 30123",
            id="health-check-node-port-changed",
        ),
        pytest.param(
            BASE,
            svc(ipFamilies=["IPv4", "IPv6"]),
            True,
            "Service default/s IPFamilies' count changed from 1 to 2",
            id="ip-families-count-changed",
        ),
        pytest.param(
            BASE, svc(ipFamilies=["IPv6"]), False, None, id="ip-family-swap-same-count-no-update"
        ),
        pytest.param(
            BASE, with_meta(BASE, labels={"a": "b"}), False, None, id="labels-do-not-count"
        ),
        pytest.param(
            BASE,
            with_meta(BASE, finalizers=[FINALIZER_LB_CLEANUP]),
            False,
            None,
            id="finalizers-do-not-count",
        ),
        pytest.param(
            BASE, svc(internalTrafficPolicy="Local"), False, None, id="itp-does-not-count"
        ),
        pytest.param(
            BASE,
            svc(allocateLoadBalancerNodePorts=False),
            False,
            None,
            id="allocate-node-ports-does-not-count",
        ),
        pytest.param(
            BASE,
            {**BASE, "status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}]}}},
            False,
            None,
            id="status-does-not-count",
        ),
        pytest.param(BASE, copy.deepcopy(BASE), False, None, id="resync-of-same-object"),
    ],
)
def test_needs_update(
    old: dict[str, Any],
    new: dict[str, Any],
    update: bool,
    logged: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """v0.36.3 records no Event here: the reasons upstream logs at V(2) are debug logs."""
    with caplog.at_level(logging.DEBUG, logger="kccm.controllers.service_predicates"):
        assert needs_update(old, new) is update
    assert [r.getMessage() for r in caplog.records] == ([] if logged is None else [logged])


@pytest.mark.parametrize(
    ("old", "new", "update"),
    [
        pytest.param(
            with_meta(BASE, annotations={"a": "b"}),
            with_meta(BASE, annotations={"a": "b", "kccm/hash": "x"}),
            False,
            id="ignored-annotation-added",
        ),
        pytest.param(
            with_meta(BASE, annotations={"a": "b", "kccm/hash": "x"}),
            with_meta(BASE, annotations={"a": "c", "kccm/hash": "y"}),
            True,
            id="other-annotation-still-counts",
        ),
    ],
)
def test_needs_update_ignores_the_given_annotations(
    old: dict[str, Any], new: dict[str, Any], update: bool
) -> None:
    assert needs_update(old, new, ignored_annotations={"kccm/hash"}) is update
