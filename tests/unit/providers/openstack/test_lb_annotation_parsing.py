"""Every annotation OCCM parses is parsed as OCCM v1.36.0 parses it
(``pkg/openstack/loadbalancer.go``): one row per annotation and spelling, each naming the Go
function whose rule it follows. A value OCCM cannot parse gives OCCM's default, and kccm says
so with one ``InvalidAnnotation`` Warning naming the annotation, the value and the value used;
nothing is refused that OCCM would have synced."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, lb_world, service

from kccm.cloudprovider.annotations import INVALID_ANNOTATION
from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.providers.openstack.loadbalancer.annotations import read_annotations

GET_BOOL = "getBoolFromServiceAnnotation"
GET_INT = "getIntFromServiceAnnotation"
GET_PROXY = "getProxyProtocolFromServiceAnnotation"

BOOLS = {
    "internal": ann.INTERNAL,
    "enable_health_monitor": ann.ENABLE_HEALTH_MONITOR,
    "x_forwarded_for": ann.X_FORWARDED_FOR,
    "keep_floating_ip": ann.KEEP_FLOATING_IP,
}
BOOL_SPELLINGS = [
    # the text, what OCCM's switch gives (None: the default, logged)
    ("true", True),
    ("false", False),
    ("True", None),
    ("TRUE", None),
    ("1", None),
    ("0", None),
    ("t", None),
    ("yes", None),
    ("on", None),
    ("", None),
    (" true", None),
]
INTS = {
    "conn_limit": ann.CONN_LIMIT,
    "timeout_client_data": ann.TIMEOUT_CLIENT_DATA,
    "timeout_member_connect": ann.TIMEOUT_MEMBER_CONNECT,
    "timeout_member_data": ann.TIMEOUT_MEMBER_DATA,
    "timeout_tcp_inspect": ann.TIMEOUT_TCP_INSPECT,
    "health_monitor_delay": ann.HEALTH_MONITOR_DELAY,
    "health_monitor_timeout": ann.HEALTH_MONITOR_TIMEOUT,
    "health_monitor_max_retries": ann.HEALTH_MONITOR_MAX_RETRIES,
    "health_monitor_max_retries_down": ann.HEALTH_MONITOR_MAX_RETRIES_DOWN,
}
INT_SPELLINGS = [
    # the text, what strconv.Atoi gives (None: an error, so the default)
    ("42", 42),
    ("-1", -1),
    ("+5", 5),
    ("007", 7),
    ("9223372036854775807", 9223372036854775807),
    ("9223372036854775808", None),
    ("1.5", None),
    ("0x10", None),
    ("1_000", None),
    ("5s", None),
    (" 3", None),
    ("", None),
    ("\u0663", None),  # a non-ASCII digit
]
PROXY_SPELLINGS = [
    # the text, the pool protocol OCCM's switch gives (warned: not one of its four cases)
    ("true", "PROXY", False),
    ("v1", "PROXY", False),
    ("v2", "PROXYV2", False),
    ("false", None, False),
    ("enabled", None, True),
    ("True", None, True),
    ("V2", None, True),
    ("", None, True),
]

ROWS = [
    pytest.param(field, key, text, want, GET_BOOL, id=f"{field}-{text!r}")
    for field, key in BOOLS.items()
    for text, want in BOOL_SPELLINGS
] + [
    pytest.param(field, key, text, want, GET_INT, id=f"{field}-{text!r}")
    for field, key in INTS.items()
    for text, want in INT_SPELLINGS
]


def _default(upstream: str) -> Any:
    return {GET_BOOL: False, GET_INT: 1234}[upstream]


@pytest.mark.parametrize(("field", "key", "text", "want", "upstream"), ROWS)
def test_bool_and_int_annotations_read_as_occm(
    field: str, key: str, text: str, want: Any, upstream: str
) -> None:
    """``want`` None: OCCM's ``upstream`` falls back to its default; kccm uses the same and
    warns once."""
    default = _default(upstream)
    notes = read_annotations(service(annotations={key: text}))
    with collect_service_warnings() as warnings:
        got = getattr(notes, field).get(default)
    assert got == (default if want is None else want)
    messages = [(w.reason, w.message) for w in warnings]
    if want is not None:
        assert messages == []
        return
    [(reason, message)] = messages
    assert reason == INVALID_ANNOTATION
    shown = "false" if upstream == GET_BOOL else str(default)
    assert message.startswith(f"annotation {key}: invalid value ")
    assert message.endswith(f"; using the default {shown}")


@pytest.mark.parametrize("default", [True, False], ids=["default-true", "default-false"])
def test_an_unparsable_bool_gives_the_default_it_is_read_with(default: bool) -> None:
    """``getBoolFromServiceAnnotation`` returns ``defaultSetting``: ``enable-health-monitor``'s
    is ``create-monitor``, so ``True`` with ``create-monitor = true`` is true."""
    notes = read_annotations(service(annotations={ann.ENABLE_HEALTH_MONITOR: "True"}))
    with collect_service_warnings():
        assert notes.enable_health_monitor.get(default) is default


@pytest.mark.parametrize(
    ("text", "want", "warned"),
    [pytest.param(t, w, x, id=f"proxy-protocol-{t!r}") for t, w, x in PROXY_SPELLINGS],
)
def test_proxy_protocol_reads_as_occm(text: str, want: str | None, warned: bool) -> None:
    """``getProxyProtocolFromServiceAnnotation``: anything but its four cases is off."""
    notes = read_annotations(service(annotations={ann.PROXY_PROTOCOL: text}))
    with collect_service_warnings() as warnings:
        assert notes.proxy_protocol.get(None) == want
    messages = [w.message for w in warnings]
    assert messages == (
        [
            f'annotation {ann.PROXY_PROTOCOL}: invalid value "{text}": want one of true, v1, '
            "v2, false; using the default false"
        ]
        if warned
        else []
    )


@pytest.mark.parametrize("field", [*BOOLS, *INTS, "proxy_protocol"])
def test_an_absent_annotation_gives_the_default_silently(field: str) -> None:
    notes = read_annotations(service())
    with collect_service_warnings() as warnings:
        assert getattr(notes, field).get(7) == 7
    assert len(warnings) == 0


# -- through the balancer code ---------------------------------------------------------------


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world(servers=1) as made:
        yield made


def test_values_occm_ignores_never_stop_a_sync(world: LBWorld) -> None:
    """``True``, ``1``, ``yes``, ``enabled``, ``ten``: OCCM syncs with its defaults (external,
    TCP, no proxy protocol, no limit); so does kccm, ensure and node update alike, each call
    with one Warning per value."""
    balancers = world.balancers()
    values = {
        ann.INTERNAL: "True",
        ann.X_FORWARDED_FOR: "1",
        ann.ENABLE_HEALTH_MONITOR: "yes",
        ann.PROXY_PROTOCOL: "enabled",
        ann.CONN_LIMIT: "ten",
    }
    svc = service(annotations=values)
    with collect_service_warnings() as warnings:
        balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert sorted(w.message.split(":")[0] for w in warnings) == sorted(
        f"annotation {key}" for key in values
    )
    lb = world.lb_named(svc)
    assert balancers.neutron.floating_ip_of_port(lb["vip_port_id"]) is not None
    (listener,) = balancers.octavia.listeners(lb["id"])
    assert (listener["protocol"], listener["connection_limit"]) == ("TCP", -1)
    (pool,) = balancers.octavia.pools(lb["id"])
    assert (pool["protocol"], pool.get("healthmonitor_id")) == ("TCP", None)
    written = world.with_written(svc)
    with collect_service_warnings() as warnings:
        balancers.update_load_balancer(CLUSTER, written, world.nodes)
    assert {w.reason for w in warnings} == {INVALID_ANNOTATION}
    balancers.ensure_load_balancer_deleted(CLUSTER, written)


def test_an_unparsable_keep_floatingip_deletes_the_floating_ip(world: LBWorld) -> None:
    """OCCM's ``ensureLoadBalancerDeleted`` reads ``keep-floatingip`` with default false: an
    unparsable value deletes the floating IP it made (kccm used to keep it)."""
    balancers = world.balancers()
    svc = service(annotations={ann.KEEP_FLOATING_IP: "yes"})
    with collect_service_warnings():
        balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    lb = world.lb_named(svc)
    fip = balancers.neutron.floating_ip_of_port(lb["vip_port_id"])
    assert fip is not None
    with collect_service_warnings() as warnings:
        balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
    assert [w.message.split(":")[0] for w in warnings] == [f"annotation {ann.KEEP_FLOATING_IP}"]
    assert fip["id"] not in world.emu.admin.state().get("floatingips", ())


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        pytest.param("role=edge, zone=", {"role": "edge", "zone": ""}, id="pairs"),
        pytest.param("edge,,", {"edge": ""}, id="key-only-and-empty-items"),
        pytest.param("a=b=c", {"a": "b=c"}, id="value-keeps-equals"),
        pytest.param("=edge", {"": "edge"}, id="empty-key-kept"),  # matches no Node
    ],
)
def test_node_selector_as_string_to_map(text: str, wanted: dict[str, str]) -> None:
    """``getKeyValueFromServiceAnnotation`` + ``util.StringToMap``."""
    notes = read_annotations(service(annotations={ann.NODE_SELECTOR: text}))
    assert notes.node_selectors("") == wanted
