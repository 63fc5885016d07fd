"""What bench/azure_side_by_side.py compares after each scenario: the Azure objects a daemon
left in the emulator (balancers, public IPs, security rules, routes), read through the
emulator's test API (not logged), made comparable between two runs, and their differences.

Two runs differ only in the Services' UIDs (the names upstream derives from them: frontend
``a<uid>``, rules and probes ``a<uid>-TCP-<port>``, public IP ``kubernetes-a<uid>``) and in
the namespace; each run has an emulator of its own, seeded the same way, so resource ids,
NIC ids and the addresses it hands out are equal. Both are replaced by placeholders; what
is left must be equal, property by property. Only bookkeeping that ARM changes on every
write is dropped: ``etag``, ``provisioningState``, ``resourceGuid``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kccm.emulators.azure.launcher import AzureEmulator

VOLATILE = frozenset({"etag", "provisioningState", "resourceGuid"})
NETWORK = ("loadBalancers", "publicIPAddresses")


def base_name(uid: str) -> str:
    """``cloudprovider.DefaultLoadBalancerName``: ``a`` + the UID without dashes, 32 long."""
    return ("a" + uid.replace("-", ""))[:32]


def _dropped(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _dropped(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        items = [_dropped(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    return value


def snapshot(emu: AzureEmulator) -> dict[str, Any]:
    """Every balancer and public IP by name, the security group's rules and the route
    table's routes by name, without the volatile keys."""
    config = emu.config
    group = (
        f"/subscriptions/{config['subscription']}/resourceGroups/{config['resource_group']}"
        "/providers/Microsoft.Network"
    )
    state = emu.admin.state()
    found: dict[str, Any] = {}
    for label in NETWORK:
        found[label] = {
            rid.rsplit("/", 1)[-1]: _dropped(emu.admin.resource(rid)) for rid in state[label]
        }
    nsg = emu.admin.resource(f"{group}/networkSecurityGroups/{config['nsg']}")
    table = emu.admin.resource(f"{group}/routeTables/{config['route_table']}")
    for label, owner, key in (
        ("securityRules", nsg, "securityRules"),
        ("routes", table, "routes"),
    ):
        found[label] = {
            r["name"]: _dropped(r["properties"]) for r in owner["properties"].get(key) or []
        }
    found["poolMembers"] = sorted(state["poolMembers"])
    return found


def normalised(
    found: Mapping[str, Any],
    uids: Mapping[str, str],
    namespace: str,
    node_ports: Mapping[int, str] | None = None,
) -> Any:
    """``found`` with each Service's UID-derived names as ``{svc:<name>}``, the namespace
    as ``{ns}`` and the node ports the apiserver chose at random (``node_ports``: port ->
    placeholder; the probes' ports and names) as their placeholders."""
    text = json.dumps(found, sort_keys=True)
    for port, placeholder in (node_ports or {}).items():
        text = text.replace(f"-TCP-{port}", f"-TCP-{{{placeholder}}}")
        text = text.replace(f'"port": {port}', f'"port": "{{{placeholder}}}"')
    for name, uid in uids.items():
        text = text.replace(base_name(uid), f"{{svc:{name}}}").replace(uid, f"{{uid:{name}}}")
    text = text.replace(f'"{namespace}/', '"{ns}/').replace(f"/{namespace}/", "/{ns}/")
    return _resorted(json.loads(text))


def _resorted(value: Any) -> Any:
    """Dictionaries re-keyed after the renames (names decide the order)."""
    if isinstance(value, dict):
        return {k: _resorted(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return sorted((_resorted(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def differences(left: Any, right: Any, path: str = "") -> list[str]:
    """``path: left != right`` for every leaf where the two differ (a key on one side only
    is a difference too)."""
    if isinstance(left, dict) and isinstance(right, dict):
        out: list[str] = []
        for key in sorted(set(left) | set(right)):
            where = f"{path}/{key}"
            if key not in left or key not in right:
                out.append(f"{where}: {_short(left.get(key))} != {_short(right.get(key))}")
            else:
                out.extend(differences(left[key], right[key], where))
        return out
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [d for i, (a, b) in enumerate(zip(left, right, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]  # fmt: skip
    return [] if left == right else [f"{path}: {_short(left)} != {_short(right)}"]


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def object_names(found: Mapping[str, Any]) -> dict[str, list[str]]:
    """The names a snapshot holds, by kind, and the balancers' frontends, pools, probes and
    rules (for the report)."""
    names = {label: sorted(found[label]) for label in (*NETWORK, "securityRules", "routes")}
    for lb_name, lb in found["loadBalancers"].items():
        props = lb.get("properties", {})
        for part in ("frontendIPConfigurations", "backendAddressPools", "probes",
                     "loadBalancingRules"):  # fmt: skip
            names[f"{lb_name}.{part}"] = sorted(p["name"] for p in props.get(part) or [])
    return names
