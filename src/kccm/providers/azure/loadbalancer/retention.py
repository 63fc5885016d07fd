"""Address retention for the azure balancer (kccm's
:class:`~kccm.cloudprovider.interface.AddressRetainer`, docs/behaviour.md "Keeping a
balancer's address"): a Service's public IP outlives its balancer.

Keeping: the public IPs the Service owns (upstream's service tag ``k8s-azure-service`` names it
and only it, and the cluster tag is this cluster's: those upstream's delete would remove,
``serviceOwnsPublicIP``/``getPublicIPUpdates`` in cloud-provider-azure v1.36.5
``pkg/provider/azure_loadbalancer.go``) are first taken off the service tag, as upstream's
``unbindServiceFromPIP`` does, and marked with the tags :data:`OWNER` (``namespace/name``),
:data:`CLUSTER` and :data:`RETAINED`; then the ordinary delete runs, which leaves them alone
(a public IP without a service tag is the user's to upstream and to kccm). Azure allows no
``/`` in tag names, hence ``kccm-owner`` rather than aws's ``kccm.io/owner``.

A public IP the user made (``azure-pip-name``, or ``loadBalancerIP`` of a public IP without a
service tag) is never deleted by upstream, and never marked by kccm: it stays the user's, is
not listed, and ``kccm addresses release`` cannot free it.

Giving back: a public ensure lists the resource group's public IPs anyway (upstream's
``determinePublicIPName``), so finding a kept one costs no call: a Service whose
``namespace/name`` is the owner, or which asks for the address (``loadBalancerIP``,
``azure-load-balancer-ipv4``) or its name (``azure-pip-name``), takes it: :data:`RETAINED`
goes and the service tag names the Service again, so from then on it is the Service's as if
upstream had made it (deleted with it unless kept again). Its name is not upstream's
``<cluster>-<uid>``: :data:`OWNER` and :data:`CLUSTER` stay, and a Service asking for no
name or address uses the public IP marked with it as owner (:func:`choose_service_pip`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from kccm.cloudprovider import RetainedAddress, Service
from kccm.providers.azure.loadbalancer.annotations import ServiceAnnotations, read_annotations
from kccm.providers.azure.loadbalancer.armapi import ArmApi, read_modify_write
from kccm.providers.azure.loadbalancer.lbrules import Json
from kccm.providers.azure.loadbalancer.names import LBSettings
from kccm.providers.azure.loadbalancer.pips import (
    KCCM_MARKS,
    LEGACY_SERVICE_TAG,
    SERVICE_TAG,
    choose_pip_name,
    ownership,
    service_ipv4,
    service_name,
)

__all__ = [
    "CLUSTER",
    "OWNER",
    "RETAINED",
    "PublicIPRetention",
    "choose_service_pip",
    "claimable",
    "is_kept",
    "reclaimed",
]

OWNER, CLUSTER = KCCM_MARKS
RETAINED = "kccm-retained"


def _tags(pip: Json) -> dict[str, str]:
    return {str(k): str(v) for k, v in (pip.get("tags") or {}).items()}


def _address(pip: Json) -> str:
    return str((pip.get("properties") or {}).get("ipAddress") or "")


def is_kept(pip: Json, cluster: str) -> bool:
    """Marked as kept for ``cluster`` and used by no balancer."""
    tags = _tags(pip)
    in_use = bool((pip.get("properties") or {}).get("ipConfiguration"))
    return (
        tags.get(RETAINED, "").lower() == "true"
        and tags.get(CLUSTER, "").lower() == cluster.lower()
        and not in_use
    )


def _mine(pip: Json, cluster: str, service: Service) -> bool:
    """Marked with the Service as owner for ``cluster`` (kept, or taken back and in use)."""
    tags = _tags(pip)
    return (
        tags.get(OWNER, "").lower() == service_name(service).lower()
        and tags.get(CLUSTER, "").lower() == cluster.lower()
    )


def claimable(pip: Json, cluster: str, service: Service, ann: ServiceAnnotations) -> bool:
    """A kept public IP this Service takes back: its owner's, or the one it asks for."""
    if not is_kept(pip, cluster):
        return False
    asked = service_ipv4(service, ann)
    return (
        _mine(pip, cluster, service)
        or bool(asked and _address(pip) == asked)
        or bool(ann.pip_name and str(pip.get("name", "")).lower() == ann.pip_name.lower())
    )


def choose_service_pip(
    settings: LBSettings,
    cluster: str,
    service: Service,
    ann: ServiceAnnotations,
    pips: Sequence[Json],
) -> tuple[str, bool]:
    """``determinePublicIPName``, except that a Service asking for no name or address uses
    the public IP marked with it as owner (kept, or taken back earlier) rather than a new
    ``<cluster>-<uid>`` one: the name and whether it must already exist."""
    if not ann.pip_name and not service_ipv4(service, ann):
        for pip in pips:
            if _mine(pip, cluster, service) and (
                is_kept(pip, cluster) or _owned_alone(pip, service, ann, cluster)
            ):
                return str(pip["name"]), False
    return choose_pip_name(settings, cluster, service, ann, pips)


def reclaimed(pip: Json, service: Service) -> Json:
    """The kept public IP given back to ``service``: the service tag names it, the kept mark
    goes (the owner and cluster marks stay: they name the Service's public IP from now on)."""
    body = copy.deepcopy(pip)
    tags = {k: v for k, v in _tags(body).items() if k != RETAINED}
    tags.pop(LEGACY_SERVICE_TAG, None)
    tags[SERVICE_TAG] = service_name(service)
    tags[OWNER] = service_name(service)
    body["tags"] = tags
    return body


def _marked(pip: Json, service: Service, cluster: str) -> Json:
    body = copy.deepcopy(pip)
    tags = _tags(body)
    tags.pop(LEGACY_SERVICE_TAG, None)
    tags.update({SERVICE_TAG: "", OWNER: service_name(service), CLUSTER: cluster})
    tags[RETAINED] = "true"
    body["tags"] = tags
    return body


def _retained(pip: Json) -> RetainedAddress:
    return RetainedAddress(
        address=_address(pip),
        owner=_tags(pip).get(OWNER, ""),
        id=str(pip.get("id", "")),
        detail=f"public IP {pip.get('name')}: tags {OWNER}, {CLUSTER}, {RETAINED}",
    )


def _owned_alone(pip: Json, service: Service, ann: ServiceAnnotations, cluster: str) -> bool:
    """Upstream's delete would remove it: the Service's own, used by no other Service."""
    owned = ownership(service, ann, pip, cluster)
    users = [u for u in str(_tags(pip).get(SERVICE_TAG) or "").split(",") if u.strip()]
    return owned.owns and not owned.user_assigned and len(users) == 1


class PublicIPRetention:
    """AddressRetainer over the Service's public IPs (mixed into the LoadBalancer)."""

    arm: ArmApi
    settings: LBSettings

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        raise NotImplementedError  # the LoadBalancer's own delete

    def _groups(self, ann: ServiceAnnotations) -> list[str]:
        groups = [self.settings.resource_group]
        if ann.pip_resource_group and ann.pip_resource_group.lower() != groups[0].lower():
            groups.insert(0, ann.pip_resource_group)
        return groups

    def ensure_load_balancer_deleted_keeping_address(
        self, cluster_name: str, service: Service
    ) -> Sequence[RetainedAddress]:
        """Mark first (a failed delete is retried with them marked), then the delete."""
        ann = read_annotations(service, lenient=True)
        me = service_name(service).lower()
        kept: list[Json] = []
        for group in self._groups(ann):
            for pip in self.arm.list(self.settings.pips_path(group)):
                if _tags(pip).get(OWNER, "").lower() == me and is_kept(pip, cluster_name):
                    kept.append(pip)
                elif _owned_alone(pip, service, ann, cluster_name):
                    kept.append(self._mark(pip, service, cluster_name))
        self.ensure_load_balancer_deleted(cluster_name, service)
        return [_retained(pip) for pip in kept]

    def _mark(self, pip: Json, service: Service, cluster_name: str) -> Json:
        def change(current: Json | None) -> Json | None:
            if current is None:
                raise LookupError(f"public IP {pip.get('id')} is gone")
            return _marked(current, service, cluster_name)

        written, _ = read_modify_write(self.arm, str(pip["id"]), change, known=pip)
        assert written is not None
        return written

    def list_retained_addresses(self, cluster_name: str) -> Sequence[RetainedAddress]:
        """The kept public IPs of the cluster's resource group."""
        return [_retained(pip) for pip in self._kept(cluster_name)]

    def _kept(self, cluster_name: str) -> list[Json]:
        listed = self.arm.list(self.settings.pips_path(self.settings.resource_group))
        return [pip for pip in listed if is_kept(pip, cluster_name)]

    def release_retained_address(self, cluster_name: str, address: str) -> bool:
        """Delete a kept public IP named by its address, name or resource ID."""
        wanted = address.lower()
        for pip in self._kept(cluster_name):
            names = (_address(pip), str(pip.get("name", "")), str(pip.get("id", "")))
            if wanted in (name.lower() for name in names if name):
                self.arm.delete(str(pip["id"]))
                return True
        return False
