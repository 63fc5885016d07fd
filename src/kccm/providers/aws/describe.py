"""The aws provider's optional ``describe_load_balancer`` (``kccm explain``): the Service's
balancer with each listener's targets and their health, as AWS reports it.

- NLB: ``DescribeListeners``, then per listener's target group ``DescribeTargetHealth``
  (``healthy``; ``initial`` and ``draining`` are not yet / no longer checked, so unknown;
  anything else, ``unhealthy``, ``unused`` (e.g. a stopped instance), ``unavailable``, means
  the target gets no traffic: unhealthy, with AWS's reason and description);
- Classic ELB: ``DescribeInstanceHealth`` once (a Classic ELB checks instances, not
  listeners: each listener shows the same verdicts on its instance port).

The targets' Node names and addresses come from one ``DescribeInstances`` (a Node on aws is
named after its instance's private DNS name). Every request goes through
:meth:`~kccm.providers.aws.api.AWSAPI.call`, so the ledger counts them as reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kccm.cloudprovider import BalancerView, ListenerView, TargetHealth, TargetView
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.targetgroups import forward_arn

__all__ = ["classic_view", "nlb_view"]

LB = Mapping[str, Any]

_NOT_CHECKED = frozenset({"initial", "draining"})
_CLASSIC = {
    "InService": TargetHealth.HEALTHY,
    "OutOfService": TargetHealth.UNHEALTHY,
}


def nlb_health(health: Mapping[str, Any]) -> tuple[TargetHealth, str]:
    """An NLB target's ``TargetHealth`` as (health, detail)."""
    state = str(health.get("State", ""))
    if state == "healthy":
        return TargetHealth.HEALTHY, ""
    reason = " ".join(str(health[k]) for k in ("Reason", "Description") if health.get(k))
    detail = f"{state}: {reason}" if reason else state
    if state in _NOT_CHECKED or not state:
        return TargetHealth.UNKNOWN, detail
    return TargetHealth.UNHEALTHY, detail


def classic_health(state: Mapping[str, Any]) -> tuple[TargetHealth, str]:
    """A Classic ELB ``InstanceState`` as (health, detail)."""
    name = str(state.get("State", ""))
    health = _CLASSIC.get(name, TargetHealth.UNKNOWN)
    if health is TargetHealth.HEALTHY:
        return health, ""
    reason = " ".join(str(state[k]) for k in ("ReasonCode", "Description") if state.get(k))
    return health, f"{name}: {reason}" if reason else name


def _instances(api: AWSAPI, ids: Iterable[str]) -> dict[str, Mapping[str, Any]]:
    wanted = sorted({i for i in ids if i.startswith("i-")})
    if not wanted:
        return {}
    filters = [{"Name": "instance-id", "Values": wanted}]
    reservations = api.pages("ec2", "describe_instances", "Reservations", Filters=filters)
    return {i["InstanceId"]: i for r in reservations for i in r.get("Instances", ())}


def _target(
    instance_id: str,
    port: int,
    verdict: tuple[TargetHealth, str],
    instances: Mapping[str, Mapping[str, Any]],
) -> TargetView:
    found = instances.get(instance_id) or {}
    address = str(found.get("PrivateIpAddress") or ("" if found else instance_id))
    node = str(found.get("PrivateDnsName") or "")
    return TargetView(node, instance_id, address, port, verdict[0], verdict[1])


def nlb_view(api: AWSAPI, lb: LB) -> BalancerView:
    """An NLB, its listeners and each listener's target health."""
    listeners = list(
        api.pages("elbv2", "describe_listeners", "Listeners", LoadBalancerArn=lb["LoadBalancerArn"])
    )
    healths: dict[str, Sequence[Mapping[str, Any]]] = {}
    for arn in sorted({a for a in map(forward_arn, listeners) if a}):
        reply = api.call("elbv2", "describe_target_health", TargetGroupArn=arn)
        healths[arn] = reply.get("TargetHealthDescriptions") or ()
    ids = (str(t["Target"]["Id"]) for found in healths.values() for t in found)
    instances = _instances(api, ids)
    views = []
    for listener in sorted(listeners, key=lambda item: int(item.get("Port", 0))):
        targets = [
            _target(
                str(t["Target"]["Id"]),
                int(t["Target"].get("Port", 0)),
                nlb_health(t.get("TargetHealth") or {}),
                instances,
            )
            for t in healths.get(forward_arn(listener), ())
        ]
        views.append(
            ListenerView(
                port=int(listener.get("Port", 0)),
                protocol=str(listener.get("Protocol", "")),
                targets=sorted(targets, key=lambda t: (t.node, t.instance)),
                detail="" if forward_arn(listener) else "forwards to no target group",
            )
        )
    state = lb.get("State") or {}
    detail = {
        "kind": "nlb",
        "dns_name": str(lb.get("DNSName", "")),
        "scheme": str(lb.get("Scheme", "")),
        "arn": str(lb.get("LoadBalancerArn", "")),
    }
    if state.get("Reason"):
        detail["state_reason"] = str(state["Reason"])
    return BalancerView(str(lb["LoadBalancerName"]), str(state.get("Code", "")), views, detail)


def classic_view(api: AWSAPI, lb: LB) -> BalancerView:
    """A Classic ELB, its listeners and its instances' health (the same for every listener)."""
    name = str(lb["LoadBalancerName"])
    reply = api.call("elb", "describe_instance_health", LoadBalancerName=name)
    states = reply.get("InstanceStates") or ()
    instances = _instances(api, (str(s.get("InstanceId", "")) for s in states))
    views = []
    for item in lb.get("ListenerDescriptions") or ():
        listener = item.get("Listener") or {}
        port = int(listener.get("InstancePort", 0))
        targets = [
            _target(str(s.get("InstanceId", "")), port, classic_health(s), instances)
            for s in states
        ]
        views.append(
            ListenerView(
                port=int(listener.get("LoadBalancerPort", 0)),
                protocol=str(listener.get("Protocol", "")),
                targets=sorted(targets, key=lambda t: (t.node, t.instance)),
            )
        )
    detail = {
        "kind": "classic",
        "dns_name": str(lb.get("DNSName", "")),
        "scheme": str(lb.get("Scheme", "")),
        "health_check": str((lb.get("HealthCheck") or {}).get("Target", "")),
    }
    views.sort(key=lambda v: v.port)
    return BalancerView(name, "active", views, detail)
