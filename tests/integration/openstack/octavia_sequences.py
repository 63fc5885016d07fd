"""The request sequences test_emulator_vs_octavia.py runs on the real Octavia API and on
kccm's emulator: each row the requests the provider makes, in the shapes OCCM v1.36.0 sends
through gophercloud (that module's docstring says where each comes from)."""

from __future__ import annotations

import pytest
from octavia_pair import LB, Call, Settle
from octavia_requests import (
    BOGUS,
    CREATE_LB,
    CREATE_LISTENER,
    FULL_CREATE_MEMBERS,
    GET_LB,
    HTTP_MONITOR,
    LB_WITH_POOL,
    LISTENER,
    MEMBERS,
    MEMBERS_PATH,
    MONITOR,
    NAME,
    PENDING_MEMBERS,
    POOL,
    bad_listener,
    bad_pool,
    lb_body,
    settled,
)

AFFINITY = {"type": "SOURCE_IP"}
"""``spec.sessionAffinity: ClientIP`` (OCCM's pool ``session_persistence``)."""

SEQUENCES = [
    pytest.param([Call("GET", "/"), Call("GET", "/v2")], id="version-discovery"),
    pytest.param(
        [
            Call(
                "POST",
                LB,
                lb_body(full=True),
                unstable=FULL_CREATE_MEMBERS,
                save={
                    "lb": "loadbalancer.id",
                    "listener": "loadbalancer.listeners.0.id",
                    "pool": "loadbalancer.pools.0.id",
                    "monitor": "loadbalancer.pools.0.healthmonitor.id",
                },
            ),
            GET_LB,
            Call("GET", "/v2.0/lbaas/listeners/{listener}"),
            Call("GET", "/v2.0/lbaas/pools/{pool}"),
            Call("GET", MEMBERS_PATH, unstable=PENDING_MEMBERS),
            Call("GET", "/v2.0/lbaas/healthmonitors/{monitor}"),
            Settle(),
            GET_LB,
            Call("GET", "/v2.0/lbaas/listeners", params={"loadbalancer_id": "{lb}"}),
            Call("GET", "/v2.0/lbaas/pools", params={"loadbalancer_id": "{lb}"}),
            Call("GET", MEMBERS_PATH),
            Call("GET", "/v2.0/lbaas/healthmonitors/{monitor}"),
        ],
        id="fully-populated-create",
    ),
    pytest.param(
        [
            CREATE_LB,
            GET_LB,
            Call("PUT", LB + "/{lb}", {"loadbalancer": {"description": "changed"}}),
            CREATE_LISTENER,
            Call("DELETE", LB + "/{lb}"),
            Settle(),
            GET_LB,
            Call("PUT", LB + "/{lb}", {"loadbalancer": {"description": "changed"}}),
            Call("PUT", LB + "/{lb}", {"loadbalancer": {"description": "again"}}),
            GET_LB,
            Settle(),
            GET_LB,
        ],
        id="pending-is-immutable",
    ),
    pytest.param(
        [
            CREATE_LB,
            Settle(),
            CREATE_LISTENER,
            Call("GET", "/v2.0/lbaas/listeners/{listener}"),
            GET_LB,
            Settle(),
            Call(
                "PUT",
                "/v2.0/lbaas/listeners/{listener}",
                {
                    "listener": {
                        "allowed_cidrs": ["172.16.0.0/12"],
                        "connection_limit": 1000,
                        "timeout_client_data": 100000,
                        "timeout_member_data": 100000,
                    }
                },
            ),
            Call("PUT", "/v2.0/lbaas/listeners/{listener}", {"listener": {"name": "again"}}),
            Settle(),
            Call("GET", "/v2.0/lbaas/listeners/{listener}"),
            Call("PUT", "/v2.0/lbaas/listeners/{listener}", {"listener": {"allowed_cidrs": []}}),
            Settle(),
            Call("GET", "/v2.0/lbaas/listeners/{listener}"),
            Call(
                "PUT",
                "/v2.0/lbaas/listeners/{listener}",
                {"listener": {"allowed_cidrs": ["fd00::/64"]}},
            ),
            Call(
                "PUT",
                "/v2.0/lbaas/listeners/{listener}",
                {"listener": {"allowed_cidrs": ["not-a-cidr"]}},
            ),
            Call(
                "POST",
                "/v2.0/lbaas/listeners",
                {"listener": {**LISTENER, "name": "same-port", "loadbalancer_id": "{lb}"}},
            ),
        ],
        id="listener-create-update",
    ),
    pytest.param(
        [
            *LB_WITH_POOL,
            Call("GET", "/v2.0/lbaas/pools/{pool}"),
            Call("POST", MEMBERS_PATH, {"member": MEMBERS[0]}, save={"member": "member.id"}),
            Call("GET", MEMBERS_PATH + "/{member}"),
            Settle(),
            Call("PUT", MEMBERS_PATH + "/{member}", {"member": {"weight": 5}}),
            Settle(),
            Call("GET", MEMBERS_PATH + "/{member}"),
            Call("POST", MEMBERS_PATH, {"member": MEMBERS[0]}),
            Call("DELETE", MEMBERS_PATH + "/{member}"),
            Call("GET", MEMBERS_PATH + "/{member}"),
            Settle(),
            Call("GET", MEMBERS_PATH),
            Call("PUT", "/v2.0/lbaas/pools/{pool}", {"pool": {"lb_algorithm": "SOURCE_IP"}}),
            Settle(),
            Call("GET", "/v2.0/lbaas/pools/{pool}"),
        ],
        id="pool-and-members",
    ),
    pytest.param(
        [
            *LB_WITH_POOL,
            Call("PUT", MEMBERS_PATH, {"members": MEMBERS}),
            Call("GET", MEMBERS_PATH),
            Call("PUT", MEMBERS_PATH, {"members": MEMBERS}),
            Settle(),
            Call("GET", MEMBERS_PATH),
            Call(
                "PUT",
                MEMBERS_PATH,
                {
                    "members": [
                        {**MEMBERS[0], "weight": 3},
                        {
                            "name": "node-c",
                            "address": "10.0.0.13",
                            "protocol_port": 30080,
                            "subnet_id": "{subnet}",
                        },
                    ]
                },
            ),
            Call("GET", MEMBERS_PATH),
            Call("GET", "/v2.0/lbaas/pools/{pool}"),
            Settle(),
            Call("GET", MEMBERS_PATH),
            Call("PUT", MEMBERS_PATH, {"members": []}),
            Settle(),
            Call("GET", MEMBERS_PATH),
            *settled(
                Call("PUT", MEMBERS_PATH, {"members": [MEMBERS[0], MEMBERS[0]]}),
                Call("PUT", MEMBERS_PATH, {"members": [{"address": "10.0.0.14"}]}),
                Call("PUT", MEMBERS_PATH, {"members": [{**MEMBERS[0], "weight": 257}]}),
                Call("PUT", MEMBERS_PATH, {"members": [{**MEMBERS[0], "address": "10.0.0"}]}),
                Call("GET", MEMBERS_PATH + "/" + BOGUS),
                Call("GET", MEMBERS_PATH),
            ),
        ],
        id="batch-member-update",
    ),
    pytest.param(
        [
            *LB_WITH_POOL,
            Call(
                "POST",
                "/v2.0/lbaas/healthmonitors",
                {"healthmonitor": {**MONITOR, "pool_id": "{pool}"}},
                save={"monitor": "healthmonitor.id"},
            ),
            Call("GET", "/v2.0/lbaas/healthmonitors/{monitor}"),
            Settle(),
            Call(
                "POST",
                "/v2.0/lbaas/healthmonitors",
                {"healthmonitor": {**MONITOR, "pool_id": "{pool}"}},
            ),
            Call(
                "PUT",
                "/v2.0/lbaas/healthmonitors/{monitor}",
                {"healthmonitor": {"delay": 10, "max_retries": 2}},
            ),
            Settle(),
            Call("GET", "/v2.0/lbaas/pools/{pool}"),
            Call("DELETE", "/v2.0/lbaas/healthmonitors/{monitor}"),
            Call("GET", "/v2.0/lbaas/healthmonitors/{monitor}"),
            Settle(),
            Call("GET", "/v2.0/lbaas/healthmonitors/{monitor}"),
            Call("GET", "/v2.0/lbaas/pools/{pool}"),
        ],
        id="healthmonitor-create-delete",
    ),
    pytest.param(
        [
            CREATE_LB,
            Call("POST", LB, lb_body("other-lb"), save={"other": "loadbalancer.id"}),
            Settle(),
            Call("GET", LB, params={"name": NAME}),
            Call("GET", LB, params={"tags": NAME}),
            Call("GET", LB, params={"tags": f"{NAME},absent"}),
            Call("GET", LB, params={"tags-any": f"{NAME},other-lb"}),
            Call("GET", LB, params={"name": "absent"}),
            Call("GET", LB, params={"description": "nothing"}),
            Call("GET", LB, params={"provisioning_status": "ACTIVE", "name": "other-lb"}),
        ],
        id="filters-by-name-and-tags",
    ),
    pytest.param(
        [
            Call(
                "POST",
                LB,
                lb_body(full=True),
                unstable=FULL_CREATE_MEMBERS,
                save={
                    "lb": "loadbalancer.id",
                    "listener": "loadbalancer.listeners.0.id",
                    "pool": "loadbalancer.pools.0.id",
                },
            ),
            Settle(),
            Call("DELETE", LB + "/{lb}"),
            Call("DELETE", LB + "/{lb}", params={"cascade": "true"}),
            GET_LB,
            Call("GET", "/v2.0/lbaas/listeners/{listener}"),
            Call("DELETE", LB + "/{lb}", params={"cascade": "true"}),
            Settle(),
            GET_LB,
            Call("GET", "/v2.0/lbaas/listeners/{listener}"),
            Call("GET", "/v2.0/lbaas/pools/{pool}"),
            Call("GET", LB),
        ],
        id="cascade-delete",
    ),
    pytest.param(
        [
            *LB_WITH_POOL,
            Call(
                "PUT",
                MEMBERS_PATH,
                {"members": [{**m, "monitor_port": 31000, "backup": False} for m in MEMBERS]},
            ),
            Settle(),
            Call(
                "POST",
                "/v2.0/lbaas/healthmonitors",
                {"healthmonitor": {**HTTP_MONITOR, "pool_id": "{pool}"}},
                save={"monitor": "healthmonitor.id"},
            ),
            Call("GET", MEMBERS_PATH),
            Settle(),
            Call("GET", MEMBERS_PATH),
            Call("GET", "/v2.0/lbaas/healthmonitors/{monitor}"),
            Call(
                "PUT",
                MEMBERS_PATH,
                {
                    "members": [
                        *({**m, "monitor_port": 31000, "backup": False} for m in MEMBERS),
                        {**MEMBERS[0], "name": "node-c", "address": "10.0.0.13"},
                    ]
                },
            ),
            Call("GET", MEMBERS_PATH),
            Settle(),
            Call("GET", MEMBERS_PATH),
        ],
        id="local-policy-http-monitor",
    ),
    pytest.param(
        [
            Call(
                "POST",
                LB,
                lb_body(
                    listeners=[
                        {
                            **LISTENER,
                            "name": "udp",
                            "protocol": "UDP",
                            "protocol_port": 53,
                            "allowed_cidrs": None,
                            "default_pool": {
                                **POOL,
                                "protocol": "UDP",
                                "members": MEMBERS,
                                "healthmonitor": {**MONITOR, "type": "UDP-CONNECT"},
                            },
                        },
                        {
                            **LISTENER,
                            "name": "udp-local",
                            "protocol": "UDP",
                            "protocol_port": 5353,
                            "allowed_cidrs": None,
                            "default_pool": {
                                **POOL,
                                "name": "udp-local",
                                "protocol": "UDP",
                                "members": MEMBERS,
                                "healthmonitor": HTTP_MONITOR,
                            },
                        },
                        {
                            **LISTENER,
                            "name": "proxy",
                            "protocol_port": 443,
                            "default_pool": {**POOL, "protocol": "PROXY", "members": MEMBERS},
                        },
                    ]
                ),
                save={"lb": "loadbalancer.id"},
            ),
            Settle(),
            Call("GET", "/v2.0/lbaas/listeners", params={"loadbalancer_id": "{lb}"}),
            Call("GET", "/v2.0/lbaas/pools", params={"loadbalancer_id": "{lb}"}),
            Call("GET", "/v2.0/lbaas/healthmonitors"),
        ],
        id="udp-and-proxy-protocol",
    ),
    pytest.param(
        [
            Call(
                "POST",
                LB,
                lb_body(full=True),
                unstable=FULL_CREATE_MEMBERS,
                save={
                    "lb": "loadbalancer.id",
                    "listener": "loadbalancer.listeners.0.id",
                    "pool": "loadbalancer.pools.0.id",
                },
            ),
            Settle(),
            Call(  # OCCM's GetPoolByListener: the listener by id, then its default pool
                "GET",
                "/v2.0/lbaas/listeners",
                params={"loadbalancer_id": "{lb}", "id": "{listener}"},
            ),
            Call(  # what Octavia refuses (a pool has no listener_id)
                "GET",
                "/v2.0/lbaas/pools",
                params={"loadbalancer_id": "{lb}", "listener_id": "{listener}"},
            ),
            Call("DELETE", "/v2.0/lbaas/pools/{pool}"),
            Call("GET", "/v2.0/lbaas/pools/{pool}"),
            Call("GET", "/v2.0/lbaas/listeners/{listener}"),
            Call("DELETE", "/v2.0/lbaas/listeners/{listener}"),
            Settle(),
            Call("GET", "/v2.0/lbaas/listeners/{listener}"),
            Call("GET", MEMBERS_PATH),
            Call("GET", "/v2.0/lbaas/healthmonitors"),
            Call("DELETE", "/v2.0/lbaas/listeners/{listener}"),
            Call(
                "POST",
                "/v2.0/lbaas/listeners",
                {
                    "listener": {
                        **LISTENER,
                        "protocol_port": 8080,
                        "loadbalancer_id": "{lb}",
                        "default_pool": {**POOL, "members": MEMBERS},
                    }
                },
                save={"listener": "listener.id"},
            ),
            Settle(),
            GET_LB,
            Call("GET", "/v2.0/lbaas/pools", params={"loadbalancer_id": "{lb}"}),
        ],
        id="listener-port-change",
    ),
    pytest.param(
        [
            Call(
                "POST",
                LB,
                {
                    "loadbalancer": {
                        "name": NAME,
                        "vip_network_id": "{network}",
                        "provider": "amphora",
                        "tags": [NAME],
                    }
                },
                save={"lb": "loadbalancer.id"},
            ),
            Settle(),
            Call("PUT", LB + "/{lb}", {"loadbalancer": {"tags": [NAME, "kccm"], "name": "new"}}),
            GET_LB,
            Settle(),
            GET_LB,
            Call("PUT", LB + "/{lb}", {"loadbalancer": {"vip_address": "10.0.0.99"}}),
            Call("POST", LB, lb_body("flavored", flavor_id=BOGUS)),
            Call("POST", LB, lb_body("zoned", availability_zone="absent-zone")),
        ],
        id="lb-by-network-update-tags",
    ),
    pytest.param(
        [
            CREATE_LB,
            Settle(),
            # two Services joining a shared balancer, each sending the list it read plus its
            # own tag: the second PUT is refused while the first is pending, and the same
            # list sent again once ACTIVE replaces the first writer's (no compare-and-swap)
            Call("PUT", LB + "/{lb}", {"loadbalancer": {"tags": [NAME, "kube_service_g1"]}}),
            Call("PUT", LB + "/{lb}", {"loadbalancer": {"tags": [NAME, "kube_service_g2"]}}),
            Settle(),
            Call("PUT", LB + "/{lb}", {"loadbalancer": {"tags": [NAME, "kube_service_g2"]}}),
            Settle(),
            GET_LB,
        ],
        id="tags-last-put-wins",
    ),
    pytest.param(
        [
            CREATE_LB,
            Settle(),
            CREATE_LISTENER,
            Settle(),
            Call(
                "POST",
                "/v2.0/lbaas/pools",
                {"pool": {**POOL, "listener_id": "{listener}", "session_persistence": AFFINITY}},
                save={"pool": "pool.id"},
            ),
            Settle(),
            Call("GET", "/v2.0/lbaas/pools/{pool}"),
            Call("PUT", "/v2.0/lbaas/pools/{pool}", {"pool": {"session_persistence": None}}),
            Settle(),
            Call("GET", "/v2.0/lbaas/pools/{pool}"),
            Call("DELETE", "/v2.0/lbaas/listeners/{listener}"),
            Settle(),
            Call("GET", "/v2.0/lbaas/pools/{pool}"),
            Call("DELETE", "/v2.0/lbaas/pools/{pool}"),
            Settle(),
            Call("DELETE", LB + "/{lb}"),
            GET_LB,
            Call("PUT", LB + "/{lb}", {"loadbalancer": {"description": "late"}}),
            Call("GET", "/v2.0/lbaas/loadbalancers/{lb}/status"),
            Settle(),
            GET_LB,
            Call("GET", LB),
        ],
        id="session-affinity-then-delete-without-cascade",
    ),
    pytest.param(
        [
            *(
                Call("POST", LB, lb_body(f"page-{n}"), save={f"lb{n}": "loadbalancer.id"})
                for n in range(3)
            ),
            Settle(),
            Call("GET", LB, params={"limit": "2"}, save={"marker": "loadbalancers.1.id"}),
            Call("GET", LB, params={"limit": "2", "marker": "{marker}"}),
            Call("GET", LB, params={"limit": "2", "marker": "{marker}", "page_reverse": "true"}),
            Call("GET", LB, params={"limit": "1", "sort": "name:desc"}),
            Call("GET", LB, params={"fields": "name"}),
            Call("GET", LB, params={"marker": BOGUS}),
        ],
        id="paging-sorting-fields",
    ),
    pytest.param(
        [
            Call("GET", LB + "/" + BOGUS),
            Call("PUT", LB + "/" + BOGUS, {"loadbalancer": {"description": "x"}}),
            Call("DELETE", LB + "/" + BOGUS),
            Call("GET", "/v2.0/lbaas/listeners/" + BOGUS),
            Call("DELETE", "/v2.0/lbaas/listeners/" + BOGUS),
            Call("GET", "/v2.0/lbaas/pools/" + BOGUS),
            Call("GET", f"/v2.0/lbaas/pools/{BOGUS}/members"),
            Call("PUT", f"/v2.0/lbaas/pools/{BOGUS}/members", {"members": []}),
            Call("GET", f"/v2.0/lbaas/pools/{BOGUS}/members/{BOGUS}"),
            Call("GET", "/v2.0/lbaas/healthmonitors/" + BOGUS),
            Call("DELETE", "/v2.0/lbaas/healthmonitors/" + BOGUS),
            Call("GET", LB + "/not-a-uuid"),
            Call(
                "POST",
                "/v2.0/lbaas/listeners",
                {"listener": {**LISTENER, "loadbalancer_id": BOGUS}},
            ),
        ],
        id="not-found",
    ),
    pytest.param(
        settled(
            Call("POST", LB, {"loadbalancer": {"name": "no-vip"}}),
            Call("POST", LB, lb_body(vip_address="not-an-ip")),
            Call("POST", LB, lb_body(provider="nope")),
            CREATE_LB,
            bad_listener(81, protocol="FOO"),
            bad_listener(0),
            bad_listener(65536),
            bad_listener(84, timeout_client_data=-5),
            bad_listener(85, connection_limit=-2),
            bad_listener(86, allowed_cidrs=["10.0.0.0/33"]),
            bad_pool(lb_algorithm="RANDOM"),
            bad_pool(lb_algorithm="SOURCE_IP_PORT"),
            Call("POST", "/v2.0/lbaas/pools", {"pool": {**POOL, "protocol": "UDP"}}),
            Call(
                "POST",
                LB,
                {
                    "loadbalancer": {
                        **lb_body("mismatch")["loadbalancer"],
                        "listeners": [{**LISTENER, "default_pool": {**POOL, "protocol": "UDP"}}],
                    }
                },
            ),
            Call("GET", LB),
        ),
        id="validation-errors",
    ),
]
