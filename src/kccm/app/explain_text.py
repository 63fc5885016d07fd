"""``kccm explain`` text output: the explain endpoint's JSON answer in a few lines for people."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["render"]


def _ago(now: float, at: float | None) -> str:
    if at is None:
        return "never"
    delta = now - at
    return f"{delta:.0f}s ago" if delta >= 0 else f"in {-delta:.0f}s"


_SHOWN_AS_NODES = frozenset({"eligible_nodes", "excluded", "excluded_count"})
"""A service sync's node-set detail: the ``nodes:`` line shows it."""


def _value(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} ({v})" for k, v in value.items()) or "none"
    return str(value)


def _sync(now: float, record: Mapping[str, Any]) -> str:
    head = f"  last sync ({record.get('controller', '?')}): "
    when = _ago(now, record.get("at"))
    if record.get("ok"):
        return head + f"ok {when}"
    line = head + f"FAILED {when}, attempt {record.get('attempts', 0)}"
    line += f": {record.get('reason') or 'error'}: {record.get('message', '')}"
    retry = record.get("next_retry_at")
    if retry is not None:
        line += f"; next retry {_ago(now, retry)}"
    return line


def _nodes(nodes: Mapping[str, Any] | None) -> list[str]:
    if not nodes:
        return []
    line = f"  nodes: {nodes.get('eligible', 0)} eligible"
    if nodes.get("selector") and nodes.get("eligible_names"):  # the chosen set, by name
        line += " (" + ", ".join(nodes["eligible_names"]) + ")"
    excluded = nodes.get("excluded") or {}
    if excluded:
        line += "; excluded: " + ", ".join(f"{n} ({why})" for n, why in excluded.items())
    lines = [line]
    if nodes.get("selector"):
        lines.insert(0, f"  target-node selector: {nodes['selector']}")
    if nodes.get("uninitialised"):
        lines.append("  not initialised yet: " + ", ".join(nodes["uninitialised"]))
    return lines


def _targets(listener: Mapping[str, Any]) -> str:
    parts = []
    for t in listener.get("targets") or ():
        who = t.get("node") or t.get("instance") or "?"
        detail = f" ({t['detail']})" if t.get("detail") else ""
        parts.append(f"{who} {t.get('address', '')}:{t.get('port', '')} {t.get('health')}{detail}")
    return ", ".join(parts) or "no targets"


def _balancer(balancer: Mapping[str, Any] | None) -> list[str]:
    if balancer is None:
        return []
    view = balancer.get("view")
    if not view:
        return [f"  balancer: {balancer.get('note', 'unknown')}"]
    lines = [f"  balancer {view.get('name', '')}: {view.get('state', '')}"]
    for listener in view.get("listeners") or ():
        port = f"{listener.get('port')}/{listener.get('protocol')}"
        lines.append(f"    {port} -> {_targets(listener)}")
    return lines


def _budget(groups: Sequence[Mapping[str, Any]]) -> list[str]:
    if not groups:
        return ["  call budget: no cloud calls yet"]
    parts = []
    for g in groups:
        part = f"{g['group']} {g['recent_rate']}/s"
        if g.get("budget_qps"):
            part += f" (budget {g['budget_qps']}/s)"
        if g.get("throttled_for"):
            part += f" THROTTLED for {g['throttled_for']}s"
        parts.append(part)
    return ["  call budget (last 60s): " + "; ".join(parts)]


def _owners(owners: Mapping[str, Any] | None) -> list[str]:
    if not owners:
        return []
    if "error" in owners:
        return [f"  class owner: unknown ({owners['error']})"]
    if owners.get("serving"):
        who = ", ".join(f"Lease {lease} (leader {h})" for lease, h in owners["serving"].items())
        return [f"  class {owners['class']!r} is served by the kccm of {who}"]
    return [f"  {owners['none']}"]


def _drain(drain: Mapping[str, Any] | None) -> list[str]:
    if not drain:
        return []
    lines = [f"  leaving Nodes: {drain.get('note')}"]
    draining = drain.get("draining") or {}
    lines += [f"  draining: {node} until {until}" for node, until in draining.items()]
    return lines


def _head(answer: Mapping[str, Any]) -> str:
    kind = "Service" if answer.get("kind") == "service" else "Node"
    leader = (answer.get("leader") or {}).get("identity") or "?"
    return f"{kind} {answer.get('key')}: leader {leader}, provider {answer.get('provider')}"


def render(answer: Mapping[str, Any]) -> str:
    """A few lines: who handles it or why nobody does, the last syncs, the node set, the
    balancer, the call budget."""
    lines = [_head(answer)]
    if "not_leader" in answer:
        return "\n".join([*lines, "  " + str(answer["not_leader"])])
    now = float(answer.get("now") or 0)
    if answer.get("kind") == "service":
        state = "handled here" if answer.get("handled") else "NOT handled by this kccm"
        lines.append(f"  {state}: {answer.get('why')}")
        lines += [f"  note: {note}" for note in answer.get("notes") or ()]
        lines += _owners(answer.get("class_owners"))
        ingress = answer.get("ingress") or []
        shown = ", ".join(i.get("ip") or i.get("hostname") or "?" for i in ingress)
        lines.append(f"  ingress: {shown or '<pending>'}")
        if answer.get("address_retention"):
            lines.append(f"  address on release: {answer['address_retention'].get('note')}")
        lines += _drain(answer.get("drain"))
        if answer.get("share_group"):
            shared = answer["share_group"]
            lines.append(f"  share group: {shared.get('note')}")
            lines += [f"    member: {member}" for member in shared.get("members") or ()]
    else:
        state = "initialised" if answer.get("initialised") else "NOT initialised"
        lines.append(f"  {state}: {answer.get('why')}")
        lines.append(f"  providerID: {answer.get('provider_id') or '<none>'}")
    syncs = answer.get("syncs") or []
    lines += [_sync(now, r) for r in syncs] or ["  last sync: none recorded yet"]
    for record in syncs:
        detail = record.get("detail") or {}
        lines += [f"    {k}: {_value(v)}" for k, v in detail.items() if k not in _SHOWN_AS_NODES]
    lines += _nodes(answer.get("nodes"))
    lines += _balancer(answer.get("balancer"))
    lines += _budget(answer.get("call_budget") or [])
    return "\n".join(lines)
