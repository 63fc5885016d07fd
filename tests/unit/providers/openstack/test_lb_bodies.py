"""The request bodies, field for field, as OCCM v1.36.0 sends them through gophercloud v2
(``loadbalancers.CreateOpts``, ``listeners.CreateOpts``, ``pools.CreateOpts``,
``pools.CreateMemberOpts``, ``monitors.CreateOpts``: pointer fields always present, plain
fields with ``omitempty`` left out when empty). The emulator's request log has no bodies, so
these are checked here, on the pure builders."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.providers.openstack.config_sections import LoadBalancerOpts
from kccm.providers.openstack.loadbalancer.create import create_body
from kccm.providers.openstack.loadbalancer.listeners import listener_changes
from kccm.providers.openstack.loadbalancer.members import build_members, member_key
from kccm.providers.openstack.loadbalancer.octavia import Octavia
from kccm.providers.openstack.loadbalancer.svcconf import ServiceConfig
from kccm.util.clock import REAL_CLOCK

NAME = "kube_service_k8s_default_web"
NODE = {
    "metadata": {"name": "n1"},
    "spec": {"providerID": "openstack:///s1"},
    "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]},
}


class VersionOnly:
    """Answers version discovery only (what ``Octavia.supports`` asks)."""

    def __init__(self, minor: int) -> None:
        self.minor = minor

    def request(self, service: str, method: str, path: str, **_: Any) -> Any:
        assert (method, path) == ("GET", "/")
        return {"versions": [{"id": f"v2.{self.minor}"}]}


def _svc(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "default", "uid": "u"},
        "spec": {"ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}], **spec},
    }


def _conf(**values: Any) -> ServiceConfig:
    base: dict[str, Any] = {
        "lb_name": NAME,
        "support_tags": True,
        "subnet_id": "sub",
        "member_subnet_id": "sub",
        "timeouts": {
            "timeout_client_data": 50000,
            "timeout_member_connect": 5000,
            "timeout_member_data": 50000,
            "timeout_tcp_inspect": 0,
        },
        "allowed_cidrs": ["0.0.0.0/0"],
        "monitor_delay": 5,
        "monitor_timeout": 3,
        "monitor_max_retries": 1,
        "monitor_max_retries_down": 3,
    }
    return ServiceConfig(**{**base, **values})


LISTENER = {
    "name": f"listener_0_{NAME}",
    "protocol": "TCP",
    "protocol_port": 80,
    "connection_limit": -1,
    "tags": [NAME],
    "timeout_client_data": 50000,
    "timeout_member_connect": 5000,
    "timeout_member_data": 50000,
    "timeout_tcp_inspect": 0,
    "allowed_cidrs": ["0.0.0.0/0"],
}
POOL = {"name": f"pool_0_{NAME}", "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}
MEMBER = {"address": "10.0.0.5", "protocol_port": 30080, "name": "n1", "subnet_id": "sub"}
TOP = {
    "name": NAME,
    "description": "Kubernetes external service default/web from cluster k8s",
    "provider": "amphora",
    "tags": [NAME],
    "vip_subnet_id": "sub",
}

CASES = [
    # id, Octavia minor version, options, config, spec, the body
    (
        "default",
        30,
        {},
        {},
        {},
        {**TOP, "listeners": [{**LISTENER, "default_pool": {**POOL, "members": [MEMBER]}}]},
    ),
    (
        "local-policy-monitor",
        30,
        {},
        {"enable_monitor": True, "health_check_node_port": 32000},
        {"sessionAffinity": "ClientIP"},
        {
            **TOP,
            "listeners": [
                {
                    **LISTENER,
                    "default_pool": {
                        **POOL,
                        "session_persistence": {"type": "SOURCE_IP"},
                        "members": [{**MEMBER, "monitor_port": 32000}],
                        "healthmonitor": {
                            "name": f"monitor_0_{NAME}",
                            "type": "HTTP",
                            "delay": 5,
                            "timeout": 3,
                            "max_retries": 1,
                            "max_retries_down": 3,
                            "url_path": "/healthz",
                            "http_method": "GET",
                            "expected_codes": "200",
                        },
                    },
                }
            ],
        },
    ),
    (
        "octavia-2.0",
        0,
        {},
        {"support_tags": False, "timeouts": {}, "allowed_cidrs": []},
        {},
        {
            "name": NAME,
            "description": TOP["description"],
            "provider": "amphora",
            "vip_subnet_id": "sub",
            "listeners": [
                {
                    "name": f"listener_0_{NAME}",
                    "protocol": "TCP",
                    "protocol_port": 80,
                    "connection_limit": -1,
                    "default_pool": {**POOL, "members": [MEMBER]},
                }
            ],
        },
    ),
    (
        "serial-internal-ip",
        30,
        {"provider_requires_serial_api_calls": True},
        {"internal": True},
        {"loadBalancerIP": "10.0.0.50"},
        {**TOP, "vip_address": "10.0.0.50"},
    ),
]


@pytest.mark.parametrize(
    ("minor", "opts", "conf", "spec", "wanted"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_create_body(
    minor: int, opts: dict[str, Any], conf: dict[str, Any], spec: dict[str, Any], wanted: Any
) -> None:
    octavia = Octavia(VersionOnly(minor), REAL_CLOCK)  # type: ignore[arg-type]
    config = _conf(**conf)
    body = create_body(octavia, NAME, "k8s", _svc(**spec), [NODE], config, LoadBalancerOpts(**opts))
    assert body == wanted


UPDATES = [
    # id, the listener as Octavia has it, the PUT body ensureOctaviaListener sends
    ("unchanged", {**LISTENER}, {}),
    # upstream copies the old tags into a nil slice: the PUT carries the Service's tag alone
    ("tag-missing", {**LISTENER, "tags": ["other"]}, {"tags": [NAME]}),
    ("conn-limit", {**LISTENER, "connection_limit": 5}, {"connection_limit": -1}),
    (
        "timeouts-and-cidrs",
        {**LISTENER, "timeout_member_data": 1, "allowed_cidrs": ["10.0.0.0/8"]},
        {"timeout_member_data": 50000, "allowed_cidrs": ["0.0.0.0/0"]},
    ),
    ("cidr-order-ignored", {**LISTENER, "allowed_cidrs": ["0.0.0.0/0"]}, {}),
    (
        "xff-removed",
        {**LISTENER, "insert_headers": {"X-Forwarded-For": "true", "X-Other": "1"}},
        {"insert_headers": {"X-Other": "1"}},
    ),
    ("null-tls-ref-is-empty", {**LISTENER, "default_tls_container_ref": None}, {}),
]


@pytest.mark.parametrize(
    ("listener", "wanted"), [u[1:] for u in UPDATES], ids=[u[0] for u in UPDATES]
)
def test_listener_update(listener: dict[str, Any], wanted: dict[str, Any]) -> None:
    octavia = Octavia(VersionOnly(30), REAL_CLOCK)  # type: ignore[arg-type]
    assert listener_changes(octavia, listener, _conf()) == wanted


def test_members_compare_on_name_address_ports() -> None:
    octavia = Octavia(VersionOnly(30), REAL_CLOCK)  # type: ignore[arg-type]
    wanted = build_members(octavia, _svc()["spec"]["ports"][0], [NODE], _conf())
    assert wanted == [MEMBER]
    listed = [{**MEMBER, "id": "m", "monitor_port": None, "weight": 1}]
    assert {member_key(m) for m in listed} == {member_key(m) for m in wanted}
