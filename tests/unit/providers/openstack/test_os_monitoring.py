"""OCCM's monitoring kept: the ``openstack_api_*`` and ``cloudprovider_openstack_reconcile_*``
metrics with OCCM's names and labels on the registry the provider is given, and OCCM's
Warning Event reasons (``pkg/openstack/events.go`` v1.36.0) reported for the Service where
kccm has the behaviour."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, lb_world, node_of, service
from prometheus_client import CollectorRegistry, generate_latest

from kccm.cloudprovider import CloudProviderError, collect_service_warnings
from kccm.providers.openstack.loadbalancer import events as ev
from kccm.providers.openstack.loadbalancer.balancers import OctaviaLoadBalancers
from kccm.providers.openstack.metrics import request_label
from kccm.providers.openstack.provider import OpenStackCloud


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world() as made:
        yield made


def _scrape(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def test_an_ensure_shows_occms_metric_names_and_labels(world: LBWorld) -> None:
    balancers = world.balancers()
    registry = CollectorRegistry()
    cloud = OpenStackCloud(balancers.octavia.api.config, api=balancers.octavia.api)
    cloud.register_metrics(registry)
    cloud.register_metrics(registry)  # once per registry
    svc = service()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    with pytest.raises(CloudProviderError):
        balancers.update_load_balancer(CLUSTER, service(name="never-made"), world.nodes)
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
    text = _scrape(registry)
    for line in (
        'openstack_api_requests_total{request="loadbalancer_create"} 1.0',
        'openstack_api_request_duration_seconds_count{request="loadbalancer_create"} 1.0',
        'openstack_api_request_duration_seconds_bucket{le="10.0",request="floating_ip_create"}',
        'openstack_api_requests_total{request="loadbalancer_delete"} 1.0',
        'cloudprovider_openstack_reconcile_total{operation="loadbalancer_ensure"} 1.0',
        'cloudprovider_openstack_reconcile_total{operation="loadbalancer_update"} 1.0',
        'cloudprovider_openstack_reconcile_errors_total{operation="loadbalancer_update"} 1.0',
        'cloudprovider_openstack_reconcile_total{operation="loadbalancer_delete"} 1.0',
        'cloudprovider_openstack_reconcile_duration_seconds_bucket{le="1000.0",'
        'operation="loadbalancer_ensure"} 1.0',
    ):
        assert line in text, line
    assert 'reconcile_errors_total{operation="loadbalancer_ensure"}' not in text


def test_a_failed_request_counts_as_an_error(world: LBWorld) -> None:
    balancers = world.balancers()
    registry = CollectorRegistry()
    balancers.octavia.api.metrics.register(registry)
    svc = service()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    svc = world.with_written(svc)
    world.emu.admin.fault("network", "GET", r"/v2\.0/floatingips$", status=500, times=1)
    with pytest.raises(CloudProviderError):
        balancers.get_load_balancer(CLUSTER, svc)
    text = _scrape(registry)
    assert 'openstack_api_request_errors_total{request="floating_ip_list"} 1.0' in text
    assert 'openstack_api_request_errors_total{request="loadbalancer_get"}' not in text
    balancers.ensure_load_balancer_deleted(CLUSTER, svc)


LABELS = [
    ("create_loadbalancer", "loadbalancer_create"),
    ("list_listeners", "loadbalancer_listener_list"),
    ("batch_update_members", "loadbalancer_members_update"),
    ("get_healthmonitor", "loadbalancer_healthmonitor_get"),
    ("list_floatingips", "floating_ip_list"),
    ("list_security_group_rules", "security_group_rule_list"),
    ("delete_port_tag", "port_tag_delete"),
    ("list_extensions", "network_extension_list"),
    ("list_versions", "version_list"),
    ("add_extraroutes", "router_update"),
    ("list_servers", "server_list"),
    ("get_container", "container_get"),
]


@pytest.mark.parametrize(("operation", "label"), LABELS, ids=[op for op, _ in LABELS])
def test_request_labels_are_occms(operation: str, label: str) -> None:
    assert request_label(operation) == label


# -- events -------------------------------------------------------------------------------------


def _old_octavia(minor: int) -> Callable[[LBWorld], None]:
    def setup(world: LBWorld) -> None:
        versions = [{"id": f"v2.{n}", "status": "SUPPORTED"} for n in range(minor + 1)]
        world.emu.admin.fault(
            "load-balancer", "GET", r"^/load-balancer/?$", status=200,
            body={"versions": versions}, times=1,
        )  # fmt: skip

    return setup


def _no_floating_network(balancers: OctaviaLoadBalancers) -> None:
    balancers.neutron.floating_network_id = lambda: ""  # type: ignore[method-assign]


def _pool_update_refused(world: LBWorld) -> None:
    world.emu.admin.fault("load-balancer", "PUT", r"/lbaas/pools/[^/]+$", status=400, times=1)


EVENTS: list[tuple[str, dict[str, Any], Callable[..., None] | None, str, str]] = [
    # id, service, setup (world or balancers), reason, text in the message
    (
        "source-ranges-before-2.12",
        {"loadBalancerSourceRanges": ["10.20.0.0/16"]},
        _old_octavia(11),
        ev.SOURCE_RANGES_IGNORED,
        "LoadBalancerSourceRanges are ignored for Service default/web",
    ),
    (
        "zone-before-2.14",
        {"annotations": {ann.AVAILABILITY_ZONE: "nova"}},
        _old_octavia(13),
        ev.AZ_IGNORED,
        "upgrade Octavia API to version 2.14 or later",
    ),
    (
        "no-floating-network",
        {},
        _no_floating_network,
        ev.EXTERNAL_NETWORK_SEARCH_FAILED,
        "Failed to find floating-network-id for Service default/web",
    ),
    (
        "forced-internal",
        {},
        _no_floating_network,
        ev.FORCED_INTERNAL,
        "forcing to ensure an internal load balancer service",
    ),
]


@pytest.mark.parametrize(
    ("spec", "setup", "reason", "text"), [e[1:] for e in EVENTS], ids=[e[0] for e in EVENTS]
)
def test_occm_events_during_an_ensure(
    world: LBWorld, spec: dict[str, Any], setup: Callable[..., None], reason: str, text: str
) -> None:
    balancers = world.balancers(**{"floating-network-id": None})
    if setup is _no_floating_network:
        setup(balancers)
    else:
        setup(world)
    svc = service(**spec)
    with collect_service_warnings() as warnings:
        balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    found = [w.message for w in warnings if w.reason == reason]
    assert len(found) == 1, list(warnings)
    assert text in found[0]
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_rename_ipv6_and_lb_method_events(world: LBWorld) -> None:
    balancers = world.balancers()
    svc = service(annotations={ann.LB_METHOD: "ROUND_ROBIN"})
    balancers.ensure_load_balancer("old", svc, world.nodes)
    svc = world.with_written(svc)
    with collect_service_warnings() as renamed:
        balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert [w.reason for w in renamed] == [ev.RENAME]
    assert "with incorrect cluster-name component. Renaming it to kube_service_" in (
        next(iter(renamed)).message
    )
    _pool_update_refused(world)
    changed = {**svc, "metadata": {**svc["metadata"], "annotations": {
        **svc["metadata"]["annotations"], ann.LB_METHOD: "LEAST_CONNECTIONS"}}}  # fmt: skip
    with collect_service_warnings() as refused:
        balancers.update_load_balancer(CLUSTER, changed, world.nodes)
    (warning,) = refused
    assert warning.reason == ev.LB_METHOD_UNKNOWN
    assert warning.message.startswith("Error updating LB method for LoadBalancer: ")
    balancers.ensure_load_balancer_deleted(CLUSTER, svc)

    six = service(
        name="six",
        annotations={ann.SUBNET_ID: world.ids["private_subnet6_id"]},
        ipFamilies=["IPv6"],
    )
    with collect_service_warnings() as skipped:
        balancers.ensure_load_balancer(CLUSTER, six, [node_of(s, ipv6=True) for s in world.servers])
    assert [w.reason for w in skipped] == [ev.FLOATING_IP_SKIPPED]
    assert "Floating IP not supported for IPv6 Service default/six" in next(iter(skipped)).message
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(six))
