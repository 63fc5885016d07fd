"""What a Service asks of its Octavia balancer, resolved once per call (upstream
``serviceConfig`` and ``checkService``, ``checkServiceUpdate``, ``checkServiceDelete``,
``makeSvcConf``, ``getMemberSubnetID``, ``getSubnetID``, ``getNetworkID`` and
``GetLoadBalancerSourceRanges`` in ``pkg/openstack/loadbalancer.go`` v1.36.0).

Precedence is upstream's: annotation, then the ``[LoadBalancerClass]`` named by
``loadbalancer.openstack.org/class``, then ``[LoadBalancer]``; for the floating network the
class comes first. Bad values are :class:`~.lbannotations.LBAnnotationError`\\ s.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kccm.cloudprovider import CloudProviderError, Node, Service, Throttled
from kccm.providers.openstack import lbannotations as ann
from kccm.providers.openstack.floatingsubnets import FloatingSubnetSpec
from kccm.providers.openstack.lbannotations import LBAnnotationError, annotation
from kccm.providers.openstack.lbclasses import class_floating_spec, class_setting, lb_class
from kccm.providers.openstack.lbnames import service_key
from kccm.providers.openstack.lbnodes import subnet_id_for_lb
from kccm.providers.openstack.lbopts import LBOptions
from kccm.providers.openstack.neutron import Neutron
from kccm.providers.openstack.octavia import Octavia

__all__ = [
    "ServiceConfig",
    "config_for_delete",
    "config_for_ensure",
    "config_for_update",
    "source_ranges",
]

log = logging.getLogger(__name__)


@dataclass
class ServiceConfig:
    """Upstream ``serviceConfig``."""

    lb_name: str = ""
    lb_id: str = ""
    internal: bool = False
    conn_limit: int = -1
    class_name: str = ""
    network_id: str = ""
    subnet_id: str = ""
    member_subnet_id: str = ""
    public_network_id: str = ""
    public_subnet: FloatingSubnetSpec | None = None
    node_selectors: dict[str, str] = field(default_factory=dict)
    keep_client_ip: bool = False
    lb_method: str = ""
    proxy_protocol: str | None = None
    timeouts: dict[str, int] = field(default_factory=dict)
    allowed_cidrs: list[str] = field(default_factory=list)
    enable_monitor: bool = False
    flavor_id: str = ""
    availability_zone: str = ""
    tls_container_ref: str = ""
    support_tags: bool = False
    health_check_node_port: int = 0
    monitor_delay: int = 0
    monitor_timeout: int = 0
    monitor_max_retries: int = 0
    monitor_max_retries_down: int = 0
    ip_family: str = ""


def _spec(service: Service) -> Mapping[str, Any]:
    return service.get("spec") or {}


def source_ranges(service: Service, family: str) -> list[str]:
    """Upstream ``GetLoadBalancerSourceRanges``: ``spec.loadBalancerSourceRanges``, else the
    ``load-balancer-source-ranges`` annotation, else everything (of the preferred family);
    as normalised CIDRs, sorted."""
    ranges: Sequence[str] = _spec(service).get("loadBalancerSourceRanges") or ()
    origin = "spec.loadBalancerSourceRanges"
    if not ranges:
        origin = f"annotation {ann.SOURCE_RANGES}"
        text = annotation(service, ann.SOURCE_RANGES).strip()
        if not text:
            text = "::/0" if family == "IPv6" else "0.0.0.0/0"
        ranges = [r for r in text.replace(",", " ").split() if r]
    try:
        nets = {str(ipaddress.ip_network(r.strip(), strict=False)) for r in ranges}
    except ValueError as err:
        raise LBAnnotationError(
            f"{origin}: {list(ranges)} is not a list of IP ranges ({err})"
        ) from err
    return sorted(nets)


def _ip_family(service: Service) -> str:
    families: Sequence[str] = _spec(service).get("ipFamilies") or ()
    return str(families[0]) if families else ""


def _tls_container_ref(service: Service, opts: LBOptions) -> str:
    ref = annotation(service, ann.TLS_CONTAINER_REF, opts.default_tls_container_ref)
    if ref and opts.container_store != "external":
        # Upstream: "failed to create a TLS Terminated loadbalancer because openstack
        # keymanager client is not initialized" — kccm has no Barbican client.
        raise LBAnnotationError(
            f"annotation {ann.TLS_CONTAINER_REF}: TLS termination with a Barbican container "
            "store is not supported by kccm (set [LoadBalancer] container-store=external)"
        )
    return ref


def _member_subnet_id(service: Service, opts: LBOptions) -> str:
    """Upstream ``getMemberSubnetID``."""
    value = annotation(service, ann.MEMBER_SUBNET_ID)
    return value or class_setting(service, opts, "member_subnet_id") or opts.member_subnet_id


def _subnet_id(service: Service, opts: LBOptions) -> str:
    """Upstream ``getSubnetID``."""
    value = annotation(service, ann.SUBNET_ID)
    return value or class_setting(service, opts, "subnet_id") or opts.subnet_id


def _network_id(service: Service, opts: LBOptions) -> str:
    """Upstream ``getNetworkID``."""
    value = annotation(service, ann.NETWORK_ID)
    return value or class_setting(service, opts, "network_id") or opts.network_id


def _internal(service: Service, opts: LBOptions) -> bool:
    if opts.internal_lb:
        ann.bool_annotation(service, ann.INTERNAL, False)  # still refuse a bad value
        return True
    return ann.bool_annotation(service, ann.INTERNAL, False)


def _floating(conf: ServiceConfig, service: Service, opts: LBOptions, neutron: Neutron) -> None:
    """The floating network and subnet part of upstream ``checkService``."""
    conf.class_name = annotation(service, ann.CLASS)
    network_id, spec = class_floating_spec(service, opts)
    if not network_id:
        network_id = annotation(service, ann.FLOATING_NETWORK_ID, opts.floating_network_id)
    if not network_id:
        network_id = neutron.floating_network_id()
        if not network_id:
            log.warning("Failed to find floating-network-id for Service %s", service_key(service))
    if not spec.configured():
        spec = FloatingSubnetSpec.from_annotations(service)
        if not spec.configured():
            spec = FloatingSubnetSpec.from_options(opts)
    spec.validate()
    if network_id and spec.subnet_id:
        subnet = neutron.subnet(spec.subnet_id)
        if subnet.get("network_id") != network_id:
            raise LBAnnotationError(
                f"floating IP subnet {spec.subnet_id!r} doesn't belong to the network "
                f"{subnet.get('network_id')!r}"
            )
    conf.public_network_id = network_id
    conf.public_subnet = spec if spec.configured() else None


def _first_node_subnet(
    neutron: Neutron, nodes: Sequence[Node], family: str, service: Service
) -> str:
    try:
        return subnet_id_for_lb(neutron, nodes[0], family)
    except Throttled:
        raise
    except CloudProviderError as err:
        raise CloudProviderError(
            "failed to get subnet to create load balancer for service "
            f"{service_key(service)}: {err}"
        ) from err


def config_for_ensure(
    service: Service, nodes: Sequence[Node], opts: LBOptions, octavia: Octavia, neutron: Neutron
) -> ServiceConfig:
    """Upstream ``checkService`` + ``makeSvcConf``."""
    key = service_key(service)
    if not nodes:
        raise CloudProviderError(f"there are no available nodes for LoadBalancer service {key}")
    if not _spec(service).get("ports"):
        raise CloudProviderError("no service ports provided")
    conf = ServiceConfig(ip_family=_ip_family(service))
    conf.internal = _internal(service, opts)
    conf.tls_container_ref = _tls_container_ref(service, opts)
    lb_class(service, opts)  # an unknown class is an error whatever else is set
    conf.network_id = _network_id(service, opts)
    conf.subnet_id = _subnet_id(service, opts)
    conf.member_subnet_id = opts.subnet_id or conf.subnet_id
    if not conf.network_id and not conf.subnet_id:
        conf.subnet_id = conf.member_subnet_id = _first_node_subnet(
            neutron, nodes, conf.ip_family, service
        )
    conf.member_subnet_id = _member_subnet_id(service, opts) or conf.member_subnet_id
    if not conf.internal:
        _floating(conf, service, opts, neutron)
    _finish(conf, service, opts, octavia)
    return conf


def config_for_update(
    service: Service, nodes: Sequence[Node], opts: LBOptions, octavia: Octavia, neutron: Neutron
) -> ServiceConfig:
    """Upstream ``checkServiceUpdate`` + ``makeSvcConf``."""
    if not _spec(service).get("ports"):
        raise CloudProviderError("no ports provided to openstack load balancer")
    conf = ServiceConfig(ip_family=_ip_family(service))
    member = _member_subnet_id(service, opts)
    if member:
        conf.member_subnet_id = member
    elif opts.subnet_id:
        conf.member_subnet_id = opts.subnet_id
    else:
        conf.class_name = annotation(service, ann.CLASS)
        if conf.class_name:
            found = lb_class(service, opts)
            conf.member_subnet_id = found.subnet_id if found is not None else ""
        else:
            conf.member_subnet_id = annotation(service, ann.SUBNET_ID, opts.subnet_id)
            if not conf.member_subnet_id and nodes:
                conf.member_subnet_id = _first_node_subnet(neutron, nodes, conf.ip_family, service)
    _finish(conf, service, opts, octavia)
    return conf


def config_for_delete(service: Service, opts: LBOptions, octavia: Octavia) -> ServiceConfig:
    """Upstream ``checkServiceDelete`` (lenient: a Service going away is never refused)."""
    conf = ServiceConfig()
    conf.lb_id = annotation(service, ann.LB_ID)
    conf.support_tags = octavia.supports("tags")
    conf.keep_client_ip = annotation(service, ann.X_FORWARDED_FOR) == "true"
    try:
        conf.proxy_protocol = ann.proxy_protocol(service)
    except LBAnnotationError:
        conf.proxy_protocol = None
    conf.tls_container_ref = annotation(
        service, ann.TLS_CONTAINER_REF, opts.default_tls_container_ref
    )
    return conf


def _timeouts(service: Service) -> dict[str, int]:
    return {
        "timeout_client_data": ann.int_annotation(service, ann.TIMEOUT_CLIENT_DATA, 50000),
        "timeout_member_connect": ann.int_annotation(service, ann.TIMEOUT_MEMBER_CONNECT, 5000),
        "timeout_member_data": ann.int_annotation(service, ann.TIMEOUT_MEMBER_DATA, 50000),
        "timeout_tcp_inspect": ann.int_annotation(service, ann.TIMEOUT_TCP_INSPECT, 0),
    }


def _lb_method(service: Service) -> str:
    method = annotation(service, ann.LB_METHOD)
    allowed = ("", "ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT")
    if method not in allowed:
        raise LBAnnotationError(
            f"annotation {ann.LB_METHOD}: {method!r} is not one of {', '.join(allowed[1:])}"
        )
    return method


def _monitor(conf: ServiceConfig, service: Service, opts: LBOptions) -> None:
    conf.enable_monitor = ann.bool_annotation(
        service, ann.ENABLE_HEALTH_MONITOR, opts.create_monitor
    )
    spec = _spec(service)
    hcnp = int(spec.get("healthCheckNodePort") or 0)
    if conf.enable_monitor and spec.get("externalTrafficPolicy") == "Local" and hcnp > 0:
        conf.health_check_node_port = hcnp
    conf.monitor_delay = ann.int_annotation(
        service, ann.HEALTH_MONITOR_DELAY, int(opts.monitor_delay)
    )
    conf.monitor_timeout = ann.int_annotation(
        service, ann.HEALTH_MONITOR_TIMEOUT, int(opts.monitor_timeout)
    )
    conf.monitor_max_retries = ann.int_annotation(
        service, ann.HEALTH_MONITOR_MAX_RETRIES, opts.monitor_max_retries
    )
    conf.monitor_max_retries_down = ann.int_annotation(
        service, ann.HEALTH_MONITOR_MAX_RETRIES_DOWN, opts.monitor_max_retries_down
    )


def _client_ip(conf: ServiceConfig, service: Service) -> None:
    """``x-forwarded-for`` and ``proxy-protocol``, which exclude each other."""
    keep_client_ip = ann.bool_annotation(service, ann.X_FORWARDED_FOR, False)
    conf.proxy_protocol = ann.proxy_protocol(service)
    if conf.proxy_protocol is not None and keep_client_ip:
        raise LBAnnotationError(
            f"annotation {ann.PROXY_PROTOCOL} and {ann.X_FORWARDED_FOR} cannot be used together"
        )
    conf.keep_client_ip = keep_client_ip


def _features(conf: ServiceConfig, service: Service, opts: LBOptions, octavia: Octavia) -> None:
    """What depends on the Octavia version and provider (``IsOctaviaFeatureSupported``)."""
    key = service_key(service)
    timeouts = _timeouts(service)
    if octavia.supports("timeout"):
        conf.timeouts = timeouts
    ranges = source_ranges(service, conf.ip_family)
    if octavia.supports("vip_acl") or (opts.lb_provider == "ovn" and opts.manage_security_groups):
        conf.allowed_cidrs = ranges
    elif (service.get("spec") or {}).get("loadBalancerSourceRanges") or annotation(
        service, ann.SOURCE_RANGES
    ):
        log.warning(
            "LoadBalancerSourceRanges are ignored for Service %s because Octavia provider "
            "does not support it",
            key,
        )
    if octavia.supports("flavors"):
        conf.flavor_id = annotation(service, ann.FLAVOR_ID, opts.flavor_id)
    zone = annotation(service, ann.AVAILABILITY_ZONE, opts.availability_zone)
    if octavia.supports("availability_zones"):
        conf.availability_zone = zone
    elif zone:
        log.warning(
            "LoadBalancer Availability Zones aren't supported (Octavia < 2.14) for Service %s", key
        )


def _finish(conf: ServiceConfig, service: Service, opts: LBOptions, octavia: Octavia) -> None:
    """Upstream ``makeSvcConf``."""
    conf.conn_limit = ann.int_annotation(service, ann.CONN_LIMIT, -1)
    conf.lb_id = annotation(service, ann.LB_ID)
    conf.lb_method = _lb_method(service)
    conf.support_tags = octavia.supports("tags")
    conf.node_selectors = ann.key_value_annotation(service, ann.NODE_SELECTOR, opts.node_selector)
    _client_ip(conf, service)
    _features(conf, service, opts, octavia)
    conf.tls_container_ref = _tls_container_ref(service, opts)
    _monitor(conf, service, opts)
