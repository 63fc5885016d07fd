"""The pre-flight's rules (``kccm explain openstack-annotations``): one row per kind of
annotation value, what OCCM v1.36.0 does with it and what kccm does; values both read alike
are not listed."""

from __future__ import annotations

from typing import Any

import pytest
from os_lb_support import ann, service

from kccm.app.explain_preflight import render_preflight
from kccm.providers.openstack.loadbalancer.preflight import checked_services, findings

ROWS = [
    # id, annotation, value, None (not listed) or (differs, words of OCCM's column)
    ("bool-true", ann.X_FORWARDED_FOR, "true", None),
    ("bool-True", ann.X_FORWARDED_FOR, "True", (False, "never read as true")),
    ("bool-0", ann.KEEP_FLOATING_IP, "0", (False, "the default is used (false)")),
    ("bool-internal", ann.INTERNAL, "yes", (False, "internal-lb")),
    ("bool-monitor", ann.ENABLE_HEALTH_MONITOR, "on", (False, "create-monitor")),
    ("int-ok", ann.CONN_LIMIT, "+100", None),
    ("int-bad", ann.CONN_LIMIT, "100k", (False, "strconv.Atoi fails: the default is used (-1)")),
    ("int-empty", ann.HEALTH_MONITOR_DELAY, "", (False, "monitor-delay")),
    ("proxy-v2", ann.PROXY_PROTOCOL, "v2", None),
    ("proxy-enabled", ann.PROXY_PROTOCOL, "enabled", (False, "no proxy protocol")),
    ("lb-method-ok", ann.LB_METHOD, "SOURCE_IP", None),
    ("lb-method-empty", ann.LB_METHOD, "", None),
    ("lb-method-bad", ann.LB_METHOD, "round_robin", (True, "Octavia")),
    ("text", ann.FLOATING_SUBNET, "public-{a,b}", None),
    ("unknown", "loadbalancer.openstack.org/keep-floating-ip", "true", (False, "not read")),
    ("other-prefix", "example.com/anything", "True", None),
]


@pytest.mark.parametrize(
    ("key", "value", "wanted"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_findings(key: str, value: str, wanted: tuple[bool, str] | None) -> None:
    found = findings(service(annotations={key: value}))
    if wanted is None:
        assert found == []
        return
    [finding] = found
    assert (finding.service, finding.annotation, finding.value) == (
        "default/web",
        key,
        f'"{value}"',
    )
    assert finding.differs is wanted[0]
    assert wanted[1] in finding.occm


def test_only_occms_services_are_checked() -> None:
    services: list[dict[str, Any]] = [
        service(name="a"),
        service(name="b", loadBalancerClass="example.com/lb"),
        {**service(name="c"), "spec": {"type": "ClusterIP"}},
    ]
    assert [s["metadata"]["name"] for s in checked_services(services)] == ["a"]


def test_text_output_puts_differences_first() -> None:
    svc = service(annotations={ann.LB_METHOD: "RANDOM", ann.INTERNAL: "True"})
    answer = {"services_checked": 1, "findings": [f.__dict__ for f in findings(svc)]}
    text = render_preflight(answer)
    assert text.splitlines()[0] == (
        "1 LoadBalancer Services checked against OCCM v1.36.0: 1 annotation(s) read "
        "differently, 1 value(s) read the same way that OCCM did not use either"
    )
    assert text.index("Read differently:") < text.index(ann.LB_METHOD) < text.index(ann.INTERNAL)
