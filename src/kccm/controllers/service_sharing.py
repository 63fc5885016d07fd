"""Shared balancers in the service controller (docs/behaviour.md, "Sharing one balancer").

:class:`SharingBalancer` is the balancer the service controller calls. For a Service without
``service.kccm.io/share-group`` every call is the one it wraps (upstream's, with retention
and drain as before). For a Service of a group (:func:`~kccm.cloudprovider.sharing.share_group_of`):

- the provider must implement :class:`~kccm.cloudprovider.sharing.BalancerSharer`; if it does
  not, the ensure fails naming the annotation and the provider (a ``SyncLoadBalancerFailed``
  Warning, no balancer), never a balancer of its own the user did not ask for;
- before any cloud call, the group's Services are read from the informer cache and ordered by
  creation (then name): a Service whose ports clash with an earlier one's, or whose
  ``sharing_settings`` differ from the first one's, fails naming that Service (the earlier one
  keeps its ports; nothing is overwritten). When an earlier Service changes or goes, the
  Services it blocked are synced again at once;
- the group's calls run one at a time (two first ensures would otherwise make two balancers);
- ``get``, ``ensure``, ``update`` and delete go to the provider's shared calls; the draining
  variants too, without the draining Nodes (no drain for shared balancers yet); retention is
  not applied to a Service of a group (a Warning says so): the address stays while another
  Service of the group uses it and goes with the last one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kccm.cloudprovider.errors import InvalidServiceConfig
from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated_sharing import GatedBalancerSharer
from kccm.cloudprovider.retention import retention_of
from kccm.cloudprovider.sharing import (
    ANNOTATION_SHARE_GROUP,
    ShareGroup,
    as_balancer_sharer,
    share_group_of,
)
from kccm.cloudprovider.types import LoadBalancerStatus, Node, Service
from kccm.controllers.service_retention import REASON_UNSUPPORTED, RetainingBalancer
from kccm.runtime.events import EVENT_TYPE_WARNING
from kccm.runtime.informers import object_key

__all__ = ["ShareConflict", "SharingBalancer", "group_members", "sharing_conflict"]

_P = Priority.NORMAL


class ShareConflict(InvalidServiceConfig):
    """The Service cannot join its group now (a port clash, unequal settings)."""

    def __init__(self, message: str) -> None:
        super().__init__(ANNOTATION_SHARE_GROUP, message)


def _lenient_group(service: Service) -> ShareGroup | None:
    """The group, or ``None`` when the annotation is absent or invalid (such a Service never
    joined a group, so its release is upstream's)."""
    try:
        return share_group_of(service)
    except InvalidServiceConfig:
        return None


def _order(service: Service) -> tuple[str, str]:
    meta = service.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


def _ports(service: Service) -> set[tuple[int, str]]:
    return {
        (int(port.get("port") or 0), str(port.get("protocol") or "TCP"))
        for port in (service.get("spec") or {}).get("ports") or ()
    }


def group_members(services: Iterable[Service], group: ShareGroup) -> list[Service]:
    """The Services of ``group`` that want a balancer (``type: LoadBalancer``, not being
    deleted), in the order that decides who keeps a port: creation, then name."""
    found = [
        s
        for s in services
        if (s.get("spec") or {}).get("type") == "LoadBalancer"
        and not (s.get("metadata") or {}).get("deletionTimestamp")
        and _lenient_group(s) == group
    ]
    return sorted(found, key=_order)


def sharing_conflict(
    service: Service,
    earlier: Sequence[Service],
    settings: Callable[[Service], Mapping[str, str]],
    group: ShareGroup,
) -> str | None:
    """Why ``service`` cannot join ``group`` after the ``earlier`` Services, or ``None``."""
    if not earlier:
        return None
    first = earlier[0]
    mine, theirs = settings(service), settings(first)
    differ = sorted(k for k in {*mine, *theirs} if mine.get(k) != theirs.get(k))
    if differ:
        shown = ", ".join(
            f"{k} {mine.get(k, '(unset)')!r} vs {theirs.get(k, '(unset)')!r}" for k in differ
        )
        return (
            f"share group {group.name}: {shown}: the Services of a group must agree, and "
            f"{object_key(first)} came first; no listener is made for this Service"
        )
    for other in earlier:
        clash = sorted(_ports(service) & _ports(other))
        if clash:
            port, protocol = clash[0]
            return (
                f"share group {group.name}: port {port}/{protocol} is already served by "
                f"{object_key(other)}, which came first; no listener is made for this Service"
            )
    return None


class SharingBalancer(RetainingBalancer):
    """:class:`RetainingBalancer` that gives a share group's Services one balancer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.members: Callable[[], Iterable[Service]] = tuple
        """Every Service the controller's informer holds (set by :meth:`watch`)."""
        self.wake: Callable[[str], None] = lambda key: None
        """Queues a Service key for a sync (set by :meth:`watch`)."""
        impl = as_balancer_sharer(self.impl)
        self.sharer = GatedBalancerSharer(impl, self.gate) if impl is not None else None
        self.blocked: dict[ShareGroup, set[str]] = {}
        """Services whose last ensure failed on a conflict, by group."""
        self._locks: dict[ShareGroup, asyncio.Lock] = {}

    def watch(self, members: Callable[[], Iterable[Service]], wake: Callable[[str], None]) -> None:
        self.members, self.wake = members, wake

    def _shared(self, service: Service) -> GatedBalancerSharer:
        if self.sharer is None:
            raise InvalidServiceConfig(
                ANNOTATION_SHARE_GROUP,
                f"{ANNOTATION_SHARE_GROUP} is not supported by {self.provider_name}: no load "
                "balancer is made for this Service (remove the annotation for one of its own)",
            )
        return self.sharer

    def _lock(self, group: ShareGroup) -> asyncio.Lock:
        return self._locks.setdefault(group, asyncio.Lock())

    def _admit(self, group: ShareGroup, service: Service, sharer: GatedBalancerSharer) -> None:
        key, blocked = object_key(service), self.blocked.setdefault(group, set())
        mine = _order(service)
        earlier = [
            s
            for s in group_members(self.members(), group)
            if _order(s) < mine and object_key(s) not in blocked and object_key(s) != key
        ]
        why = sharing_conflict(service, earlier, sharer.sharing_settings, group)
        if why is not None:
            blocked.add(key)
            raise ShareConflict(why)
        blocked.discard(key)

    def _wake_blocked(self, group: ShareGroup, service: Service) -> None:
        for key in sorted(self.blocked.get(group, set()) - {object_key(service)}):
            self.wake(key)

    async def _ensure_shared(
        self,
        cluster_name: str,
        group: ShareGroup,
        service: Service,
        nodes: Sequence[Node],
        priority: Priority,
    ) -> LoadBalancerStatus:
        sharer = self._shared(service)
        self._admit(group, service, sharer)
        async with self._lock(group):
            with self._reporting(service):
                status = await sharer.ensure_shared_load_balancer(
                    cluster_name, group, service, nodes, priority=priority
                )
        self._wake_blocked(group, service)
        return status

    async def get_load_balancer(
        self, cluster_name: str, service: Service, *, priority: Priority = _P
    ) -> tuple[LoadBalancerStatus | None, bool]:
        group = _lenient_group(service)
        if group is None or self.sharer is None:
            return await super().get_load_balancer(cluster_name, service, priority=priority)
        return await self.sharer.get_shared_load_balancer(
            cluster_name, group, service, priority=priority
        )

    async def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], *, priority: Priority = _P
    ) -> LoadBalancerStatus:
        group = share_group_of(service)
        if group is None:
            return await super().ensure_load_balancer(
                cluster_name, service, nodes, priority=priority
            )
        return await self._ensure_shared(cluster_name, group, service, nodes, priority)

    async def ensure_load_balancer_draining(
        self,
        cluster_name: str,
        service: Service,
        nodes: Sequence[Node],
        draining: Sequence[Node],
        *,
        priority: Priority = _P,
    ) -> LoadBalancerStatus:
        group = share_group_of(service)
        if group is None:
            return await super().ensure_load_balancer_draining(
                cluster_name, service, nodes, draining, priority=priority
            )
        return await self._ensure_shared(cluster_name, group, service, nodes, priority)

    async def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], *, priority: Priority = _P
    ) -> None:
        group = _lenient_group(service)
        if group is None:
            await super().update_load_balancer(cluster_name, service, nodes, priority=priority)
            return
        await self._update_shared(cluster_name, group, service, nodes, priority)

    async def update_load_balancer_draining(
        self,
        cluster_name: str,
        service: Service,
        nodes: Sequence[Node],
        draining: Sequence[Node],
        *,
        priority: Priority = _P,
    ) -> None:
        group = _lenient_group(service)
        if group is None:
            await super().update_load_balancer_draining(
                cluster_name, service, nodes, draining, priority=priority
            )
            return
        await self._update_shared(cluster_name, group, service, nodes, priority)

    async def _update_shared(
        self,
        cluster_name: str,
        group: ShareGroup,
        service: Service,
        nodes: Sequence[Node],
        priority: Priority,
    ) -> None:
        sharer = self._shared(service)
        async with self._lock(group):
            with self._reporting(service):
                await sharer.update_shared_load_balancer(
                    cluster_name, group, service, nodes, priority=priority
                )

    async def ensure_load_balancer_deleted(
        self, cluster_name: str, service: Service, *, priority: Priority = _P
    ) -> None:
        group = _lenient_group(service)
        if group is None or self.sharer is None:
            await super().ensure_load_balancer_deleted(cluster_name, service, priority=priority)
            return
        retention = retention_of(service, self.default_retain)
        if retention.keep:
            self._event(
                service,
                EVENT_TYPE_WARNING,
                REASON_UNSUPPORTED,
                f"Address retention {retention.because()} is not applied to a Service of share "
                f"group {group.name}: the group's address stays while another Service of the "
                "group uses it and is released with the last one",
            )
        async with self._lock(group):
            with self._reporting(service):
                await self.sharer.ensure_shared_load_balancer_deleted(
                    cluster_name, group, service, priority=priority
                )
        self.blocked.get(group, set()).discard(object_key(service))
        self._wake_blocked(group, service)
