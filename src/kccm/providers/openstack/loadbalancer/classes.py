"""``[LoadBalancerClass "name"]`` sections, chosen by the ``loadbalancer.openstack.org/class``
annotation (upstream ``LBClass`` in ``pkg/openstack/openstack.go``; read in
``checkService``, ``getMemberSubnetID``, ``getSubnetID``, ``getNetworkID`` and
``createOctaviaLoadBalancer`` in ``loadbalancer.go`` v1.36.0).

A class overrides the floating network and subnet of the annotations and ``[LoadBalancer]``,
and, for an external Service, the VIP subnet and network (``createOctaviaLoadBalancer``); for
an internal Service's VIP and for the member subnet an annotation still wins. An unknown class
is an error (upstream: ``invalid loadbalancer class "x"``).
"""

from __future__ import annotations

from collections.abc import Mapping

from kccm.providers.openstack.config_sections import LBClassOpts
from kccm.providers.openstack.loadbalancer import annotations as ann
from kccm.providers.openstack.loadbalancer.floatingsubnets import FloatingSubnetSpec

__all__ = ["Classes", "class_floating_spec", "lb_class"]

Classes = Mapping[str, LBClassOpts]
"""The configured classes by name (``OpenStackConfig.load_balancer_classes``)."""


def lb_class(name: str, classes: Classes) -> LBClassOpts | None:
    """The class a Service names (``name``: its ``class`` annotation), ``None`` when it names
    none."""
    if not name:
        return None
    found = classes.get(name)
    if found is None:
        raise ann.LBAnnotationError(
            f"annotation {ann.CLASS}: invalid loadbalancer class {name!r} "
            f"(configured: {', '.join(sorted(classes)) or 'none'})"
        )
    return found


def class_floating_spec(found: LBClassOpts | None) -> tuple[str, FloatingSubnetSpec]:
    """The class's floating network and subnet spec (``floating-subnet-id`` first)."""
    if found is None:
        return "", FloatingSubnetSpec()
    if found.floating_subnet_id:
        return found.floating_network_id, FloatingSubnetSpec(subnet_id=found.floating_subnet_id)
    spec = FloatingSubnetSpec(subnet=found.floating_subnet, subnet_tags=found.floating_subnet_tags)
    return found.floating_network_id, spec
