"""What the node controllers record of each Node (``kccm explain node``).

Three records per Node in the daemon's :class:`~kccm.controllers.syncstate.SyncStates`, one
per controller name:

- ``cloud-node-controller`` (:class:`NodeInitRecorder`): initialised or not and why, the
  providerID, the last sync's error, attempts and next retry;
- ``cloud-node-controller/addresses`` (:data:`ADDRESS_REFRESH`): the last periodic address
  refresh (``last_address_refresh``, epoch seconds) and its ``result``;
- ``cloud-node-lifecycle-controller``: the last existence and shutdown checks of a NotReady
  Node and what followed (``action``).

A Node's records go when the Node is deleted (:func:`forget_on_delete`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kccm.api.wellknown import TAINT_UNINITIALIZED
from kccm.cloudprovider.nodes import node_provider_id
from kccm.cloudprovider.reasons import Reason
from kccm.controllers.nodeutil import has_cloud_taint, node_name
from kccm.controllers.syncstate import Kind, SyncStates
from kccm.runtime.informers import EventHandler, Informer

__all__ = [
    "ADDRESS_REFRESH",
    "NODE",
    "NodeInitRecorder",
    "forget_on_delete",
    "record_address_refresh",
]

NODE: Kind = "node"
ADDRESS_REFRESH = "cloud-node-controller/addresses"

Node = Mapping[str, Any]


def forget_on_delete(states: SyncStates, informer: Informer, *controllers: str) -> None:
    """Drop the Node's records of ``controllers`` when the Node is deleted."""

    def deleted(node: Node) -> None:
        for controller in controllers:
            states.forget(NODE, node_name(node), controller)

    informer.add_event_handler(EventHandler(on_delete=deleted))


class NodeInitRecorder:
    """The cloud-node controller's records: the sync notes what it did (:meth:`initialized`,
    :meth:`not_initialized`); :meth:`outcome` (the queue's ``on_outcome``) records it."""

    def __init__(self, states: SyncStates, controller: str, informer: Informer) -> None:
        self.states = states
        self.controller = controller
        self._informer = informer
        self._notes: dict[str, dict[str, Any]] = {}
        forget_on_delete(states, informer, controller, ADDRESS_REFRESH)

    def initialized(self, name: str, provider_id: str) -> None:
        self._notes[name] = {"initialized": True, "provider_id": provider_id}

    def not_initialized(self, name: str, why: str) -> None:
        self._notes[name] = {"initialized": False, "why": why}

    def outcome(self, key: str, error: Exception | None, retry_in: float | None) -> None:
        node = self._informer.get(key)
        note = self._notes.pop(key, None)
        if node is None and error is None:
            return
        self.states.record(
            NODE,
            key,
            self.controller,
            error=error,
            retry_in=retry_in,
            detail=note or self._detail(node, error),
        )

    @staticmethod
    def _detail(node: Node | None, error: Exception | None) -> dict[str, Any]:
        tainted = node is not None and has_cloud_taint(node)
        detail: dict[str, Any] = {
            "initialized": not tainted,
            "provider_id": node_provider_id(node or {}),
        }
        if error is not None:
            detail["initialized"] = False if tainted else detail["initialized"]
            detail["why"] = f"the last sync failed: {error}"
        elif tainted:
            detail["why"] = f"taint {TAINT_UNINITIALIZED} still set"
        return detail


def record_address_refresh(
    states: SyncStates, node: Node, result: str, error: BaseException | None = None
) -> None:
    """A periodic address refresh of ``node`` ended with ``result`` (or ``error``); a result
    ``invalid: ...`` (the provided-node-ip annotation) or ``failed: ...`` is a failure."""
    name = node_name(node)
    at = states.clock.now().timestamp()
    reason = None
    if error is None and result.startswith(("invalid:", "failed:")):
        reason = Reason.INVALID if result.startswith("invalid:") else Reason.OTHER
    states.record(
        NODE,
        name,
        ADDRESS_REFRESH,
        error=error,
        reason=reason,
        message=result if error is None else None,
        detail={
            "last_address_refresh": at,
            "result": result if error is None else f"error: {error}",
            "provider_id": node_provider_id(node or {}),
        },
    )
