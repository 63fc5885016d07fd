"""The request bodies and calls of the comparison (test_emulator_vs_octavia.py), in the shapes
OCCM v1.36.0 sends through gophercloud (pkg/openstack/loadbalancer.go: names
``kube_service_<cluster>_<namespace>_<name>``, ``listener_<i>_<lb>``, ``pool_<i>_<lb>``,
``monitor_<i>_<lb>``; the listener's ``allowed_cidrs`` and timeouts; members with
``subnet_id``; a TCP monitor, or HTTP on ``/healthz`` for ``externalTrafficPolicy: Local``)."""

from __future__ import annotations

from typing import Any

from octavia_pair import LB, Call, Settle, Step

# -- bodies ----------------------------------------------------

NAME = "kube_service_kubernetes_default_web"
MEMBERS = [
    {"name": "node-a", "address": "10.0.0.11", "protocol_port": 30080, "subnet_id": "{subnet}"},
    {"name": "node-b", "address": "10.0.0.12", "protocol_port": 30080, "subnet_id": "{subnet}"},
]
MONITOR = {
    "name": f"monitor_0_{NAME}",
    "type": "TCP",
    "delay": 5,
    "timeout": 3,
    "max_retries": 1,
    "max_retries_down": 3,
}
HTTP_MONITOR = {
    **MONITOR,
    "type": "HTTP",
    "http_method": "GET",
    "url_path": "/healthz",
    "expected_codes": "200",
}
POOL = {"name": f"pool_0_{NAME}", "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}
LISTENER = {
    "name": f"listener_0_{NAME}",
    "protocol": "TCP",
    "protocol_port": 80,
    "connection_limit": -1,
    "allowed_cidrs": ["10.0.0.0/8", "192.168.0.0/16"],
    "timeout_client_data": 50000,
    "timeout_member_connect": 5000,
    "timeout_member_data": 50000,
    "timeout_tcp_inspect": 0,
    "tags": [NAME],
}


def lb_body(name: str = NAME, *, full: bool = False, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "description": "Kubernetes external service default/web from cluster kubernetes",
        "vip_subnet_id": "{subnet}",
        "tags": [name],
        **extra,
    }
    if full:
        pool = {**POOL, "members": MEMBERS, "healthmonitor": MONITOR}
        body["listeners"] = [{**LISTENER, "default_pool": pool}]
    return {"loadbalancer": body}


CREATE_LB = Call("POST", LB, lb_body(), save={"lb": "loadbalancer.id"})
GET_LB = Call("GET", LB + "/{lb}")
CREATE_LISTENER = Call(
    "POST",
    "/v2.0/lbaas/listeners",
    {"listener": {**LISTENER, "loadbalancer_id": "{lb}"}},
    save={"listener": "listener.id"},
)
CREATE_POOL = Call(
    "POST",
    "/v2.0/lbaas/pools",
    {"pool": {**POOL, "listener_id": "{listener}"}},
    save={"pool": "pool.id"},
)
MEMBERS_PATH = "/v2.0/lbaas/pools/{pool}/members"
LB_WITH_POOL: list[Step] = [CREATE_LB, Settle(), CREATE_LISTENER, Settle(), CREATE_POOL, Settle()]
BOGUS = "00000000-0000-4000-8000-00000000beef"


def settled(*calls: Call) -> list[Step]:
    """Each call on a settled world: a call one server accepts and the other refuses leaves
    no pending balancer behind to turn the next call into a 409."""
    return [step for call in calls for step in (call, Settle())]


def bad_listener(port: int, **fields: Any) -> Call:
    """A listener on its own ``port`` with a bad field (a server that accepts it must not
    make the next one a duplicate)."""
    listener = {**LISTENER, "name": "bad", "protocol_port": port, "loadbalancer_id": "{lb}"}
    return Call("POST", "/v2.0/lbaas/listeners", {"listener": {**listener, **fields}})


def bad_pool(**fields: Any) -> Call:
    return Call(
        "POST", "/v2.0/lbaas/pools", {"pool": {**POOL, "loadbalancer_id": "{lb}", **fields}}
    )


FULL_CREATE_MEMBERS = ("loadbalancer.pools.*.members.*.operating_status",)
"""The members' operating status in a fully populated create whose pool has a monitor: real
Octavia answers NO_MONITOR mostly (11 of 12 creates in a row here) and OFFLINE sometimes.
MembersController._graph_create reads ``pool.health_monitor`` from the session's ORM pool
(``get_orm``), which still holds the relationship as loaded before the monitor was added
unless that object was garbage-collected from the weak identity map in between. The
emulator answers NO_MONITOR."""
PENDING_MEMBERS = ("members.*.operating_status",)
"""The same members listed before the provider settles them (the stored value)."""
