"""Cluster ownership by tags and providerIDs, as upstream cloud-provider-aws does them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CLUSTER_TAG_PREFIX",
    "LEGACY_CLUSTER_TAG",
    "SERVICE_NAME_TAG",
    "ClusterTagging",
    "InstanceRef",
    "parse_provider_id",
    "provider_id",
    "tag_dict",
]

CLUSTER_TAG_PREFIX = "kubernetes.io/cluster/"
LEGACY_CLUSTER_TAG = "KubernetesCluster"
SERVICE_NAME_TAG = "kubernetes.io/service-name"
SUBNET_ROLE_PUBLIC = "kubernetes.io/role/elb"
SUBNET_ROLE_INTERNAL = "kubernetes.io/role/internal-elb"
OWNED = "owned"

_INSTANCE_ID = re.compile(r"^i-[0-9a-z]+$")


def tag_dict(tags: Iterable[Mapping[str, Any]] | None) -> dict[str, str]:
    """AWS's ``[{"Key": k, "Value": v}]`` as a dict."""
    return {str(t.get("Key", "")): str(t.get("Value", "")) for t in tags or ()}


@dataclass(frozen=True)
class ClusterTagging:
    """Which resources belong to the cluster (upstream ``awsTagging``).

    With a cluster ID, a resource is the cluster's when it carries
    ``kubernetes.io/cluster/<id>`` (any value) or the legacy ``KubernetesCluster=<id>``; without
    one, every resource is (upstream's behaviour for untagged clouds).
    """

    cluster_id: str = ""
    uses_legacy_tag: bool = False

    @property
    def cluster_tag_key(self) -> str:
        return CLUSTER_TAG_PREFIX + self.cluster_id

    def owns(self, tags: Iterable[Mapping[str, Any]] | None) -> bool:
        if not self.cluster_id:
            return True
        found = tag_dict(tags)
        if self.cluster_tag_key in found:
            return True
        return found.get(LEGACY_CLUSTER_TAG) == self.cluster_id

    def has_no_cluster_tag(self, tags: Iterable[Mapping[str, Any]] | None) -> bool:
        """True when no ``kubernetes.io/cluster/*`` tag is present (a shared subnet)."""
        return not any(key.startswith(CLUSTER_TAG_PREFIX) for key in tag_dict(tags))

    def build(self, extra: Mapping[str, str]) -> dict[str, str]:
        """Tags for a resource the cluster creates and owns."""
        tags = dict(extra)
        if self.cluster_id:
            if self.uses_legacy_tag:
                tags[LEGACY_CLUSTER_TAG] = self.cluster_id
            tags[self.cluster_tag_key] = OWNED
        return tags


@dataclass(frozen=True)
class InstanceRef:
    """What a providerID says: the instance ID, and the zone when given."""

    instance_id: str
    zone: str = ""


def provider_id(zone: str, instance_id: str) -> str:
    """``aws:///<zone>/<instance-id>``, upstream's providerID format."""
    return f"aws:///{zone}/{instance_id}"


def parse_provider_id(value: str) -> InstanceRef | None:
    """The instance a providerID names, ``None`` when it names no EC2 instance.

    Accepts upstream's forms: ``aws:///<zone>/<id>``, ``aws:////<id>``, ``aws://<id>`` and a
    bare ``i-...``. Raises :class:`ValueError` for another provider's scheme and for an
    ``aws://`` ID of a kind kccm does not handle (e.g. Fargate's), so that the caller never
    reads either as "this instance is gone".
    """
    if not value.startswith("aws://"):
        if _INSTANCE_ID.match(value):
            return InstanceRef(value)
        raise ValueError(f"providerID {value!r} is not an aws:// providerID")
    parts = [p for p in value.removeprefix("aws://").split("/") if p]
    if not parts or len(parts) > 2:
        return None
    last = parts[-1]
    if _INSTANCE_ID.match(last):
        return InstanceRef(last, parts[0] if len(parts) == 2 else "")
    if last.startswith("fargate-"):
        raise ValueError(f"providerID {value!r} names a Fargate node, which kccm does not manage")
    return None
