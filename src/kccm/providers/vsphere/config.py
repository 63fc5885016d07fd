"""The vSphere cloud config: the CPI's INI and YAML formats, same keys and defaults.

Upstream: ``pkg/common/config`` (``types_ini_legacy.go``, ``types_yaml.go``,
``config_ini_legacy.go`` ``validateConfig``, ``config_yaml.go`` ``validateConfig``) and
``pkg/cloudprovider/vsphere/config`` (``[Nodes]``). Both formats are read by kccm's cloud-config
loader (names match ignoring case, ``-`` and ``_``, so ``insecure-flag`` and ``insecureFlag``
are one key); what differs between them is handled here:

- INI: ``[VirtualCenter "<server>"]`` (the section name is the server unless ``server`` is
  set, then it is only the tenant name); ``datacenters`` and ``ip-family`` are comma-separated.
- YAML: ``vcenter: {<name>: {server: ..., ...}}`` (``server`` required); lists are lists.

A ``[Global] server`` adds one vCenter with the global settings, as upstream does. Per-vCenter
values fall back to ``[Global]``. The ``VSPHERE_*`` environment overrides (upstream ``FromEnv``)
are applied afterwards, as upstream does, by :mod:`kccm.providers.vsphere.envconfig`. The
result's types are in :mod:`kccm.providers.vsphere.configtypes`.
"""

# ruff: noqa: RUF009 - setting() is a dataclasses.field() factory

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TextIO

from kccm.cloudprovider import CloudConfigError
from kccm.cloudprovider.config import load_cloud_config, setting
from kccm.providers.vsphere.configtypes import (
    DEFAULT_PORT,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_ROUNDTRIP_COUNT,
    GLOBAL_SECRET_REF,
    GlobalDefaults,
    Network,
    NodesConfig,
    VCenter,
    VSphereConfig,
)
from kccm.providers.vsphere.envconfig import apply_environment

__all__ = ["load_vsphere_config"]

log = logging.getLogger(__name__)

IP_FAMILIES = ("ipv4", "ipv6")
DUAL_STACK_ENV = "ENABLE_ALPHA_DUAL_STACK"


@dataclass(frozen=True)
class _GlobalSection:
    user: str = ""
    password: str = setting(default="", secret=True)
    server: str = ""
    port: int = 0
    insecure_flag: bool = False
    datacenters: list[str] = setting(default_factory=list)
    soap_roundtrip_count: int = 0
    ca_file: str = ""
    thumbprint: str = ""
    secret_name: str = ""
    secret_namespace: str = ""
    secrets_directory: str = ""
    api_disable: bool = True
    api_binding: str = ""
    ip_family: list[str] = setting(default_factory=list)
    request_timeout: float = 0.0
    """kccm extension: seconds one vSphere request may take (default 30)."""


@dataclass(frozen=True)
class _VirtualCenterSection:
    user: str = ""
    password: str = setting(default="", secret=True)
    server: str = ""
    port: int = 0
    insecure_flag: bool = False
    datacenters: list[str] = setting(default_factory=list)
    soap_roundtrip_count: int = 0
    ca_file: str = ""
    thumbprint: str = ""
    secret_name: str = ""
    secret_namespace: str = ""
    ip_family: list[str] = setting(default_factory=list)


@dataclass(frozen=True)
class _LabelsSection:
    zone: str = ""
    region: str = ""


@dataclass(frozen=True)
class _NodesSection:
    internal_network_subnet_cidr: str = ""
    external_network_subnet_cidr: str = ""
    internal_vm_network_name: str = ""
    external_vm_network_name: str = ""
    exclude_internal_network_subnet_cidr: str = ""
    exclude_external_network_subnet_cidr: str = ""


@dataclass(frozen=True)
class _NsxtSection:
    """Upstream ``pkg/nsxt/config`` ``[NSXT]``: accepted, not used (no NSX-T in kccm)."""

    user: str = ""
    password: str = setting(default="", secret=True)
    host: str = ""
    insecure_flag: bool = False
    remote_auth: bool = False
    secret_name: str = ""
    secret_namespace: str = ""
    vmc_access_token: str = setting(default="", secret=True)
    vmc_auth_host: str = ""
    client_auth_cert_file: str = ""
    client_auth_key_file: str = ""
    ca_file: str = ""


@dataclass(frozen=True)
class _LoadBalancerClassSection:
    """Upstream ``loadbalancer/config`` ``[LoadBalancerClass "<name>"]``: accepted, not used."""

    ip_pool_name: str = ""
    ip_pool_id: str = ""
    tcp_app_profile_name: str = ""
    tcp_app_profile_path: str = ""
    udp_app_profile_name: str = ""
    udp_app_profile_path: str = ""


@dataclass(frozen=True)
class _LoadBalancerSection(_LoadBalancerClassSection):
    """Upstream ``[LoadBalancer]``: accepted, not used."""

    size: str = ""
    lb_service_id: str = ""
    tier1_gateway_path: str = ""
    snat_disabled: bool = False
    tags: str = ""


@dataclass(frozen=True)
class _RouteSection:
    """Upstream ``route/config`` ``[Route]``: accepted, not used."""

    router_path: str = ""


@dataclass(frozen=True)
class _Schema:
    global_: _GlobalSection = setting(default_factory=_GlobalSection)
    virtual_center: dict[str, _VirtualCenterSection] = setting(default_factory=dict)
    """INI: ``[VirtualCenter "<server>"]``."""
    vcenter: dict[str, _VirtualCenterSection] = setting(default_factory=dict)
    """YAML: ``vcenter: {<name>: {...}}``."""
    labels: _LabelsSection = setting(default_factory=_LabelsSection)
    nodes: _NodesSection = setting(default_factory=_NodesSection)
    # Read by upstream's NSX-T load balancer and route providers from the same file, which
    # kccm does not implement: accepted so a CPI config loads unchanged, then ignored.
    nsxt: _NsxtSection = setting(default_factory=_NsxtSection)
    load_balancer: _LoadBalancerSection = setting(default_factory=_LoadBalancerSection)
    load_balancer_class: dict[str, _LoadBalancerClassSection] = setting(default_factory=dict)
    route: _RouteSection = setting(default_factory=_RouteSection)

    def unused_sections(self) -> list[str]:
        """The NSX-T sections that are set (kccm logs that it ignores them)."""
        found = [
            name
            for name, value, empty in (
                ("NSXT", self.nsxt, _NsxtSection()),
                ("LoadBalancer", self.load_balancer, _LoadBalancerSection()),
                ("Route", self.route, _RouteSection()),
            )
            if value != empty
        ]
        return found + [f'LoadBalancerClass "{name}"' for name in self.load_balancer_class]


def _split(values: list[str]) -> tuple[str, ...]:
    """INI writes ``a,b`` in one value, YAML a list: accept both."""
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def _cidrs(text: str, key: str, issues: list[str]) -> tuple[Network, ...]:
    nets: list[Network] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            nets.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            issues.append(f"[Nodes] {key}: {part!r} is not a CIDR")
    return tuple(nets)


def _nodes(section: _NodesSection, issues: list[str]) -> NodesConfig:
    return NodesConfig(
        internal_subnets=_cidrs(
            section.internal_network_subnet_cidr, "internal-network-subnet-cidr", issues
        ),
        external_subnets=_cidrs(
            section.external_network_subnet_cidr, "external-network-subnet-cidr", issues
        ),
        internal_network_name=section.internal_vm_network_name,
        external_network_name=section.external_vm_network_name,
        exclude_internal_subnets=_cidrs(
            section.exclude_internal_network_subnet_cidr,
            "exclude-internal-network-subnet-cidr",
            issues,
        ),
        exclude_external_subnets=_cidrs(
            section.exclude_external_network_subnet_cidr,
            "exclude-external-network-subnet-cidr",
            issues,
        ),
    )


def _global_secret(glob: _GlobalSection) -> bool:
    """Upstream ``CommonConfig*.isSecretInfoProvided``: a Secret or a directory, not both."""
    secret = bool(glob.secret_name and glob.secret_namespace)
    return (secret and not glob.secrets_directory) or (
        not glob.secret_name and not glob.secret_namespace and bool(glob.secrets_directory)
    )


def _families(
    values: tuple[str, ...], where: str, environ: Mapping[str, str], issues: list[str]
) -> tuple[str, ...]:
    families = tuple(v.lower() for v in values) or ("ipv4",)
    for family in families:
        if family not in IP_FAMILIES:
            issues.append(f"{where} ip-family: {family!r}: Invalid IP Family type (ipv4 or ipv6)")
    if len(families) > 1 and DUAL_STACK_ENV not in environ:
        issues.append(
            f"{where} ip-family: multiple IP families specified but {DUAL_STACK_ENV} env var "
            "is not set (as upstream)"
        )
    return families


def _credentials(
    vc: _VirtualCenterSection, glob: _GlobalSection, where: str, issues: list[str]
) -> tuple[str, str, str]:
    """``(user, password, secret_ref)`` by upstream's rules."""
    own_secret = bool(vc.secret_name and vc.secret_namespace)
    if own_secret:
        return vc.user, vc.password, f"{vc.secret_namespace}/{vc.secret_name}"
    if _global_secret(glob):
        return vc.user, vc.password, GLOBAL_SECRET_REF
    user, password = vc.user or glob.user, vc.password or glob.password
    if not user:
        issues.append(f"{where}: Username is missing (set user, or a secret-name/namespace)")
    if not password:
        issues.append(f"{where}: Password is missing (set password, or a secret-name/namespace)")
    return user, password, ""


def _vcenter(
    name: str,
    vc: _VirtualCenterSection,
    glob: _GlobalSection,
    yaml: bool,
    environ: Mapping[str, str],
    issues: list[str],
) -> VCenter:
    where = f"vcenter {name!r}" if yaml else f'[VirtualCenter "{name}"]'
    if yaml and not vc.server:
        issues.append(
            f"{where}: server: vsphere.conf does not have the VirtualCenter IP address specified"
        )
    user, password, secret_ref = _credentials(vc, glob, where, issues)
    port = vc.port or glob.port or DEFAULT_PORT
    if not 0 < port < 65536:
        issues.append(f"{where}: port: {port} is not a TCP port")
    return VCenter(
        tenant_ref=name,
        server=vc.server or name,
        port=port,
        user=user,
        password=password,
        insecure=vc.insecure_flag or glob.insecure_flag,
        datacenters=_split(vc.datacenters) or _split(glob.datacenters),
        roundtrip_count=vc.soap_roundtrip_count
        or glob.soap_roundtrip_count
        or DEFAULT_ROUNDTRIP_COUNT,
        ca_file=vc.ca_file or glob.ca_file,
        thumbprint=vc.thumbprint or glob.thumbprint,
        secret_ref=secret_ref,
        secret_name=vc.secret_name or (glob.secret_name if secret_ref == GLOBAL_SECRET_REF else ""),
        secret_namespace=vc.secret_namespace
        or (glob.secret_namespace if secret_ref == GLOBAL_SECRET_REF else ""),
        ip_families=_families(
            _split(vc.ip_family) or _split(glob.ip_family), where, environ, issues
        ),
    )


def _global_vcenter(glob: _GlobalSection) -> _VirtualCenterSection:
    return _VirtualCenterSection(
        user=glob.user,
        password=glob.password,
        server=glob.server,
        port=glob.port,
        insecure_flag=glob.insecure_flag,
        datacenters=glob.datacenters,
        soap_roundtrip_count=glob.soap_roundtrip_count,
        ca_file=glob.ca_file,
        thumbprint=glob.thumbprint,
        ip_family=glob.ip_family,
    )


def _warn_secret_settings(glob: _GlobalSection) -> None:
    """Upstream accepts these (its ``isSecretInfoProvided`` is then false: every vCenter needs
    a user and password); kccm loads them too and says why the Secret is not used."""
    if glob.secret_name and glob.secrets_directory:
        log.warning(
            "vsphere: [Global] sets both secret-name and secrets-directory: as upstream, "
            "neither counts, each vCenter needs its own user and password"
        )
    elif bool(glob.secret_name) != bool(glob.secret_namespace):
        log.warning(
            "vsphere: [Global] secret-name and secret-namespace go together: as upstream, "
            "without both no Secret is read and each vCenter needs its own user and password"
        )


def _build(schema: _Schema, environ: Mapping[str, str]) -> VSphereConfig:
    issues: list[str] = []
    glob = schema.global_
    yaml = bool(schema.vcenter)
    if schema.vcenter and schema.virtual_center:
        issues.append("use either [VirtualCenter] sections (INI) or vcenter: (YAML), not both")
    sections = dict(schema.vcenter or schema.virtual_center)
    if glob.server and glob.server not in sections:
        sections[glob.server] = _global_vcenter(glob)
    if not sections:
        issues.append("No Virtual Center hosts defined ([VirtualCenter] or [Global] server)")
    vcenters = {
        name: _vcenter(name, vc, glob, yaml, environ, issues) for name, vc in sections.items()
    }
    nodes = _nodes(schema.nodes, issues)
    _warn_secret_settings(glob)
    if glob.request_timeout < 0:
        issues.append(f"[Global] request-timeout: {glob.request_timeout} must be positive")
    if issues:
        raise CloudConfigError(issues)
    for name in schema.unused_sections():
        log.warning(
            "vsphere: cloud config section [%s] is ignored: kccm has no NSX-T load balancer "
            "or routes (docs/providers/vsphere.md)",
            name,
        )
    return VSphereConfig(
        vcenters=vcenters,
        defaults=GlobalDefaults(
            user=glob.user,
            password=glob.password,
            port=glob.port or DEFAULT_PORT,
            datacenters=_split(glob.datacenters),
            ca_file=glob.ca_file,
            thumbprint=glob.thumbprint,
        ),
        zone_category=schema.labels.zone,
        region_category=schema.labels.region,
        nodes=nodes,
        secret_name=glob.secret_name,
        secret_namespace=glob.secret_namespace,
        secrets_directory=glob.secrets_directory,
        request_timeout=glob.request_timeout or DEFAULT_REQUEST_TIMEOUT,
    )


def load_vsphere_config(
    stream: TextIO | str | None,
    environ: Mapping[str, str] | None = None,
    *,
    path_exists: Callable[[str], bool] = os.path.exists,
) -> VSphereConfig:
    """Parse and check the cloud config (INI or YAML), then apply the ``VSPHERE_*`` overrides
    from ``environ`` (default: the process environment) as upstream ``ReadCPIConfig`` does;
    every problem is reported at once. ``path_exists`` decides whether the default secrets
    directory is there (a seam for tests)."""
    env = os.environ if environ is None else environ
    if stream is None:
        raise CloudConfigError(["no vSphere cloud provider config file given (--cloud-config)"])
    return apply_environment(_build(load_cloud_config(stream, _Schema), env), env, path_exists)
