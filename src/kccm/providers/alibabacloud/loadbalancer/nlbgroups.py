"""An NLB's server groups and listeners, read first and written only where they differ
(upstream ``pkg/controller/service/nlbv2``, v2.14.0: ``buildServerGroupCreateAndUpdateActions``,
``UpdateServerGroup``, ``updateServerGroupServers``/``diff``, ``buildActionsForListeners``,
``UpdateNLBListener``, ``cleanup`` in ``model_applier.go``, ``server_groups.go``,
``listeners.go``).

Server groups are found by the Service's tags (``kubernetes.do.not.delete=<name>``,
``ack.aliyun.com=<cluster ID>``) and matched by name; one whose type changed is made anew.
A group is this Service's when its name parses as ``k8s.<port>.<protocol>.<service>.
<namespace>.<cluster ID>`` for it; a server is when its description does: servers of other
owners are never removed and groups of other owners never deleted.

Listeners are matched by port and protocol; the rest of the balancer's listeners are deleted
(on a reused balancer only this Service's), then each wanted one is created or set.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kccm.providers.alibabacloud.loadbalancer.nlbapi import NlbApi, NlbListener, Server, ServerGroup
from kccm.providers.alibabacloud.loadbalancer.nlbspec import GroupSpec, ListenerWant

__all__ = [
    "NlbOwner",
    "cleanup_groups",
    "delete_listeners",
    "sync_groups",
    "sync_listeners",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NlbOwner:
    """Whose names these are: ``k8s.<port>.<protocol>.<service>.<namespace>.<cluster>``."""

    service: str
    namespace: str
    cluster_id: str

    def owns(self, name: str) -> bool:
        """``LoadNLBSGNamedKey`` / ``LoadNLBListenerNamedKey`` + ``IsManagedByService``."""
        parts = name.split(".")
        return (
            len(parts) == 6
            and parts[0] == "k8s"
            and (parts[3], parts[4], parts[5]) == (self.service, self.namespace, self.cluster_id)
        )


def _same(want: Any, have: Any) -> bool:
    if isinstance(want, str) and isinstance(have, str):
        return want.lower() == have.lower()
    if isinstance(want, bool):
        return want == (str(have).lower() == "true" if not isinstance(have, bool) else have)
    if isinstance(want, int):
        try:
            return want == int(have or 0)
        except (TypeError, ValueError):
            return False
    if isinstance(want, list):
        return [str(w) for w in want] == [str(h) for h in have or []]
    return bool(want == have)


def _differs(want: Mapping[str, Any], have: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in want.items() if not _same(v, have.get(k))}


# server groups
def _group_params(group: GroupSpec, vpc_id: str, tags: Mapping[str, str]) -> dict[str, Any]:
    """``CreateNLBServerGroupAsync``."""
    params: dict[str, Any] = {
        "ServerGroupName": group.name,
        "VpcId": vpc_id,
        "Protocol": group.protocol,
        "AnyPortEnabled": False,
        "Tag": [{"Key": k, "Value": v} for k, v in tags.items()],
        **group.attributes,
    }
    if group.type:
        params["ServerGroupType"] = group.type
    if group.health is not None:
        params["HealthCheckConfig"] = group.health
    return params


def _servers_diff(
    want: Sequence[Server], have: Sequence[Server], owner: NlbOwner, ignore_weight: bool
) -> tuple[list[Server], list[Server], list[Server]]:
    """``diff``: servers to add, remove (this Service's only) and set."""
    wanted = {s.key: s for s in want}
    present = {s.key: s for s in have}
    add = [s for k, s in wanted.items() if k not in present]
    remove = [s for k, s in present.items() if k not in wanted and owner.owns(s.description)]
    update = [
        s
        for k, s in wanted.items()
        if k in present
        and (
            s.port != present[k].port
            or s.description != present[k].description
            or (not ignore_weight and s.weight != present[k].weight)
        )
    ]
    return add, remove, update


def _sync_servers(
    api: NlbApi,
    group_id: str,
    want: GroupSpec,
    servers: Sequence[Server],
    have: ServerGroup,
    owner: NlbOwner,
) -> None:
    add, remove, update = _servers_diff(servers, have.servers, owner, want.ignore_weight)
    if add:
        api.add_servers(group_id, add)
    if remove:
        api.remove_servers(group_id, remove)
    if update:
        api.update_servers(group_id, update)


def _update_group(api: NlbApi, want: GroupSpec, have: ServerGroup) -> None:
    """``UpdateServerGroup``: the attributes and health check the Service sets."""
    changed = _differs(want.attributes, have.fields)
    changed.pop("ResourceGroupId", None)  # not a parameter of UpdateServerGroupAttribute
    health = _differs(want.health or {}, have.health)
    if not changed and not health:
        return
    params: dict[str, Any] = {"ServerGroupId": have.id, "ServerGroupName": want.name, **changed}
    if health:
        params["HealthCheckConfig"] = {**(want.health or {})}
    api.update_server_group(params)


def sync_groups(
    api: NlbApi,
    remote: Sequence[ServerGroup],
    wants: Sequence[tuple[GroupSpec, list[Server]]],
    vpc_id: str,
    tags: Mapping[str, str],
    owner: NlbOwner,
) -> dict[str, str]:
    """Create or set each wanted group and its servers; ``{group name: group ID}``."""
    by_name = {g.name: g for g in remote}
    ids: dict[str, str] = {}
    for want, servers in wants:
        if want.name in ids:
            continue
        have = by_name.get(want.name)
        if have is not None and want.type and want.type != have.type:
            log.info("alibabacloud: server group %s changes type, made anew", have.id)
            have = None
        if have is None:
            group_id = api.create_server_group(_group_params(want, vpc_id, tags))
            if servers:
                api.add_servers(group_id, servers)
        else:
            group_id = have.id
            _update_group(api, want, have)
            _sync_servers(api, group_id, want, servers, have, owner)
        ids[want.name] = group_id
    return ids


def cleanup_groups(
    api: NlbApi,
    remote: Iterable[ServerGroup],
    keep: Iterable[str],
    owner: NlbOwner,
    *,
    preserve: bool = False,
    tags: Mapping[str, str] | None = None,
) -> None:
    """``cleanup``: a group no port wants is deleted when it is this Service's; another
    owner's only loses this Service's servers. ``preserve`` (a preserved balancer's Service
    deleted): the groups keep everything but the Service's tags."""
    kept = set(keep)
    for group in remote:
        if group.id in kept:
            continue
        if preserve:
            gone = [k for k, v in (tags or {}).items() if group.tags.get(k) == v]
            if gone:
                api.untag(group.id, gone, "servergroup")
        elif owner.owns(group.name) and all(owner.owns(s.description) for s in group.servers):
            api.delete_server_group(group.id)
        else:
            mine = [s for s in group.servers if owner.owns(s.description)]
            if mine:
                api.remove_servers(group.id, mine)


# listeners
def _listener_params(want: ListenerWant, group_id: str) -> dict[str, Any]:
    return {
        "ListenerDescription": want.description,
        "ServerGroupId": group_id,
        **want.attributes,
    }


def delete_listeners(
    api: NlbApi,
    remote: Sequence[NlbListener],
    wants: Sequence[ListenerWant],
    owner: NlbOwner | None,
) -> list[NlbListener]:
    """Delete the listeners no port wants (``owner``: a reused balancer, only its own);
    the remaining ones."""
    wanted = {(w.port, w.protocol) for w in wants}
    kept = []
    for listener in remote:
        if (listener.port, listener.protocol) in wanted:
            kept.append(listener)
        elif owner is not None and not owner.owns(listener.description):
            log.debug("alibabacloud: listener %s is not the Service's, kept", listener.id)
        else:
            api.delete_listener(listener.id)
    return kept


def sync_listeners(
    api: NlbApi,
    lb_id: str,
    remote: Sequence[NlbListener],
    wants: Sequence[ListenerWant],
    group_ids: Mapping[str, str],
) -> None:
    """Create or set each wanted listener (``remote``: what :func:`delete_listeners`
    kept); a stopped one is started."""
    by_key = {(r.port, r.protocol): r for r in remote}
    for want in wants:
        group_id = group_ids[want.group.name]
        params = _listener_params(want, group_id)
        have = by_key.get((want.port, want.protocol))
        if have is None:
            api.create_listener(
                {
                    "LoadBalancerId": lb_id,
                    "ListenerProtocol": want.protocol,
                    "ListenerPort": want.port,
                    **params,
                }
            )
            continue
        if have.status == "Stopped":
            api.start_listener(have.id)
        current = {
            **have.fields,
            "ListenerDescription": have.description,
            "ServerGroupId": have.server_group_id,
        }
        changed = _differs(params, current)
        if changed:
            api.update_listener({"ListenerId": have.id, **params})
