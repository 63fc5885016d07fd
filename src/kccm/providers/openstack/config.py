"""The openstack provider's cloud config: OCCM's ``cloud.conf``, read unchanged.

Upstream: ``pkg/openstack/openstack.go`` (``Config``, ``LoadBalancerOpts``, ``LBClass``,
``NetworkingOpts``, ``RouterOpts``; ``ReadConfig`` sets the defaults, then
``gcfg.FatalOnly(gcfg.ReadInto(&cfg, config))``), ``pkg/client/client.go`` (``AuthOpts``, the
``[Global]`` section) and ``pkg/util/metadata/metadata.go`` (``Opts``, ``[Metadata]``), all at
tag v1.36.0. Example::

    [Global]
    auth-url = https://keystone.example.com/identity/v3
    application-credential-id = 0123abcd
    application-credential-secret = s3cret
    region = RegionOne

    [LoadBalancer]
    floating-network-id = 4a1b...
    lb-provider = ovn
    lb-method = SOURCE_IP_PORT

    [LoadBalancerClass "internal"]
    subnet-id = 9c2d...

    [Networking]
    internal-network-name = private
    public-network-name = public

    [Route]
    router-id = 7f3e...

Field names are the gcfg keys with ``-`` -> ``_`` (``floating-network-id`` ->
``floating_network_id``). Durations (``monitor-delay``, ``monitor-timeout``,
``request-timeout``) are Go durations (``5s``) held as float seconds.

Unknown sections and keys: gcfg reports them as ``extraData`` *warnings* and OCCM's
``gcfg.FatalOnly`` drops warnings (gcfg ``errors.go``), so OCCM ignores them; kccm ignores them
too and logs each one (a shared ``cloud.conf`` with a cinder ``[BlockStorage]`` section keeps
working). A bad value is fatal in gcfg and here: one line naming file, line, section and key.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from kccm.cloudprovider import CloudConfigError
from kccm.cloudprovider.config import load_cloud_config, parse_gcfg
from kccm.cloudprovider.config_syntax import ParsedConfig
from kccm.providers.openstack.config_clouds import merge_clouds_yaml
from kccm.providers.openstack.config_sections import (
    GlobalOpts,
    LBClassOpts,
    LoadBalancerOpts,
    MetadataOpts,
    NetworkingOpts,
    OpenStackConfig,
    RouteOpts,
)
from kccm.providers.openstack.config_values import gcfg_bool

__all__ = [
    "CheckedOpenStackConfig",
    "GlobalOpts",
    "LBClassOpts",
    "LoadBalancerOpts",
    "MetadataOpts",
    "NetworkingOpts",
    "OpenStackConfig",
    "RouteOpts",
    "load_openstack_config",
    "startup_warnings",
    "unknown_keys",
]

log = logging.getLogger(__name__)

SUPPORTED_LB_PROVIDERS = ("amphora", "octavia", "ovn", "f5", "amphorav2")
"""``supportedLBProvider`` (openstack.go): anything else is only warned about."""
SUPPORTED_CONTAINER_STORES = ("barbican", "external")
"""``supportedContainerStore`` (openstack.go)."""
CONFIG_DRIVE_ID = "configDrive"
METADATA_ID = "metadataService"
DEFAULT_SEARCH_ORDER = f"{CONFIG_DRIVE_ID},{METADATA_ID}"
"""``ReadConfig``'s default ``[Metadata] search-order``."""


# -- checks -----------------------------------------------------------------------------------


def _check_search_order(order: str) -> list[str]:
    """``CheckMetadataSearchOrder`` (metadata.go), after ``ReadConfig``'s default."""
    elements = (order or DEFAULT_SEARCH_ORDER).split(",")
    if len(elements) > 2:
        return ["[Metadata] search-order: cannot contain more than 2 elements"]
    for element in elements:
        if element.strip() not in (CONFIG_DRIVE_ID, METADATA_ID):
            return [
                f"[Metadata] search-order: invalid element {element.strip()!r} "
                f"(supported: {CONFIG_DRIVE_ID!r} and {METADATA_ID!r})"
            ]
    return []


def _is_bool(text: str) -> bool:
    try:
        gcfg_bool(text)
    except ValueError:
        return False
    return True


def _check_global(glob: GlobalOpts, *, clouds_read: bool) -> list[str]:
    issues = []
    if not glob.auth_url and (clouds_read or not glob.use_clouds):
        where = " (neither in cloud.conf nor in the clouds.yaml cloud)" if glob.use_clouds else ""
        issues.append(
            f"[Global] auth-url: is required{where} (or use-clouds = true with a clouds.yaml)"
        )
    return issues


def _check_load_balancer(lb: LoadBalancerOpts) -> list[str]:
    """``lb-version`` other than v2 is fatal upstream (``LoadBalancer()`` ``klog.Fatalf``);
    an unsupported ``lb-provider``/``container-store`` is only warned about (``ReadConfig``)."""
    issues = []
    if lb.lb_version not in ("", "v2"):
        issues.append(f"[LoadBalancer] lb-version: {lb.lb_version!r} is not supported (only v2)")
    return issues


def _issues(config: OpenStackConfig, *, clouds_read: bool = True) -> list[str]:
    """Every problem; ``clouds_read``: use-clouds was applied (not in the up-front check)."""
    return (
        _check_global(config.global_, clouds_read=clouds_read)
        + _check_load_balancer(config.load_balancer)
        + _check_search_order(config.metadata.search_order)
    )


def startup_warnings(config: OpenStackConfig) -> list[str]:
    """Values OCCM v1.36.0 starts with although they do not do what they seem to: kccm starts
    as OCCM does, and says so (docs/providers/openstack.md, "Start-up: odd values")."""
    glob, lb = config.global_, config.load_balancer
    found = []
    if glob.tls_insecure not in ("", "true", "false"):
        # client.go: InsecureSkipVerify = cfg.TLSInsecure == "true" (a plain string field)
        seems = "true" if _is_bool(glob.tls_insecure) and gcfg_bool(glob.tls_insecure) else ""
        found.append(
            f"[Global] tls-insecure = {glob.tls_insecure}: only 'true' turns certificate "
            "verification off (OCCM compares the text with 'true'), so certificates are "
            + ("verified; write 'true' to turn verification off" if seems else "verified")
        )
    if bool(glob.cert_file) != bool(glob.key_file):
        # client.go: the key pair is loaded only when both are set
        given, missing = ("cert-file", "key-file") if glob.cert_file else ("key-file", "cert-file")
        found.append(
            f"[Global] {given} is set without {missing}: no client certificate is sent "
            "(OCCM loads the pair only when both are set)"
        )
    if lb.max_shared_lb < 1:
        # loadbalancer.go: sharedCount+1 > MaxSharedLB refuses every Service that shares
        found.append(
            f"[LoadBalancer] max-shared-lb = {lb.max_shared_lb}: no Service can share a "
            "balancer through loadbalancer.openstack.org/load-balancer-id (each is refused "
            'with "already shared", as OCCM refuses it)'
        )
    return found


def _warnings(config: OpenStackConfig) -> None:
    for warning in startup_warnings(config):
        log.warning("openstack: %s", warning)
    lb = config.load_balancer
    if lb.lb_provider not in SUPPORTED_LB_PROVIDERS:
        log.warning("openstack: unsupported [LoadBalancer] lb-provider %r", lb.lb_provider)
    if lb.container_store not in SUPPORTED_CONTAINER_STORES:
        log.warning("openstack: unsupported [LoadBalancer] container-store %r", lb.container_store)
    for item in address_sort_order_issues(config.networking.address_sort_order):
        log.warning("openstack: [Networking] address-sort-order: ignoring %s", item)


def address_sort_order_issues(order: str) -> list[str]:
    """The items ``buildAddressSortOrderList`` (instances_addresses.go) ignores with a
    warning: anything that is not a CIDR."""
    bad = []
    for item in (part.strip() for part in order.split(",")):
        if not item:
            continue
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            bad.append(f"invalid CIDR {item!r}")
        else:
            if "/" not in item:
                bad.append(f"invalid CIDR {item!r} (no prefix length)")
    return bad


@dataclass(frozen=True)
class CheckedOpenStackConfig(OpenStackConfig):
    """The schema kccm validates ``--cloud-config`` against before start-up (the factory's
    ``config_schema``): a bad value stops kccm at once with exit code 2."""

    def __post_init__(self) -> None:
        issues = _issues(self, clouds_read=False)
        if issues:
            raise CloudConfigError(issues)


# -- loading ----------------------------------------------------------------------------------

_SECTIONS = {
    "global": GlobalOpts,
    "loadbalancer": LoadBalancerOpts,
    "loadbalancerclass": LBClassOpts,
    "networking": NetworkingOpts,
    "route": RouteOpts,
    "metadata": MetadataOpts,
}


def _norm(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def _field_keys(cls: type) -> frozenset[str]:
    keys = set()
    for field in dataclasses.fields(cls):
        meta = field.metadata.get("kccm.cloudconfig")
        explicit = getattr(meta, "key", None)
        keys.add(_norm(explicit or field.name))
    return frozenset(keys)


def unknown_keys(parsed: ParsedConfig) -> list[str]:
    """The sections and keys OCCM's gcfg would ignore (``extraData``), as ``file:line: what``,
    in file order."""
    found: list[tuple[int, str]] = []
    for name, _sub, line in parsed.sections:
        if _norm(name) not in _SECTIONS:
            found.append((line, f"{parsed.source}:{line}: unknown section [{name}]"))
    for entry in parsed.entries:
        cls = _SECTIONS.get(_norm(entry.section))
        if cls is not None and _norm(entry.name) not in _field_keys(cls):
            where = f"{parsed.source}:{entry.line}"
            found.append((entry.line, f"{where}: unknown key {entry.name!r} in [{entry.section}]"))
    return [text for _, text in sorted(found)]


def _apply_project_aliases(glob: GlobalOpts) -> GlobalOpts:
    """kccm reads the ``project-*`` spellings when the ``tenant-*`` key is empty."""
    changes = {}
    for tenant, project in (
        ("tenant_id", "project_id"),
        ("tenant_name", "project_name"),
        ("tenant_domain_id", "project_domain_id"),
        ("tenant_domain_name", "project_domain_name"),
    ):
        if getattr(glob, project) and not getattr(glob, tenant):
            log.warning(
                "openstack: [Global] %s is not an OCCM key (OCCM ignores it); kccm reads it as %s",
                project.replace("_", "-"),
                tenant.replace("_", "-"),
            )
            changes[tenant] = getattr(glob, project)
    return dataclasses.replace(glob, **changes) if changes else glob


def load_openstack_config(
    stream: TextIO | str | None,
    *,
    environ: Mapping[str, str] | None = None,
    source: str | None = None,
) -> OpenStackConfig:
    """Parse ``cloud.conf`` as OCCM's ``ReadConfig`` does (gcfg only), apply ``use-clouds``
    (``client.ReadClouds``: the file's values win over clouds.yaml's) and check it; every
    problem is reported at once in one :class:`CloudConfigError`."""
    if stream is None:
        raise CloudConfigError(["no OpenStack cloud provider config file given (--cloud-config)"])
    text = stream if isinstance(stream, str) else stream.read()
    name = source or getattr(stream, "name", None) or "<cloud-config>"
    for unknown in unknown_keys(_parse_quietly(text, str(name))):
        log.warning("openstack: %s: ignored, as OCCM's gcfg.FatalOnly ignores it", unknown)
    config = load_cloud_config(
        text, OpenStackConfig, source=str(name), format="gcfg", allow_unknown=True
    )
    config = dataclasses.replace(config, global_=_apply_project_aliases(config.global_))
    if config.global_.use_clouds:
        config = dataclasses.replace(config, global_=merge_clouds_yaml(config.global_, environ))
    issues = _issues(config)
    if issues:
        raise CloudConfigError(issues)
    _warnings(config)
    return config


def _parse_quietly(text: str, source: str) -> ParsedConfig:
    try:
        return parse_gcfg(text, source)
    except CloudConfigError:
        return ParsedConfig(source, (), ())  # the binder reports the syntax errors
