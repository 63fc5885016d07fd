"""The vSphere cloud config as the provider uses it: each vCenter after upstream's defaulting,
the ``[Global]`` fallbacks, ``[Labels]`` and ``[Nodes]``.

Upstream: ``pkg/common/config`` (``VirtualCenterConfig``, ``Config``) and
``pkg/cloudprovider/vsphere/config`` (``[Nodes]``). Built from the file by
:mod:`kccm.providers.vsphere.config`, then changed by the ``VSPHERE_*`` overrides of
:mod:`kccm.providers.vsphere.envconfig`; both build on these types.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_ROUNDTRIP_COUNT",
    "GLOBAL_SECRET_REF",
    "GlobalDefaults",
    "Network",
    "NodesConfig",
    "VCenter",
    "VSphereConfig",
]

DEFAULT_PORT = 443
"""``DefaultVCenterPort``."""
DEFAULT_ROUNDTRIP_COUNT = 3
"""``DefaultRoundTripperCount`` (attempts of one SOAP call)."""
DEFAULT_REQUEST_TIMEOUT = 30.0
GLOBAL_SECRET_REF = "Global"
"""``DefaultCredentialManager``: the vCenter's credentials come from [Global]'s Secret."""


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class NodesConfig:
    """``[Nodes]``: how a node's addresses are chosen among its VM's guest IPs."""

    internal_subnets: tuple[Network, ...] = ()
    external_subnets: tuple[Network, ...] = ()
    internal_network_name: str = ""
    external_network_name: str = ""
    exclude_internal_subnets: tuple[Network, ...] = ()
    exclude_external_subnets: tuple[Network, ...] = ()


@dataclass(frozen=True)
class VCenter:
    """One vCenter after upstream's defaulting (``VirtualCenterConfig``)."""

    tenant_ref: str
    """The section name: the connection key (the server, unless ``server`` is set)."""
    server: str
    port: int = DEFAULT_PORT
    user: str = ""
    password: str = field(default="", repr=False)
    insecure: bool = False
    datacenters: tuple[str, ...] = ()
    roundtrip_count: int = DEFAULT_ROUNDTRIP_COUNT
    ca_file: str = ""
    thumbprint: str = ""
    secret_ref: str = ""
    """Empty: credentials from the config; ``Global``: [Global]'s Secret or directory;
    ``<namespace>/<name>``: this vCenter's own Secret."""
    secret_name: str = ""
    secret_namespace: str = ""
    ip_families: tuple[str, ...] = ("ipv4",)


@dataclass(frozen=True)
class GlobalDefaults:
    """``[Global]``'s connection settings after upstream's defaulting: what a vCenter defined
    by ``VSPHERE_VCENTER_<id>`` falls back to (upstream ``FromEnv``)."""

    user: str = ""
    password: str = field(default="", repr=False)
    port: int = DEFAULT_PORT
    datacenters: tuple[str, ...] = ()
    ca_file: str = ""
    thumbprint: str = ""


@dataclass(frozen=True)
class VSphereConfig:
    vcenters: dict[str, VCenter]
    """By tenant ref, in file order."""
    defaults: GlobalDefaults = GlobalDefaults()
    zone_category: str = ""
    region_category: str = ""
    nodes: NodesConfig = NodesConfig()
    secret_name: str = ""
    secret_namespace: str = ""
    secrets_directory: str = ""
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    @property
    def zones_enabled(self) -> bool:
        """Upstream reports no zone unless both ``[Labels]`` categories are set."""
        return bool(self.zone_category and self.region_category)
