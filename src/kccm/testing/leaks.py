"""What a test must not leave on a shared control plane, found and removed.

The session's control plane runs no namespace controller and no garbage collector, so what a
test leaves stays for every later test, and every later daemon watches all namespaces: a
``type: LoadBalancer`` Service gets a balancer ensured by the next daemon's provider, a Service
still holding ``service.kubernetes.io/load-balancer-cleanup`` gets that provider's delete, and a
Node gets initialised, refreshed or deleted by it. The pytest plugin
(:mod:`kccm.testing.pytest_plugin`) takes :func:`leftovers` before a test (and before a module's
fixtures) and after its teardown; what is new is a leak: the test (or module) fails with the
list, and :func:`remove` takes the objects away so the next test starts clean.
"""

from __future__ import annotations

import contextlib
import urllib.error
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["AdminApi", "Leftover", "describe", "leftovers", "remove"]


class AdminApi(Protocol):
    """What is needed of a control plane (:class:`~kccm.testing.controlplane.ControlPlane`)."""

    def admin_request(
        self, method: str, path: str, body: object = None, content_type: str = ...
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, order=True)
class Leftover:
    kind: str  # "Service" or "Node"
    namespace: str
    name: str
    uid: str
    why: str = field(compare=False)  # a Service that gains a finalizer is the same Service

    @property
    def path(self) -> str:
        if self.kind == "Node":
            return f"/api/v1/nodes/{self.name}"
        return f"/api/v1/namespaces/{self.namespace}/services/{self.name}"


def _service_reason(service: dict[str, Any]) -> str | None:
    finalizers = service["metadata"].get("finalizers") or []
    if finalizers:
        return f"finalizers {finalizers}"
    if service.get("spec", {}).get("type") == "LoadBalancer":
        return "type LoadBalancer"
    return None


def leftovers(api: AdminApi) -> set[Leftover]:
    """Every object a later daemon would act on: Services of type LoadBalancer or holding a
    finalizer (in any namespace), and Nodes."""
    found: set[Leftover] = set()
    for service in api.admin_request("GET", "/api/v1/services")["items"]:
        why = _service_reason(service)
        if why is not None:
            meta = service["metadata"]
            found.add(Leftover("Service", meta["namespace"], meta["name"], meta["uid"], why))
    for node in api.admin_request("GET", "/api/v1/nodes")["items"]:
        meta = node["metadata"]
        found.add(Leftover("Node", "", meta["name"], meta["uid"], "a Node"))
    return found


def describe(found: set[Leftover]) -> str:
    return "; ".join(
        f"{o.kind} {o.namespace + '/' if o.namespace else ''}{o.name} ({o.why})"
        for o in sorted(found)
    )


def remove(api: AdminApi, found: set[Leftover]) -> None:
    """Drop each object's finalizers and delete it (gone already is fine)."""
    for leftover in sorted(found):
        with contextlib.suppress(urllib.error.HTTPError):
            api.admin_request(
                "PATCH",
                leftover.path,
                {"metadata": {"finalizers": None, "uid": leftover.uid}},
                "application/merge-patch+json",
            )
        with contextlib.suppress(urllib.error.HTTPError):
            api.admin_request("DELETE", leftover.path, {"preconditions": {"uid": leftover.uid}})
