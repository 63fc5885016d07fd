"""A Service's frontend: its public IP (made or adopted first) or its place in a subnet
(cloud-provider-azure v1.36.5 ``azure_loadbalancer.go`` ``reconcileFrontendIPConfigs``'
``addNewFIPOfService``, ``reconcilePublicIPs``/``reconcilePublicIP``)."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence

from kccm.cloudprovider import InvalidServiceConfig, Service
from kccm.providers.azure.loadbalancer.annotations import ServiceAnnotations
from kccm.providers.azure.loadbalancer.armapi import ArmApi, read_modify_write
from kccm.providers.azure.loadbalancer.lbrules import Json
from kccm.providers.azure.loadbalancer.names import LBSettings, frontend_name
from kccm.providers.azure.loadbalancer.pips import (
    SERVICE_TAG,
    desired_pip,
    release_plan,
    service_ipv4,
    service_name,
)
from kccm.providers.azure.loadbalancer.retention import (
    choose_service_pip,
    claimable,
    reclaimed,
)

__all__ = ["PublicIPs", "internal_frontend", "public_frontend", "release_public_ips"]

log = logging.getLogger(__name__)


class PublicIPs:
    """The public IPs of one resource group, listed once per call."""

    def __init__(self, arm: ArmApi, settings: LBSettings, ann: ServiceAnnotations) -> None:
        self.arm = arm
        self.settings = settings
        self.group = ann.pip_resource_group or settings.resource_group
        self._listed: list[Json] | None = None

    def all(self) -> list[Json]:
        if self._listed is None:
            self._listed = self.arm.list(self.settings.pips_path(self.group))
        return self._listed

    def find(self, name: str) -> Json | None:
        return next((p for p in self.all() if str(p.get("name", "")).lower() == name.lower()), None)

    def path(self, name: str) -> str:
        return self.settings.pip_path(self.group, name)


def public_frontend(
    pips: PublicIPs,
    cluster: str,
    service: Service,
    ann: ServiceAnnotations,
    zones: Sequence[str] = (),
) -> tuple[Json, Json]:
    """The Service's public IP, made or brought to what it should be (``ensurePublicIPExists``),
    and the frontend naming it."""
    settings = pips.settings
    name, must_exist = choose_service_pip(settings, cluster, service, ann, pips.all())
    path = pips.path(name)
    _refuse_sharing(pips.find(name), service)

    def change(current: Json | None) -> Json | None:
        base = current
        if current is not None and claimable(current, cluster, service, ann):
            base = reclaimed(current, service)
        body, changed = desired_pip(settings, cluster, service, ann, name, base, must_exist)
        if current is None and zones:
            body["zones"] = list(zones)
        return body if changed or base is not current else None

    pip, _ = read_modify_write(pips.arm, path, change, known=pips.find(name))
    if pip is None:
        raise InvalidServiceConfig("", f"public IP {name} not found")
    if not (pip.get("properties") or {}).get("ipAddress"):
        pip = pips.arm.get(path) or pip
    frontend = {
        "name": frontend_name(service, None),
        "properties": {"publicIPAddress": {"id": pip.get("id") or path}},
    }
    return frontend, pip


def _refuse_sharing(pip: Json | None, service: Service) -> None:
    """A public IP upstream made for other Services (its service tag) is theirs: upstream
    would put this Service's rules on their frontend; kccm does not share frontends."""
    tags = (pip or {}).get("tags") or {}
    users = [u.strip() for u in str(tags.get(SERVICE_TAG) or "").split(",") if u.strip()]
    me = service_name(service).lower()
    if users and me not in (u.lower() for u in users):
        raise InvalidServiceConfig(
            "spec.loadBalancerIP",
            f"public IP {(pip or {}).get('name')} belongs to {', '.join(users)}; kccm does not "
            "share a public IP between Services",
        )


def release_public_ips(
    pips: PublicIPs, cluster: str, service: Service, ann: ServiceAnnotations, *, want_lb: bool
) -> int:
    """``reconcilePublicIPs``: untag or delete the Service's public IPs it no longer wants
    (none but the wanted one while it has a public balancer), in the annotation's resource
    group and the cluster's; the number of calls made."""
    wanted = ""
    if want_lb and not ann.internal:
        wanted = choose_service_pip(pips.settings, cluster, service, ann, pips.all())[0]
    found = list(pips.all())
    cluster_group = pips.settings.resource_group
    if pips.group.lower() != cluster_group.lower():
        found += pips.arm.list(pips.settings.pips_path(cluster_group))
    deletes, updates = release_plan(
        service, ann, found, cluster, want_lb=want_lb, wanted_name=wanted
    )
    for pip in updates:
        pips.arm.put(_pip_path(pips, pip), pip, if_match=pip.get("etag"))
    for pip in deletes:
        log.info("azure: deleting public IP %s", _pip_path(pips, pip))
        pips.arm.delete(_pip_path(pips, pip))
    return len(updates) + len(deletes)


def _pip_path(pips: PublicIPs, pip: Json) -> str:
    """The public IP's own ID (it may be in the cluster's resource group or the
    annotation's)."""
    return str(pip.get("id") or pips.path(str(pip["name"])))


def _in_subnet(address: str, subnet: Json) -> bool:
    """``ipInSubnet``."""
    props = subnet.get("properties") or {}
    prefixes = [props.get("addressPrefix"), *(props.get("addressPrefixes") or ())]
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for prefix in prefixes:
        if prefix and ip in ipaddress.ip_network(str(prefix), strict=False):
            return True
    return False


def _ingress(service: Service) -> Sequence[str]:
    status = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ()
    return [str(item.get("ip")) for item in status if item.get("ip")]


def internal_frontend(
    arm: ArmApi, settings: LBSettings, service: Service, ann: ServiceAnnotations
) -> Json:
    """The frontend in the Service's subnet: the loadBalancerIP, else the address the Service
    has now if it lies in the subnet, else one ARM picks."""
    subnet_name = ann.internal_subnet or settings.subnet_name
    subnet = arm.get(settings.subnet_path(subnet_name))
    if subnet is None:
        raise InvalidServiceConfig("", f"failed to get subnet: {settings.vnet_name}/{subnet_name}")
    props: Json = {"subnet": {"id": subnet.get("id") or settings.subnet_path(subnet_name)}}
    address = service_ipv4(service, ann)
    if not address:
        address = next((ip for ip in _ingress(service) if _in_subnet(ip, subnet)), "")
    if address:
        props.update(privateIPAllocationMethod="Static", privateIPAddress=address)
    else:
        props["privateIPAllocationMethod"] = "Dynamic"
    return {"name": frontend_name(service, ann.internal_subnet), "properties": props}
