"""The leader's ``/debug/kccm/explain`` endpoint: what this kccm knows now about one Service or
Node, as JSON (``kccm explain`` renders it; see docs/why-is-my-load-balancer-pending.md).

``GET /debug/kccm/explain/service/<namespace>/<name>`` and ``/debug/kccm/explain/node/<name>``
are served on the secure port under the same delegated authentication and authorization as
``/metrics``: a non-resource path, so RBAC decides (the opt-in ClusterRole
``kccm-explain-reader`` in deploy/ grants ``get`` on it). Nothing is written anywhere.

A daemon that does not lead answers who does (``leader.identity`` from the Lease) with
``answered_by.leader: false`` and HTTP 200, and does not forward: forwarding would need this
daemon to act on the caller's behalf at the leader (impersonation rights kccm does not hold),
and ``kccm explain`` finds the leader through the Lease before it asks.

Only reads: the Service or Node and the Nodes (through kccm's own client), the Lease, the
controllers' :class:`~kccm.controllers.syncstate.SyncStates`, the call gate's
:meth:`~kccm.cloudprovider.gate.CallGate.snapshot` and, where the provider implements it,
``describe_load_balancer`` through the gate (a read, budgeted like any other).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

from kccm.app.explain_rules import (
    address_retention,
    handling,
    node_initialisation,
    node_set,
    share_group,
    target_drain,
)
from kccm.cloudprovider.errors import NotImplementedByProvider
from kccm.cloudprovider.gate import METHOD_GROUPS, CallGate, Priority
from kccm.cloudprovider.gated import GatedCloud
from kccm.cloudprovider.sharing import ANNOTATION_SHARE_GROUP, as_balancer_sharer
from kccm.controllers.service_drain import DRAIN_RECORD
from kccm.controllers.service_predicates import UPSTREAM_CLASSES, LoadBalancerClasses
from kccm.controllers.syncstate import SyncStates
from kccm.kube.errors import KubeError, NotFound
from kccm.kube.interface import KubeClient, Obj
from kccm.kube.resources import LEASES, NODES, SERVICES
from kccm.runtime.server import Server
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["EXPLAIN_PATH", "Explainer", "record_json"]

EXPLAIN_PATH = "/debug/kccm/explain"
MAX_NAMES = 20
_log = logging.getLogger("kccm.explain")


def _plain(value: Any) -> Any:
    """JSON-shaped copy: dataclasses as dicts, enums as their values, mappings and sequences
    walked."""
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat(timespec="seconds")


def record_json(record: Any) -> dict[str, Any]:
    """A :class:`~kccm.controllers.syncstate.SyncRecord` as JSON, times also as ISO 8601."""
    plain = record.to_json() if hasattr(record, "to_json") else _plain(record)
    body = dict(plain) if isinstance(plain, Mapping) else {"record": plain}
    body["at_iso"] = _iso(body.get("at"))
    body["next_retry_at_iso"] = _iso(body.get("next_retry_at"))
    return body


def _json(body: Mapping[str, Any], status: int = 200) -> web.Response:
    return web.json_response(dict(body), status=status)


@dataclass
class Explainer:
    """Serves the explain paths on a :class:`~kccm.runtime.server.Server` (see module doc)."""

    kube: KubeClient
    cloud: GatedCloud
    gate: CallGate
    provider: str
    cluster_name: str
    lease: tuple[str, str] = ("kube-system", "cloud-controller-manager")
    identity: str = ""
    leading: bool = False
    leader_election: bool = True
    states: SyncStates | None = None
    classes: LoadBalancerClasses = UPSTREAM_CLASSES
    default_retain_address: bool = False
    default_drain_seconds: int = 0
    clock: Clock = REAL_CLOCK

    def register(self, server: Server) -> None:
        server.add_get(EXPLAIN_PATH + "/service/{namespace}/{name}", self.service)
        server.add_get(EXPLAIN_PATH + "/node/{name}", self.node)

    # -- handlers ----------------------------------------------------------------------------

    async def service(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        head = await self._head("service", f"{ns}/{name}")
        if not self.leading:
            return _json(head)
        try:
            svc = await self.kube.get(SERVICES, name, namespace=ns)
        except NotFound:
            return _json({**head, "error": f"Service {ns}/{name} not found"}, 404)
        verdict = handling(svc, self.classes)
        body = {
            **head,
            "handled": verdict.handled,
            "why": verdict.why,
            "notes": list(verdict.notes),
            "load_balancer_class": (svc.get("spec") or {}).get("loadBalancerClass"),
            "ingress": ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or [],
            "syncs": self._records("service", f"{ns}/{name}"),
            "nodes": await self._nodes(svc),
            "call_budget": self._budget(),
            "balancer": await self._balancer(svc) if verdict.handled else None,
            "address_retention": self._retention(svc),
            "drain": self._drain(svc, f"{ns}/{name}"),
            "share_group": await self._sharing(svc, ns),
        }
        return _json(body)

    async def node(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        head = await self._head("node", name)
        if not self.leading:
            return _json(head)
        try:
            node = await self.kube.get(NODES, name)
        except NotFound:
            return _json({**head, "error": f"Node {name} not found"}, 404)
        initialised, why = node_initialisation(node)
        body = {
            **head,
            "initialised": initialised,
            "why": why,
            "provider_id": (node.get("spec") or {}).get("providerID") or "",
            "addresses": (node.get("status") or {}).get("addresses") or [],
            "taints": [t.get("key") for t in (node.get("spec") or {}).get("taints") or ()],
            "syncs": self._records("node", name),
            "call_budget": self._budget(),
        }
        return _json(body)

    # -- parts -------------------------------------------------------------------------------

    async def _head(self, kind: str, key: str) -> dict[str, Any]:
        leader = await self._leader()
        head: dict[str, Any] = {
            "kind": kind,
            "key": key,
            "answered_by": {"identity": self.identity, "leader": self.leading},
            "leader": leader,
            "provider": self.provider,
            "classes": sorted(self.classes.names),
            "class_less": not self.classes.class_only,
            "now": self.clock.now().timestamp(),
        }
        if not self.leading:
            holder = leader.get("identity") or "nobody (the Lease has no holder)"
            head["not_leader"] = (
                f"this kccm ({self.identity}) does not lead; the leader is {holder}: ask it "
                "(kccm explain finds the leader through the Lease)"
            )
        return head

    async def _leader(self) -> dict[str, Any]:
        if not self.leader_election:
            return {"identity": self.identity, "lease": None, "note": "--leader-elect=false"}
        ns, name = self.lease
        try:
            lease = await self.kube.get(LEASES, name, namespace=ns)
        except KubeError as exc:
            return {"identity": "", "lease": f"{ns}/{name}", "error": str(exc)}
        spec = lease.get("spec") or {}
        return {
            "identity": spec.get("holderIdentity") or "",
            "lease": f"{ns}/{name}",
            "renewed": spec.get("renewTime"),
            "transitions": spec.get("leaseTransitions", 0),
        }

    def _records(self, kind: Literal["service", "node"], key: str) -> list[dict[str, Any]]:
        if self.states is None:
            return []
        return [record_json(r) for r in self.states.get(kind, key)]

    async def _nodes(self, service: Obj) -> dict[str, Any]:
        nodes = await self.kube.list(NODES)
        found = node_set(nodes.items, service)
        body: dict[str, Any] = {
            "eligible": len(found.eligible),
            "eligible_names": list(found.eligible[:MAX_NAMES]),
            "excluded": dict(found.excluded),
            "uninitialised": list(found.uninitialised),
        }
        if found.selector is not None:
            body["selector"] = found.selector
        return body

    async def _balancer(self, service: Obj) -> dict[str, Any]:
        lb = self.cloud.load_balancer()
        if lb is None:
            return {"available": False, "note": f"provider {self.provider} has no load balancers"}
        if not lb.can_describe:
            note = f"provider {self.provider} does not describe its balancers"
            return {"available": False, "note": note}
        group = METHOD_GROUPS["describe_load_balancer"]
        if any(g.group == group and g.throttled_for > 0 for g in self.gate.snapshot()):
            # explain must not wait out (nor end) a throttling pause: the answer says why
            note = "not described now: the cloud throttles load balancer calls (see call_budget)"
            return {"available": False, "note": note}
        try:
            view = await lb.describe_load_balancer(
                self.cluster_name, service, priority=Priority.PERIODIC
            )
        except NotImplementedByProvider:
            note = f"provider {self.provider} does not describe its balancers"
            return {"available": False, "note": note}
        except Exception as exc:  # a read for people: report it, never fail the answer
            _log.info("describe_load_balancer failed: %s", exc)
            return {"available": False, "note": f"describing the balancer failed: {exc}"}
        if view is None:
            return {"available": True, "view": None, "note": "the cloud has no balancer for it"}
        return {"available": True, "view": _plain(view)}

    def _retention(self, service: Obj) -> dict[str, Any]:
        lb = self.cloud.load_balancer()
        supported = lb is not None and lb.can_retain_addresses
        return address_retention(service, self.default_retain_address, supported, self.provider)

    def _drain(self, service: Obj, key: str) -> dict[str, Any]:
        lb = self.cloud.load_balancer()
        supported = lb is not None and lb.can_drain_targets
        record = None if self.states is None else self.states.last("service", key, DRAIN_RECORD)
        until = dict(record.detail.get("draining_until") or {}) if record is not None else {}
        return target_drain(service, self.default_drain_seconds, supported, self.provider, until)

    async def _sharing(self, service: Obj, namespace: str) -> dict[str, Any] | None:
        if ANNOTATION_SHARE_GROUP not in ((service.get("metadata") or {}).get("annotations") or {}):
            return None  # no list call for the Services that share nothing
        lb = self.cloud.load_balancer()
        supported = lb is not None and as_balancer_sharer(lb.impl) is not None
        services = (await self.kube.list(SERVICES, namespace=namespace)).items
        return share_group(service, services, supported, self.provider)

    def _budget(self) -> list[dict[str, Any]]:
        return [_plain(group) for group in self.gate.snapshot()]
