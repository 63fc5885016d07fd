"""``[LoadBalancerClass "name"]`` sections, chosen by the ``loadbalancer.openstack.org/class``
annotation (upstream ``LBClass`` in ``pkg/openstack/openstack.go``; read in
``checkService``, ``getMemberSubnetID``, ``getSubnetID``, ``getNetworkID`` and
``createOctaviaLoadBalancer`` in ``loadbalancer.go`` v1.36.0).

A class overrides the floating network and subnet of the annotations and ``[LoadBalancer]``;
for the VIP and member subnets and the VIP network an annotation still wins. An unknown class
is an error (upstream: ``invalid loadbalancer class "x"``).
"""

from __future__ import annotations

from kccm.cloudprovider import Service
from kccm.providers.openstack import lbannotations as ann
from kccm.providers.openstack.floatingsubnets import FloatingSubnetSpec
from kccm.providers.openstack.lbopts import LBClass, LBOptions

__all__ = ["class_floating_spec", "class_setting", "lb_class"]


def lb_class(service: Service, opts: LBOptions) -> LBClass | None:
    """The class the Service names, ``None`` when it names none."""
    name = ann.annotation(service, ann.CLASS)
    if not name:
        return None
    found = opts.classes.get(name)
    if found is None:
        raise ann.LBAnnotationError(
            f"annotation {ann.CLASS}: invalid loadbalancer class {name!r} "
            f"(configured: {', '.join(sorted(opts.classes)) or 'none'})"
        )
    return found


def class_setting(service: Service, opts: LBOptions, name: str) -> str:
    """One string setting of the Service's class (``""`` without a class)."""
    found = lb_class(service, opts)
    return str(getattr(found, name)) if found is not None else ""


def class_floating_spec(service: Service, opts: LBOptions) -> tuple[str, FloatingSubnetSpec]:
    """The class's floating network and subnet spec (``floating-subnet-id`` first)."""
    found = lb_class(service, opts)
    if found is None:
        return "", FloatingSubnetSpec()
    if found.floating_subnet_id:
        return found.floating_network_id, FloatingSubnetSpec(subnet_id=found.floating_subnet_id)
    spec = FloatingSubnetSpec(subnet=found.floating_subnet, subnet_tags=found.floating_subnet_tags)
    return found.floating_network_id, spec
