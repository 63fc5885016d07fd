"""An in-memory ARM for the azure balancer's unit tests: resources by ID with ETags that
change on every write (If-Match checked: 412 as :class:`PreconditionFailed`), public IP
addresses and private frontend addresses allocated, child IDs filled in and every pool's
``backendIPConfigurations`` computed from the interfaces and scale set VMs that name it, as
ARM does; a log of every call. Plus a seed: a resource group with a vnet, subnet, security
group and VMs (availability set) or scale set VMs, and the Nodes for them."""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Callable
from typing import Any

from kccm.providers.azure.loadbalancer import LBSettings, PreconditionFailed

Json = dict[str, Any]
SUB = "sub-1"
RG = "rg"
NET = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network"
COMPUTE = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute"
MUTATING = ("PUT", "DELETE")


class FakeArm:
    def __init__(self) -> None:
        self.store: dict[str, Json] = {}
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._etags = itertools.count(1)
        self._ips = itertools.count(10)
        self._private = itertools.count(100)
        self.before_put: Callable[[str], None] | None = None

    # -- the ArmApi Protocol ---------------------------------------------------------------

    def get(self, path: str) -> Json | None:
        with self._lock:
            self.calls.append(("GET", path))
            found = self.store.get(path.lower())
            return copy.deepcopy(self._view(found)) if found is not None else None

    def list(self, path: str) -> list[Json]:
        with self._lock:
            self.calls.append(("LIST", path))
            prefix = path.lower() + "/"
            return [
                copy.deepcopy(self._view(body))
                for key, body in sorted(self.store.items())
                if key.startswith(prefix) and "/" not in key[len(prefix) :]
            ]

    def put(
        self, path: str, body: Json, *, if_match: str | None, if_none_match: bool = False
    ) -> Json:
        hook = self.before_put
        if hook is not None:
            hook(path)
        with self._lock:
            self.calls.append(("PUT", path))
            current = self.store.get(path.lower())
            if if_match is not None and (current is None or current.get("etag") != if_match):
                self.calls.append(("412", path))
                raise PreconditionFailed(path)
            if if_none_match and current is not None:
                self.calls.append(("412", path))
                raise PreconditionFailed(path)
            stored = self._stored(path, copy.deepcopy(body), current)
            self.store[path.lower()] = stored
            return copy.deepcopy(self._view(stored))

    def delete(self, path: str) -> None:
        """As ARM: a deleted balancer's pools leave the interfaces that named them."""
        with self._lock:
            self.calls.append(("DELETE", path))
            self.store.pop(path.lower(), None)
            if "/loadbalancers/" not in path.lower():
                return
            prefix = path.lower() + "/backendaddresspools/"
            for key, body in self.store.items():
                if "/networkinterfaces/" not in key:
                    continue
                for ipc in (body.get("properties") or {}).get("ipConfigurations") or ():
                    props = ipc.get("properties") or {}
                    pools = props.get("loadBalancerBackendAddressPools") or []
                    kept = [p for p in pools if not p["id"].lower().startswith(prefix)]
                    props["loadBalancerBackendAddressPools"] = kept

    # -- what ARM fills in -----------------------------------------------------------------

    def _stored(self, path: str, body: Json, current: Json | None) -> Json:
        body["id"] = path
        body["name"] = path.rsplit("/", 1)[1]
        body["etag"] = f'W/"{next(self._etags)}"'
        props = body.setdefault("properties", {})
        props["provisioningState"] = "Succeeded"
        if "/publicipaddresses/" in path.lower() and not props.get("ipAddress"):
            old = ((current or {}).get("properties") or {}).get("ipAddress")
            props["ipAddress"] = old or f"20.0.0.{next(self._ips)}"
        if "/loadbalancers/" in path.lower():
            for key in (
                "frontendIPConfigurations",
                "backendAddressPools",
                "probes",
                "loadBalancingRules",
            ):
                for child in props.get(key) or ():
                    child["id"] = f"{path}/{key}/{child['name']}"
            for fip in props.get("frontendIPConfigurations") or ():
                fprops = fip.setdefault("properties", {})
                if fprops.get("subnet") and not fprops.get("privateIPAddress"):
                    fprops["privateIPAddress"] = f"10.0.0.{next(self._private)}"
            for pool in props.get("backendAddressPools") or ():
                pool.setdefault("properties", {}).pop("backendIPConfigurations", None)
        return body

    def _view(self, body: Json) -> Json:
        if "/loadbalancers/" not in str(body.get("id", "")).lower():
            return body
        view = copy.deepcopy(body)
        for pool in (view.get("properties") or {}).get("backendAddressPools") or ():
            members = [{"id": ip} for ip in self._members(str(pool["id"]))]
            pool.setdefault("properties", {})["backendIPConfigurations"] = members
        return view

    def _members(self, pool_id: str) -> list[str]:
        found = []
        for key, body in sorted(self.store.items()):
            configs = []
            if "/networkinterfaces/" in key and "/virtualmachinescalesets/" not in key:
                configs = (body.get("properties") or {}).get("ipConfigurations") or []
            elif "/virtualmachinescalesets/" in key and "/virtualmachines/" in key:
                nics = body["properties"]["networkProfileConfiguration"][
                    "networkInterfaceConfigurations"
                ]
                for nic in nics:
                    for ipc in nic["properties"]["ipConfigurations"]:
                        ipc = dict(
                            ipc,
                            id=f"{body['id']}/networkInterfaces/{nic['name']}"
                            f"/ipConfigurations/{ipc['name']}",
                        )
                        configs.append(ipc)
            for ipc in configs:
                pools = (ipc.get("properties") or {}).get("loadBalancerBackendAddressPools") or []
                if any(p["id"].lower() == pool_id.lower() for p in pools):
                    found.append(ipc["id"])
        return found

    # -- helpers for tests -----------------------------------------------------------------

    def mutating(self) -> list[tuple[str, str]]:
        return [call for call in self.calls if call[0] in MUTATING]

    def seed(self, path: str, body: Json) -> None:
        with self._lock:
            body = copy.deepcopy(body)
            body.setdefault("id", path)
            body.setdefault("name", path.rsplit("/", 1)[1])
            body.setdefault("etag", f'W/"{next(self._etags)}"')
            self.store[path.lower()] = body

    def resource(self, path: str) -> Json:
        return copy.deepcopy(self._view(self.store[path.lower()]))


def settings(**changes: Any) -> LBSettings:
    base: Json = {
        "subscription_id": SUB,
        "resource_group": RG,
        "location": "westus",
        "vm_type": "standard",
        "vnet_name": "vnet",
        "subnet_name": "nodes",
        "security_group_name": "nsg",
    }
    base.update(changes)
    return LBSettings(**base)


def seed_network(arm: FakeArm) -> None:
    arm.seed(
        f"{NET}/virtualNetworks/vnet/subnets/nodes",
        {"properties": {"addressPrefix": "10.0.0.0/16"}},
    )
    arm.seed(f"{NET}/networkSecurityGroups/nsg", {"properties": {"securityRules": []}})


def seed_vm(arm: FakeArm, name: str, address: str) -> Json:
    """A VM with one interface; its Node."""
    nic = f"{NET}/networkInterfaces/{name}-nic"
    arm.seed(
        nic,
        {
            "properties": {
                "ipConfigurations": [
                    {
                        "name": "ipconfig1",
                        "id": f"{nic}/ipConfigurations/ipconfig1",
                        "properties": {"primary": True, "privateIPAddress": address},
                    }
                ]
            }
        },
    )
    arm.seed(
        f"{COMPUTE}/virtualMachines/{name}",
        {
            "properties": {
                "networkProfile": {
                    "networkInterfaces": [{"id": nic, "properties": {"primary": True}}]
                }
            }
        },
    )
    return node(name, f"azure://{COMPUTE}/virtualMachines/{name}", address)


def seed_vmss(arm: FakeArm, scale_set: str, instances: int) -> list[Json]:
    """A scale set and its VMs; their Nodes."""
    nic_config = [
        {
            "name": "nic",
            "properties": {
                "primary": True,
                "ipConfigurations": [{"name": "ipconfig1", "properties": {"primary": True}}],
            },
        }
    ]
    arm.seed(
        f"{COMPUTE}/virtualMachineScaleSets/{scale_set}",
        {
            "location": "westus",
            "properties": {
                "virtualMachineProfile": {
                    "networkProfile": {"networkInterfaceConfigurations": copy.deepcopy(nic_config)}
                }
            },
        },
    )
    nodes = []
    for index in range(instances):
        path = f"{COMPUTE}/virtualMachineScaleSets/{scale_set}/virtualMachines/{index}"
        arm.seed(
            path,
            {
                "location": "westus",
                "properties": {
                    "networkProfileConfiguration": {
                        "networkInterfaceConfigurations": copy.deepcopy(nic_config)
                    }
                },
            },
        )
        nodes.append(node(f"{scale_set}00000{index}", f"azure://{path}", f"10.1.0.{index + 4}"))
    return nodes


def node(name: str, provider_id: str, address: str) -> Json:
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {"providerID": provider_id},
        "status": {"addresses": [{"type": "InternalIP", "address": address}]},
    }


def service(
    uid: str = "6f1b2c3d-0000-4000-8000-00000000000a",
    name: str = "web",
    ports: tuple[tuple[str, int, int], ...] = (("TCP", 80, 30080),),
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Json:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid,
            "annotations": annotations or {},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"protocol": p, "port": port, "nodePort": node_port} for p, port, node_port in ports
            ],
            **spec,
        },
    }
