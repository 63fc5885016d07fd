"""Upstream ``ServiceControllerOptions`` (options/servicecontroller.go)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kccm.app.config import (
    ManagerConfig,
)
from kccm.app.flags import Flag, FlagSet, Section
from kccm.app.options.checks import (
    IGNORED,
    positive,
)
from kccm.cloudprovider.drain import MAX_DRAIN_SECONDS
from kccm.controllers.service import ServiceControllerOptions

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_QUALIFIED = re.compile(rf"([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}")
"""Kubernetes' qualified name (``IsQualifiedName``), the syntax of ``spec.loadBalancerClass``."""


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

        self._add_class_flags(s)
        s.boolean(
            self.service,
            "default_retain_address",
            "default-retain-address",
            "kccm: when a LoadBalancer Service's balancer is released (the Service deleted or "
            "no longer a LoadBalancer), keep its address in the cloud, marked with the "
            "Service's namespace/name, for Services without the annotation "
            "service.kccm.io/retain-address (which wins both ways). A Service of the same "
            "namespace/name, or asking for the address, gets it back; `kccm addresses "
            "release` frees it. Needs a provider that supports it (else a Warning Event and "
            "upstream's release); docs/behaviour.md, \"Keeping a balancer's address\".",
        )
        s.integer(
            self.service,
            "default_drain_seconds",
            "default-drain-seconds",
            "kccm: seconds a Node leaving a balancer's node set (the exclusion label, the "
            "cluster autoscaler's taint, a deletion) stays a draining target (no new "
            "connections, established ones kept) before it is removed, for Services without "
            "the annotation service.kccm.io/drain-seconds (which wins both ways). 0 (the "
            "default) removes at once, as upstream. Needs a provider with a draining state "
            '(else removed at once); docs/behaviour.md, "Draining a Node\'s targets".',
        )

    def _add_class_flags(self, s: Section) -> None:
        s.strings(
            self.service,
            "load_balancer_classes",
            "load-balancer-class",
            "kccm: a spec.loadBalancerClass this kccm serves (repeatable, or comma-separated). "
            "Services of type LoadBalancer with one of these classes get a load balancer "
            "besides the class-less ones (upstream serves class-less Services only). Each "
            'class must be served by one deployment; docs/behaviour.md, "Serving a '
            'load-balancer class".',
        )
        s.boolean(
            self.service,
            "load_balancer_class_only",
            "load-balancer-class-only",
            "kccm: serve only the Services whose spec.loadBalancerClass is named by "
            "--load-balancer-class, not the class-less ones (which another deployment or "
            "cloud-controller-manager serves). Requires --load-balancer-class.",
        )

    def validate(self) -> list[str]:
        errors = positive("concurrent-service-syncs", self.service.concurrent_service_syncs)
        if not 0 <= self.service.default_drain_seconds <= MAX_DRAIN_SECONDS:
            errors.append(f"--default-drain-seconds: must be from 0 to {MAX_DRAIN_SECONDS}")
        errors += [
            f"--load-balancer-class: {name!r} is not a valid class (a qualified name such as "
            "example.com/internal-lb)"
            for name in self.service.load_balancer_classes
            if not _QUALIFIED.fullmatch(name)
        ]
        if self.service.load_balancer_class_only and not self.service.load_balancer_classes:
            errors.append("--load-balancer-class-only: requires at least one --load-balancer-class")
        return errors

    def apply_to(self, config: ManagerConfig) -> None:
        if self._reuse_flag is not None and self._reuse_flag.changed:
            config.warn(
                "--reuse-unchanged-load-balancers is deprecated and ignored: every load "
                "balancer is ensured on start, as upstream, and providers write only what "
                "differs from the cloud"
            )
