"""An NLB server group's servers from the Service's endpoints, as upstream v2.14.0 makes them
(``pkg/controller/service/nlbv2/server_groups.go``: ``setServerGroupServers``,
``setBackendsFromEndpointSlices``, ``buildLocalBackends``, ``buildENIBackends``,
``updateENIBackends``, ``updateServerGroupENIBackendID``, ``podNumberAlgorithm``).

Endpoints count when ready and when their port is known (:func:`.endpoint_members.ready_ports`).

- ``local`` (``externalTrafficPolicy: Local``): one server per eligible Node running such an
  endpoint, on the node port: its ECS instance (type ``Ecs``, weight the Node's endpoint
  count), or for an ``Ip`` group its InternalIP (type ``Ip``, weight 1, as upstream weighs
  non-ECS servers).
- ``eni`` (``backend-type: eni``, else the config's ``serviceBackendType``): one server per
  endpoint on its target port, weight ``default-weight`` (100): type ``Eni`` with the ENI
  holding its IP (``DescribeNetworkInterfaces``; an IP no ENI holds is left out, said in a
  Warning), or for an ``Ip`` group type ``Ip`` with the IP itself (no ENI lookup).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from kccm.cloudprovider import Node, Service, ServiceEndpoint
from kccm.providers.alibabacloud.instances import parse_provider_id
from kccm.providers.alibabacloud.loadbalancer.backends import eligible_nodes
from kccm.providers.alibabacloud.loadbalancer.endpoint_members import ready_ports
from kccm.providers.alibabacloud.loadbalancer.nlbapi import Server
from kccm.providers.alibabacloud.loadbalancer.nlbspec import GroupSpec, internal_ip
from kccm.providers.alibabacloud.loadbalancer.spec import eni_backends

__all__ = ["eni_ips", "eni_servers", "local_servers", "members_mode"]


def members_mode(service: Service, config_backend_type: str) -> str:
    """Upstream's traffic policy: ``eni``, ``local`` or ``nodes`` (cluster)."""
    if eni_backends(service, config_backend_type):
        return "eni"
    if (service.get("spec") or {}).get("externalTrafficPolicy") == "Local":
        return "local"
    return "nodes"


def _sorted(servers: Mapping[tuple[str, str], Server]) -> list[Server]:
    return [servers[k] for k in sorted(servers)]


def local_servers(
    service: Service, group: GroupSpec, endpoints: Sequence[ServiceEndpoint], nodes: Sequence[Node]
) -> list[Server]:
    """``buildLocalBackends`` + ``podNumberAlgorithm`` (Local) + ``removeDuplicatedECS``."""
    by_name = {str(n["metadata"]["name"]): n for n in eligible_nodes(service, nodes)}
    counts: Counter[str] = Counter()
    for endpoint, _ in ready_ports(endpoints, group):
        if endpoint.node_name in by_name:
            counts[endpoint.node_name] += 1
    servers: dict[tuple[str, str], Server] = {}
    for name, count in counts.items():
        node = by_name[name]
        if group.type == "Ip":
            ip = internal_ip(node)
            server = Server(ip, "Ip", group.node_port, 1, group.name, ip)
        else:
            instance = parse_provider_id(str(node["spec"]["providerID"]))[1]
            server = Server(instance, "Ecs", group.node_port, count, group.name)
        servers.setdefault((server.server_type, server.server_id), server)
    return _sorted(servers)


def eni_ips(groups: Sequence[GroupSpec], endpoints: Sequence[ServiceEndpoint]) -> list[str]:
    """The IPs whose ENI ``updateServerGroupENIBackendID`` looks up (``Eni`` servers only)."""
    return sorted(
        {e.address for g in groups if g.type != "Ip" for e, _ in ready_ports(endpoints, g)}
    )


def eni_servers(
    group: GroupSpec, endpoints: Sequence[ServiceEndpoint], eni_of: Mapping[str, str]
) -> list[Server]:
    """``buildENIBackends`` + ``updateServerGroupENIBackendID``: ``eni_of`` maps an IP to
    its ENI."""
    servers: dict[tuple[str, str], Server] = {}
    for endpoint, port in ready_ports(endpoints, group):
        ip = endpoint.address
        if group.type == "Ip":
            server = Server(ip, "Ip", port, group.weight, group.name, ip)
        elif ip in eni_of:
            server = Server(eni_of[ip], "Eni", port, group.weight, group.name, ip)
        else:
            continue
        servers.setdefault((server.server_id, ip), server)
    return _sorted(servers)
