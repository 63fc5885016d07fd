"""One Service's part of the shared balancer, merged into the balancer's JSON by name.

Every function takes the balancer as last read from ARM (a JSON dict, changed in place) and
returns whether it changed; objects of other Services (any name that does not start with this
Service's ``a<uid>``) are never touched. The comparisons are upstream's (cloud-provider-azure
v1.36.5 ``azure_loadbalancer.go``: ``reconcileFrontendIPConfigs``/``isFrontendIPChanged``,
``reconcileLBProbes``/``findProbe``, ``reconcileLBRules``/``findRule`` with
``equalLoadBalancingRulePropertiesFormat``, ``ReconcileBackendPools``' ``newBackendPool``):
what a rule or probe has beyond the compared fields is kept as ARM returned it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kccm.cloudprovider import Service, default_load_balancer_name
from kccm.providers.azure.loadbalancer.lbrules import Expected, Json
from kccm.providers.azure.loadbalancer.names import SHARED_PROBE, LBSettings, owns_name
from kccm.providers.azure.loadbalancer.tags import parse_tags, reconcile_tags

__all__ = [
    "apply_service",
    "ensure_pool",
    "ensure_tags",
    "new_balancer",
    "owned_frontends",
    "remove_service",
]


def new_balancer(settings: LBSettings, name: str) -> Json:
    """A balancer not yet in ARM (``getServiceLoadBalancer``/``selectLoadBalancer``)."""
    sku = "Standard" if settings.standard else "Basic"
    return {"name": name, "location": settings.location, "sku": {"name": sku}, "properties": {}}


def _items(lb: Json, key: str) -> list[Json]:
    props = lb.setdefault("properties", {})
    found = props.get(key)
    if found is None:
        found = props[key] = []
    return list(found)


def _set(lb: Json, key: str, items: list[Json]) -> None:
    lb["properties"][key] = items


def _fold(value: object) -> str:
    return str(value if value is not None else "").lower()


def _sub_id(value: Any) -> str:
    return _fold((value or {}).get("id"))


def ensure_pool(lb: Json, pool_name: str) -> bool:
    """The cluster's backend pool (named after the cluster) is on the balancer."""
    pools = _items(lb, "backendAddressPools")
    if any(_fold(pool.get("name")) == pool_name.lower() for pool in pools):
        return False
    pools.append({"name": pool_name, "properties": {}})
    _set(lb, "backendAddressPools", pools)
    return True


def owned_frontends(lb: Json, service: Service) -> list[Json]:
    """The frontends named after the Service (``serviceOwnsFrontendIP``, primary Service)."""
    base = default_load_balancer_name(service)
    return [
        fip
        for fip in _items(lb, "frontendIPConfigurations")
        if str(fip.get("name", "")).startswith(base)
    ]


def _frontend_changed(current: Json, wanted: Json) -> bool:
    """``isFrontendIPChanged``: another name, another public IP, subnet or private IP."""
    if _fold(current.get("name")) != _fold(wanted.get("name")):
        return True
    have, want = current.get("properties") or {}, wanted.get("properties") or {}
    if "publicIPAddress" in want:
        return _sub_id(have.get("publicIPAddress")) != _sub_id(want["publicIPAddress"])
    subnets = want.get("subnet") and have.get("subnet")
    if subnets and _sub_id(have["subnet"]) != _sub_id(want["subnet"]):
        return True
    static = want.get("privateIPAllocationMethod") == "Static" and want.get("privateIPAddress")
    return bool(static and _fold(have.get("privateIPAddress")) != _fold(want["privateIPAddress"]))


def _apply_frontend(lb: Json, service: Service, wanted: Json) -> bool:
    frontends = _items(lb, "frontendIPConfigurations")
    owned = [fip for fip in owned_frontends(lb, service) if not _frontend_changed(fip, wanted)]
    stale = [fip for fip in owned_frontends(lb, service) if fip not in owned]
    if stale:
        frontends = [fip for fip in frontends if fip not in stale]
    if owned:
        _set(lb, "frontendIPConfigurations", frontends)
        return bool(stale)
    frontends.append(wanted)
    _set(lb, "frontendIPConfigurations", frontends)
    return True


def _probe_equal(have: Json, want: Json) -> bool:
    """``findProbe``."""
    a, b = have.get("properties") or {}, want.get("properties") or {}
    return (
        _fold(have.get("name")) == _fold(want.get("name"))
        and a.get("port") == b.get("port")
        and _fold(a.get("protocol")) == _fold(b.get("protocol"))
        and _fold(a.get("requestPath")) == _fold(b.get("requestPath"))
        and a.get("intervalInSeconds", 0) == b.get("intervalInSeconds", 0)
        and a.get("probeThreshold", 0) == b.get("probeThreshold", 0)
    )


def _rule_equal(have: Json, want: Json) -> bool:
    """``findRule`` with ``equalLoadBalancingRulePropertiesFormat`` (wantLB true)."""
    if _fold(have.get("name")) != _fold(want.get("name")):
        return False
    a, b = have.get("properties"), want.get("properties")
    if a is None or b is None or a.get("protocol") != b.get("protocol"):
        return False
    if a.get("protocol") == "Tcp" and bool(a.get("enableTcpReset")) != bool(
        b.get("enableTcpReset")
    ):
        return False
    same = all(
        _sub_id(a.get(key)) == _sub_id(b.get(key))
        for key in ("frontendIPConfiguration", "backendAddressPool", "probe")
    ) and all(
        a.get(key) == b.get(key)
        for key in ("loadDistribution", "frontendPort", "backendPort", "enableFloatingIP")
    )
    same = same and bool(a.get("disableOutboundSnat")) == bool(b.get("disableOutboundSnat"))
    idle_a, idle_b = a.get("idleTimeoutInMinutes"), b.get("idleTimeoutInMinutes")
    return same and (idle_a is None or idle_b is None or idle_a == idle_b)


def _merge(
    lb: Json,
    key: str,
    service: Service,
    wanted: Sequence[Json],
    equal: Callable[[Json, Json], bool],
) -> bool:
    """Drop the Service's objects no wanted one equals; add the wanted ones missing."""
    items = _items(lb, key)
    kept = [
        item
        for item in items
        if not owns_name(service, str(item.get("name", "")))
        or any(equal(item, want) for want in wanted)
    ]
    changed = len(kept) != len(items)
    for want in wanted:
        if not any(equal(item, want) for item in kept):
            kept.append(want)
            changed = True
    if changed:
        _set(lb, key, kept)
    return changed


def _shared_probe_kept(lb: Json, before: list[Json]) -> bool:
    """``keepSharedProbe``: the shared probe stays while any rule names it (another
    Service's too) and goes when none does; True when that changed the probes."""
    probes = _items(lb, "probes")
    named = [p for p in probes if p.get("name") == SHARED_PROBE]
    suffix = f"/probes/{SHARED_PROBE}".lower()
    used = any(
        _sub_id((rule.get("properties") or {}).get("probe")).endswith(suffix)
        for rule in _items(lb, "loadBalancingRules")
    )
    if used and not named:
        old = [p for p in before if p.get("name") == SHARED_PROBE]
        _set(lb, "probes", [*probes, *old])
        return bool(old)
    if named and not used:
        _set(lb, "probes", [p for p in probes if p.get("name") != SHARED_PROBE])
        return True
    return False


def apply_service(lb: Json, service: Service, frontend: Json, expected: Expected) -> bool:
    """The Service's frontend, probes and rules on ``lb``; True when ``lb`` changed."""
    before = _items(lb, "probes")
    changed = _apply_frontend(lb, service, frontend)
    changed = _merge(lb, "probes", service, expected.probes, _probe_equal) or changed
    changed = _merge(lb, "loadBalancingRules", service, expected.rules, _rule_equal) or changed
    return _shared_probe_kept(lb, before) or changed


def remove_service(lb: Json, service: Service) -> bool:
    """Nothing of the Service left on ``lb`` (``reconcileLoadBalancer`` with wantLb false)."""
    owned = owned_frontends(lb, service)
    before = _items(lb, "probes")
    changed = False
    if owned:
        frontends = [fip for fip in _items(lb, "frontendIPConfigurations") if fip not in owned]
        _set(lb, "frontendIPConfigurations", frontends)
        changed = True
    changed = _merge(lb, "probes", service, (), _probe_equal) or changed
    changed = _merge(lb, "loadBalancingRules", service, (), _rule_equal) or changed
    return _shared_probe_kept(lb, before) or changed


def ensure_tags(lb: Json, settings: LBSettings) -> bool:
    """``ensureLoadBalancerTagged``: the config's ``tags`` on the balancer."""
    wanted = parse_tags(settings.tags, settings.tags_map)
    if not wanted:
        return False
    tags, changed = reconcile_tags(dict(lb.get("tags") or {}), wanted, settings.system_tags)
    lb["tags"] = tags
    return changed
