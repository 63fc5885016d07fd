"""An operator's hands on the OpenStack emulator (``kccm.emulators.openstack``), for the
conformance kit's tamper and the daemon end-to-end test.

It is deliberately not the provider's code: a keystoneauth1 Session (the library under the
``openstack`` CLI) as the emulator's default user, and the Octavia v2 / Neutron v2.0 calls
``openstack loadbalancer ...`` and ``openstack floating ip ...`` send. What it reads is the
cloud's own record, summed up per balancer in :class:`BalancerView`: the listeners by port,
each with its ``allowed_cidrs``, its default pool's members (address, port, monitor port) and
health monitor, the VIP and the floating IP on the VIP port.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import session as ksa_session
from keystoneauth1.identity import v3

from kccm.emulators.openstack.launcher import Emulator

__all__ = ["BalancerView", "ListenerView", "Operator"]

LBAAS = "/v2/lbaas"
VIEW_ATTEMPTS = 10
ACTIVE_WAIT = 60.0
"""How long :meth:`Operator.wait_active` waits for a balancer to leave ``PENDING_*`` (the
emulator's delay is a fraction of a second; the bound only ends a hung test)."""


@dataclass(frozen=True)
class ListenerView:
    """One listener as the cloud holds it."""

    protocol: str
    allowed_cidrs: frozenset[str]
    members: frozenset[tuple[str, int, int | None]]
    """(address, protocol_port, monitor_port) of the default pool's members."""
    monitor: tuple[str, str] | None
    """(type, url_path) of the default pool's health monitor."""


@dataclass(frozen=True)
class BalancerView:
    """A balancer as the cloud holds it (never through the provider)."""

    id: str
    name: str
    vip_address: str
    vip_port_id: str
    provisioning_status: str
    listeners: Mapping[int, ListenerView] = field(default_factory=dict)
    floating_ip: str | None = None
    tags: frozenset[str] = frozenset()


class Operator:
    """Octavia and Neutron calls as the default user (``demo`` in project ``demo``)."""

    def __init__(self, emulator: Emulator) -> None:
        conf = emulator.config
        auth = v3.Password(
            auth_url=emulator.auth_url,
            username=conf["user"],
            password=conf["password"],
            user_domain_name=conf["domain"],
            project_name=conf["project"],
            project_domain_name=conf["domain"],
        )
        self.session = ksa_session.Session(auth=auth)
        self.region = conf["region"]

    def call(self, service: str, method: str, path: str, body: Any = None, **params: Any) -> Any:
        """One request to ``service``'s catalog endpoint; the decoded body (None if empty)."""
        response = self.session.request(
            path,
            method,
            json=body,
            params=params or None,
            endpoint_filter={
                "service_type": service,
                "interface": "public",
                "region_name": self.region,
            },
            raise_exc=True,
        )
        return response.json() if response.content else None

    # -- Octavia ------------------------------------------------------------------------------

    def load_balancers(self, **filters: Any) -> list[dict[str, Any]]:
        found = self.call("load-balancer", "GET", f"{LBAAS}/loadbalancers", **filters)
        return list(found["loadbalancers"])

    def load_balancer(self, name: str) -> dict[str, Any] | None:
        found = self.load_balancers(name=name)
        assert len(found) <= 1, f"{len(found)} balancers named {name}"
        return found[0] if found else None

    def wait_active(self, lb_id: str) -> dict[str, Any]:
        """What ``openstack loadbalancer ... --wait`` does: poll until the balancer is
        ``ACTIVE`` again (an immutable balancer answers every change with 409)."""
        deadline = time.monotonic() + ACTIVE_WAIT
        while True:
            lb = self.call("load-balancer", "GET", f"{LBAAS}/loadbalancers/{lb_id}")
            lb = lb["loadbalancer"]
            if lb["provisioning_status"] == "ACTIVE":
                return dict(lb)
            if time.monotonic() > deadline:
                raise TimeoutError(f"balancer {lb_id} stayed {lb['provisioning_status']}")
            time.sleep(0.02)

    def listeners(self, lb_id: str) -> list[dict[str, Any]]:
        found = self.call("load-balancer", "GET", f"{LBAAS}/listeners", loadbalancer_id=lb_id)
        return list(found["listeners"])

    def members(self, pool_id: str) -> list[dict[str, Any]]:
        return list(
            self.call("load-balancer", "GET", f"{LBAAS}/pools/{pool_id}/members")["members"]
        )

    def monitor(self, monitor_id: str) -> dict[str, Any]:
        found = self.call("load-balancer", "GET", f"{LBAAS}/healthmonitors/{monitor_id}")
        return dict(found["healthmonitor"])

    def pool(self, pool_id: str) -> dict[str, Any]:
        return dict(self.call("load-balancer", "GET", f"{LBAAS}/pools/{pool_id}")["pool"])

    def delete_listener(self, lb_id: str, listener_id: str) -> None:
        self.call("load-balancer", "DELETE", f"{LBAAS}/listeners/{listener_id}")
        self.wait_active(lb_id)

    def remove_members(self, lb_id: str, pool_id: str) -> None:
        """``openstack loadbalancer member delete`` for every member of the pool."""
        for member in self.members(pool_id):
            self.call("load-balancer", "DELETE", f"{LBAAS}/pools/{pool_id}/members/{member['id']}")
            self.wait_active(lb_id)

    def cascade_delete(self, lb_id: str) -> None:
        """``openstack loadbalancer delete --cascade --wait``."""
        self.call("load-balancer", "DELETE", f"{LBAAS}/loadbalancers/{lb_id}", cascade="true")
        deadline = time.monotonic() + ACTIVE_WAIT
        while self.load_balancers(id=lb_id):
            if time.monotonic() > deadline:
                raise TimeoutError(f"balancer {lb_id} was not deleted")
            time.sleep(0.02)

    # -- Neutron ------------------------------------------------------------------------------

    def floating_ips(self, **filters: Any) -> list[dict[str, Any]]:
        return list(self.call("network", "GET", "/v2.0/floatingips", **filters)["floatingips"])

    def floating_ip_on(self, port_id: str) -> dict[str, Any] | None:
        found = self.floating_ips(port_id=port_id)
        return found[0] if found else None

    def disassociate(self, fip_id: str) -> None:
        """``openstack floating ip unset --port``."""
        self.call(
            "network", "PUT", f"/v2.0/floatingips/{fip_id}", {"floatingip": {"port_id": None}}
        )

    def delete_floating_ip(self, fip_id: str) -> None:
        self.call("network", "DELETE", f"/v2.0/floatingips/{fip_id}")

    def router_routes(self, router_id: str) -> set[tuple[str, str]]:
        """(destination, nexthop) of the router's extra routes."""
        router = self.call("network", "GET", f"/v2.0/routers/{router_id}")["router"]
        return {(r["destination"], r["nexthop"]) for r in router.get("routes") or []}

    def port_pairs(self, device_id: str) -> set[str]:
        """The ``allowed_address_pairs`` addresses of a server's ports."""
        ports = self.call("network", "GET", "/v2.0/ports", device_id=device_id)["ports"]
        return {p["ip_address"] for port in ports for p in port.get("allowed_address_pairs") or []}

    # -- the whole balancer -------------------------------------------------------------------

    def view(self, name: str) -> BalancerView | None:
        """The balancer called ``name`` with its listeners, pools, members, monitors and
        floating IP; None when there is none. A child deleted while it is read (kccm is
        changing the balancer) makes it read the whole balancer again."""
        for _ in range(VIEW_ATTEMPTS - 1):
            try:
                return self._view(name)
            except ksa_exc.NotFound:
                continue
        return self._view(name)

    def _view(self, name: str) -> BalancerView | None:
        lb = self.load_balancer(name)
        if lb is None:
            return None
        listeners = {
            int(li["protocol_port"]): self._listener(li) for li in self.listeners(lb["id"])
        }
        fip = self.floating_ip_on(lb["vip_port_id"])
        return BalancerView(
            id=lb["id"],
            name=lb["name"],
            vip_address=lb["vip_address"],
            vip_port_id=lb["vip_port_id"],
            provisioning_status=lb["provisioning_status"],
            listeners=listeners,
            floating_ip=fip["floating_ip_address"] if fip else None,
            tags=frozenset(lb.get("tags") or ()),
        )

    def _listener(self, listener: Mapping[str, Any]) -> ListenerView:
        members: frozenset[tuple[str, int, int | None]] = frozenset()
        monitor = None
        if pool_id := listener.get("default_pool_id"):
            members = frozenset(
                (m["address"], int(m["protocol_port"]), m.get("monitor_port"))
                for m in self.members(pool_id)
            )
            if monitor_id := self.pool(pool_id).get("healthmonitor_id"):
                found = self.monitor(monitor_id)
                monitor = (str(found["type"]), str(found.get("url_path") or ""))
        return ListenerView(
            protocol=str(listener["protocol"]),
            allowed_cidrs=frozenset(listener.get("allowed_cidrs") or ()),
            members=members,
            monitor=monitor,
        )
