"""The fake's cloud config and its entry point :func:`new_fake_cloud`."""

# ruff: noqa: RUF009 - setting() is a dataclasses.field() factory

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kccm.cloudprovider import (
    CloudConfigError,
    LoadBalancerIPMode,
    NodeAddress,
    Zone,
)
from kccm.cloudprovider.config import load_cloud_config, setting
from kccm.providers.fake.cloud import FakeCloud
from kccm.providers.fake.model import (
    FakeInstance,
    latency_problem,
)

__all__ = [
    "FakeCloudConfig",
    "fake_cloud_from_config",
    "new_fake_cloud",
]


@dataclass(frozen=True)
class FakeGlobalConfig:
    """``[Global]`` of the fake's cloud config."""

    zone: str = "fake-zone-a"
    region: str = "fake-region"
    disable: list[str] = setting(default_factory=list)
    """Capabilities to switch off: load_balancer, instances, instances_v2, zones, routes..."""
    latency: float = 0.0
    """Seconds every provider call takes (simulates a slow cloud)."""
    state_file: str = ""
    """Where the fake keeps its load balancers across restarts (a journal); empty: in memory."""
    load_balancer_ip_mode: str = "VIP"
    """``VIP`` or ``Proxy``: the ``ipMode`` of every balancer's ingress (existing balancers are
    brought to it by their next ensure)."""


@dataclass(frozen=True)
class FakeInstanceConfig:
    """``[Instance "<node name>"]``: a machine the fake cloud knows."""

    instance_id: str = ""
    instance_type: str = "fake.small"
    address: list[str] = setting(default_factory=list)
    """``<Type>=<address>``, one per line, e.g. ``InternalIP=10.0.0.5``."""
    zone: str = ""
    region: str = ""
    shutdown: bool = False


@dataclass(frozen=True)
class FakeCloudConfig:
    global_: FakeGlobalConfig = setting(default_factory=FakeGlobalConfig)
    instance: dict[str, FakeInstanceConfig] = setting(default_factory=dict)


def _instance_from_config(
    name: str, entry: FakeInstanceConfig, glob: FakeGlobalConfig
) -> FakeInstance:
    addresses = []
    for item in entry.address:
        kind, sep, value = item.partition("=")
        if not sep or not value:
            raise CloudConfigError(
                [f'[Instance "{name}"] address: {item!r} is not <Type>=<address>']
            )
        addresses.append(NodeAddress(type=kind.strip(), address=value.strip()))
    return FakeInstance(
        name=name,
        instance_id=entry.instance_id,
        instance_type=entry.instance_type,
        addresses=tuple(addresses),
        zone=entry.zone or glob.zone,
        region=entry.region or glob.region,
        shutdown=entry.shutdown,
    )


def fake_cloud_from_config(config: FakeCloudConfig) -> FakeCloud:
    """A fake cloud with the capabilities, instances and latency a cloud config declares."""
    glob = config.global_
    known = {"load_balancer", "instances", "instances_v2", "zones", "clusters", "routes"}
    unknown = sorted(set(glob.disable) - known)
    if unknown:
        raise CloudConfigError(
            [
                f"[Global] disable: unknown capability {u!r} (known: {sorted(known)})"
                for u in unknown
            ]
        )
    problem = latency_problem(glob.latency)
    if problem:
        raise CloudConfigError([f"[Global] latency: {problem}"])
    modes = [mode.value for mode in LoadBalancerIPMode]
    if glob.load_balancer_ip_mode not in modes:
        raise CloudConfigError(
            [
                f"[Global] load-balancer-ip-mode: {glob.load_balancer_ip_mode!r} is not one "
                f"of {modes}"
            ]
        )
    off = set(glob.disable)
    cloud = FakeCloud(
        enable_load_balancers="load_balancer" not in off,
        enable_instances="instances" not in off,
        enable_instances_v2="instances_v2" not in off,
        enable_zones="zones" not in off,
        enable_clusters="clusters" not in off,
        enable_routes="routes" not in off,
    )
    cloud.zone = Zone(failure_domain=glob.zone, region=glob.region)
    cloud.load_balancer_ip_mode = LoadBalancerIPMode(glob.load_balancer_ip_mode)
    if glob.latency > 0:
        cloud.set_latency("*", glob.latency)
    for name, entry in config.instance.items():
        cloud.add_instance(_instance_from_config(name, entry, glob))
    if glob.state_file:
        cloud.persist_balancers(Path(glob.state_file))
    return cloud


def new_fake_cloud(config: TextIO | None) -> FakeCloud:
    """The ``fake`` entry point. Without a cloud config: an empty fake cloud. With one (gcfg or
    YAML, see :class:`FakeCloudConfig`): its instances, capabilities and latency."""
    if config is None:
        return FakeCloud()
    return fake_cloud_from_config(load_cloud_config(config, FakeCloudConfig))


new_fake_cloud.config_schema = FakeCloudConfig  # type: ignore[attr-defined]  # lets kccm validate the file before start-up
