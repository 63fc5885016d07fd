"""vServer groups and listeners of one classic load balancer: read, compare, write only what
differs (upstream ``pkg/controller/service/clbv1``: ``vgroups.go`` ``diff``,
``isBackendManagedByMyService``, ``isVGroupManagedByMyService``; ``listeners.go``
``buildActionsForListeners``, ``isNeedUpdate``, ``isPortManagedByMyService``;
``model_applier.go`` ``cleanup``; v2.14.0).

What kccm owns on a balancer is what carries this Service's keys: a vServer group whose name,
a backend whose description, a listener whose description is ``k8s/<port>/<service>/
<namespace>/<cluster ID>``. Anything else is the user's and is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kccm.providers.alibabacloud.loadbalancer.slbapi import Backend, SlbApi, VGroup
from kccm.providers.alibabacloud.loadbalancer.spec import ListenerSpec

__all__ = ["Owner", "read_vgroups", "sync_listeners", "sync_vgroups"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Owner:
    """This Service's identity in names and descriptions."""

    name: str
    namespace: str
    cluster_id: str

    def owns(self, key: str) -> bool:
        """``k8s/<port>/<name>/<namespace>/<cluster ID>`` of this Service."""
        parts = key.split("/")
        return (
            len(parts) == 5
            and parts[0] == "k8s"
            and parts[2:]
            == [
                self.name,
                self.namespace,
                self.cluster_id,
            ]
        )


def read_vgroups(api: SlbApi, lb_id: str, owner: Owner) -> list[VGroup]:
    """The balancer's vServer groups; the backends of this Service's ones."""
    groups = api.vgroups(lb_id)
    for group in groups:
        if owner.owns(group.name):
            group.backends = api.vgroup_backends(group.id)
    return groups


def _sync_backends(api: SlbApi, group: VGroup, wanted: Sequence[Backend], owner: Owner) -> None:
    """``diff``: remove this Service's members no longer wanted, add the new ones, set those
    whose port, weight or description changed."""
    have = {b.key: b for b in group.backends}
    want = {b.key: b for b in wanted}
    stale = [b for k, b in have.items() if k not in want and owner.owns(b.description)]
    new = [b for k, b in want.items() if k not in have]
    changed = [
        b
        for k, b in want.items()
        if k in have and owner.owns(have[k].description) and not have[k].same(b)
    ]
    if stale:
        api.remove_backends(group.id, stale)
    if new:
        api.add_backends(group.id, new)
    if changed:
        api.update_backends(group.id, changed)


def sync_vgroups(
    api: SlbApi,
    lb_id: str,
    remote: Sequence[VGroup],
    wanted: Mapping[str, Sequence[Backend]],
    owner: Owner,
) -> dict[str, str]:
    """Create or update one group per wanted name; ``{name: group ID}``."""
    by_name = {g.name: g for g in remote}
    ids: dict[str, str] = {}
    for name, backends in wanted.items():
        group = by_name.get(name)
        if group is None:
            group = VGroup(api.create_vgroup(lb_id, name), name)
            log.info("alibabacloud: %s: created vServer group %s (%s)", lb_id, name, group.id)
        _sync_backends(api, group, backends, owner)
        ids[name] = group.id
    return ids


def delete_unused_vgroups(
    api: SlbApi, remote: Sequence[VGroup], keep: Mapping[str, str], owner: Owner
) -> None:
    """``cleanup``: delete this Service's groups no listener of it uses any more."""
    for group in remote:
        if owner.owns(group.name) and group.name not in keep:
            api.delete_vgroup(group.id)


def _differs(wanted: Mapping[str, str], have: Mapping[str, str]) -> dict[str, str]:
    """The parameters whose value differs from the listener's (``isNeedUpdate`` looks only at
    what the local model sets)."""
    return {k: v for k, v in wanted.items() if have.get(k, "") != v}


def sync_listeners(
    api: SlbApi,
    lb_id: str,
    wanted: Sequence[ListenerSpec],
    vgroup_ids: Mapping[str, str],
    owner: Owner,
) -> None:
    """``buildActionsForListeners``: delete this Service's listeners no port wants (first:
    a port may change protocol), create the missing ones (and start them), set the changed
    ones (and start a stopped one)."""
    remote = api.listeners(lb_id)
    local = {(w.port, w.protocol): w for w in wanted}
    for item in remote:
        key = (int(item.get("ListenerPort") or 0), item.get("ListenerProtocol", ""))
        if key not in local and owner.owns(item.get("Description", "")):
            api.delete_listener(lb_id, key[0], key[1])
    have = {
        (int(item.get("ListenerPort") or 0), item.get("ListenerProtocol", "")): item
        for item in remote
    }
    for key, listener in local.items():
        params = {**listener.params, "VServerGroupId": vgroup_ids[listener.vgroup_name]}
        found = have.get(key)
        if found is None:
            api.create_listener(lb_id, listener.protocol, {**listener.defaults, **params})
            api.start_listener(lb_id, listener.port, listener.protocol)
            continue
        if found.get("Status") == "stopped":
            api.start_listener(lb_id, listener.port, listener.protocol)
        changed = _differs(params, found)
        if changed:
            changed["ListenerPort"] = str(listener.port)
            api.set_listener(lb_id, listener.protocol, changed)
