"""The members of a Service's vServer groups: which Nodes, with which weight, in which group
(upstream v2.14.0: ``GetNodes``, ``filterOutByLabel``, ``needExcludeFromLB`` in
``pkg/controller/service/reconcile/backend/backend.go``; ``buildVGroupForServicePort``,
``buildClusterBackends``, ``setWeightBackends`` in ``pkg/controller/service/clbv1/vgroups.go``).

Nodes: every Node given with a providerID, except those labelled
``node.kubernetes.io/exclude-from-external-load-balancers`` (or upstream's older
``alpha.service-controller.kubernetes.io/exclude-balancer``, ``service.beta.kubernetes.io/
exclude-node``), ``node-role.kubernetes.io/master`` ones, those tainted
``ToBeDeletedByClusterAutoscaler``, unschedulable ones with ``remove-unscheduled-backend: on``,
and, with ``backend-label: k1=v1,k2=v2``, those without every one of those labels. Node
readiness is the framework's to judge (it passes the Nodes it chose).

Members from endpoints (``externalTrafficPolicy: Local``, ENI backends):
:mod:`.endpoint_members`.

Weights: ``default-weight`` (0-100, default 100) for every member; on a reused balancer with
``vgroup-port``, ``weight`` (0-100) is the group's total, split evenly (at least 1 each, 0
gives 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kccm.cloudprovider import InvalidServiceConfig, Node, Service, ServiceEndpoint
from kccm.providers.alibabacloud.instances import parse_provider_id
from kccm.providers.alibabacloud.loadbalancer.annotations import PREFIX, value
from kccm.providers.alibabacloud.loadbalancer.endpoint_members import eni_members, local_members
from kccm.providers.alibabacloud.loadbalancer.members import GroupWant
from kccm.providers.alibabacloud.loadbalancer.slbapi import Backend
from kccm.providers.alibabacloud.loadbalancer.spec import BalancerSpec, ListenerSpec, go_int

__all__ = ["DEFAULT_WEIGHT", "eligible_nodes", "group_wants", "vgroup_ports", "weight_annotation"]

DEFAULT_WEIGHT = 100  # vgroups.go DefaultServerWeight
_EXCLUDE = (
    "node.kubernetes.io/exclude-from-external-load-balancers",
    "alpha.service-controller.kubernetes.io/exclude-balancer",
    "service.beta.kubernetes.io/exclude-node",
    "node-role.kubernetes.io/master",
)
_TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"


def _label_filter(service: Service) -> dict[str, str]:
    """``filterOutByLabel``'s ``k1=v1,k2=v2``."""
    text = value(service, "loadbalancer-backend-label") or ""
    wanted: dict[str, str] = {}
    for item in text.split(",") if text else ():
        pair = item.split("=")
        if len(pair) < 2:
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-backend-label",
                f"parse backend label: {item}, [k1=v1,k2=v2]",
            )
        wanted[pair[0]] = pair[1]
    return wanted


def _eligible(node: Node, labels_wanted: dict[str, str], drop_unscheduled: bool) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    spec = node.get("spec") or {}
    if not spec.get("providerID") or any(label in labels for label in _EXCLUDE):
        return False
    if any(labels.get(k) != v for k, v in labels_wanted.items()):
        return False
    if any(t.get("key") == _TO_BE_DELETED for t in spec.get("taints") or ()):
        return False
    return not (drop_unscheduled and spec.get("unschedulable"))


def weight_annotation(service: Service, suffix: str) -> int | None:
    """A weight annotation (``weight``, ``default-weight``): an integer in [0, 100]."""
    found = go_int(service, suffix)
    if found is None:
        return None
    if not 0 <= int(found) <= 100:
        raise InvalidServiceConfig(
            f"{PREFIX}{suffix}", f"weight must be integer in range [0,100] , got [{found}]"
        )
    return int(found)


def vgroup_ports(service: Service, reuse_id: str) -> dict[str, str]:
    """``vgroup``: ``rsp-1:80,rsp-2:443`` on a reused balancer, ``{port: group ID}``."""
    text = value(service, "loadbalancer-vgroup-port") or ""
    if not reuse_id or not text:
        return {}
    ports: dict[str, str] = {}
    for item in text.split(","):
        pair = item.split(":")
        if len(pair) < 2:
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-vgroup-port",
                f"vgroupid and protocol format must be like 'vsp-xxx:443' with colon "
                f"separated. got=[{item}]",
            )
        ports.setdefault(pair[1], pair[0])
    return ports


def _members(
    nodes: Sequence[Node], listener: ListenerSpec, each: int, total: int | None
) -> list[Backend]:
    instances = sorted({parse_provider_id(str(n["spec"]["providerID"]))[1] for n in nodes})
    if total is not None:
        each = 0 if total == 0 else max(1, total // max(1, len(instances)))
    return [Backend(i, listener.node_port, each, "ecs", listener.vgroup_name) for i in instances]


def eligible_nodes(service: Service, nodes: Sequence[Node]) -> list[Node]:
    """The Nodes that may be the Service's backends (``GetNodes``, ``filterOutByLabel``)."""
    labels = _label_filter(service)
    drop_unscheduled = value(service, "loadbalancer-remove-unscheduled-backend") == "on"
    return [n for n in nodes if _eligible(n, labels, drop_unscheduled)]


def group_wants(
    service: Service,
    spec: BalancerSpec,
    nodes: Sequence[Node],
    endpoints: Sequence[ServiceEndpoint] = (),
    eni_of: Mapping[str, str] | None = None,
) -> list[GroupWant]:
    """One :class:`~.members.GroupWant` per port of ``spec``; with ``spec.members_from``
    ``local`` or ``eni``, members from ``endpoints`` (:mod:`.endpoint_members`; ``eni_of``:
    the ENI holding each endpoint IP)."""
    chosen = eligible_nodes(service, nodes)
    reused = vgroup_ports(service, spec.reuse_id)
    total = weight_annotation(service, "loadbalancer-weight") if reused else None
    default = weight_annotation(service, "loadbalancer-default-weight")
    each = DEFAULT_WEIGHT if default is None else default
    ignore = (value(service, "loadbalancer-ignore-weight-update") or "").lower() == "on"
    instance_of = {
        str(n["metadata"]["name"]): parse_provider_id(str(n["spec"]["providerID"]))[1]
        for n in chosen
    }

    def members(listener: ListenerSpec) -> list[Backend]:
        if spec.members_from == "local":
            return local_members(endpoints, listener, instance_of, total)
        if spec.members_from == "eni":
            return eni_members(endpoints, listener, eni_of or {}, each, total)
        return _members(chosen, listener, each, total)

    return [
        GroupWant(
            listener.vgroup_name, reused.get(str(listener.port), ""), members(listener), ignore
        )
        for listener in spec.listeners
    ]
