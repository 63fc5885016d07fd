"""Shared balancers (kccm, not upstream; docs/behaviour.md, "Sharing one balancer").

A Service annotated ``service.kccm.io/share-group: <group>`` (a DNS-1123 label) shares one
balancer and one address with every Service of the same group in its namespace: the group is
``(namespace, group)``. Each Service brings its own ports (a listener, and whatever the cloud
hangs under it, per Service port); the cloud records which Service owns each listener, so one
Service's ensure, update or delete never touches another's listeners, and the last Service of a
group to go removes the balancer and releases the address.

The framework (``kccm.controllers.service_sharing``) does what is the same for every cloud:
parsing the annotation, finding a port clash or unequal settings among the group's Services
from the informer cache (a Warning on the later Service naming the first one, which keeps
the port), one group's calls at a time, and a Warning when the provider cannot share. A
provider shares by implementing :class:`BalancerSharer` on its LoadBalancer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from kccm.cloudprovider.calls import MaybeAwaitable, provider_call
from kccm.cloudprovider.errors import InvalidServiceConfig
from kccm.cloudprovider.types import LoadBalancerStatus, Node, Service

__all__ = [
    "ANNOTATION_SHARE_GROUP",
    "BalancerSharer",
    "ShareGroup",
    "as_balancer_sharer",
    "share_group_of",
]

ANNOTATION_SHARE_GROUP = "service.kccm.io/share-group"

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True, order=True)
class ShareGroup:
    """One shared balancer: the group ``name`` of Services in ``namespace``."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def share_group_of(service: Service) -> ShareGroup | None:
    """The Service's group, ``None`` without the annotation. A value that is no DNS-1123 label
    raises :class:`InvalidServiceConfig` naming the annotation (never read as "not shared":
    that would give the Service a balancer of its own the user did not ask for)."""
    meta = service.get("metadata") or {}
    value = (meta.get("annotations") or {}).get(ANNOTATION_SHARE_GROUP)
    if value is None:
        return None
    text = str(value)
    if not _LABEL.fullmatch(text):
        raise InvalidServiceConfig(
            ANNOTATION_SHARE_GROUP,
            f"{ANNOTATION_SHARE_GROUP}: {text!r} is not a valid group name (a DNS-1123 label: "
            "at most 63 lower-case letters, digits and '-', starting and ending with a letter "
            "or digit)",
        )
    return ShareGroup(str(meta.get("namespace") or ""), text)


@runtime_checkable
class BalancerSharer(Protocol):
    """Optional, on the :class:`~kccm.cloudprovider.interface.LoadBalancer` implementation
    (kccm, not upstream): one balancer and one address for a :class:`ShareGroup`.

    For a Service of a group the service controller calls these instead of ``get``,
    ``ensure``, ``update`` and ``ensure_..._deleted``, one call of a group at a time, and only
    once the Service's ports clash with no earlier Service of its group and its
    :meth:`sharing_settings` equal the first one's. The provider owes what the conformance kit
    checks (``kccm.testing.conformance_sharing``): every Service of a group gets the same
    address; a Service's listeners are recorded in the cloud as its own, and its ensure,
    update and delete change only those; the last Service's delete leaves nothing.
    """

    def sharing_settings(self, service: Service) -> Mapping[str, str]:
        """What every Service of a group must have alike, by the field or annotation that sets
        it (e.g. an internal scheme, or source ranges when the cloud filters per balancer,
        not per listener). No cloud call."""
        ...

    @provider_call("load_balancer", read=True)
    def get_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service
    ) -> MaybeAwaitable[tuple[LoadBalancerStatus | None, bool]]:
        """The group's status for ``service``, and whether ``service`` has listeners in it."""
        ...

    @provider_call("load_balancer", read=False)
    def ensure_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service, nodes: Sequence[Node]
    ) -> MaybeAwaitable[LoadBalancerStatus]:
        """Make the group's balancer exist and hold ``service``'s listeners, as its own, to
        ``nodes``; the status carries the group's address and ``service``'s ports."""
        ...

    @provider_call("load_balancer", read=False)
    def update_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service, nodes: Sequence[Node]
    ) -> MaybeAwaitable[None]:
        """Point ``service``'s listeners at ``nodes``."""
        ...

    @provider_call("load_balancer", read=False)
    def ensure_shared_load_balancer_deleted(
        self, cluster_name: str, group: ShareGroup, service: Service
    ) -> MaybeAwaitable[None]:
        """Remove ``service``'s listeners; the balancer and its address too when no other
        Service's listener is left. Idempotent."""
        ...


def as_balancer_sharer(load_balancer: object) -> BalancerSharer | None:
    """The LoadBalancer implementation as a :class:`BalancerSharer`, or ``None``."""
    names = (
        "sharing_settings",
        "get_shared_load_balancer",
        "ensure_shared_load_balancer",
        "update_shared_load_balancer",
        "ensure_shared_load_balancer_deleted",
    )
    if all(callable(getattr(load_balancer, name, None)) for name in names):
        return cast(BalancerSharer, load_balancer)
    return None
