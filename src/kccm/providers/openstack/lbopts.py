"""The ``[LoadBalancer]`` and ``[LoadBalancerClass "name"]`` settings the balancer code reads,
as the balancer code takes them: the settings and their defaults are declared once, in
``config.py`` (upstream ``LoadBalancerOpts`` and ``LBClass`` in ``pkg/openstack/openstack.go``
v1.36.0, with ``ReadConfig``'s defaults).

:func:`lb_options` copies them from the provider's parsed cloud config (``config.py``, field
names = gcfg keys with ``-`` -> ``_``); tests build :class:`LBOptions` directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any

from kccm.providers.openstack.config import LBClassOpts, LoadBalancerOpts

__all__ = ["LBClass", "LBOptions", "lb_options", "seconds"]


LBClass = LBClassOpts
"""Upstream ``LBClass``: one ``[LoadBalancerClass "name"]`` section (declared in ``config.py``)."""


@dataclass(frozen=True)
class LBOptions(LoadBalancerOpts):
    """Upstream ``LoadBalancerOpts`` (the fields and OCCM's defaults are declared once, in
    ``config.py``), with the ``[LoadBalancerClass "name"]`` sections beside them."""

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
