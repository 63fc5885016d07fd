"""The ``[LoadBalancer]`` and ``[LoadBalancerClass "name"]`` settings the balancer code reads,
typed once (upstream ``LoadBalancerOpts`` and ``LBClass`` in ``pkg/openstack/openstack.go``
v1.36.0, with ``ReadConfig``'s defaults).

:func:`lb_options` copies them from the provider's parsed cloud config (``config.py``, field
names = gcfg keys with ``-`` -> ``_``); tests build :class:`LBOptions` directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any

__all__ = ["LBClass", "LBOptions", "lb_options", "seconds"]


@dataclass(frozen=True)
class LBClass:
    """Upstream ``LBClass``: one ``[LoadBalancerClass "name"]`` section."""

    floating_network_id: str = ""
    floating_subnet_id: str = ""
    floating_subnet: str = ""
    floating_subnet_tags: str = ""
    network_id: str = ""
    subnet_id: str = ""
    member_subnet_id: str = ""


@dataclass(frozen=True)
class LBOptions:
    """Upstream ``LoadBalancerOpts`` with ``ReadConfig``'s defaults (durations in seconds)."""

    enabled: bool = True
    subnet_id: str = ""
    member_subnet_id: str = ""
    network_id: str = ""
    floating_network_id: str = ""
    floating_subnet_id: str = ""
    floating_subnet: str = ""
    floating_subnet_tags: str = ""
    lb_method: str = "ROUND_ROBIN"
    lb_provider: str = "amphora"
    create_monitor: bool = False
    monitor_delay: float = 5.0
    monitor_timeout: float = 3.0
    monitor_max_retries: int = 1
    monitor_max_retries_down: int = 3
    manage_security_groups: bool = False
    internal_lb: bool = False
    node_selector: str = ""
    cascade_delete: bool = True
    flavor_id: str = ""
    availability_zone: str = ""
    enable_ingress_hostname: bool = False
    ingress_hostname_suffix: str = "nip.io"
    max_shared_lb: int = 2
    container_store: str = "barbican"
    provider_requires_serial_api_calls: bool = False
    default_tls_container_ref: str = ""
    classes: Mapping[str, LBClass] = field(default_factory=dict)


def seconds(value: Any) -> float:
    """A duration setting as seconds: a ``timedelta``, a number, or Go text (``5s``, ``1m``)."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    units = (("ms", 0.001), ("h", 3600.0), ("m", 60.0), ("s", 1.0))
    total, number = 0.0, ""
    index = 0
    while index < len(text):
        char = text[index]
        if char.isdigit() or char == ".":
            number += char
            index += 1
            continue
        for unit, scale in units:
            if text.startswith(unit, index):
                total += float(number or 0) * scale
                number, index = "", index + len(unit)
                break
        else:
            raise ValueError(f"invalid duration {text!r}")
    if number:
        raise ValueError(f"invalid duration {text!r}: missing unit")
    return total


_DURATIONS = frozenset({"monitor_delay", "monitor_timeout"})


def _copy(target: type[Any], source: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in fields(target):
        if item.name == "classes" or not hasattr(source, item.name):
            continue
        value = getattr(source, item.name)
        if value is None:
            continue
        values[item.name] = seconds(value) if item.name in _DURATIONS else value
    return values


def lb_options(config: Any) -> LBOptions:
    """The options from an ``OpenStackConfig`` (its ``load_balancer`` and
    ``load_balancer_classes``; a setting the config does not carry keeps OCCM's default)."""
    section = getattr(config, "load_balancer", None)
    values = _copy(LBOptions, section) if section is not None else {}
    classes = getattr(config, "load_balancer_classes", None) or {}
    values["classes"] = {name: LBClass(**_copy(LBClass, opts)) for name, opts in classes.items()}
    return LBOptions(**values)
