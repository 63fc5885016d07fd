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
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kccm.cloudprovider import InvalidServiceConfig
from kccm.providers.alibabacloud.loadbalancer.slbapi import Backend, SlbApi, VGroup
from kccm.providers.alibabacloud.loadbalancer.spec import ListenerSpec

__all__ = ["GroupWant", "Owner", "read_vgroups", "sync_listeners", "sync_vgroups"]

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


def read_vgroups(
    api: SlbApi, lb_id: str, owner: Owner, reused: Collection[str] = ()
) -> list[VGroup]:
    """The balancer's vServer groups; the members of this Service's ones and of the user's
    groups it reuses (``DescribeVServerGroups`` in upstream's ``vgroups.go``)."""
    groups = api.vgroups(lb_id)
    for group in groups:
        if owner.owns(group.name) or group.id in reused:
            group.backends = api.vgroup_backends(group.id)
    return groups


@dataclass
class GroupWant:
    """One port's group: its name (``k8s/<nodePort>/...``), the user's group to use instead
    (``vgroup-port`` on a reused balancer), its members and whether weights are left as
    they are (``ignore-weight-update``)."""

    name: str
    reused_id: str
    backends: Sequence[Backend]
    ignore_weight: bool = False


def _sync_backends(api: SlbApi, group: VGroup, want: GroupWant, owner: Owner) -> None:
    """``diff``: remove this Service's members no longer wanted, add the new ones, set those
    whose port, weight or description changed."""
    have = {b.key: b for b in group.backends}
    wanted = {b.key: b for b in want.backends}
    stale = [b for k, b in have.items() if k not in wanted and owner.owns(b.description)]
    new = [b for k, b in wanted.items() if k not in have]
    changed = [
        b
        for k, b in wanted.items()
        if k in have
        and owner.owns(have[k].description)
        and not have[k].same(b, weight=not want.ignore_weight)
    ]
    if stale:
        api.remove_backends(group.id, stale)
    if new:
        api.add_backends(group.id, new)
    if changed:
        api.update_backends(group.id, changed)


def _reused(remote: Sequence[VGroup], want: GroupWant, lb_id: str) -> VGroup:
    """``buildVGroupForServicePort``: the user's group must be on the balancer and not one
    a Service's balancer made."""
    found = [g for g in remote if g.id == want.reused_id]
    key = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-vgroup-port"
    if not found:
        raise InvalidServiceConfig(key, f"can not find vgroupId {want.reused_id} in lb {lb_id}")
    if found[0].name.startswith("k8s/") and len(found[0].name.split("/")) == 5:
        raise InvalidServiceConfig(
            key, f"cannot reuse a ccm created vgroup {want.reused_id} for slb {lb_id}"
        )
    return found[0]


def sync_vgroups(
    api: SlbApi, lb_id: str, remote: Sequence[VGroup], wants: Sequence[GroupWant], owner: Owner
) -> dict[str, str]:
    """Create or update one group per port; ``{name: group ID}``."""
    by_name = {g.name: g for g in remote}
    ids: dict[str, str] = {}
    for want in wants:
        group = _reused(remote, want, lb_id) if want.reused_id else by_name.get(want.name)
        if group is None:
            group = VGroup(api.create_vgroup(lb_id, want.name), want.name)
            log.info("alibabacloud: %s: created vServer group %s (%s)", lb_id, want.name, group.id)
        _sync_backends(api, group, want, owner)
        ids[want.name] = group.id
    return ids


def delete_unused_vgroups(
    api: SlbApi, remote: Sequence[VGroup], keep: Mapping[str, str], owner: Owner
) -> None:
    """``cleanup``: delete this Service's groups no port of it uses any more; from the user's
    groups it used, remove its members."""
    used = set(keep.values())
    for group in remote:
        if group.id in used:
            continue
        if owner.owns(group.name):
            api.delete_vgroup(group.id)
            continue
        mine = [b for b in group.backends if owner.owns(b.description)]
        if mine:
            api.remove_backends(group.id, mine)


def _differs(wanted: Mapping[str, str], have: Mapping[str, str]) -> dict[str, str]:
    """The parameters whose value differs from the listener's (``isNeedUpdate`` looks only at
    what the local model sets)."""
    return {k: v for k, v in wanted.items() if have.get(k, "") != v}


def _key(item: Mapping[str, str]) -> tuple[int, str]:
    return (int(item.get("ListenerPort") or 0), item.get("ListenerProtocol", ""))


def _forwards(item: Mapping[str, str]) -> bool:
    """An HTTP listener that redirects (``ListenerForward: on``); a listener without the
    field does not."""
    return item.get("ListenerForward", "off") == "on"


def _forward_changed(listener: ListenerSpec, item: Mapping[str, str]) -> bool:
    """``http.Update``: a forwarding rule can not be set, only re-created."""
    if listener.protocol != "http":
        return False
    if listener.forward:
        return not _forwards(item) or item.get("ForwardPort") != str(listener.forward)
    return _forwards(item)


def _sync_domains(api: SlbApi, lb_id: str, port: int, wanted: Mapping[str, str]) -> None:
    """``updateDomainExtensions``: add, re-certify and delete an HTTPS listener's domain
    extensions (read only when the annotation names some, as upstream's ``Describe``).
    Upstream sets a changed certificate with the old one and no extension ID (a no-op);
    kccm sets the new one on the extension."""
    have = api.domain_extensions(lb_id, port) if wanted else {}
    for domain, cert in wanted.items():
        if domain not in have:
            api.create_domain_extension(lb_id, port, domain, cert)
        elif have[domain][1] != cert:
            api.set_domain_extension(have[domain][0], cert)
    for domain, (extension_id, _) in have.items():
        if domain not in wanted and extension_id:
            api.delete_domain_extension(extension_id)


def sync_listeners(
    api: SlbApi,
    lb_id: str,
    wanted: Sequence[ListenerSpec],
    vgroup_ids: Mapping[str, str],
    owner: Owner,
) -> None:
    """``buildActionsForListeners`` and ``buildActionsToUpdate``: delete this Service's
    listeners no port wants (first: a port may change protocol; those that forward before the
    ones they forward to), re-create an HTTP listener whose forwarding changed, create the
    missing ones (and start them; forwarding ones last, after their target), set the changed
    ones (and start a stopped one; a forwarding one is left as it is)."""
    remote = api.listeners(lb_id)
    local = {(w.port, w.protocol): w for w in wanted}
    have = {_key(item): item for item in remote}
    stale = [i for i in remote if _key(i) not in local and owner.owns(i.get("Description", ""))]
    for item in sorted(stale, key=lambda i: not _forwards(i)):
        api.delete_listener(lb_id, *_key(item))
    for key, listener in local.items():
        if key in have and _forward_changed(listener, have[key]):
            api.delete_listener(lb_id, *key)
            del have[key]
    for key, listener in sorted(local.items(), key=lambda kv: kv[1].forward != 0):
        params = {**listener.params, "VServerGroupId": vgroup_ids[listener.vgroup_name]}
        found = have.get(key)
        if found is None:
            extra = {"ListenerForward": "on", "ForwardPort": str(listener.forward)}
            sent = {**listener.defaults, **params, **(extra if listener.forward else {})}
            api.create_listener(lb_id, listener.protocol, sent)
            for domain, cert in (listener.domains or {}).items():
                api.create_domain_extension(lb_id, listener.port, domain, cert)
            api.start_listener(lb_id, listener.port, listener.protocol)
            continue
        if found.get("Status") == "stopped":
            api.start_listener(lb_id, listener.port, listener.protocol)
        if listener.domains is not None:
            _sync_domains(api, lb_id, listener.port, listener.domains)
        changed = {} if _forwards(found) else _differs(params, found)
        if changed:
            changed["ListenerPort"] = str(listener.port)
            api.set_listener(lb_id, listener.protocol, changed)
