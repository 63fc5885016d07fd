"""A vServer group's members from the Service's endpoints, as upstream v2.14.0 makes them
(``pkg/controller/service/clbv1/vgroups.go``: ``setBackendsFromEndpointSlices``,
``buildLocalBackends``, ``buildENIBackends``, ``updateVServerGroupENIBackendID``,
``setWeightBackends`` with ``podNumberAlgorithm`` and ``podPercentAlgorithm``; the ENI ids
from ``pkg/provider/alibaba/ecs/ecs.go`` ``DescribeNetworkInterfaces``).

Endpoints count when ready (the framework's reader, :class:`~kccm.cloudprovider.ServiceEndpoint`:
terminating ones are already left out) and when their port is known: the Service port's
numeric ``targetPort``, else the endpoint's port named as the Service port.

- ``local`` (``externalTrafficPolicy: Local``): one ECS member per eligible Node running such an
  endpoint, on the node port; its weight is the Node's endpoint count, or with a ``weight``
  total (reused group) ``total * count / endpoints`` (at least 1; a total of 0 gives 0).
  ``default-weight`` is not used, as upstream.
- ``eni``: one member of type ``eni`` per endpoint: its IP (``ServerIp``), its ENI
  (``ServerId``, found by private IP), the target port; weight ``default-weight`` (100), or
  ``total / endpoints`` (at least 1). An IP no ENI of the VPC holds is left out, and said in
  a Warning (``SkipSyncBackends``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from kccm.cloudprovider import ServiceEndpoint
from kccm.providers.alibabacloud.loadbalancer.slbapi import Backend, Rpc
from kccm.providers.alibabacloud.loadbalancer.spec import ListenerSpec

__all__ = ["PortTarget", "eni_ids", "eni_members", "local_members", "ready_ports"]

MAX_ENI_IPS = 100  # ecs.go MaxNetworkInterfaceNum
PAGE = 100  # ecs.go MaxResult


class PortTarget(Protocol):
    """What finds an endpoint's port: the Service port's ``targetPort`` and name."""

    @property
    def target(self) -> str: ...

    @property
    def port_name(self) -> str: ...


def _port(endpoint: ServiceEndpoint, listener: PortTarget) -> int:
    if listener.target.isdigit():
        return int(listener.target)
    return next((port for name, port in endpoint.ports if name == listener.port_name), 0)


def ready_ports(
    endpoints: Sequence[ServiceEndpoint], listener: PortTarget
) -> Iterator[tuple[ServiceEndpoint, int]]:
    """The ready endpoints whose backend port is known, with it."""
    for endpoint in endpoints:
        port = _port(endpoint, listener) if endpoint.ready else 0
        if port:
            yield endpoint, port


def _share(total: int, part: int, whole: int) -> int:
    """``podPercentAlgorithm``: ``total * part / whole``, at least 1 unless ``total`` is 0."""
    return 0 if total == 0 else max(1, total * part // max(1, whole))


def local_members(
    endpoints: Sequence[ServiceEndpoint],
    listener: ListenerSpec,
    instance_of: Mapping[str, str],
    total: int | None,
) -> list[Backend]:
    """``buildLocalBackends``: ``instance_of`` maps each eligible Node to its ECS instance."""
    counts: Counter[str] = Counter()
    for endpoint, _ in ready_ports(endpoints, listener):
        instance = instance_of.get(endpoint.node_name)
        if instance is not None:
            counts[instance] += 1
    found = sum(counts.values())
    return [
        Backend(
            instance,
            listener.node_port,
            count if total is None else _share(total, count, found),
            "ecs",
            listener.vgroup_name,
        )
        for instance, count in sorted(counts.items())
    ]


def eni_members(
    endpoints: Sequence[ServiceEndpoint],
    listener: ListenerSpec,
    eni_of: Mapping[str, str],
    each: int,
    total: int | None,
) -> list[Backend]:
    """``buildENIBackends`` and ``updateVServerGroupENIBackendID``: weights are shared among
    every ready endpoint, then those without an ENI are left out."""
    found = list(ready_ports(endpoints, listener))
    weight = each if total is None else _share(total, 1, len(found))
    return [
        Backend(eni_of[e.address], port, weight, "eni", listener.vgroup_name, e.address)
        for e, port in found
        if e.address in eni_of
    ]


def eni_ids(rpc: Rpc, vpc_id: str, ips: Sequence[str]) -> dict[str, str]:
    """``DescribeNetworkInterfaces`` by private IP (``PrivateIpAddress.N``, 100 a call, in use,
    in the VPC; ``NextToken`` pages of 100): ``{ip: ENI id}`` for every IP an ENI holds."""
    found: dict[str, str] = {}
    for start in range(0, len(ips), MAX_ENI_IPS):
        params: dict[str, str | int] = {"VpcId": vpc_id, "Status": "InUse", "MaxResults": PAGE}
        for n, ip in enumerate(ips[start : start + MAX_ENI_IPS], 1):
            params[f"PrivateIpAddress.{n}"] = ip
        while True:
            page = rpc.call("ecs", "DescribeNetworkInterfaces", params)
            for eni in (page.get("NetworkInterfaceSets") or {}).get("NetworkInterfaceSet") or []:
                for item in (eni.get("PrivateIpSets") or {}).get("PrivateIpSet") or []:
                    found[str(item.get("PrivateIpAddress"))] = str(eni.get("NetworkInterfaceId"))
            token = str(page.get("NextToken") or "")
            if not token:
                break
            params["NextToken"] = token
    return found
