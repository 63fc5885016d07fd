"""Address retention in the service controller's release path (docs/behaviour.md, "Keeping
a balancer's address").

:class:`RetainingBalancer` is the balancer the service controller calls. Its
``ensure_load_balancer_deleted`` (every release: the Service deleted, no longer of type
LoadBalancer, or moved to another class) reads the Service's :class:`Retention`:

- not asked (no annotation, no flag): upstream's delete, nothing else;
- asked, and the provider implements
  :class:`~kccm.cloudprovider.interface.AddressRetainer`: the provider's
  ``ensure_load_balancer_deleted_keeping_address``, and a ``RetainedAddress`` Event naming
  what was kept;
- asked, the provider cannot: a ``Warning`` Event ``AddressRetentionUnsupported`` naming the
  annotation (or flag) and the provider, then upstream's delete: the address is released,
  never silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedCloud, GatedLoadBalancer
from kccm.cloudprovider.retention import retention_of
from kccm.cloudprovider.types import RetainedAddress, Service
from kccm.controllers.service_hosts import service_ref
from kccm.controllers.service_warnings import ReportingBalancer
from kccm.runtime.events import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING, EventRecorder

__all__ = ["REASON_RETAINED", "REASON_UNSUPPORTED", "RetainingBalancer", "kept_message"]

REASON_RETAINED = "RetainedAddress"
REASON_UNSUPPORTED = "AddressRetentionUnsupported"

_P = Priority.NORMAL
_B = TypeVar("_B", bound="RetainingBalancer")


class _Options(Protocol):
    default_retain_address: bool


def kept_message(kept: Sequence[RetainedAddress], because: str) -> str:
    """The ``RetainedAddress`` Event's message."""
    if not kept:
        return f"No address to keep ({because}): the balancer had none"
    names = ", ".join(f"{a.address} ({a.id})" if a.id else a.address for a in kept)
    return (
        f"Kept address {names} ({because}); a Service of the same namespace/name, or one "
        "asking for it, gets it back; `kccm addresses release` frees it"
    )


class RetainingBalancer(ReportingBalancer):
    """:class:`ReportingBalancer` whose release keeps the address when the Service asks."""

    def __init__(
        self,
        balancer: GatedLoadBalancer,
        recorder: EventRecorder,
        *,
        default_retain: bool = False,
        provider_name: str = "",
    ) -> None:
        super().__init__(balancer, recorder)
        self.default_retain = default_retain
        self.provider_name = provider_name or "the provider"

    @classmethod
    def of(
        cls: type[_B],
        balancer: GatedLoadBalancer,
        recorder: EventRecorder,
        cloud: GatedCloud,
        options: _Options,
    ) -> _B:
        """The service controller's balancer, with ``--default-retain-address`` applied."""
        return cls(
            balancer,
            recorder,
            default_retain=options.default_retain_address,
            provider_name=f"provider {cloud.provider_name()}",
        )

    async def ensure_load_balancer_deleted(
        self, cluster_name: str, service: Service, *, priority: Priority = _P
    ) -> None:
        retention = retention_of(service, self.default_retain)
        if not retention.keep:
            await super().ensure_load_balancer_deleted(cluster_name, service, priority=priority)
            return
        if not self.can_retain_addresses:
            self._event(
                service,
                EVENT_TYPE_WARNING,
                REASON_UNSUPPORTED,
                f"Address retention {retention.because()} is not supported by "
                f"{self.provider_name}: the balancer and its address are released",
            )
            await super().ensure_load_balancer_deleted(cluster_name, service, priority=priority)
            return
        with self._reporting(service):
            kept = await super().ensure_load_balancer_deleted_keeping_address(
                cluster_name, service, priority=priority
            )
        self._event(
            service, EVENT_TYPE_NORMAL, REASON_RETAINED, kept_message(kept, retention.because())
        )

    def _event(self, service: Service, event_type: str, reason: str, message: str) -> None:
        self.recorder.event(service_ref(service), event_type, reason, message)
