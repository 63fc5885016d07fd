"""Upstream ``ServiceControllerOptions`` (options/servicecontroller.go)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kccm.app.config import (
    ManagerConfig,
)
from kccm.app.flags import Flag, FlagSet
from kccm.app.options.checks import (
    IGNORED,
    positive,
)
from kccm.controllers.service import ServiceControllerOptions


@dataclass
class ServiceControllerFlags:
    """Section "service-lb-controller": binds to the controller's own options."""

    service: ServiceControllerOptions = field(default_factory=ServiceControllerOptions)
    reuse_unchanged_load_balancers: bool = True
    _reuse_flag: Flag | None = field(default=None, init=False, repr=False, compare=False)

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("service-lb-controller")
        s.integer(
            self.service,
            "concurrent_service_syncs",
            "concurrent-service-syncs",
            "The number of services that are allowed to sync concurrently (kccm "
            "default 10; upstream 1). Larger number = more responsive service "
            "management, but more CPU and cloud API load.",
        )
        self._reuse_flag = s.boolean(
            self,
            "reuse_unchanged_load_balancers",
            "reuse-unchanged-load-balancers",
            "DEPRECATED, no effect: kccm ensures every load balancer on start as upstream "
            "does; the providers' read-compare-write makes an unchanged one cost reads only. "
            f"{IGNORED}",
        )

    def validate(self) -> list[str]:
        return positive("concurrent-service-syncs", self.service.concurrent_service_syncs)

    def apply_to(self, config: ManagerConfig) -> None:
        if self._reuse_flag is not None and self._reuse_flag.changed:
            config.warn(
                "--reuse-unchanged-load-balancers is deprecated and ignored: every load "
                "balancer is ensured on start, as upstream, and providers write only what "
                "differs from the cloud"
            )
