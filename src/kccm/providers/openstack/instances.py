"""InstancesV2 from Nova and Neutron (upstream ``pkg/openstack/instances.go`` v1.36.0).

- The server of a Node is found by its providerID (``GET /servers/{id}``), or, without one,
  by name: ``GET /servers/detail?name=^<QuoteMeta(name)>$`` (``getServerByName``); more than
  one match is an error.
- providerIDs are ``openstack:///<uuid>``, or ``openstack://<region>/<uuid>`` when the
  environment has ``OS_CCM_REGIONAL=true`` (``makeInstanceID``); both forms are parsed, a bare
  ``<uuid>`` too (``instanceIDFromProviderID``), and a region other than ``[Global] region``
  is an error.
- ``SHUTOFF`` is shut down (``InstanceShutdown``).
- The instance type is the flavor's ``original_name`` when Nova gives one and it is a valid
  label value, else the name of ``GET /flavors/{id}`` (its ID when the name is no label value):
  ``srvInstanceType``. kccm sends no microversion, as OCCM; flavor names are cached by ID
  (Nova cannot rename a flavor).
- Addresses: :mod:`kccm.providers.openstack.addresses` with the server's ports from
  ``GET /v2.0/ports?device_id=<id>`` (``getAttachedPorts``).
- Zone: ``OS-EXT-AZ:availability_zone`` through ``util.SanitizeLabel``; region:
  ``[Global] region``.

**Deliberate difference**: a Node without a providerID whose server is gone does not exist
(``instance_exists`` is false, so the lifecycle controller deletes the Node). OCCM's
``getServerByName`` returns ``errors.ErrNotFound``, not ``cloudprovider.InstanceNotFound``, so
``InstanceExists`` fails and the Node stays forever (cloud-provider-openstack#3114, open).

``list_instance_metadata`` answers a refresh tick for all Nodes with one paged
``servers/detail`` listing and one ports listing. Nova lists the servers of the token's project
only, so a Node the listing leaves out (its server in another project, reached with admin
credentials; or gone) is read on its own, as OCCM reads every Node (``GET /servers/{id}``, else
by name, and its ports by ``device_id``); a gone one is left out.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import (
    CloudProviderError,
    InstanceMetadata,
    InstanceNotFound,
    InstanceView,
    Node,
    NodeName,
    Throttled,
    node_name,
    node_provider_id,
)
from kccm.providers.openstack.addresses import node_addresses
from kccm.providers.openstack.api import OpenStackAPI, OpenStackNotFound
from kccm.providers.openstack.config import OpenStackConfig

__all__ = [
    "PROVIDER_NAME",
    "REGIONAL_PROVIDER_ID_ENV",
    "OpenStackInstances",
    "go_quote_meta",
    "instance_id_from_provider_id",
    "is_valid_label_value",
    "sanitize_label",
]

log = logging.getLogger(__name__)

PROVIDER_NAME = "openstack"
REGIONAL_PROVIDER_ID_ENV = "OS_CCM_REGIONAL"
"""``RegionalProviderIDEnv``: ``true`` makes providerIDs ``openstack://<region>/<uuid>``."""
INSTANCE_SHUTOFF = "SHUTOFF"
PORTS_BY_DEVICE_MAX = 40
"""Servers whose ports one ``device_id``-filtered listing asks for (a longer URL risks the
server's limit); more are answered from one listing of the project's ports."""
_PROVIDER_ID = re.compile(r"^openstack://([^/]*)/([^/]+)$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_UNSAFE_LABEL = re.compile(r"[^-a-zA-Z0-9_.]+")
_GO_META = frozenset("\\.+*?()|[]{}^$")


def instance_id_from_provider_id(provider_id: str) -> tuple[str, str]:
    """``instanceIDFromProviderID``: ``(instance ID, region)``; a value without ``://`` is
    read as ``openstack://<value>`` (kubernetes/kubernetes#85731)."""
    if provider_id and "://" not in provider_id:
        provider_id = f"{PROVIDER_NAME}://{provider_id}"
    found = _PROVIDER_ID.match(provider_id)
    if found is None:
        raise CloudProviderError(
            f'ProviderID "{provider_id}" didn\'t match expected format '
            '"openstack://region/InstanceID"'
        )
    return found.group(2), found.group(1)


def go_quote_meta(text: str) -> str:
    """Go's ``regexp.QuoteMeta`` (Python's ``re.escape`` escapes more, e.g. ``-``)."""
    return "".join(f"\\{char}" if char in _GO_META else char for char in text)


def is_valid_label_value(value: str) -> bool:
    """``validation.IsValidLabelValue``: at most 63 characters of ``[-A-Za-z0-9_.]``,
    alphanumeric at both ends (or empty)."""
    return len(value) <= 63 and _LABEL_VALUE.match(value) is not None


def sanitize_label(value: str) -> str:
    """``util.SanitizeLabel``."""
    return _UNSAFE_LABEL.sub("-", value).strip("-_.")[:63]


class OpenStackInstances:
    """InstancesV2 (and ``list_instance_metadata``) on Nova and Neutron."""

    def __init__(self, api: OpenStackAPI, config: OpenStackConfig, *, regional: bool) -> None:
        self.api = api
        self.region = config.global_.region
        self.networking = config.networking
        self.regional = regional
        self._flavors: dict[str, str] = {}
        self._flavor_lock = threading.Lock()
        self._node_names: dict[str, NodeName] = {}
        """server ID -> the name of the Node seen with it (for the routes' next hops)."""

    # -- InstancesV2 ------------------------------------------------------------------------

    def instance_exists(self, node: Node) -> bool:
        """``InstanceExists``; a Node without providerID whose server is gone does not exist
        (see the module doc: OCCM errors there, cloud-provider-openstack#3114)."""
        try:
            self.server_of(node)
        except InstanceNotFound:
            return False
        return True

    def instance_shutdown(self, node: Node) -> bool:
        """``InstanceShutdown``: the server's status is ``SHUTOFF``."""
        return self.server_of(node).get("status") == INSTANCE_SHUTOFF

    def instance_metadata(self, node: Node) -> InstanceMetadata:
        """``InstanceMetadata``: providerID, flavor, addresses, zone and region."""
        server = self.server_of(node)
        return self.metadata_of(server, self.ports_of(server["id"]))

    def describe_instance(self, node: Node) -> InstanceView:
        """kccm's optional describe (``kccm explain node``): the node's server as Nova reports
        it now (``ACTIVE``, ``SHUTOFF``, ``ERROR``...); a gone one does not exist."""
        try:
            server = self.server_of(node)
        except InstanceNotFound:
            return InstanceView(provider_id=node_provider_id(node), exists=False)
        detail = {
            "flavor": self.instance_type(server),
            "zone": str(server.get("OS-EXT-AZ:availability_zone") or ""),
            "name": str(server.get("name") or ""),
        }
        fault = (server.get("fault") or {}).get("message")
        if fault:
            detail["fault"] = str(fault)
        return InstanceView(
            provider_id=self.provider_id_of(server),
            state=str(server.get("status") or ""),
            detail=detail,
        )

    # -- lookups ----------------------------------------------------------------------------

    def node_name_of(self, server: Mapping[str, Any]) -> NodeName:
        """The Node seen with this server, else the server's name."""
        return self._node_names.get(str(server.get("id")), str(server.get("name") or ""))

    def server_of(self, node: Node) -> dict[str, Any]:
        """``getInstance``: by providerID, else by name; :class:`InstanceNotFound` when gone."""
        server = self._server_of(node)
        self._node_names[str(server.get("id"))] = node_name(node)
        return server

    def _server_of(self, node: Node) -> dict[str, Any]:
        provider_id = node_provider_id(node)
        if not provider_id:
            return self.server_by_name(node_name(node))
        instance_id, region = instance_id_from_provider_id(provider_id)
        if region and region != self.region:
            raise CloudProviderError(
                f'ProviderID "{provider_id}" didn\'t match supported region "{self.region}"'
            )
        try:
            found = self.api.request(
                "compute", "GET", f"/servers/{instance_id}", operation="get_server"
            )
        except OpenStackNotFound as err:
            raise InstanceNotFound(f"server {instance_id} not found") from err
        server: dict[str, Any] = found["server"]
        return server

    def server_by_name(self, name: str) -> dict[str, Any]:
        """``getServerByName``: exactly one server named ``name`` (a regex match, anchored)."""
        params = {"name": f"^{go_quote_meta(name)}$"}
        found = []
        for server in self.api.paged(
            "compute", "/servers/detail", "servers", params, operation="list_servers"
        ):
            found.append(server)
            if len(found) > 1:
                raise CloudProviderError(f"multiple servers are named {name!r}")
        if not found:
            raise InstanceNotFound(f"no server named {name!r}")
        return found[0]

    def ports_of(self, server_id: str) -> list[dict[str, Any]]:
        """``getAttachedPorts``."""
        return list(
            self.api.paged(
                "network", "/v2.0/ports", "ports", {"device_id": server_id}, operation="list_ports"
            )
        )

    def flavor_name(self, flavor_id: str) -> str:
        """The flavor's name (its ID when the name is no label value), cached. The lock is held
        over the lookup, so concurrent first lookups of a flavor fetch it once."""
        with self._flavor_lock:
            cached = self._flavors.get(flavor_id)
            if cached is None:
                cached = self._flavors[flavor_id] = self._fetch_flavor_name(flavor_id)
            return cached

    def _fetch_flavor_name(self, flavor_id: str) -> str:
        found = self.api.request("compute", "GET", f"/flavors/{flavor_id}", operation="get_flavor")[
            "flavor"
        ]
        name = str(found.get("name") or "")
        return name if is_valid_label_value(name) else str(found.get("id") or flavor_id)

    def instance_type(self, server: Mapping[str, Any]) -> str:
        """``srvInstanceType``: ``original_name`` (microversion >= 2.47) when it is a label
        value, else the flavor looked up by ``id`` (a lookup failure tries the next key)."""
        flavor = server.get("flavor") or {}
        for key in ("original_name", "id"):
            value = flavor.get(key)
            if not isinstance(value, str):
                continue
            if key == "original_name" and is_valid_label_value(value):
                return value
            try:
                return self.flavor_name(value)
            except CloudProviderError as err:
                log.debug("flavor %s of server %s: %s", value, server.get("id"), err)
        raise CloudProviderError("flavor original_name/id not found")

    def subport_addresses(self, ports: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
        """The fixed IPs of the ports' trunk subports by network name (upstream: one port and
        one network ``GET`` per subport; a failure skips that subport)."""
        found: dict[str, list[str]] = {}
        for port in ports:
            for subport in (port.get("trunk_details") or {}).get("sub_ports") or ():
                try:
                    detail = self.api.request(
                        "network", "GET", f"/v2.0/ports/{subport['port_id']}", operation="get_port"
                    )["port"]
                    network = self.api.request(
                        "network",
                        "GET",
                        f"/v2.0/networks/{detail['network_id']}",
                        operation="get_network",
                    )["network"]
                except (CloudProviderError, KeyError) as err:
                    log.error("failed to get subport %s details: %s", subport.get("port_id"), err)
                    continue
                ips = [str(f.get("ip_address", "")) for f in detail.get("fixed_ips") or ()]
                found.setdefault(str(network.get("name", "")), []).extend(ips)
        return found

    def provider_id_of(self, server: Mapping[str, Any]) -> str:
        """``makeInstanceID``."""
        if self.regional:
            return f"{PROVIDER_NAME}://{self.region}/{server['id']}"
        return f"{PROVIDER_NAME}:///{server['id']}"

    def metadata_of(
        self, server: Mapping[str, Any], ports: Sequence[Mapping[str, Any]]
    ) -> InstanceMetadata:
        addresses = node_addresses(server, ports, self.networking, self.subport_addresses(ports))
        return InstanceMetadata(
            provider_id=self.provider_id_of(server),
            instance_type=self.instance_type(server),
            node_addresses=addresses,
            zone=sanitize_label(str(server.get("OS-EXT-AZ:availability_zone") or "")),
            region=self.region,
        )

    # -- batch ------------------------------------------------------------------------------

    def list_instance_metadata(self, nodes: Sequence[Node]) -> Mapping[NodeName, InstanceMetadata]:
        """Metadata of every Node whose server exists, from one paged ``servers/detail``
        listing and one ports listing (``device_id`` filters for up to
        :data:`PORTS_BY_DEVICE_MAX` servers, else every port of the project, one paged
        call); flavors come from the cache. Nodes without a server are left out (the
        lifecycle controller decides existence); a Node whose metadata fails is logged and
        left out too."""
        servers = list(
            self.api.paged("compute", "/servers/detail", "servers", operation="list_servers")
        )
        matched = _match_servers(nodes, servers, self.region)
        self._node_names.update({str(s["id"]): name for name, s in matched.items()})
        ports = self._ports_by_device(sorted({s["id"] for s in matched.values()}))
        result: dict[NodeName, InstanceMetadata] = {}
        for name, server in matched.items():
            try:
                result[name] = self.metadata_of(server, ports.get(server["id"], []))
            except CloudProviderError as err:
                log.warning(
                    "openstack: metadata of node %s (server %s): %s", name, server["id"], err
                )
        result.update(self._one_by_one([n for n in nodes if node_name(n) not in matched]))
        return result

    def _one_by_one(self, nodes: Sequence[Node]) -> dict[NodeName, InstanceMetadata]:
        """Nodes the project's listing left out, read as OCCM reads each Node; gone ones are
        left out, a failure is logged (a rate limit ends the tick)."""
        result: dict[NodeName, InstanceMetadata] = {}
        for node in nodes:
            try:
                result[node_name(node)] = self.instance_metadata(node)
            except InstanceNotFound:
                continue
            except Throttled:
                raise
            except CloudProviderError as err:
                log.warning("openstack: metadata of node %s: %s", node_name(node), err)
        return result

    def _ports_by_device(self, server_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        if not server_ids:
            return {}
        params: dict[str, Any]
        if len(server_ids) <= PORTS_BY_DEVICE_MAX:
            params = {"device_id": list(server_ids)}
        else:
            project = self.api.session.get_project_id()
            params = {"project_id": project} if project else {}
        wanted = set(server_ids)
        found: dict[str, list[dict[str, Any]]] = {}
        for port in self.api.paged(
            "network", "/v2.0/ports", "ports", params, operation="list_ports"
        ):
            device = str(port.get("device_id") or "")
            if device in wanted:
                found.setdefault(device, []).append(port)
        return found


def _match_servers(
    nodes: Sequence[Node], servers: Sequence[dict[str, Any]], region: str
) -> dict[NodeName, dict[str, Any]]:
    """Each Node's server: by providerID (its region must be ours), else by exact name (a
    name two servers share matches neither)."""
    by_id = {str(s.get("id")): s for s in servers}
    by_name: dict[str, list[dict[str, Any]]] = {}
    for server in servers:
        by_name.setdefault(str(server.get("name")), []).append(server)
    matched: dict[NodeName, dict[str, Any]] = {}
    for node in nodes:
        name = node_name(node)
        provider_id = node_provider_id(node)
        if not provider_id:
            named = by_name.get(name, [])
            if len(named) == 1:
                matched[name] = named[0]
            continue
        try:
            instance_id, node_region = instance_id_from_provider_id(provider_id)
        except CloudProviderError as err:
            log.warning("openstack: node %s: %s", name, err)
            continue
        if (not node_region or node_region == region) and instance_id in by_id:
            matched[name] = by_id[instance_id]
    return matched
