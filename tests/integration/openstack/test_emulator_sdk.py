"""openstacksdk (with keystoneauth1) drives the OpenStack emulator through every kind of call
the openstack provider makes, and the emulator's answers parse (the first of the three
checks that keep the emulator honest; the real Octavia API and OCCM are the others).

One emulator for the module (``lb_active_delay`` 0.05 s); every test removes what it made,
which :meth:`EmulatorAdmin.assert_clean` checks after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import keystoneauth1.exceptions.http
import openstack
import pytest
from openstack import exceptions as sdk_exc
from openstack.connection import Connection

from kccm.emulators.openstack import Emulator, openstack_emulator
from kccm.testing.certs import emulator_tls

pytestmark = [
    # openstacksdk warns about its own future removals on connect and on some calls
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:openstack"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:openstack.*"),
]


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with openstack_emulator(lb_active_delay=0.05) as emulator:
        yield emulator


def connect(emu: Emulator, **auth: Any) -> Connection:
    args: dict[str, Any] = {"auth_url": emu.auth_url, "region_name": "RegionOne"}
    if "auth_type" not in auth:
        args.update(
            username="demo",
            password="secret",
            user_domain_name="Default",
            project_name="demo",
            project_domain_name="Default",
        )
    args.update(auth)
    return openstack.connect(load_yaml_config=False, load_envvars=False, **args)


@pytest.fixture(scope="module")
def conn(emu: Emulator) -> Iterator[Connection]:
    connection = connect(emu)
    try:
        yield connection
    finally:
        connection.close()


@pytest.fixture(autouse=True)
def leaves_nothing(emu: Emulator) -> Iterator[None]:
    baseline = emu.admin.state()
    yield
    emu.admin.clear_faults()
    emu.admin.assert_clean(baseline)


@pytest.fixture
def nodes(emu: Emulator) -> Iterator[list[dict[str, Any]]]:
    made = [
        emu.admin.add_server("kccm-sdk-a", floating=True),
        emu.admin.add_server("kccm-sdk-b", status="SHUTOFF", flavor="m1.large", az="az-2"),
        emu.admin.add_server("other-c"),
    ]
    yield made
    for server in made:
        emu.admin.delete_server(server["id"])


@pytest.mark.parametrize(
    "auth",
    [
        pytest.param({}, id="password-by-names"),
        pytest.param(
            {"project_id": "<project>", "project_name": None, "project_domain_name": None},
            id="password-project-id",
        ),
        pytest.param(
            {
                "auth_type": "v3applicationcredential",
                "application_credential_id": "<ac>",
                "application_credential_secret": "ac-secret",
            },
            id="app-cred-id",
        ),
        pytest.param(
            {
                "auth_type": "v3applicationcredential",
                "application_credential_name": "kccm-ac",
                "username": "demo",
                "user_domain_name": "Default",
                "application_credential_secret": "ac-secret",
            },
            id="app-cred-name",
        ),
    ],
)
def test_auth_methods(emu: Emulator, auth: dict[str, Any]) -> None:
    ids = {
        "<project>": emu.config["project_id"],
        "<ac>": emu.config["app_cred_id"],
        "<trust>": emu.config["trust_id"],
    }
    auth = {k: ids.get(v, v) if isinstance(v, str) else v for k, v in auth.items()}
    auth = {k: v for k, v in auth.items() if v is not None}
    connection = connect(emu, **auth)
    try:
        assert connection.current_project_id == emu.config["project_id"]
        assert [n.name for n in connection.network.networks(name="public")] == ["public"]
    finally:
        connection.close()


def test_https_with_the_emulators_ca() -> None:
    with openstack_emulator(tls=emulator_tls()) as secure:
        connection = connect(secure, cacert=secure.ca_file)
        try:
            assert [n.name for n in connection.network.networks(name="private")] == ["private"]
        finally:
            connection.close()


def test_wrong_password_is_401(emu: Emulator) -> None:
    connection = connect(emu, password="wrong")
    with pytest.raises(keystoneauth1.exceptions.http.Unauthorized) as raised:
        list(connection.compute.servers())
    assert raised.value.http_status == 401


def test_token_is_renewed_after_expiry(emu: Emulator, conn: Connection) -> None:
    list(conn.compute.servers())
    since = emu.admin.last_seq()
    assert emu.admin.expire_tokens() >= 1
    list(conn.compute.servers())
    calls = [(r["method"], r["service"], r["status"]) for r in emu.admin.requests(since)]
    assert calls == [("GET", "compute", 401), ("POST", "identity", 201), ("GET", "compute", 200)]


def test_servers_flavors_and_interfaces(
    emu: Emulator, conn: Connection, nodes: list[dict[str, Any]]
) -> None:
    assert sorted(s.name for s in conn.compute.servers(name="^kccm-sdk-")) == [
        "kccm-sdk-a",
        "kccm-sdk-b",
    ]
    assert [s.name for s in conn.compute.servers(name="^kccm-sdk-", status="SHUTOFF")] == [
        "kccm-sdk-b"
    ]
    paged = list(conn.compute.servers(details=True, limit=1))
    assert {s.name for s in paged} >= {"kccm-sdk-a", "kccm-sdk-b", "other-c"}
    server = conn.compute.get_server(nodes[1]["id"])
    assert (server.status, server.availability_zone) == ("SHUTOFF", "az-2")
    assert server.flavor.original_name == "m1.large"  # the SDK asks for a recent microversion
    first = conn.compute.get_server(nodes[0]["id"])
    kinds = sorted((a["OS-EXT-IPS:type"], a["version"]) for a in first.addresses["private"])
    assert kinds == [("fixed", 4), ("fixed", 6), ("floating", 4)]
    assert conn.compute.get_flavor("2").name == "m1.small"
    assert {f.name for f in conn.compute.flavors()} == {"m1.small", "m1.medium", "m1.large"}
    interfaces = list(conn.compute.server_interfaces(nodes[0]["id"]))
    assert [i.net_id for i in interfaces] == [emu.config["private_network_id"]]
    with pytest.raises(sdk_exc.NotFoundException):
        conn.compute.get_server("00000000-0000-0000-0000-000000000000")


def test_ports_filters_and_address_pairs(
    emu: Emulator, conn: Connection, nodes: list[dict[str, Any]]
) -> None:
    address = nodes[0]["addresses"]["private"][0]["addr"]
    by_ip = list(conn.network.ports(fixed_ips=[f"ip_address={address}"]))
    assert [p.device_id for p in by_ip] == [nodes[0]["id"]]
    subnet = emu.config["private_subnet_id"]
    both = list(conn.network.ports(fixed_ips=[f"subnet_id={subnet}", f"ip_address={address}"]))
    assert [p.id for p in both] == [by_ip[0].id]
    port = next(iter(conn.network.ports(device_id=nodes[1]["id"])))
    assert port.device_owner == "compute:nova"
    pairs = [{"ip_address": "10.244.3.0/24"}]
    updated = conn.network.update_port(port, allowed_address_pairs=pairs)
    assert updated.allowed_address_pairs == [
        {"ip_address": "10.244.3.0/24", "mac_address": port.mac_address}
    ]
    conn.network.update_port(port, allowed_address_pairs=[])


def test_floating_ip_lifecycle(
    emu: Emulator, conn: Connection, nodes: list[dict[str, Any]]
) -> None:
    public = emu.config["public_network_id"]
    assert [n.id for n in conn.network.networks(is_router_external=True)] == [public]
    port = next(iter(conn.network.ports(device_id=nodes[2]["id"])))
    fip = conn.network.create_ip(floating_network_id=public, description="kccm-sdk")
    try:
        assert fip.status == "DOWN"
        fip = conn.network.update_ip(fip, port_id=port.id)
        assert (fip.fixed_ip_address, fip.status) == (port.fixed_ips[0]["ip_address"], "ACTIVE")
        found = list(conn.network.ips(port_id=port.id, floating_network_id=public))
        assert [f.floating_ip_address for f in found] == [fip.floating_ip_address]
        found = list(conn.network.ips(floating_ip_address=fip.floating_ip_address))
        assert [f.id for f in found] == [fip.id]
        server = conn.compute.get_server(nodes[2]["id"])
        assert fip.floating_ip_address in [a["addr"] for a in server.addresses["private"]]
        with pytest.raises(sdk_exc.ConflictException):
            conn.network.create_ip(floating_network_id=public, port_id=port.id)
        fip = conn.network.update_ip(fip, port_id=None)
        assert fip.port_id is None
    finally:
        conn.network.delete_ip(fip)
    assert conn.network.find_ip(fip.id) is None


def test_security_group_and_rules(emu: Emulator, conn: Connection) -> None:
    sg = conn.network.create_security_group(name="lb-kccm-sdk", description="kccm")
    try:
        rule = conn.network.create_security_group_rule(
            security_group_id=sg.id,
            direction="ingress",
            ethertype="IPv4",
            protocol="tcp",
            port_range_min=30080,
            port_range_max=30080,
            remote_ip_prefix="10.0.0.0/24",
        )
        with pytest.raises(sdk_exc.ConflictException, match="already exists"):
            conn.network.create_security_group_rule(
                security_group_id=sg.id,
                direction="ingress",
                ethertype="IPv4",
                protocol="tcp",
                port_range_min=30080,
                port_range_max=30080,
                remote_ip_prefix="10.0.0.0/24",
            )
        rules = list(conn.network.security_group_rules(security_group_id=sg.id))
        assert rule.id in [r.id for r in rules]
        assert {r.direction for r in rules} == {"ingress", "egress"}
        conn.network.delete_security_group_rule(rule)
    finally:
        conn.network.delete_security_group(sg)


def test_router_routes_and_extraroutes(emu: Emulator, conn: Connection) -> None:
    assert conn.network.find_extension("extraroute-atomic") is not None
    router = conn.network.get_router(emu.config["router_id"])
    assert router.external_gateway_info["network_id"] == emu.config["public_network_id"]
    route = {"destination": "10.244.7.0/24", "nexthop": "10.0.0.7"}
    router = conn.network.add_extra_routes_to_router(router, body={"router": {"routes": [route]}})
    assert router.routes == [route]
    router = conn.network.remove_extra_routes_from_router(
        router, body={"router": {"routes": [route]}}
    )
    assert router.routes == []
    router = conn.network.update_router(router, routes=[route])
    assert router.routes == [route]
    with pytest.raises(sdk_exc.BadRequestException, match="nexthop is not connected"):
        conn.network.update_router(
            router, routes=[{"destination": "10.9.0.0/16", "nexthop": "192.168.0.1"}]
        )
    conn.network.update_router(router, routes=[])


def _full_lb(emu: Emulator, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    subnet = emu.config["private_subnet_id"]
    members = [
        {
            "address": n["addresses"]["private"][0]["addr"],
            "protocol_port": 30080,
            "subnet_id": subnet,
            "name": n["name"],
        }
        for n in nodes[:2]
    ]
    return {
        "name": "kube_service_kccm_sdk_svc",
        "vip_subnet_id": subnet,
        "tags": ["kube_service_kccm_sdk_svc"],
        "provider": "amphora",
        "listeners": [
            {
                "name": "listener_0_kube_service_kccm_sdk_svc",
                "protocol": "TCP",
                "protocol_port": 80,
                "allowed_cidrs": ["10.0.0.0/8"],
                "default_pool": {
                    "name": "pool_0_kube_service_kccm_sdk_svc",
                    "protocol": "TCP",
                    "lb_algorithm": "ROUND_ROBIN",
                    "members": members,
                    "healthmonitor": {"type": "TCP", "delay": 5, "timeout": 3, "max_retries": 1},
                },
            }
        ],
    }


def test_octavia_version_discovery(conn: Connection) -> None:
    assert conn.load_balancer.get_api_major_version()[0] == 2


def test_octavia_lifecycle(emu: Emulator, conn: Connection, nodes: list[dict[str, Any]]) -> None:
    lbs = conn.load_balancer
    emu.admin.set_config(lb_active_delay=3600.0)  # pending until settled: no race with 409s
    try:
        lb = lbs.create_load_balancer(**_full_lb(emu, nodes))
    finally:
        emu.admin.set_config(lb_active_delay=0.05)
    try:
        assert lb.provisioning_status == "PENDING_CREATE"
        pool_id = lb.pools[0]["id"]
        with pytest.raises(
            sdk_exc.ConflictException,
            match=f"Invalid state PENDING_CREATE of loadbalancer resource {lb.id}",
        ):
            lbs.update_load_balancer(lb, description="busy")
        response = lbs.put(f"/lbaas/pools/{pool_id}/members", json={"members": []})
        assert response.status_code == 409
        assert (
            response.json()["faultstring"] == f"Pool {pool_id} is immutable and cannot be updated."
        )
        assert emu.admin.settle() == [lb.id]
        lb = lbs.wait_for_load_balancer(lb.id, interval=0.05, wait=60)
        assert (lb.provisioning_status, lb.operating_status) == ("ACTIVE", "ONLINE")
        assert [x.id for x in lbs.load_balancers(tags=["kube_service_kccm_sdk_svc"])] == [lb.id]
        assert [x.id for x in lbs.load_balancers(vip_port_id=lb.vip_port_id)] == [lb.id]
        listener = lbs.get_listener(lb.listeners[0]["id"])
        assert (listener.default_pool_id, listener.allowed_cidrs) == (pool_id, ["10.0.0.0/8"])
        assert [p.id for p in lbs.pools(loadbalancer_id=lb.id)] == [pool_id]
        wanted = [
            {
                "address": nodes[2]["addresses"]["private"][0]["addr"],
                "protocol_port": 30080,
                "subnet_id": emu.config["private_subnet_id"],
            }
        ]
        response = lbs.put(f"/lbaas/pools/{pool_id}/members", json={"members": wanted})
        assert response.status_code == 202
        lbs.wait_for_load_balancer(lb.id, interval=0.05, wait=60)
        members = list(lbs.members(pool_id))
        assert [(m.address, m.provisioning_status) for m in members] == [
            (wanted[0]["address"], "ACTIVE")
        ]
        lbs.update_listener(listener, allowed_cidrs=["10.0.0.0/16", "172.24.4.0/24"])
        lbs.wait_for_load_balancer(lb.id, interval=0.05, wait=60)
        assert lbs.get_listener(listener.id).allowed_cidrs == ["10.0.0.0/16", "172.24.4.0/24"]
        assert lbs.get_load_balancer_statistics(lb.id).active_connections == 0
        tree = lbs.get(f"/lbaas/loadbalancers/{lb.id}/status").json()["statuses"]
        assert tree["loadbalancer"]["listeners"][0]["pools"][0]["id"] == pool_id
    finally:
        lbs.wait_for_load_balancer(lb.id, interval=0.05, wait=60)
        lbs.delete_load_balancer(lb, cascade=True)
        lbs.wait_for_delete(lb, interval=0.05, wait=60)
    assert conn.network.find_port(lb.vip_port_id) is None


def test_injected_faults_reach_the_sdk(emu: Emulator, conn: Connection) -> None:
    emu.admin.fault("network", "GET", r"/v2\.0/ports$", status=503, times=1)
    with pytest.raises(sdk_exc.HttpException) as raised:
        list(conn.network.ports())
    assert raised.value.status_code == 503
    assert list(conn.network.ports(device_owner="network:router_gateway"))
    emu.admin.fault("load-balancer", "GET", "/loadbalancers", kind="conflict", times=1)
    with pytest.raises(sdk_exc.ConflictException, match="is immutable and cannot be updated"):
        list(conn.load_balancer.load_balancers())
    assert list(conn.load_balancer.load_balancers()) == []


def test_key_manager_secrets_and_containers(emu: Emulator, conn: Connection) -> None:
    """Barbican as a TLS listener's reference needs it: a certificate secret, a container
    holding it, both read back by UUID (as OCCM's ``checkService``) and listed. (A created
    resource's ``id`` is its whole reference, as with Barbican itself: the UUID is
    ``container_id``/``secret_id``.)"""
    keys = conn.key_manager
    secret = keys.create_secret(
        name="kccm-sdk-cert", payload="PEM", payload_content_type="text/plain"
    )
    try:
        container = keys.create_container(
            name="kccm-sdk-tls",
            type="certificate",
            secret_refs=[{"name": "certificate", "secret_ref": secret.secret_ref}],
        )
        try:
            found = keys.get_container(container.container_id)
            assert (found.type, found.status, found.secret_refs) == (
                "certificate",
                "ACTIVE",
                [{"name": "certificate", "secret_ref": secret.secret_ref}],
            )
            assert found.container_ref == container.container_ref
            assert [c.container_id for c in keys.containers()] == [container.container_id]
            fetched = keys.get_secret(secret.secret_id)
            assert (fetched.name, fetched.payload, fetched.secret_type) == (
                "kccm-sdk-cert",
                "PEM",
                "opaque",
            )
            assert [s.secret_id for s in keys.secrets()] == [secret.secret_id]
        finally:
            keys.delete_container(container.container_id)
        with pytest.raises(sdk_exc.NotFoundException, match="No Container found"):
            keys.get_container(container.container_id)
    finally:
        keys.delete_secret(secret.secret_id)
    assert list(keys.secrets()) == []
