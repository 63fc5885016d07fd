"""A Service's public IP as upstream makes, tags, adopts and releases it (cloud-provider-azure
v1.36.5 ``azure_loadbalancer.go``: ``determinePublicIPName``, ``ensurePublicIPExists``,
``reconcileDNSSettings``, ``reconcileIPSettings``, ``ensurePIPTagged``,
``getPublicIPUpdates``, ``shouldReleaseExistingOwnedPublicIP``, ``serviceOwnsPublicIP``,
``bindServicesToPIP``/``unbindServiceFromPIP``).

A public IP upstream made carries the tags ``k8s-azure-service`` (the Services using it,
``<namespace>/<name>`` joined by commas) and ``k8s-azure-cluster-name``; one without a service
tag is the user's and is never changed in its tags nor deleted.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

from kccm.cloudprovider import InvalidServiceConfig, Service
from kccm.providers.azure.loadbalancer import annotations as A
from kccm.providers.azure.loadbalancer.annotations import ServiceAnnotations
from kccm.providers.azure.loadbalancer.lbrules import Json
from kccm.providers.azure.loadbalancer.names import LBSettings, pip_name
from kccm.providers.azure.loadbalancer.tags import find_key, parse_tags, reconcile_tags

__all__ = [
    "CLUSTER_TAG",
    "DNS_TAG",
    "SERVICE_TAG",
    "Ownership",
    "choose_pip_name",
    "desired_pip",
    "ownership",
    "release_plan",
    "service_ipv4",
    "service_name",
]

SERVICE_TAG, LEGACY_SERVICE_TAG = "k8s-azure-service", "service"
CLUSTER_TAG, LEGACY_CLUSTER_TAG = "k8s-azure-cluster-name", "kubernetes-cluster-name"
DNS_TAG, LEGACY_DNS_TAG = "k8s-azure-dns-label-service", "kubernetes-dns-label-service"
KCCM_MARKS = ("kccm-owner", "kccm-cluster")
"""kccm's address retention's marks that stay on a public IP given back (:mod:`.retention`):
kept through ``systemTags``' pruning, as upstream keeps its own tags."""


def service_name(service: Service) -> str:
    """``getServiceName``: ``<namespace>/<name>``."""
    meta = service.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def service_ipv4(service: Service, ann: ServiceAnnotations) -> str:
    """``getServiceLoadBalancerIP`` (IPv4): the ipv4 annotation, else spec.loadBalancerIP."""
    if ann.ipv4:
        return ann.ipv4
    text = str((service.get("spec") or {}).get("loadBalancerIP") or "")
    return text if text.count(".") == 3 else ""


def _tag(pip: Json, key: str, legacy: str) -> str:
    tags = pip.get("tags") or {}
    return str(tags.get(key) or tags.get(legacy) or "")


def _names(tag: str) -> list[str]:
    """``parsePIPServiceTag``."""
    return [name.strip() for name in tag.split(",") if name]


def _address(pip: Json) -> str:
    return str((pip.get("properties") or {}).get("ipAddress") or "")


@dataclass(frozen=True)
class Ownership:
    """``serviceOwnsPublicIP``: owned by the Service, and made by the user."""

    owns: bool
    user_assigned: bool


def ownership(service: Service, ann: ServiceAnnotations, pip: Json, cluster: str) -> Ownership:
    selected = bool(_address(pip)) and (
        _address(pip).lower() == service_ipv4(service, ann).lower()
        or str(pip.get("name", "")).lower() == ann.pip_name.lower()
    )
    service_tag = _tag(pip, SERVICE_TAG, LEGACY_SERVICE_TAG)
    if not service_tag:
        return Ownership(selected, True)
    me = service_name(service).lower()
    if any(name.lower() == me for name in _names(service_tag)):
        cluster_tag = _tag(pip, CLUSTER_TAG, LEGACY_CLUSTER_TAG)
        return Ownership(not cluster_tag or cluster_tag.lower() == cluster.lower(), False)
    return Ownership(selected, False)


def choose_pip_name(
    settings: LBSettings,
    cluster: str,
    service: Service,
    ann: ServiceAnnotations,
    pips: Sequence[Json],
) -> tuple[str, bool]:
    """``determinePublicIPName``: the name and whether it must already exist."""
    if ann.pip_name:
        return ann.pip_name, True
    address = service_ipv4(service, ann)
    if not address:
        return pip_name(cluster, service), False
    for pip in pips:
        if _address(pip) == address:
            return str(pip["name"]), False
    group = ann.pip_resource_group or settings.resource_group
    raise InvalidServiceConfig(
        "spec.loadBalancerIP",
        f"user supplied IP Address {address} was not found in resource group {group}",
    )


def _bind(pip: Json, name: str) -> bool:
    """``bindServicesToPIP``: add the Service to the service tag."""
    tags = pip.setdefault("tags", {})
    current = _tag(pip, SERVICE_TAG, LEGACY_SERVICE_TAG)
    if any(existing == name for existing in _names(current)):
        tags[SERVICE_TAG] = current
        return False
    tags[SERVICE_TAG] = f"{current},{name}" if current else name
    return True


def _wanted_tags(settings: LBSettings, ann: ServiceAnnotations, pip: Json) -> dict[str, str]:
    """``ensurePIPTagged``: the config's tags, the annotation's over them, and the
    cluster, service and DNS tags the public IP has."""
    wanted = parse_tags(settings.tags, settings.tags_map)
    for key, value in parse_tags(ann.pip_tags or "").items():
        same = find_key(wanted, key)
        wanted[same if same is not None else key] = value
    for key, legacy in (
        (CLUSTER_TAG, LEGACY_CLUSTER_TAG),
        (SERVICE_TAG, LEGACY_SERVICE_TAG),
        (DNS_TAG, LEGACY_DNS_TAG),
        *((mark, mark) for mark in KCCM_MARKS),
    ):
        if _tag(pip, key, legacy):
            wanted[key] = _tag(pip, key, legacy)
    return wanted


def _dns(pip: Json, ann: ServiceAnnotations, name: str, user_assigned: bool) -> bool:
    """``reconcileDNSSettings``."""
    label = ann.dns_label_name or ""
    owner = _tag(pip, DNS_TAG, LEGACY_DNS_TAG)
    if owner and owner.lower() != name.lower():
        raise InvalidServiceConfig(
            A.DNS_LABEL_NAME,
            f"there is an existing service {owner} consuming the DNS label on the public IP "
            f"{pip.get('name')}, so the service cannot set the DNS label annotation with this "
            "value",
        )
    props = pip.setdefault("properties", {})
    if not label:
        if props.get("dnsSettings"):
            props.pop("dnsSettings")
            return True
        return False
    changed = False
    current = str((props.get("dnsSettings") or {}).get("domainNameLabel") or "")
    if current.lower() != label.lower():
        props.setdefault("dnsSettings", {})
        props["dnsSettings"] = {**(props["dnsSettings"] or {}), "domainNameLabel": label}
        changed = True
    if owner.lower() != name.lower() and not user_assigned:
        pip.setdefault("tags", {})[DNS_TAG] = name
        changed = True
    return changed


def _new_pip(settings: LBSettings, cluster: str, ann: ServiceAnnotations, name: str) -> Json:
    props: Json = {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"}
    if ann.pip_ip_tags is not None:
        props["ipTags"] = _ip_tags(ann.pip_ip_tags)
    pip: Json = {"name": name, "location": settings.location, "properties": props}
    pip["tags"] = {SERVICE_TAG: "", CLUSTER_TAG: cluster}
    if settings.standard:
        pip["sku"] = {"name": "Standard"}
    return pip


def _ip_tags(text: str) -> list[Json]:
    """``getIPTagMap``/``convertIPTagMapToSlice``: ``type=tag`` pairs, the last one winning."""
    found: dict[str, str] = {}
    for pair in text.strip().split(","):
        parts = pair.split("=")
        if len(parts) == 2:
            found[parts[0].strip()] = parts[1].strip()
    return [{"ipTagType": key, "tag": value} for key, value in sorted(found.items())]


def desired_pip(
    settings: LBSettings,
    cluster: str,
    service: Service,
    ann: ServiceAnnotations,
    name: str,
    existing: Json | None,
    must_exist: bool,
) -> tuple[Json, bool]:
    """``ensurePublicIPExists``: the public IP the Service wants and whether it differs
    from ``existing`` (which is not changed)."""
    me = service_name(service)
    if existing is None:
        if must_exist:
            raise InvalidServiceConfig(
                A.PIP_NAME,
                f"PublicIP from annotation azure-pip-name(-IPv6)={name} for service {me} "
                "doesn't exist",
            )
        pip, changed, user = _new_pip(settings, cluster, ann, name), True, False
        _bind(pip, me)
    else:
        pip = copy.deepcopy(existing)
        owned = ownership(service, ann, pip, cluster)
        user = owned.user_assigned
        changed = owned.owns and not user and _bind(pip, me)
        if settings.standard and str((pip.get("sku") or {}).get("name", "")).lower() != "standard":
            pip["sku"] = {**(pip.get("sku") or {}), "name": "Standard"}
            changed = True
    if not user:
        tags, retagged = reconcile_tags(
            dict(pip.get("tags") or {}), _wanted_tags(settings, ann, pip), settings.system_tags
        )
        pip["tags"] = tags
        changed = retagged or changed
    if ann.dns_label_name is not None:
        changed = _dns(pip, ann, me, user) or changed
    props = pip.setdefault("properties", {})
    if props.get("publicIPAddressVersion") != "IPv4":
        props["publicIPAddressVersion"] = "IPv4"
        changed = True
    return pip, changed


def release_plan(
    service: Service,
    ann: ServiceAnnotations,
    pips: Sequence[Json],
    cluster: str,
    *,
    want_lb: bool,
    wanted_name: str,
) -> tuple[list[Json], list[Json]]:
    """``getPublicIPUpdates`` (IPv4): the Service's public IPs to delete, and those to keep
    with the Service taken out of their tags."""
    me = service_name(service)
    deletes: list[Json] = []
    updates: list[Json] = []
    for existing in pips:
        if (existing.get("properties") or {}).get("publicIPAddressVersion", "IPv4") != "IPv4":
            continue
        owned = ownership(service, ann, existing, cluster)
        if not owned.owns or owned.user_assigned:
            continue
        pip = copy.deepcopy(existing)
        refs = _names(_tag(pip, SERVICE_TAG, LEGACY_SERVICE_TAG))
        dirty = False
        if not want_lb:
            if _tag(pip, DNS_TAG, LEGACY_DNS_TAG).lower() == me.lower():
                for key in (DNS_TAG, LEGACY_DNS_TAG):
                    pip["tags"].pop(key, None)
            refs = [ref for ref in refs if ref.lower() != me.lower()]
            pip["tags"][SERVICE_TAG] = ",".join(refs)
            dirty = True
        keep = (not want_lb and refs) or (want_lb and len(refs) > 1)
        release = not keep and (not want_lb or ann.internal or pip.get("name") != wanted_name)
        if release:
            deletes.append(pip)
        elif dirty:
            updates.append(pip)
    return deletes, updates
