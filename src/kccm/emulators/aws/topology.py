"""``DescribeInstanceTopology``, which moto 5 does not know, taught to moto as AWS documents it.

:func:`network_nodes_of` is what the taught moto answers for an instance, importable by the
tests that compare with it without importing moto.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

__all__ = ["TOPOLOGY_TYPES", "network_nodes_of", "teach_instance_topology"]

TOPOLOGY_TYPES = re.compile(
    r"^(g6e|g7e|hpc6a|hpc6id|hpc7a|hpc7g|hpc8a|p3dn|p4d|p4de|p5|p5e|p5en|trn1|trn1n|trn2|trn2u"
    r"|p6-b200)\."
)
"""Instance types AWS documents as having a topology (API reference and "Prerequisites for
Amazon EC2 topology"); ``p6-b200`` answers four network nodes, the others three."""


def network_nodes_of(instance_id: str, zone: str, instance_type: str) -> list[str]:
    """The network nodes the taught moto reports for an instance, top layer first: shared by
    the zone's instances at the first layer(s), the instance's own at the last."""
    layers = 4 if instance_type.startswith("p6-b200.") else 3
    seeds = [f"{zone}/{layer}" for layer in range(1, layers)] + [instance_id]
    return ["nn-" + hashlib.sha256(seed.encode()).hexdigest()[:17] for seed in seeds]


def teach_instance_topology() -> None:
    """Give moto's EC2 ``DescribeInstanceTopology`` (moto 5 has none): AWS's documented
    answer, ``Instances`` (``instanceSet``) with ``InstanceId``, ``InstanceType``,
    ``NetworkNodes``, ``AvailabilityZone``, ``ZoneId``, paged by ``MaxResults`` (default 20,
    not with ``InstanceIds``) and ``NextToken``. Only running instances of a supported type
    are listed. Patched on moto's response class in the emulator's process."""
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import InvalidParameterCombination
    from moto.ec2.responses import EC2Response

    response_class: Any = EC2Response
    if hasattr(response_class, "describe_instance_topology"):
        return

    def describe_instance_topology(self: Any) -> ActionResult:
        ids = set(self._get_param("InstanceIds", []))
        if ids and self._get_param("MaxResults") is not None:
            raise InvalidParameterCombination("MaxResults cannot be used with InstanceIds")
        listed = [
            _topology_of(self.ec2_backend, instance)
            for instance in self.ec2_backend.all_instances()
            if (not ids or instance.id in ids)
            and instance.state == "running"
            and TOPOLOGY_TYPES.match(instance.instance_type)
        ]
        start = int(self._get_param("NextToken") or 0)
        size = int(self._get_param("MaxResults") or 20)
        page = listed[start : start + size]
        more = start + size < len(listed)
        return ActionResult({"Instances": page, "NextToken": str(start + size) if more else None})

    response_class.describe_instance_topology = describe_instance_topology


def _topology_of(backend: Any, instance: Any) -> dict[str, Any]:
    zone = str(instance.placement.zone)
    found = backend.get_zone_by_name(zone)
    return {
        "InstanceId": instance.id,
        "InstanceType": instance.instance_type,
        "NetworkNodes": network_nodes_of(instance.id, zone, instance.instance_type),
        "AvailabilityZone": zone,
        "ZoneId": found.zone_id if found is not None else "",
    }
