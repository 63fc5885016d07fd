"""Octavia as OCCM calls it: the v2 requests, waiting for ``ACTIVE``, 409 "immutable" and
version discovery (upstream ``pkg/util/openstack/loadbalancer.go`` v1.36.0).

- :meth:`Octavia.wait_active` is ``WaitActiveAndGetLoadBalancer``: a GET, then sleeps of 1 s
  growing by 1.2 between polls, 23 polls (``OCCM_WAIT_LB_ACTIVE_STEPS`` overrides the count),
  a failed GET logged and retried, ``ERROR`` fatal. :meth:`Octavia.wait_deleted` is
  ``waitLoadbalancerDeleted`` (24 polls, done at the first 404).
- Every write is followed by ``wait_active`` as upstream's ``Create*``/``Update*``/
  ``Delete*`` helpers do, so the next write never meets a ``PENDING_UPDATE`` balancer.
- A write answered ``409 Conflict`` (the balancer is immutable: ``PENDING_*``, someone else
  is changing it) waits for ``ACTIVE`` and is sent again, up to :data:`CONFLICT_RETRIES`
  times. Upstream fails the sync instead and lets the service controller retry it later;
  waiting is the same outcome without a failed sync and its Warning event. A tag list
  (:meth:`Octavia.update_tags`) is made again from the balancer read then, as the change
  that held the balancer may have been to its tags (Octavia replaces the list whole).
- :meth:`Octavia.supports` is ``IsOctaviaFeatureSupported``: the last entry of the version
  discovery document (``GET <endpoint>/``) is the current API version, read once.

Sleeps go through the kccm :class:`~kccm.util.clock.Clock`: provider methods run in the
framework's thread pool, so the wait blocks its thread; a clock with a ``sleep_blocking``
method (the tests' step clock) is used for that, any other clock means ``time.sleep``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kccm.cloudprovider import CloudProviderError, StillProvisioning, Throttled
from kccm.providers.openstack.api import (
    OpenStackAPI,
    OpenStackConflict,
    OpenStackError,
    OpenStackNotFound,
)
from kccm.util.clock import Clock

__all__ = [
    "ACTIVE",
    "CONFLICT_RETRIES",
    "ERROR",
    "FEATURE_MIN_VERSION",
    "LB",
    "Octavia",
    "OctaviaStillPending",
    "OctaviaWaitError",
    "backoff_schedule",
    "blocking_sleeper",
]

log = logging.getLogger(__name__)

ACTIVE = "ACTIVE"
ERROR = "ERROR"
LB = dict[str, Any]
SERVICE = "load-balancer"
PREFIX = "/v2/lbaas"
INIT_DELAY = 1.0
FACTOR = 1.2
ACTIVE_STEPS = 23
DELETE_STEPS = 24
CONFLICT_RETRIES = 10
PENDING_RETRY_AFTER = 10.0
"""Seconds before a sync whose balancer was still ``PENDING_*`` at the wait's end retries."""

FEATURE_MIN_VERSION: Mapping[str, tuple[int, int]] = {
    "tags": (2, 5),
    "vip_acl": (2, 12),
    "flavors": (2, 6),
    "timeout": (2, 1),
    "availability_zones": (2, 14),
    "http_monitors_on_udp": (2, 16),
}
"""Upstream's ``OctaviaFeature*`` constants and the versions ``IsOctaviaFeatureSupported``
requires; every feature but ``tags`` is off for the ``ovn`` provider."""


class OctaviaWaitError(CloudProviderError):
    """The balancer did not become ACTIVE (timeout or ERROR); ``lb`` is its last state."""

    def __init__(self, message: str, lb: LB | None = None) -> None:
        super().__init__(message)
        self.lb = lb


class OctaviaStillPending(OctaviaWaitError, StillProvisioning):
    """The wait for ACTIVE ran out with the balancer still ``PENDING_*``: Octavia is still
    working on it. The sync is retried in ``retry_after`` seconds (not backed off), and
    ``kccm explain`` reports "waiting on the cloud"."""

    def __init__(self, message: str, lb: LB | None = None) -> None:
        super().__init__(message, lb)
        self.retry_after = PENDING_RETRY_AFTER


def blocking_sleeper(clock: Clock) -> Callable[[float], None]:
    """How a thread-pool provider call sleeps on ``clock`` (see the module docstring)."""
    custom = getattr(clock, "sleep_blocking", None)
    return custom if callable(custom) else time.sleep


def backoff_schedule(steps: int) -> list[float]:
    """The sleeps between ``steps`` polls of ``wait.ExponentialBackoff`` (1 s, x1.2, no
    jitter): one fewer than the polls."""
    return [INIT_DELAY * FACTOR**i for i in range(max(steps - 1, 0))]


def _steps(env: str, default: int) -> int:
    """Upstream ``getTimeoutSteps``: the environment override when it is an integer >= 0."""
    value = os.environ.get(env, "")
    return int(value) if value.isdigit() else default


def _version(text: str) -> tuple[int, ...]:
    parts = text.lstrip("vV").split(".")
    return tuple(int(p) for p in parts if p.isdigit())


class Octavia:
    """The Octavia v2 API for one provider (``api`` carries auth, catalog and the ledger)."""

    def __init__(self, api: OpenStackAPI, clock: Clock, lb_provider: str = "amphora") -> None:
        self.api = api
        self.clock = clock
        self.lb_provider = lb_provider
        self._sleep = blocking_sleeper(clock)
        self._version: tuple[int, ...] | None = None
        self._version_lock = threading.Lock()
        """One discovery for the concurrent service workers of a start, not one each."""

    # -- requests ----------------------------------------------------------------------------

    def _get(self, path: str, key: str, operation: str) -> LB:
        body = self.api.request(SERVICE, "GET", PREFIX + path, operation=operation)
        return dict((body or {}).get(key) or {})

    def _list(self, path: str, key: str, params: Mapping[str, Any], op: str) -> list[LB]:
        return list(self.api.paged(SERVICE, PREFIX + path, key, params, operation=op))

    def _write(
        self,
        lb_id: str,
        method: str,
        path: str,
        body: Any,
        operation: str,
        *,
        wait: bool = True,
        params: Mapping[str, Any] | None = None,
        rebuild: Callable[[LB], Any] | None = None,
    ) -> Any:
        """A mutating request on balancer ``lb_id``: 409 -> wait for ACTIVE and send again
        (the body ``rebuild`` makes of the balancer then read, when given: ``None`` means
        nothing is left to send); afterwards wait for ACTIVE (upstream's helpers all do)."""
        result = None
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                result = self.api.request(
                    SERVICE, method, PREFIX + path, json=body, params=params, operation=operation
                )
                break
            except OpenStackConflict as err:
                if attempt == CONFLICT_RETRIES:
                    raise
                log.info(
                    "%s on load balancer %s: 409 (%s); waiting for ACTIVE", operation, lb_id, err
                )
                fresh = self.wait_active(lb_id)
                if rebuild is not None:
                    body = rebuild(fresh)
                    if body is None:
                        break
            except OpenStackNotFound:
                if method != "DELETE":
                    raise
                result = None  # already gone: upstream's Delete* helpers ignore 404
                break
        if wait:
            self.wait_active(lb_id)
        return result

    # -- version discovery -------------------------------------------------------------------

    def version(self) -> tuple[int, ...]:
        """Upstream ``getOctaviaVersion``: the last listed version (``(0, 0)`` on failure,
        not cached then, as upstream)."""
        with self._version_lock:
            return self._discover() if self._version is None else self._version

    def _discover(self) -> tuple[int, ...]:
        if self._version is None:
            try:
                body = self.api.request(
                    SERVICE, "GET", "/", operation="list_versions", ok=(200, 300)
                )
            except OpenStackError as err:
                log.warning("Failed to get current Octavia API version: %s", err)
                return (0, 0)
            versions = (body or {}).get("versions") or []
            if not versions:
                return (0, 0)
            self._version = _version(str(versions[-1].get("id", "")))
        return self._version

    def supports(self, feature: str) -> bool:
        """Upstream ``IsOctaviaFeatureSupported``."""
        if feature != "tags" and self.lb_provider == "ovn":
            return False
        return self.version() >= FEATURE_MIN_VERSION[feature]

    # -- waiting -----------------------------------------------------------------------------

    def wait_active(self, lb_id: str) -> LB:
        """Upstream ``WaitActiveAndGetLoadBalancer``."""
        steps = _steps("OCCM_WAIT_LB_ACTIVE_STEPS", ACTIVE_STEPS)
        schedule = iter(backoff_schedule(steps))
        lb: LB | None = None
        for _ in range(steps):
            try:
                lb = self.get_load_balancer(lb_id)
            except OpenStackNotFound as err:
                # kccm: gone is final (upstream polls a 404 to the end of the backoff, ~4.5 min,
                # e.g. a node-sync update waiting while the Service's delete removed the balancer)
                raise OctaviaWaitError(f"loadbalancer {lb_id} is gone: {err}", lb) from err
            except (OpenStackError, Throttled) as err:  # upstream: logged, polled again
                log.warning(
                    "Failed to fetch loadbalancer status from OpenStack (lbID %r): %s", lb_id, err
                )
            else:
                status = lb.get("provisioning_status")
                if status == ACTIVE:
                    return lb
                if status == ERROR:
                    raise OctaviaWaitError(f"loadbalancer {lb_id} has gone into ERROR state", lb)
            delay = next(schedule, None)
            if delay is None:
                break
            self._sleep(delay)
        message = f"timeout waiting for the loadbalancer {lb_id} {ACTIVE}"
        if lb is not None and str(lb.get("provisioning_status", "")).startswith("PENDING"):
            raise OctaviaStillPending(f"{message} (still {lb['provisioning_status']})", lb)
        raise OctaviaWaitError(message, lb)

    def wait_deleted(self, lb_id: str) -> None:
        """Upstream ``waitLoadbalancerDeleted``."""
        schedule = iter(backoff_schedule(DELETE_STEPS))
        for _ in range(DELETE_STEPS):
            try:
                self.get_load_balancer(lb_id)
            except OpenStackNotFound:
                return
            delay = next(schedule, None)
            if delay is None:
                break
            self._sleep(delay)
        raise OctaviaWaitError("loadbalancer failed to delete within the allotted time")

    # -- load balancers ----------------------------------------------------------------------

    def get_load_balancer(self, lb_id: str) -> LB:
        return self._get(f"/loadbalancers/{lb_id}", "loadbalancer", "get_loadbalancer")

    def status_tree(self, lb_id: str) -> LB:
        """``GET /loadbalancers/{id}/status``: the balancer's ``statuses.loadbalancer`` tree."""
        body = self.api.request(
            SERVICE, "GET", f"{PREFIX}/loadbalancers/{lb_id}/status", operation="get_lb_status"
        )
        return dict(((body or {}).get("statuses") or {}).get("loadbalancer") or {})

    def list_load_balancers(self, **params: Any) -> list[LB]:
        return self._list("/loadbalancers", "loadbalancers", params, "list_loadbalancers")

    def create_load_balancer(self, body: Mapping[str, Any]) -> LB:
        """One POST (fully populated when ``body`` has listeners); not waited for here."""
        result = self.api.request(
            SERVICE,
            "POST",
            PREFIX + "/loadbalancers",
            json={"loadbalancer": body},
            operation="create_loadbalancer",
        )
        return dict((result or {}).get("loadbalancer") or {})

    def update_load_balancer(self, lb_id: str, changes: Mapping[str, Any]) -> LB:
        """Upstream ``UpdateLoadBalancer``: PUT then wait for ACTIVE (returns the new state)."""
        self._write(
            lb_id,
            "PUT",
            f"/loadbalancers/{lb_id}",
            {"loadbalancer": changes},
            "update_loadbalancer",
            wait=False,
        )
        return self.wait_active(lb_id)

    def update_tags(self, lb: LB, edit: Callable[[list[str]], list[str] | None], **also: Any) -> LB:
        """Upstream ``UpdateLoadBalancerTags`` as a read-modify-write: ``edit`` makes the new
        list from ``lb``'s (``None``: no change, and no request unless ``also`` has changes
        sent with it). A ``PUT`` refused with 409 (someone else is changing the balancer,
        maybe its tags) is edited again from the balancer read once it is ``ACTIVE``, never
        sent again with the list read before. Returns the balancer as it then is."""
        lb_id = str(lb["id"])

        def body(current: LB) -> dict[str, Any] | None:
            tags = edit(list(current.get("tags") or ()))
            changes = dict(also) if tags is None else {**also, "tags": tags}
            return {"loadbalancer": changes} if changes else None

        first = body(lb)
        if first is None:
            return lb
        log.info("Updating load balancer %s: %s", lb_id, first["loadbalancer"])
        self._write(
            lb_id,
            "PUT",
            f"/loadbalancers/{lb_id}",
            first,
            "update_loadbalancer",
            wait=False,
            rebuild=body,
        )
        return self.wait_active(lb_id)

    def delete_load_balancer(self, lb_id: str, *, cascade: bool) -> None:
        """Upstream ``DeleteLoadbalancer``: DELETE (404 is fine), then wait until gone."""
        params = {"cascade": "true"} if cascade else None
        path = f"/loadbalancers/{lb_id}"
        self._write(lb_id, "DELETE", path, None, "delete_loadbalancer", wait=False, params=params)
        self.wait_deleted(lb_id)

    # -- listeners ---------------------------------------------------------------------------

    def listeners(self, lb_id: str) -> list[LB]:
        """Upstream ``GetListenersByLoadBalancerID``."""
        return self._list("/listeners", "listeners", {"loadbalancer_id": lb_id}, "list_listeners")

    def create_listener(self, lb_id: str, body: Mapping[str, Any]) -> LB:
        result = self._write(lb_id, "POST", "/listeners", {"listener": body}, "create_listener")
        return dict((result or {}).get("listener") or {})

    def update_listener(self, lb_id: str, listener_id: str, changes: Mapping[str, Any]) -> None:
        self._write(
            lb_id,
            "PUT",
            f"/listeners/{listener_id}",
            {"listener": changes},
            "update_listener",
        )

    def delete_listener(self, lb_id: str, listener_id: str) -> None:
        self._write(lb_id, "DELETE", f"/listeners/{listener_id}", None, "delete_listener")

    # -- pools and members -------------------------------------------------------------------

    def pools(self, lb_id: str) -> list[LB]:
        return self._list("/pools", "pools", {"loadbalancer_id": lb_id}, "list_pools")

    def pool_of_listener(self, lb_id: str, listener_id: str) -> LB | None:
        """Upstream ``GetPoolByListener``: the pool whose ``listeners`` name the listener."""
        found = [
            p
            for p in self.pools(lb_id)
            if any(ref.get("id") == listener_id for ref in p.get("listeners") or ())
        ]
        if len(found) > 1:
            raise CloudProviderError(f"multiple pools found for listener {listener_id}")
        return found[0] if found else None

    def create_pool(self, lb_id: str, body: Mapping[str, Any]) -> LB:
        result = self._write(lb_id, "POST", "/pools", {"pool": body}, "create_pool")
        return dict((result or {}).get("pool") or {})

    def update_pool(self, lb_id: str, pool_id: str, changes: Mapping[str, Any]) -> None:
        self._write(lb_id, "PUT", f"/pools/{pool_id}", {"pool": changes}, "update_pool")

    def delete_pool(self, lb_id: str, pool_id: str) -> None:
        self._write(lb_id, "DELETE", f"/pools/{pool_id}", None, "delete_pool")

    def members(self, pool_id: str) -> list[LB]:
        return self._list(f"/pools/{pool_id}/members", "members", {}, "list_members")

    def batch_update_members(self, lb_id: str, pool_id: str, members: list[dict[str, Any]]) -> None:
        """Upstream ``BatchUpdatePoolMembers``: one PUT of the whole member list."""
        self._write(
            lb_id,
            "PUT",
            f"/pools/{pool_id}/members",
            {"members": members},
            "batch_update_members",
        )

    def create_member(self, lb_id: str, pool_id: str, body: Mapping[str, Any]) -> None:
        self._write(lb_id, "POST", f"/pools/{pool_id}/members", {"member": body}, "create_member")

    def delete_member(self, lb_id: str, pool_id: str, member_id: str) -> None:
        self._write(lb_id, "DELETE", f"/pools/{pool_id}/members/{member_id}", None, "delete_member")

    # -- health monitors ---------------------------------------------------------------------

    def health_monitor(self, monitor_id: str) -> LB:
        return self._get(f"/healthmonitors/{monitor_id}", "healthmonitor", "get_healthmonitor")

    def create_health_monitor(self, lb_id: str, body: Mapping[str, Any]) -> None:
        self._write(
            lb_id,
            "POST",
            "/healthmonitors",
            {"healthmonitor": body},
            "create_healthmonitor",
        )

    def update_health_monitor(
        self, lb_id: str, monitor_id: str, changes: Mapping[str, Any]
    ) -> None:
        self._write(
            lb_id,
            "PUT",
            f"/healthmonitors/{monitor_id}",
            {"healthmonitor": changes},
            "update_healthmonitor",
        )

    def delete_health_monitor(self, lb_id: str, monitor_id: str) -> None:
        self._write(lb_id, "DELETE", f"/healthmonitors/{monitor_id}", None, "delete_healthmonitor")
