"""``VSPHERE_*`` environment overrides of the vSphere cloud config, as upstream applies them.

Upstream: ``pkg/common/config/config.go`` ``FromEnv`` and
``pkg/cloudprovider/vsphere/config/config.go`` ``FromCPIEnv``, called by ``ReadCPIConfig``
*after* the file was read and validated. So, as upstream:

- The file must be valid on its own (an environment variable cannot fill in a missing
  password); a set variable (not empty) wins over the file.
- ``VSPHERE_USER``, ``_PASSWORD``, ``_VCENTER_PORT``, ``_DATACENTER``, ``_CAFILE`` and
  ``_THUMBPRINT`` change ``[Global]`` only, which by then is just the default of the vCenters
  defined by ``VSPHERE_VCENTER_<id>``; the vCenters of the file keep their values.
  ``VSPHERE_VCENTER``, ``_INSECURE`` and ``_ROUNDTRIP_COUNT`` change nothing a vCenter uses.
- ``VSPHERE_VCENTER_<id>=<name>`` defines the vCenter ``<name>`` (replacing a file entry of
  that name): ``VCENTER_<id>_SERVER`` (then ``<name>`` is only the tenant),
  ``VCENTER_<id>_USERNAME``, ``_PASSWORD``, ``_PORT``, ``_DATACENTERS``, ``_CAFILE``,
  ``_THUMBPRINT`` (each falling back to ``[Global]``), ``_SECRET_NAME`` with
  ``_SECRET_NAMESPACE``. Upstream reads ``_INSECURE``, ``_ROUNDTRIP`` and ``_IP_FAMILY`` with
  inverted error checks: TLS is always verified, 3 round trips, and IPv4 (when ``_IP_FAMILY``
  is unset upstream's family is empty and no node address is ever found; kccm uses IPv4).
- ``VSPHERE_SECRET_NAME``/``_NAMESPACE``/``_SECRETS_DIRECTORY`` choose the global
  credentials; the secrets directory defaults to ``/etc/cloud/secrets`` when that exists.
- ``VSPHERE_LABEL_ZONE``/``_REGION`` and ``VSPHERE_NODES_{INTERNAL,EXTERNAL}_{NETWORK_SUBNET_CIDR,
  VM_NETWORK_NAME}`` replace ``[Labels]`` and ``[Nodes]`` values.

Where kccm differs, on purpose: a bad ``VSPHERE_INSECURE``/``VSPHERE_ROUNDTRIP_COUNT`` (logged
and skipped upstream), port or CIDR is an error naming the variable (exit 2 at start);
``VSPHERE_VCENTER_PORT`` is only the port (upstream's ``VSPHERE_VCENTER_`` prefix scan also
makes it a vCenter named after the port number); a value holding ``=`` is read whole (Go's
``strings.Split(e, "=")`` skips it).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
from collections.abc import Callable, Mapping

from kccm.cloudprovider import CloudConfigError
from kccm.providers.vsphere.configtypes import (
    DEFAULT_ROUNDTRIP_COUNT,
    GLOBAL_SECRET_REF,
    GlobalDefaults,
    Network,
    NodesConfig,
    VCenter,
    VSphereConfig,
)
from kccm.util.gostrconv import parse_bool

__all__ = ["DEFAULT_SECRETS_DIRECTORY", "apply_environment"]

log = logging.getLogger(__name__)

DEFAULT_SECRETS_DIRECTORY = "/etc/cloud/secrets"
"""Upstream ``DefaultSecretDirectory``."""
_VC_PREFIX = "VSPHERE_VCENTER_"
_GLOBAL_PORT = "VSPHERE_VCENTER_PORT"
_NODES = {
    "internal_subnets": "VSPHERE_NODES_INTERNAL_NETWORK_SUBNET_CIDR",
    "external_subnets": "VSPHERE_NODES_EXTERNAL_NETWORK_SUBNET_CIDR",
}
_NODE_NAMES = {
    "internal_network_name": "VSPHERE_NODES_INTERNAL_VM_NETWORK_NAME",
    "external_network_name": "VSPHERE_NODES_EXTERNAL_VM_NETWORK_NAME",
}
_IGNORED_PER_VCENTER = {
    "INSECURE": "TLS is verified",
    "ROUNDTRIP": f"{DEFAULT_ROUNDTRIP_COUNT} round trips",
}


class _Env:
    """The environment with upstream's reading rules and the problems found so far."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.issues: list[str] = []

    def get(self, name: str) -> str:
        """``os.Getenv``: empty when unset."""
        return self.environ.get(name, "")

    def lookup(self, name: str, fallback: str) -> str:
        """Upstream ``getEnvKeyValue``: a present variable wins even when it is empty."""
        return self.environ.get(name, fallback)

    def port(self, name: str, text: str, fallback: int) -> int:
        if not text:
            return fallback
        if not text.isdigit() or not 0 < int(text) < 65536:
            self.issues.append(f"{name}={text!r}: not a TCP port (1-65535)")
            return fallback
        return int(text)

    def flag(self, name: str) -> None:
        """``strconv.ParseBool`` check of a variable whose value nothing uses."""
        text = self.get(name)
        try:
            parse_bool(text or "false")
        except ValueError:
            self.issues.append(f"{name}={text!r}: not a boolean (true, false, 1, 0, t, f)")

    def count(self, name: str) -> None:
        """``strconv.ParseUint(v, 10, 32)`` check of a variable whose value nothing uses."""
        text = self.get(name)
        if text and not (text.isascii() and text.isdigit() and int(text) < 2**32):
            self.issues.append(f"{name}={text!r}: not an unsigned 32-bit integer")

    def cidrs(self, name: str, fallback: tuple[Network, ...]) -> tuple[Network, ...]:
        text = self.get(name)
        if not text:
            return fallback
        nets: list[Network] = []
        for part in (p.strip() for p in text.split(",")):
            try:
                nets.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                self.issues.append(f"{name}: {part!r} is not a CIDR")
        return tuple(nets)


def _split(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _defaults(env: _Env, base: GlobalDefaults) -> GlobalDefaults:
    datacenters = env.get("VSPHERE_DATACENTER")
    return GlobalDefaults(
        user=env.get("VSPHERE_USER") or base.user,
        password=env.get("VSPHERE_PASSWORD") or base.password,
        port=env.port(_GLOBAL_PORT, env.get(_GLOBAL_PORT), base.port),
        datacenters=_split(datacenters) if datacenters else base.datacenters,
        ca_file=env.get("VSPHERE_CAFILE") or base.ca_file,
        thumbprint=env.get("VSPHERE_THUMBPRINT") or base.thumbprint,
    )


def _vcenter_ids(env: _Env) -> list[tuple[str, str]]:
    """``(id, name)`` of every ``VSPHERE_VCENTER_<id>=<name>``, in environment order."""
    return [
        (key[len(_VC_PREFIX) :], value)
        for key, value in env.environ.items()
        if key.startswith(_VC_PREFIX) and key != _GLOBAL_PORT and value
    ]


def _warn_ignored(env: _Env, var: str) -> None:
    """Upstream reads these with inverted error checks, so their values never count."""
    for suffix, effect in _IGNORED_PER_VCENTER.items():
        if var + suffix in env.environ:
            log.warning(
                "vsphere: %s is ignored, as upstream FromEnv does (%s)", var + suffix, effect
            )
    family = env.lookup(var + "IP_FAMILY", "ipv4")
    if family.lower() != "ipv4":
        log.warning(
            "vsphere: %s=%s is ignored, as upstream FromEnv does (IPv4)", var + "IP_FAMILY", family
        )


def _with_credentials(env: _Env, ident: str, vc: VCenter, config: VSphereConfig) -> VCenter:
    """Where ``vc``'s credentials come from: its own Secret (both variables set), else its user
    and password, else the global Secret or directory; else it is an error."""
    var = f"VCENTER_{ident}_"
    name, namespace = (
        env.environ.get(var + "SECRET_NAME"),
        env.environ.get(var + "SECRET_NAMESPACE"),
    )
    if name and namespace:
        return dataclasses.replace(
            vc, secret_ref=f"{namespace}/{name}", secret_name=name, secret_namespace=namespace
        )
    if vc.user and vc.password:
        return vc  # upstream logs in with these first (its secretRef only serves a retry)
    if (config.secret_name and config.secret_namespace) or config.secrets_directory:
        return dataclasses.replace(vc, secret_ref=GLOBAL_SECRET_REF)
    if not vc.user:
        what, own, fallback = "Username", "USERNAME", "USER"
    else:
        what, own, fallback = "Password", "PASSWORD", "PASSWORD"
    env.issues.append(
        f"{_VC_PREFIX}{ident}={vc.tenant_ref}: {what} is missing "
        f"(set {var}{own} or VSPHERE_{fallback}, or a Secret)"
    )
    return vc


def _env_vcenter(env: _Env, ident: str, name: str, config: VSphereConfig) -> VCenter:
    """One vCenter from ``VSPHERE_VCENTER_<id>`` (upstream ``FromEnv``'s loop)."""
    g = config.defaults
    var = f"VCENTER_{ident}_"
    _warn_ignored(env, var)
    datacenters = env.environ.get(var + "DATACENTERS")
    vc = VCenter(
        tenant_ref=name,
        server=env.lookup(var + "SERVER", "") or name,
        port=env.port(var + "PORT", env.lookup(var + "PORT", ""), g.port),
        user=env.lookup(var + "USERNAME", g.user),
        password=env.lookup(var + "PASSWORD", g.password),
        datacenters=g.datacenters if datacenters is None else _split(datacenters),
        ca_file=env.lookup(var + "CAFILE", g.ca_file),
        thumbprint=env.lookup(var + "THUMBPRINT", g.thumbprint),
    )
    return _with_credentials(env, ident, vc, config)


def _nodes(env: _Env, nodes: NodesConfig) -> NodesConfig:
    changes: dict[str, object] = {
        attr: env.cidrs(name, getattr(nodes, attr)) for attr, name in _NODES.items()
    }
    for attr, name in _NODE_NAMES.items():
        changes[attr] = env.get(name) or getattr(nodes, attr)
    return dataclasses.replace(nodes, **changes)  # type: ignore[arg-type]


def _secrets_directory(env: _Env, configured: str, path_exists: Callable[[str], bool]) -> str:
    """Upstream: the variable, else the file's, else ``/etc/cloud/secrets`` if it exists.
    A directory that was asked for and is missing stays (kccm then says so at start; upstream
    drops it silently and the logins fail)."""
    chosen = env.get("VSPHERE_SECRETS_DIRECTORY") or configured
    if chosen:
        return chosen
    return DEFAULT_SECRETS_DIRECTORY if path_exists(DEFAULT_SECRETS_DIRECTORY) else ""


def _with_global_secret(config: VSphereConfig) -> VSphereConfig:
    """vCenters on the global Secret read the (possibly overridden) global name/namespace."""
    vcenters = {
        name: dataclasses.replace(
            vc, secret_name=config.secret_name, secret_namespace=config.secret_namespace
        )
        if vc.secret_ref == GLOBAL_SECRET_REF
        else vc
        for name, vc in config.vcenters.items()
    }
    return dataclasses.replace(config, vcenters=vcenters)


def apply_environment(
    config: VSphereConfig,
    environ: Mapping[str, str],
    path_exists: Callable[[str], bool],
) -> VSphereConfig:
    """``config`` with upstream's ``FromEnv``/``FromCPIEnv`` overrides from ``environ``.

    Raises :class:`CloudConfigError` naming each variable with a bad value.
    """
    env = _Env(environ)
    env.flag("VSPHERE_INSECURE")
    env.count("VSPHERE_ROUNDTRIP_COUNT")
    config = dataclasses.replace(
        config,
        defaults=_defaults(env, config.defaults),
        secret_name=env.get("VSPHERE_SECRET_NAME") or config.secret_name,
        secret_namespace=env.get("VSPHERE_SECRET_NAMESPACE") or config.secret_namespace,
        secrets_directory=_secrets_directory(env, config.secrets_directory, path_exists),
        zone_category=env.get("VSPHERE_LABEL_ZONE") or config.zone_category,
        region_category=env.get("VSPHERE_LABEL_REGION") or config.region_category,
        nodes=_nodes(env, config.nodes),
    )
    vcenters = dict(config.vcenters)
    for ident, name in _vcenter_ids(env):
        vcenters[name] = _env_vcenter(env, ident, name, config)
    config = _with_global_secret(dataclasses.replace(config, vcenters=vcenters))
    if env.issues:
        raise CloudConfigError(env.issues)
    return config
