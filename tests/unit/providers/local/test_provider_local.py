"""The local provider: cloud config, InstancesV2/Zones from the store, load balancers, routes."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider import (
    CloudConfigError,
    ForeignProviderID,
    InstanceNotFound,
    InvalidServiceConfig,
    Route,
)
from kccm.cloudprovider.registry import default_registry
from kccm.providers.local import LocalCloud, new_local_cloud
from kccm.providers.local.config import (
    LocalCloudConfig,
    VipPool,
    load_local_config,
    pool_problems,
)
from kccm.providers.local.provider import (
    LocalLoadBalancerError,
    desired_load_balancer,
)
from kccm.providers.local.store import InstanceRecord, LocalStore

CLUSTER = "kubernetes"


def config(text: str) -> LocalCloudConfig:
    return load_local_config(io.StringIO(text))


_OPENED: list[LocalStore] = []


def make_cloud(tmp_path: Path, text: str = "") -> LocalCloud:
    store = LocalStore(tmp_path / "state.db")
    _OPENED.append(store)
    return LocalCloud(store, config(text))


@pytest.fixture(autouse=True)
def _close_stores() -> Iterator[None]:
    """Every store a test opened is closed (Python 3.13 warns about unclosed connections)."""
    yield
    while _OPENED:
        _OPENED.pop().close()


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[LocalCloud]:
    made = make_cloud(tmp_path, "[Global]\nvip-range = 127.0.20.0/29\n")
    made.store.add_instance(InstanceRecord("n1", (("InternalIP", "127.0.10.1"),), zone="z1"))
    made.store.add_instance(InstanceRecord("n2", (("InternalIP", "127.0.10.2"),)))
    made.store.set_instance_state("n2", running=False)
    yield made
    made.store.close()


def node(name: str, provider_id: str = "", address: str | None = "127.0.10.1") -> dict[str, Any]:
    addresses = [{"type": "Hostname", "address": name}]
    if address:
        addresses.append({"type": "InternalIP", "address": address})
    return {
        "metadata": {"name": name},
        "spec": {"providerID": provider_id} if provider_id else {},
        "status": {"addresses": addresses},
    }


def service(
    name: str = "web", uid: str = "uid-1", annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "annotations": annotations or {}},
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30080},
                {"name": "dns", "protocol": "UDP", "port": 53, "nodePort": 30053},
            ],
        },
    }
    body["spec"].update(spec)
    return body


# -- cloud config ----------------------------------------------------------------------------


def test_config_defaults() -> None:
    glob = load_local_config(None).global_
    assert (glob.state_file, glob.vip_range, glob.health_check_mode) == (
        "",
        "127.0.20.0/24",
        "kube-proxy",
    )
    assert (glob.auto_adopt, glob.zone, glob.region) == (False, "local-zone-a", "local")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("[Global]\nvip-range = nonsense\n", "vip-range", id="bad-range"),
        pytest.param("[Global]\nvip-range = 127.0.0.9-127.0.0.1\n", "vip-range", id="reversed"),
        pytest.param("[Global]\nhealth-check-mode = http\n", "health-check-mode", id="bad-mode"),
        pytest.param("[Global]\nauto-adopt = maybe\n", "auto-adopt", id="bad-bool"),
        pytest.param("[Global]\nvip-pool = 1\n", "unknown key", id="typo"),
        pytest.param(
            "[Global]\nvip-range = 0.0.0.0\n",
            "vip-range '0.0.0.0': 0.0.0.0 is the unspecified address",
            id="unspecified",
        ),
        pytest.param(
            "[Global]\nvip-range = 224.0.0.0/28\n",
            "224.0.0.1 is a multicast address",
            id="multicast",
        ),
        pytest.param(
            "[Global]\nvip-range = ::/0\n",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff is a multicast address",
            id="all-of-ipv6",
        ),
        pytest.param(
            "[Global]\nvip-range = 0.0.0.0/0\n",
            "4294967294 addresses; a pool has at most 65536",
            id="all-of-ipv4",
        ),
        pytest.param(
            "[Global]\nvip-range = 192.0.2.0/24\n",
            "192.0.2.1, 192.0.2.254 is not an address of this machine",
            id="not-local",
        ),
    ],
)
def test_config_errors(text: str, message: str) -> None:
    with pytest.raises(CloudConfigError, match=message):
        config(text)


def test_a_range_of_this_machines_addresses_is_accepted() -> None:
    """Locality is decided by binding: a range whose ends bind is fine, loopback always is."""
    pool = VipPool.parse("198.51.100.1-198.51.100.3")
    assert pool_problems(pool, bindable=lambda ip: True) == []
    assert pool_problems(VipPool.parse("127.0.20.0/24"), bindable=lambda ip: False) == []


@pytest.mark.parametrize(
    ("text", "first", "last", "count"),
    [
        pytest.param("127.0.20.0/24", "127.0.20.1", "127.0.20.254", 254, id="cidr"),
        pytest.param("127.0.20.10-127.0.20.12", "127.0.20.10", "127.0.20.12", 3, id="range"),
        pytest.param("127.0.30.7/32", "127.0.30.7", "127.0.30.7", 1, id="single"),
        pytest.param("fd00::/126", "fd00::1", "fd00::3", 3, id="ipv6"),
    ],
)
def test_vip_pool(text: str, first: str, last: str, count: int) -> None:
    pool = VipPool.parse(text)
    assert (str(pool.first), str(pool.last), len(list(pool.addresses()))) == (first, last, count)
    assert first in pool
    assert "10.0.0.1" not in pool
    assert "garbage" not in pool


def test_factory_reads_the_state_file_from_the_cloud_config(tmp_path: Path) -> None:
    path = tmp_path / "from-config.db"
    cloud = new_local_cloud(io.StringIO(f"[Global]\nstate-file = {path}\nauto-adopt\n"))
    assert (cloud.store.path, cloud.config.global_.auto_adopt) == (path, True)
    cloud.store.close()
    assert new_local_cloud.config_schema is LocalCloudConfig  # type: ignore[attr-defined]


def test_the_provider_is_registered_as_local() -> None:
    assert default_registry.factory("local") is new_local_cloud


# -- InstancesV2 and Zones -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("the_node", "exists", "shutdown"),
    [
        pytest.param(node("n1"), True, False, id="running-by-name"),
        pytest.param(node("x", provider_id="local://n1"), True, False, id="running-by-id"),
        pytest.param(node("n2"), True, True, id="stopped"),
        pytest.param(node("gone"), False, None, id="deleted"),
        pytest.param(node("n1", provider_id="local://other"), False, None, id="id-wins"),
    ],
)
def test_instance_exists_and_shutdown(
    cloud: LocalCloud, the_node: dict[str, Any], exists: bool, shutdown: bool | None
) -> None:
    assert cloud.instance_exists(the_node) is exists
    if shutdown is None:
        with pytest.raises(InstanceNotFound):
            cloud.instance_shutdown(the_node)
    else:
        assert cloud.instance_shutdown(the_node) is shutdown


FOREIGN = [
    pytest.param("aws:///us-east-1a/i-0abc", id="aws"),
    pytest.param("gce://project/zone/vm-1", id="gce"),
    pytest.param("n1", id="no-scheme-even-if-a-local-name"),
]


@pytest.mark.parametrize("provider_id", FOREIGN)
def test_another_providers_node_is_never_reported_missing(
    cloud: LocalCloud, provider_id: str
) -> None:
    """instance_exists / instance_shutdown / instance_metadata raise ForeignProviderID
    (naming the node and its providerID) instead of answering "does not exist"."""
    foreign = node("n1", provider_id=provider_id)
    for method in (cloud.instance_exists, cloud.instance_shutdown, cloud.instance_metadata):
        with pytest.raises(ForeignProviderID, match=f"node 'n1' has providerID '{provider_id}'"):
            method(foreign)
    with pytest.raises(ForeignProviderID, match="not a local:// one"):
        cloud.get_zone_by_provider_id(provider_id)


def test_auto_adopt_never_adopts_another_providers_node(tmp_path: Path) -> None:
    made = make_cloud(tmp_path, "[Global]\nauto-adopt = true\n")
    with pytest.raises(ForeignProviderID):
        made.instance_metadata(node("n9", provider_id="aws:///zone/i-9"))
    assert made.store.list_instances() == []
    made.store.close()


def test_instance_metadata(cloud: LocalCloud) -> None:
    meta = cloud.instance_metadata(node("n1"))
    assert meta is not None
    assert (meta.provider_id, meta.instance_type, meta.zone, meta.region) == (
        "local://n1",
        "local.standard",
        "z1",
        "local",
    )
    assert [(a.type, a.address) for a in meta.node_addresses] == [("InternalIP", "127.0.10.1")]
    with pytest.raises(InstanceNotFound, match="auto-adopt"):
        cloud.instance_metadata(node("stranger"))


@pytest.mark.parametrize(
    ("adopt", "the_node", "adopted"),
    [
        pytest.param(True, node("fresh", address="127.0.10.9"), True, id="adopted"),
        pytest.param(False, node("fresh"), False, id="switched-off"),
        pytest.param(True, node("fresh", provider_id="local://fresh"), False, id="has-provider-id"),
    ],
)
def test_auto_adopt(tmp_path: Path, adopt: bool, the_node: dict[str, Any], adopted: bool) -> None:
    cloud = make_cloud(tmp_path, f"[Global]\nauto-adopt = {str(adopt).lower()}\nzone = zz\n")
    if not adopted:
        with pytest.raises(InstanceNotFound):
            cloud.instance_metadata(the_node)
        assert cloud.store.list_instances() == []
        return
    meta = cloud.instance_metadata(the_node)
    assert meta is not None
    assert (meta.provider_id, meta.zone) == ("local://fresh", "zz")
    stored = cloud.store.get_instance("fresh")
    assert stored.addresses == (("Hostname", "fresh"), ("InternalIP", "127.0.10.9"))


def test_zones(cloud: LocalCloud) -> None:
    assert cloud.get_zone_by_provider_id("local://n1").failure_domain == "z1"
    assert cloud.get_zone_by_node_name("n2").region == "local"
    assert cloud.get_zone().failure_domain == "local-zone-a"
    with pytest.raises(InstanceNotFound):
        cloud.get_zone_by_node_name("gone")


# -- the desired load balancer ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "mode", "health"),
    [
        pytest.param({}, "kube-proxy", ("kube-proxy", 10256, "/healthz"), id="cluster"),
        pytest.param(
            {"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000},
            "kube-proxy",
            ("node-port", 32000, "/healthz"),
            id="local-policy",
        ),
        pytest.param(
            {"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000},
            "tcp",
            ("tcp", 0, ""),
            id="tcp-mode",
        ),
    ],
)
def test_health_checks(spec: dict[str, Any], mode: str, health: tuple[Any, ...]) -> None:
    lb = desired_load_balancer(service(**spec), [], health_check_mode=mode)
    assert (lb.health["mode"], lb.health["port"], lb.health["path"]) == health


@pytest.mark.parametrize(
    ("annotations", "spec", "ranges"),
    [
        pytest.param({}, {}, ("0.0.0.0/0",), id="default"),
        pytest.param({}, {"loadBalancerSourceRanges": ["10.0.0.0/8"]}, ("10.0.0.0/8",), id="spec"),
        pytest.param(
            {"service.beta.kubernetes.io/load-balancer-source-ranges": "127.0.0.1/32, 10.1.0.0/16"},
            {},
            ("127.0.0.1/32", "10.1.0.0/16"),
            id="annotation",
        ),
        pytest.param(
            {"service.beta.kubernetes.io/load-balancer-source-ranges": "192.168.0.0/16"},
            {"loadBalancerSourceRanges": ["10.0.0.0/8"]},
            ("10.0.0.0/8",),
            id="spec-wins",
        ),
    ],
)
def test_source_ranges(
    annotations: dict[str, str], spec: dict[str, Any], ranges: tuple[str, ...]
) -> None:
    assert (
        desired_load_balancer(service(annotations=annotations, **spec), []).source_ranges == ranges
    )


def test_ports_backends_and_affinity() -> None:
    nodes = [
        node("b", address="127.0.10.2"),
        node("a", address="127.0.10.1"),
        node("c", address=None),
    ]
    lb = desired_load_balancer(service(sessionAffinity="ClientIP"), nodes)
    assert lb.ports == (
        {"name": "http", "protocol": "TCP", "port": 80, "node_port": 30080},
        {"name": "dns", "protocol": "UDP", "port": 53, "node_port": 30053},
    )
    assert lb.backends == (
        {"node": "a", "address": "127.0.10.1"},
        {"node": "b", "address": "127.0.10.2"},
    )
    assert (lb.service, lb.name, lb.session_affinity) == ("ns/web", "auid1", "ClientIP")


# -- LoadBalancer ----------------------------------------------------------------------------


def test_ensure_returns_the_vip_in_proxy_mode(cloud: LocalCloud) -> None:
    status = cloud.ensure_load_balancer(CLUSTER, service(), [node("n1")])
    assert status.to_dict() == {
        "ingress": [
            {
                "ip": "127.0.20.1",
                "ipMode": "Proxy",
                "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
            }
        ]
    }
    assert cloud.get_load_balancer(CLUSTER, service()) == (status, True)
    assert cloud.get_load_balancer(CLUSTER, service(uid="other")) == (None, False)


def test_the_vip_survives_a_controller_restart(tmp_path: Path) -> None:
    first = make_cloud(tmp_path)
    first.ensure_load_balancer(CLUSTER, service("a", "1"), [])
    vip = first.ensure_load_balancer(CLUSTER, service("b", "2"), []).ingress[0].ip
    first.store.close()
    restarted = make_cloud(tmp_path)
    assert restarted.ensure_load_balancer(CLUSTER, service("b", "2"), []).ingress[0].ip == vip


@pytest.mark.parametrize(
    ("requested", "error"),
    [
        pytest.param("127.0.20.5", None, id="free"),
        pytest.param("127.0.20.1", "already claimed by ns/holder", id="taken"),
        pytest.param(
            "192.0.2.1", r"not in the local VIP pool .*pool 127.0.20.1-127.0.20.6", id="outside"
        ),
    ],
)
def test_load_balancer_ip(cloud: LocalCloud, requested: str, error: str | None) -> None:
    cloud.ensure_load_balancer(CLUSTER, service("holder", "h"), [])
    wanted = service("wants", "w", loadBalancerIP=requested)
    if error is None:
        assert cloud.ensure_load_balancer(CLUSTER, wanted, []).ingress[0].ip == requested
        return
    with pytest.raises(LocalLoadBalancerError, match=error):
        cloud.ensure_load_balancer(CLUSTER, wanted, [])
    assert cloud.get_load_balancer(CLUSTER, wanted) == (None, False)


@pytest.mark.parametrize(
    ("annotation", "same_vip"),
    [pytest.param("true", True, id="retained"), pytest.param("false", False, id="released")],
)
def test_retain_ip_across_delete_and_recreate(
    cloud: LocalCloud, annotation: str, same_vip: bool
) -> None:
    retain = {"local.kccm.io/retain-ip": annotation}
    old = service("web", "old", annotations=retain)
    vip = cloud.ensure_load_balancer(CLUSTER, old, []).ingress[0].ip
    cloud.ensure_load_balancer_deleted(CLUSTER, old)
    assert cloud.get_load_balancer(CLUSTER, old) == (None, False)
    cloud.ensure_load_balancer(CLUSTER, service("squatter", "s"), [])
    again = cloud.ensure_load_balancer(CLUSTER, service("web", "new"), []).ingress[0].ip
    assert (again == vip) is same_vip


@pytest.mark.parametrize("annotation", ["1", "t", "TRUE", "True"])
def test_retain_ip_reads_go_bool_spellings(cloud: LocalCloud, annotation: str) -> None:
    old = service("web", "old", annotations={"local.kccm.io/retain-ip": annotation})
    vip = cloud.ensure_load_balancer(CLUSTER, old, []).ingress[0].ip
    cloud.ensure_load_balancer_deleted(CLUSTER, old)
    cloud.ensure_load_balancer(CLUSTER, service("squatter", "s"), [])
    assert cloud.ensure_load_balancer(CLUSTER, service("web", "new"), []).ingress[0].ip == vip


@pytest.mark.parametrize("annotation", ["maybe", "yes", " true", "TRUE ", "tRUE"])
def test_retain_ip_refuses_what_is_not_a_bool(cloud: LocalCloud, annotation: str) -> None:
    bad = service(annotations={"local.kccm.io/retain-ip": annotation})
    with pytest.raises(InvalidServiceConfig) as raised:
        cloud.ensure_load_balancer(CLUSTER, bad, [])
    assert raised.value.key == "local.kccm.io/retain-ip"
    assert f'invalid value "{annotation}": want true or false' in str(raised.value)
    assert cloud.store.list_ip_claims() == []
    with pytest.raises(InvalidServiceConfig, match=r"local\.kccm\.io/retain-ip"):
        cloud.ensure_load_balancer_deleted(CLUSTER, bad)


def test_update_rewrites_backends(cloud: LocalCloud) -> None:
    svc = service()
    cloud.ensure_load_balancer(CLUSTER, svc, [node("n1")])
    cloud.update_load_balancer(CLUSTER, svc, [node("n3", address="127.0.10.3")])
    (record,) = cloud.store.list_load_balancers()
    assert (record.backends, record.generation) == (({"node": "n3", "address": "127.0.10.3"},), 2)
    cloud.ensure_load_balancer_deleted(CLUSTER, svc)
    cloud.ensure_load_balancer_deleted(CLUSTER, svc)
    with pytest.raises(LocalLoadBalancerError, match="is gone"):
        cloud.update_load_balancer(CLUSTER, svc, [])


def test_invalid_source_range_annotation_is_an_error(cloud: LocalCloud) -> None:
    bad = service(annotations={"service.beta.kubernetes.io/load-balancer-source-ranges": "x/99"})
    with pytest.raises(LocalLoadBalancerError, match="invalid loadBalancerSourceRanges: x/99"):
        cloud.ensure_load_balancer(CLUSTER, bad, [])
    assert cloud.store.list_ip_claims() == []


# -- Routes ----------------------------------------------------------------------------------


def test_routes(cloud: LocalCloud) -> None:
    cloud.create_route(CLUSTER, "uid-n1", Route(target_node="n1", destination_cidr="10.244.1.0/24"))
    cloud.create_route("other", "uid-n1", Route(target_node="n1", destination_cidr="10.244.1.0/24"))
    (route,) = cloud.list_routes(CLUSTER)
    assert (route.name, route.target_node) == ("kubernetes-uid-n1-10.244.1.0/24", "n1")
    cloud.delete_route(CLUSTER, route)
    assert cloud.list_routes(CLUSTER) == []
    assert len(cloud.list_routes("other")) == 1


@pytest.mark.parametrize(
    ("ports", "spec", "message"),
    [
        pytest.param(
            [{"name": "assoc", "protocol": "SCTP", "port": 9000, "nodePort": 30900}],
            {},
            r"port assoc \(9000/SCTP\): the local data plane serves TCP and UDP only, not SCTP",
            id="sctp",
        ),
        pytest.param(
            [
                {"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30080},
                {"name": "assoc", "protocol": "SCTP", "port": 9000, "nodePort": 30900},
            ],
            {},
            "serves TCP and UDP only, not SCTP",
            id="sctp-next-to-tcp",
        ),
        pytest.param(
            [{"name": "http", "protocol": "TCP", "port": 80}],
            {"allocateLoadBalancerNodePorts": False},
            r"port http \(80/TCP\) has no nodePort \(spec.allocateLoadBalancerNodePorts is false\)",
            id="no-node-ports-allocated",
        ),
        pytest.param(
            [{"port": 53, "protocol": "UDP"}],
            {},
            r"port 53 \(53/UDP\) has no nodePort: the local data plane forwards to nodePorts",
            id="no-node-port",
        ),
    ],
)
def test_a_service_nothing_would_serve_gets_no_vip(
    cloud: LocalCloud, ports: list[dict[str, Any]], spec: dict[str, Any], message: str
) -> None:
    """Ensure fails naming the reason (a Warning event), and nothing is claimed or written,
    so no status claims a VIP that nothing serves."""
    svc = service(ports=ports, **spec)
    with pytest.raises(LocalLoadBalancerError, match=message):
        cloud.ensure_load_balancer(CLUSTER, svc, [node("n1")])
    assert cloud.store.list_load_balancers() == []
    assert cloud.store.list_ip_claims() == []
    assert cloud.get_load_balancer(CLUSTER, svc) == (None, False)


def test_the_daemon_refuses_a_bad_vip_range_with_exit_2(tmp_path: Path) -> None:
    """Daemon level: the bad range is named, every problem at once, nothing starts."""
    conf, kubeconfig = tmp_path / "cloud.conf", tmp_path / "kubeconfig"
    conf.write_text("[Global]\nvip-range = 0.0.0.0/0\n")
    kubeconfig.write_text(  # valid, pointing nowhere: the range is refused before any contact
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {}}]\ncurrent-context: c\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "kccm", "--cloud-provider=local", f"--cloud-config={conf}",
         f"--kubeconfig={kubeconfig}", "--controllers=*,-route"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "[Global] vip-range '0.0.0.0/0': 4294967294 addresses" in done.stderr
