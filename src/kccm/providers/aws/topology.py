"""EC2 instance topology as Node labels (upstream ``topology.go`` ``instanceTopologyManager`` and
``instances_v2.go`` ``getAdditionalLabels``).

At a Node's initialisation, ``DescribeInstanceTopology`` for its instance gives the network nodes
above it, top layer first; each becomes ``topology.k8s.aws/network-node-layer-<n>`` (n from 1).
As upstream:

- no call for a Node that already has ``network-node-layer-1``, nor for an empty instance type;
- the region, the instance ID and the instance type are remembered as "unsupported" for 24 h
  (upstream's ``cache.NewTTLStore``) and not asked about meanwhile: the region when EC2 answers
  ``UnsupportedOperation`` (logged) or ``UnauthorizedOperation`` (warned: the IAM policy lacks
  ``ec2:DescribeInstanceTopology``); the instance type when EC2 lists nothing for an instance of
  a type that is not expected to answer; the instance ID when it is expected to answer (it may
  be stopping: its type is not blamed);
- a type is expected to answer when it matches ``SupportedTopologyInstanceTypePattern``
  (default ``^(hpc|trn|p)[0-9]+[a-z]*(-[a-z0-9]+)?(\\.[0-9a-z]*)$``, upstream's
  ``defaultSupportedTopologyInstanceTypePattern``). Any other error (throttling included, and
  any exception at all: an endpoint's HTML 500 or a bug, as upstream's ``err != nil``) fails
  the Node's initialisation for such a type, so that it is retried; for other types it is
  logged and the Node is initialised without the labels.

kccm initialises Nodes with 32 workers where upstream has one: instances of one type not
expected to answer are asked about one at a time, so the first answer ("none for this type")
spares the others their call, and a type costs one call a day, as with upstream's one worker.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import CloudProviderError
from kccm.providers.aws.api import AWSAPI
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = [
    "CACHE_TTL",
    "DEFAULT_SUPPORTED_PATTERN",
    "LABEL_NETWORK_NODE_PREFIX",
    "InstanceTopologies",
    "network_node_labels",
]

log = logging.getLogger(__name__)

LABEL_NETWORK_NODE_PREFIX = "topology.k8s.aws/network-node-layer-"
"""Upstream ``LabelNetworkNodePrefix`` (``well_known_labels.go``); suffixed 1, 2, ..."""
DEFAULT_SUPPORTED_PATTERN = r"^(hpc|trn|p)[0-9]+[a-z]*(-[a-z0-9]+)?(\.[0-9a-z]*)$"
"""Upstream ``defaultSupportedTopologyInstanceTypePattern``: types expected to answer."""
CACHE_TTL = 24 * 3600.0
"""Upstream ``instanceTopologyManagerCacheTimeout``: how long "unsupported" is remembered."""
_BACK_OFF_CODES = {
    "UnsupportedOperation": "ec2:DescribeInstanceTopology is not available in %s: %s",
    "UnauthorizedOperation": (
        "Not authorized to perform: ec2:DescribeInstanceTopology (region %s), permission "
        "missing: %s"
    ),
}


def network_node_labels(network_nodes: Sequence[str]) -> dict[str, str]:
    """``network-node-layer-1`` for the first network node, and so on (upstream's order)."""
    return {
        f"{LABEL_NETWORK_NODE_PREFIX}{layer}": str(node)
        for layer, node in enumerate(network_nodes, start=1)
    }


class _Unsupported:
    """Keys remembered for :data:`CACHE_TTL` (upstream's TTL store; a re-add restarts it)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, key: str) -> None:
        with self._lock:
            self._until[key] = self._clock.monotonic() + CACHE_TTL

    def __contains__(self, key: object) -> bool:
        with self._lock:
            until = self._until.get(str(key))
            if until is None:
                return False
            if self._clock.monotonic() >= until:
                del self._until[str(key)]
                return False
            return True


class InstanceTopologies:
    """Upstream ``instanceTopologyManager``: one ``DescribeInstanceTopology`` per instance asked
    about, none for what is remembered as unsupported."""

    def __init__(self, api: AWSAPI, pattern: str = "", clock: Clock = REAL_CLOCK) -> None:
        self._api = api
        self._pattern = re.compile(pattern or DEFAULT_SUPPORTED_PATTERN)
        self.unsupported = _Unsupported(clock)
        self._type_locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def requires_response(self, instance_type: str) -> bool:
        """Upstream ``DoesInstanceTypeRequireResponse`` (Go's ``MatchString``: a search)."""
        return self._pattern.search(instance_type) is not None

    def labels(
        self, instance_id: str, instance_type: str, region: str, existing: Mapping[str, str]
    ) -> dict[str, str]:
        """The topology part of upstream ``getAdditionalLabels``: the labels to add, ``{}``
        when the Node has them already or there is no topology; raises only for a type that
        is expected to answer."""
        if f"{LABEL_NETWORK_NODE_PREFIX}1" in existing:
            return {}
        try:
            nodes = self.network_nodes(instance_id, instance_type, region)
        except Exception as err:  # upstream: any error (issue 25: not only AWS's)
            if self.requires_response(instance_type):
                log.error(
                    "Failed to get node topology for instance type %s and one is expected: %s",
                    instance_type,
                    err,
                )
                raise
            log.warning(
                "Failed to get node topology for instance type %s and ID %s. Moving on without "
                "setting labels. Ignoring %s",
                instance_type,
                instance_id,
                err,
            )
            return {}
        if nodes is None:
            log.info("No instance topology for instance type %s available.", instance_type)
            return {}
        return network_node_labels(nodes)

    def network_nodes(self, instance_id: str, instance_type: str, region: str) -> list[str] | None:
        """Upstream ``GetNodeTopology``: the instance's network nodes, ``None`` when there is
        no topology to be had (remembered as unsupported where upstream does)."""
        if self.requires_response(instance_type):
            return self._ask(instance_id, instance_type, region)
        with self._type_lock(instance_type):
            return self._ask(instance_id, instance_type, region)

    def _type_lock(self, instance_type: str) -> threading.Lock:
        with self._locks_lock:
            return self._type_locks.setdefault(instance_type, threading.Lock())

    def _ask(self, instance_id: str, instance_type: str, region: str) -> list[str] | None:
        if not self._might_support(instance_id, instance_type, region):
            return None
        try:
            found = list(
                self._api.pages(
                    "ec2", "describe_instance_topology", "Instances", InstanceIds=[instance_id]
                )
            )
        except CloudProviderError as err:
            self._failed(err, region)  # raises unless upstream backs off
            return None
        if not found:
            self._no_topology(instance_id, instance_type)
            return None
        first: Mapping[str, Any] = found[0]
        return [str(node) for node in first.get("NetworkNodes") or ()]

    def _failed(self, err: CloudProviderError, region: str) -> None:
        """The region remembered as unsupported for the codes upstream backs off on; any
        other error raised again."""
        code = str(getattr(err, "code", ""))
        if code in _BACK_OFF_CODES:
            level = logging.INFO if code == "UnsupportedOperation" else logging.WARNING
            log.log(level, _BACK_OFF_CODES[code], region, err)
            self.unsupported.add(region)
            return
        log.error("Error describing instance topology: %s", err)
        raise err

    def _no_topology(self, instance_id: str, instance_type: str) -> None:
        if self.requires_response(instance_type):
            log.warning(
                "Instance %s of type %s has no instance topology listed but may be a supported "
                "type.",
                instance_id,
                instance_type,
            )
            self.unsupported.add(instance_id)
        else:
            log.info("Instance type %s unsupported for getting instance topology", instance_type)
            self.unsupported.add(instance_type)

    def _might_support(self, instance_id: str, instance_type: str, region: str) -> bool:
        if not instance_type:  # Fargate and other variants have no instance type
            return False
        return not any(key in self.unsupported for key in (region, instance_id, instance_type))
