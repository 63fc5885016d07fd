"""The sections of OCCM's ``cloud.conf`` as kccm holds them: one frozen dataclass per section,
field names = gcfg keys with ``-`` -> ``_`` and OCCM's defaults (``ReadConfig``). Reading,
checking and the module's story: :mod:`kccm.providers.openstack.config`."""

# ruff: noqa: RUF009 - setting() is a dataclasses.field() factory

from __future__ import annotations

from dataclasses import dataclass

from kccm.cloudprovider.config import setting
from kccm.providers.openstack.config_values import gcfg_bool, gcfg_int, gcfg_uint, go_duration

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT",
    "GlobalOpts",
    "LBClassOpts",
    "LoadBalancerOpts",
    "MetadataOpts",
    "NetworkingOpts",
    "OpenStackConfig",
    "RouteOpts",
]

DEFAULT_REQUEST_TIMEOUT = 60.0
"""``defaultTimeOut`` (openstack.go): the HTTP client's timeout when ``request-timeout`` is
unset."""


def _bool(default: bool) -> bool:
    return setting(default=default, parse=gcfg_bool)  # type: ignore[no-any-return]


def _secret() -> str:
    return setting(default="", secret=True)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class GlobalOpts:
    """``[Global]``: upstream ``client.AuthOpts`` (gcfg tags; ``username``, ``password`` and
    ``region`` have none and match by field name, as gcfg's ``fieldFold`` does)."""

    auth_url: str = ""
    user_id: str = ""
    username: str = ""
    password: str = _secret()
    tenant_id: str = ""
    tenant_name: str = ""
    trust_id: str = ""
    trustee_id: str = ""
    trustee_password: str = _secret()
    domain_id: str = ""
    domain_name: str = ""
    tenant_domain_id: str = ""
    tenant_domain_name: str = ""
    user_domain_id: str = ""
    user_domain_name: str = ""
    region: str = ""
    os_endpoint_type: str = ""
    """``public`` (default), ``internal`` or ``admin``: the catalog interface used."""
    ca_file: str = ""
    tls_insecure: str = ""
    """A string upstream (``TLSInsecure string``): only ``true`` turns verification off."""
    token: str = _secret()
    cert_file: str = ""
    key_file: str = ""
    ca_file_contents: str = setting(default="", key="CAFileContents")
    """No gcfg tag upstream: gcfg matches the field name ``CAFileContents``."""
    use_clouds: bool = _bool(False)
    clouds_file: str = ""
    cloud: str = ""
    application_credential_id: str = ""
    application_credential_name: str = ""
    application_credential_secret: str = _secret()
    project_id: str = ""
    """kccm: not an OCCM key (OCCM ignores it); read as ``tenant-id`` when that is empty."""
    project_name: str = ""
    """kccm: read as ``tenant-name`` when that is empty."""
    project_domain_id: str = ""
    """kccm: read as ``tenant-domain-id`` when that is empty."""
    project_domain_name: str = ""
    """kccm: read as ``tenant-domain-name`` when that is empty."""

    @property
    def insecure(self) -> bool:
        """``config.InsecureSkipVerify = cfg.TLSInsecure == "true"`` (client.go)."""
        return self.tls_insecure == "true"

    @property
    def endpoint_interface(self) -> str:
        """The catalog interface: ``os-endpoint-type`` (gophercloud's ``Availability``),
        ``public`` when empty; ``publicURL`` style spellings are accepted."""
        value = self.os_endpoint_type.strip().lower().removesuffix("url")
        return value or "public"


@dataclass(frozen=True)
class LBClassOpts:
    """``[LoadBalancerClass "name"]``: upstream ``LBClass``."""

    floating_network_id: str = ""
    floating_subnet_id: str = ""
    floating_subnet: str = ""
    floating_subnet_tags: str = ""
    network_id: str = ""
    subnet_id: str = ""
    member_subnet_id: str = ""


@dataclass(frozen=True)
class LoadBalancerOpts:
    """``[LoadBalancer]``: upstream ``LoadBalancerOpts`` with ``ReadConfig``'s defaults."""

    enabled: bool = _bool(True)
    lb_version: str = ""
    subnet_id: str = ""
    member_subnet_id: str = ""
    network_id: str = ""
    floating_network_id: str = ""
    floating_subnet_id: str = ""
    floating_subnet: str = ""
    floating_subnet_tags: str = ""
    lb_method: str = "ROUND_ROBIN"
    lb_provider: str = "amphora"
    create_monitor: bool = _bool(False)
    monitor_delay: float = setting(default=5.0, parse=go_duration)
    """Seconds (a Go duration in the file, default ``5s``)."""
    monitor_timeout: float = setting(default=3.0, parse=go_duration)
    """Seconds (default ``3s``)."""
    monitor_max_retries: int = setting(default=1, parse=gcfg_uint)
    monitor_max_retries_down: int = setting(default=3, parse=gcfg_uint)
    manage_security_groups: bool = _bool(False)
    internal_lb: bool = _bool(False)
    node_selector: str = ""
    cascade_delete: bool = _bool(True)
    flavor_id: str = ""
    availability_zone: str = ""
    enable_ingress_hostname: bool = _bool(False)
    ingress_hostname_suffix: str = "nip.io"
    """``defaultProxyHostnameSuffix`` (loadbalancer.go)."""
    max_shared_lb: int = setting(default=2, parse=gcfg_int)
    container_store: str = "barbican"
    provider_requires_serial_api_calls: bool = _bool(False)
    default_tls_container_ref: str = ""
    """gcfg key ``default-tls-container-ref`` (upstream field ``TlsContainerRef``)."""


@dataclass(frozen=True)
class NetworkingOpts:
    """``[Networking]``: upstream ``NetworkingOpts`` (the two names are multi-valued: one
    line per network, ORed)."""

    ipv6_support_disabled: bool = _bool(False)
    public_network_name: list[str] = setting(default_factory=list)
    internal_network_name: list[str] = setting(default_factory=list)
    address_sort_order: str = ""


@dataclass(frozen=True)
class RouteOpts:
    """``[Route]``: upstream ``RouterOpts``; routes are supported only with ``router-id``."""

    router_id: str = ""


@dataclass(frozen=True)
class MetadataOpts:
    """``[Metadata]``: upstream ``metadata.Opts``. kccm has no metadata service or config
    drive to read (it runs off the node); ``search-order`` is checked as OCCM checks it."""

    search_order: str = ""
    request_timeout: float = setting(default=0.0, parse=go_duration)
    """Seconds; OCCM uses it as the HTTP client's timeout (0: 60 s)."""

    @property
    def timeout(self) -> float:
        """The HTTP timeout of every OpenStack request (``NewOpenStack``)."""
        return self.request_timeout if self.request_timeout > 0 else DEFAULT_REQUEST_TIMEOUT


@dataclass(frozen=True)
class OpenStackConfig:
    """OCCM's ``Config``; ``load_balancer_classes`` holds the ``[LoadBalancerClass "name"]``
    sections (upstream copies them into ``LoadBalancerOpts.LBClasses``)."""

    global_: GlobalOpts = setting(default_factory=GlobalOpts)
    load_balancer: LoadBalancerOpts = setting(default_factory=LoadBalancerOpts)
    load_balancer_classes: dict[str, LBClassOpts] = setting(
        default_factory=dict, key="LoadBalancerClass"
    )
    networking: NetworkingOpts = setting(default_factory=NetworkingOpts)
    route: RouteOpts = setting(default_factory=RouteOpts)
    metadata: MetadataOpts = setting(default_factory=MetadataOpts)

    @property
    def region(self) -> str:
        return self.global_.region
