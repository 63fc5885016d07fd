"""Zone and region from vSphere tags on a VM's ancestors.

Upstream ``connectionmanager.LookupZoneByMoref`` (``pkg/common/connectionmanager/zones.go``)
walks an object's ancestors from the object up to the root folder, and for each one reads
its attached tags and each tag's category: a tag in the ``[Labels] zone`` category names the
zone, one in the ``[Labels] region`` category the region; it stops when both are found, and
fails when either is missing. ``zones.GetZoneByProviderID`` (``vsphere/zones.go``) tries the
VM's host first, then its resource pool, then the VM itself (its folders).

kccm reads the attached tags of every object involved in one
``list-attached-tags-on-objects`` request, and keeps tag and category names, and each
object's attached tags, for ``cache_seconds`` (tags rarely change).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kccm.cloudprovider import CloudProviderError, Zone
from kccm.providers.vsphere.inventory import VMInfo
from kccm.providers.vsphere.session import TagClient

__all__ = ["ZoneLookup", "pick_zone"]

ASSOCIATION = "/com/vmware/cis/tagging/tag-association"
TAG = "/com/vmware/cis/tagging/tag/id:"
CATEGORY = "/com/vmware/cis/tagging/category/id:"

Chain = Sequence[tuple[str, str]]
TagNames = Callable[[str], tuple[str, str]]
"""tag ID -> (category name, tag name)."""


def _walk(
    chain: Chain, attached: dict[str, list[str]], names: TagNames, labels: tuple[str, str]
) -> tuple[str, str]:
    """Upstream's loop over one chain: ``(zone, region)`` as found (either may be empty)."""
    zone_category, region_category = labels
    zone = region = ""
    for _kind, moref in chain:
        for tag_id in attached.get(moref, ()):
            category, tag = names(tag_id)
            if category == zone_category:
                zone = tag
            elif category == region_category:
                region = tag
            if zone and region:
                return zone, region
    return zone, region


def pick_zone(
    vm: VMInfo, attached: dict[str, list[str]], names: TagNames, labels: tuple[str, str]
) -> Zone:
    """The first chain (host, resource pool, VM folders) that yields both zone and region."""
    for chain in vm.chains:
        zone, region = _walk(chain, attached, names, labels)
        if zone and region:
            return Zone(failure_domain=zone, region=region)
    zone_category, region_category = labels
    raise CloudProviderError(
        f"VM {vm.name} ({vm.moref}) in vCenter {vm.vcenter}: no tag of category "
        f"{region_category!r} (region) and {zone_category!r} (zone) on its host, cluster, "
        "resource pool, folders or datacenter"
    )


def _objects(vms: Iterable[VMInfo]) -> set[tuple[str, str]]:
    return {(kind, moref) for vm in vms for chain in vm.chains for kind, moref in chain}


class ZoneLookup:
    """Zones of one vCenter's VMs, with cached tag data."""

    def __init__(self, tags: TagClient, labels: tuple[str, str], *, cache_seconds: float) -> None:
        self._tags = tags
        self._labels = labels
        self._ttl = cache_seconds
        self._lock = threading.Lock()
        self._fetching = threading.Lock()
        """Held while asking vCenter: concurrent misses wait and then find the cache filled."""
        self._attached: dict[str, tuple[float, list[str]]] = {}
        self._names: dict[str, tuple[float, tuple[str, str]]] = {}
        self._categories: dict[str, tuple[float, str]] = {}
        self._clock: Callable[[], float] = time.monotonic

    def zones(
        self, vms: Iterable[VMInfo], neighbours: Iterable[VMInfo] = ()
    ) -> dict[str, Zone | CloudProviderError]:
        """Zone per VM UUID (or the error that VM's lookup ended with). When tags must be read,
        those of ``neighbours``' ancestors are read in the same request (the next lookups of a
        node-initialisation burst then cost nothing)."""
        vms = list(vms)
        objects = _objects(vms)
        attached = self._attached_tags(objects, _objects(neighbours))
        out: dict[str, Zone | CloudProviderError] = {}
        for vm in vms:
            try:
                out[vm.uuid] = pick_zone(vm, attached, self._tag_names, self._labels)
            except CloudProviderError as err:
                out[vm.uuid] = err
        return out

    def _fresh(self, entry: tuple[float, Any] | None) -> bool:
        return entry is not None and self._clock() - entry[0] <= self._ttl

    def _missing(self, objects: set[tuple[str, str]]) -> list[tuple[str, str]]:
        with self._lock:
            return sorted(o for o in objects if not self._fresh(self._attached.get(o[1])))

    def _attached_tags(
        self, objects: set[tuple[str, str]], extra: set[tuple[str, str]]
    ) -> dict[str, list[str]]:
        if self._missing(objects):
            with self._fetching:
                if self._missing(objects):
                    self._fetch_attached(self._missing(objects | extra))
        with self._lock:
            return {moref: list(self._attached[moref][1]) for _k, moref in objects}

    def _fetch_attached(self, missing: list[tuple[str, str]]) -> None:
        if missing:
            body = {"object_ids": [{"id": moref, "type": kind} for kind, moref in missing]}
            found = self._tags.request(
                "POST", ASSOCIATION + "?~action=list-attached-tags-on-objects", body
            )
            now = self._clock()
            answered = {
                str(item["object_id"]["id"]): [str(t) for t in item.get("tag_ids") or ()]
                for item in found or ()
            }
            with self._lock:
                for _kind, moref in missing:
                    self._attached[moref] = (now, answered.get(moref, []))

    def _cached_names(self, tag_id: str) -> tuple[str, str] | None:
        with self._lock:
            cached = self._names.get(tag_id)
            return cached[1] if cached is not None and self._fresh(cached) else None

    def _tag_names(self, tag_id: str) -> tuple[str, str]:
        found = self._cached_names(tag_id)
        if found is not None:
            return found
        with self._fetching:
            return self._cached_names(tag_id) or self._fetch_names(tag_id)

    def _fetch_names(self, tag_id: str) -> tuple[str, str]:
        tag = self._tags.request("GET", TAG + tag_id)
        category = self._category_name(str(tag["category_id"]))
        names = (category, str(tag["name"]))
        with self._lock:
            self._names[tag_id] = (self._clock(), names)
        return names

    def _category_name(self, category_id: str) -> str:
        with self._lock:
            cached = self._categories.get(category_id)
            if self._fresh(cached):
                assert cached is not None
                return cached[1]
        category = self._tags.request("GET", CATEGORY + category_id)
        with self._lock:
            self._categories[category_id] = (self._clock(), str(category["name"]))
        return str(category["name"])
