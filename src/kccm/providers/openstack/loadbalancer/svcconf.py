"""What a Service asks of its Octavia balancer, resolved once per call (upstream
``serviceConfig`` and ``checkService``, ``checkServiceUpdate``, ``checkServiceDelete``,
``makeSvcConf``, ``getMemberSubnetID``, ``getSubnetID``, ``getNetworkID`` and
``GetLoadBalancerSourceRanges`` in ``pkg/openstack/loadbalancer.go`` v1.36.0).

Precedence is upstream's: annotation, then the ``[LoadBalancerClass]`` named by
``loadbalancer.openstack.org/class``, then ``[LoadBalancer]``; for the floating network the
class comes first. The annotations come from :mod:`.annotations`, each read where upstream
reads it (a value upstream cannot parse gives its default, with a Warning Event), so the
first problem upstream would meet is the one reported.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kccm.cloudprovider import CloudProviderError, Node, Service, Throttled
from kccm.providers.openstack.config_sections import LBClassOpts, LoadBalancerOpts
from kccm.providers.openstack.loadbalancer import annotations as ann
from kccm.providers.openstack.loadbalancer import events as ev
from kccm.providers.openstack.loadbalancer.annotations import (
    LBAnnotationError,
    ServiceAnnotations,
    read_annotations,
)
from kccm.providers.openstack.loadbalancer.classes import Classes, class_floating_spec, lb_class
from kccm.providers.openstack.loadbalancer.events import occm_event
from kccm.providers.openstack.loadbalancer.floatingsubnets import FloatingSubnetSpec
from kccm.providers.openstack.loadbalancer.keymanager import KeyManager
from kccm.providers.openstack.loadbalancer.names import service_key
from kccm.providers.openstack.loadbalancer.neutron import Neutron
from kccm.providers.openstack.loadbalancer.nodes import subnet_id_for_lb
from kccm.providers.openstack.loadbalancer.octavia import Octavia

__all__ = [
    "ServiceConfig",
    "config_for_delete",
    "config_for_ensure",
    "config_for_update",
    "parse_cidr_sloppy",
    "source_ranges",
]

log = logging.getLogger(__name__)


@dataclass
class ServiceConfig:
    """Upstream ``serviceConfig``, with the Service's parsed annotations and its
    ``[LoadBalancerClass]`` (kccm: what the balancer code reads of the Service)."""

    annotations: ServiceAnnotations = field(default_factory=ServiceAnnotations)
    lb_class: LBClassOpts | None = None
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


def _or(value: str | None, default: str) -> str:
    """An annotation's text, ``default`` when it is absent (an empty value counts)."""
    return default if value is None else value


def _ipv4_sloppy(text: str) -> ipaddress.IPv4Address | None:
    """The forked ``parseIPv4`` of ``k8s.io/utils/net``: four decimal fields up to 255,
    leading zeros allowed (read as decimal)."""
    fields = text.split(".")
    if len(fields) != 4 or not all(f.isascii() and f.isdigit() for f in fields):
        return None
    if any(int(f) > 255 for f in fields):
        return None
    return ipaddress.IPv4Address(".".join(str(int(f)) for f in fields))


def parse_cidr_sloppy(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """``netutils.ParseCIDRSloppy`` (what ``netsets.ParseIPNets`` applies): ``address/bits``
    with a decimal prefix length; a bare address is refused, host bits are dropped."""
    address, slash, bits = text.partition("/")
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = _ipv4_sloppy(address)
    if ip is None and ":" in address and "%" not in address:
        try:
            ip = ipaddress.IPv6Address(address)
        except ValueError:
            ip = None
    width = 32 if isinstance(ip, ipaddress.IPv4Address) else 128
    if not slash or ip is None or not (bits.isascii() and bits.isdigit()) or int(bits) > width:
        raise ValueError(f"invalid CIDR address: {text}")
    return ipaddress.ip_network((ip, int(bits)), strict=False)


def source_ranges(service: Service, notes: ServiceAnnotations, family: str) -> list[str]:
    """Upstream ``GetLoadBalancerSourceRanges``: ``spec.loadBalancerSourceRanges``, else the
    ``load-balancer-source-ranges`` annotation, else everything (of the preferred family);
    as normalised CIDRs, sorted."""
    ranges: Sequence[str] = _spec(service).get("loadBalancerSourceRanges") or ()
    origin = "spec.loadBalancerSourceRanges"
    if not ranges:
        origin = f"annotation {ann.SOURCE_RANGES}"
        text = notes.source_ranges.strip()
        if not text:
            text = "::/0" if family == "IPv6" else "0.0.0.0/0"
        ranges = [r for r in text.replace(",", " ").split() if r]
    try:
        nets = {str(parse_cidr_sloppy(r.strip())) for r in ranges}
    except ValueError as err:
        raise LBAnnotationError(
            f"{origin}: {list(ranges)} is not a list of IP ranges ({err})"
        ) from err
    return sorted(nets)


def _ip_family(service: Service) -> str:
    families: Sequence[str] = _spec(service).get("ipFamilies") or ()
    return str(families[0]) if families else ""


def _tls_container_ref(notes: ServiceAnnotations, opts: LoadBalancerOpts) -> str:
    """The annotation, else ``[LoadBalancer] default-tls-container-ref`` (checked in Barbican
    on ensure only: :mod:`.keymanager`)."""
    return _or(notes.tls_container_ref, opts.default_tls_container_ref)


def _class_setting(notes: ServiceAnnotations, classes: Classes, name: str) -> str:
    """One string setting of the Service's class (``""`` without a class)."""
    found = lb_class(notes.class_name, classes)
    return str(getattr(found, name)) if found is not None else ""


def _member_subnet_id(notes: ServiceAnnotations, opts: LoadBalancerOpts, classes: Classes) -> str:
    """Upstream ``getMemberSubnetID``."""
    value = notes.member_subnet_id
    return value or _class_setting(notes, classes, "member_subnet_id") or opts.member_subnet_id


def _subnet_id(notes: ServiceAnnotations, opts: LoadBalancerOpts, classes: Classes) -> str:
    """Upstream ``getSubnetID``."""
    value = notes.subnet_id or ""
    return value or _class_setting(notes, classes, "subnet_id") or opts.subnet_id


def _network_id(notes: ServiceAnnotations, opts: LoadBalancerOpts, classes: Classes) -> str:
    """Upstream ``getNetworkID``."""
    value = notes.network_id
    return value or _class_setting(notes, classes, "network_id") or opts.network_id


def _internal(notes: ServiceAnnotations, opts: LoadBalancerOpts) -> bool:
    """Upstream ``checkService``: ``internal-lb`` forces it (the annotation is only logged
    there, so kccm does not read it either); else the annotation, default ``internal-lb``."""
    if opts.internal_lb:
        return True
    return notes.internal.get(opts.internal_lb)


def _floating(
    conf: ServiceConfig,
    service: Service,
    opts: LoadBalancerOpts,
    classes: Classes,
    neutron: Neutron,
) -> None:
    """The floating network and subnet part of upstream ``checkService``."""
    notes = conf.annotations
    conf.class_name = notes.class_name
    network_id, spec = class_floating_spec(lb_class(notes.class_name, classes))
    if not network_id:
        network_id = _or(notes.floating_network_id, opts.floating_network_id)
    if not network_id:
        network_id = neutron.floating_network_id()
        if not network_id:
            occm_event(
                ev.EXTERNAL_NETWORK_SEARCH_FAILED,
                f"Failed to find floating-network-id for Service {service_key(service)}: "
                "failed to find object",
            )
    if not spec.configured():
        spec = FloatingSubnetSpec.from_annotations(notes)
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
    service: Service,
    nodes: Sequence[Node],
    opts: LoadBalancerOpts,
    classes: Classes,
    octavia: Octavia,
    neutron: Neutron,
    keymanager: KeyManager | None = None,
) -> ServiceConfig:
    """Upstream ``checkService`` + ``makeSvcConf``."""
    key = service_key(service)
    if not nodes:
        raise CloudProviderError(f"there are no available nodes for LoadBalancer service {key}")
    if not _spec(service).get("ports"):
        raise CloudProviderError("no service ports provided")
    notes = read_annotations(service)
    conf = ServiceConfig(annotations=notes, ip_family=_ip_family(service))
    conf.internal = _internal(notes, opts)
    conf.tls_container_ref = _tls_container_ref(notes, opts)
    if keymanager is not None:
        keymanager.check_ref(conf.tls_container_ref, key)
    conf.lb_class = lb_class(notes.class_name, classes)  # unknown: an error whatever is set
    conf.network_id = _network_id(notes, opts, classes)
    conf.subnet_id = _subnet_id(notes, opts, classes)
    conf.member_subnet_id = opts.subnet_id or conf.subnet_id
    if not conf.network_id and not conf.subnet_id:
        conf.subnet_id = conf.member_subnet_id = _first_node_subnet(
            neutron, nodes, conf.ip_family, service
        )
    conf.member_subnet_id = _member_subnet_id(notes, opts, classes) or conf.member_subnet_id
    if not conf.internal:
        _floating(conf, service, opts, classes, neutron)
    _finish(conf, service, opts, octavia)
    return conf


def config_for_update(
    service: Service,
    nodes: Sequence[Node],
    opts: LoadBalancerOpts,
    classes: Classes,
    octavia: Octavia,
    neutron: Neutron,
) -> ServiceConfig:
    """Upstream ``checkServiceUpdate`` + ``makeSvcConf``."""
    if not _spec(service).get("ports"):
        raise CloudProviderError("no ports provided to openstack load balancer")
    notes = read_annotations(service)
    conf = ServiceConfig(annotations=notes, ip_family=_ip_family(service))
    member = _member_subnet_id(notes, opts, classes)
    if member:
        conf.member_subnet_id = member
    elif opts.subnet_id:
        conf.member_subnet_id = opts.subnet_id
    else:
        conf.class_name = notes.class_name
        if conf.class_name:
            found = lb_class(conf.class_name, classes)
            conf.member_subnet_id = found.subnet_id if found is not None else ""
        else:
            conf.member_subnet_id = _or(notes.subnet_id, opts.subnet_id)
            if not conf.member_subnet_id and nodes:
                conf.member_subnet_id = _first_node_subnet(neutron, nodes, conf.ip_family, service)
    _finish(conf, service, opts, octavia)
    return conf


def config_for_delete(service: Service, opts: LoadBalancerOpts, octavia: Octavia) -> ServiceConfig:
    """Upstream ``checkServiceDelete`` (nothing read here can refuse a deletion)."""
    notes = read_annotations(service)
    conf = ServiceConfig(annotations=notes)
    conf.lb_id = notes.lb_id
    conf.support_tags = octavia.supports("tags")
    conf.keep_client_ip = notes.x_forwarded_for.get(False)
    conf.proxy_protocol = notes.proxy_protocol.get(None)
    conf.tls_container_ref = _tls_container_ref(notes, opts)
    return conf


def _timeouts(notes: ServiceAnnotations) -> dict[str, int]:
    return {
        "timeout_client_data": notes.timeout_client_data.get(50000),
        "timeout_member_connect": notes.timeout_member_connect.get(5000),
        "timeout_member_data": notes.timeout_member_data.get(50000),
        "timeout_tcp_inspect": notes.timeout_tcp_inspect.get(0),
    }


def _monitor(conf: ServiceConfig, service: Service, opts: LoadBalancerOpts) -> None:
    notes = conf.annotations
    conf.enable_monitor = notes.enable_health_monitor.get(opts.create_monitor)
    spec = _spec(service)
    hcnp = int(spec.get("healthCheckNodePort") or 0)
    if conf.enable_monitor and spec.get("externalTrafficPolicy") == "Local" and hcnp > 0:
        conf.health_check_node_port = hcnp
    conf.monitor_delay = notes.health_monitor_delay.get(int(opts.monitor_delay))
    conf.monitor_timeout = notes.health_monitor_timeout.get(int(opts.monitor_timeout))
    conf.monitor_max_retries = notes.health_monitor_max_retries.get(opts.monitor_max_retries)
    conf.monitor_max_retries_down = notes.health_monitor_max_retries_down.get(
        opts.monitor_max_retries_down
    )


def _client_ip(conf: ServiceConfig) -> None:
    """``x-forwarded-for`` and ``proxy-protocol``, which exclude each other."""
    keep_client_ip = conf.annotations.x_forwarded_for.get(False)
    conf.proxy_protocol = conf.annotations.proxy_protocol.get(None)
    if conf.proxy_protocol is not None and keep_client_ip:
        raise LBAnnotationError(
            f"annotation {ann.PROXY_PROTOCOL} and {ann.X_FORWARDED_FOR} cannot be used together"
        )
    conf.keep_client_ip = keep_client_ip


def _features(
    conf: ServiceConfig, service: Service, opts: LoadBalancerOpts, octavia: Octavia
) -> None:
    """What depends on the Octavia version and provider (``IsOctaviaFeatureSupported``)."""
    key = service_key(service)
    notes = conf.annotations
    timeouts = _timeouts(notes)
    if octavia.supports("timeout"):
        conf.timeouts = timeouts
    ranges = source_ranges(service, notes, conf.ip_family)
    if octavia.supports("vip_acl") or (opts.lb_provider == "ovn" and opts.manage_security_groups):
        conf.allowed_cidrs = ranges
    elif _spec(service).get("loadBalancerSourceRanges") or notes.source_ranges:
        occm_event(
            ev.SOURCE_RANGES_IGNORED,
            f"LoadBalancerSourceRanges are ignored for Service {key} because Octavia provider "
            "does not support it",
        )
    if octavia.supports("flavors"):
        conf.flavor_id = _or(notes.flavor_id, opts.flavor_id)
    zone = _or(notes.availability_zone, opts.availability_zone)
    if octavia.supports("availability_zones"):
        conf.availability_zone = zone
    elif zone:
        occm_event(
            ev.AZ_IGNORED,
            "LoadBalancer Availability Zones aren't supported. Please, upgrade Octavia API to "
            f"version 2.14 or later (Ussuri release) to use them for Service {key}",
        )


def _finish(
    conf: ServiceConfig, service: Service, opts: LoadBalancerOpts, octavia: Octavia
) -> None:
    """Upstream ``makeSvcConf``."""
    notes = conf.annotations
    conf.conn_limit = notes.conn_limit.get(-1)
    conf.lb_id = notes.lb_id
    conf.lb_method = notes.lb_method.get("")
    conf.support_tags = octavia.supports("tags")
    conf.node_selectors = notes.node_selectors(opts.node_selector)
    _client_ip(conf)
    _features(conf, service, opts, octavia)
    conf.tls_container_ref = _tls_container_ref(notes, opts)
    _monitor(conf, service, opts)
