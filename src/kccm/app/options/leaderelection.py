"""Upstream's leader-election flags (component-base ``BindLeaderElectionFlags``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kccm.app.config import (
    LeaderElectionSettings,
    ManagerConfig,
)
from kccm.app.flags import FlagSet, go_quote
from kccm.app.options.checks import (
    positive,
)


@dataclass
class LeaderElectionOptions:
    """Upstream ``LeaderElectionConfiguration`` flags (section "generic")."""

    settings: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("generic")
        s.boolean(
            self.settings,
            "enabled",
            "leader-elect",
            "Start a leader election client and gain leadership before executing the "
            "main loop. Enable this when running replicated components for high "
            "availability.",
        )
        s.duration(
            self.settings,
            "lease_duration",
            "leader-elect-lease-duration",
            "The duration that non-leader candidates will wait after observing a "
            "leadership renewal until attempting to acquire leadership.",
        )
        s.duration(
            self.settings,
            "renew_deadline",
            "leader-elect-renew-deadline",
            "The interval between attempts by the acting leader to renew a leadership "
            "slot before it stops leading. Must be less than the lease "
            "duration.",
        )
        s.duration(
            self.settings,
            "retry_period",
            "leader-elect-retry-period",
            "The duration the clients should wait between attempting acquisition and "
            "renewal of a leadership.",
        )
        s.string(
            self.settings,
            "resource_lock",
            "leader-elect-resource-lock",
            "The type of resource object that is used for locking during leader "
            "election. Only 'leases' is supported.",
        )
        s.string(
            self.settings,
            "resource_name",
            "leader-elect-resource-name",
            "The name of resource object that is used for locking during leader election.",
        )
        s.string(
            self.settings,
            "resource_namespace",
            "leader-elect-resource-namespace",
            "The namespace of resource object that is used for locking during leader election.",
        )

    def validate(self) -> list[str]:
        if not self.settings.enabled:
            return []
        errors: list[str] = []
        if self.settings.resource_lock != "leases":
            errors.append(
                f"--leader-elect-resource-lock: must be {go_quote('leases')} when "
                f"--leader-elect is true, got {go_quote(self.settings.resource_lock)}"
            )
        errors += positive("leader-elect-retry-period", self.settings.retry_period)
        if self.settings.lease_duration <= self.settings.renew_deadline:
            errors.append(
                "--leader-elect-lease-duration: must be greater than "
                f"--leader-elect-renew-deadline ({self.settings.lease_duration:g}s <= "
                f"{self.settings.renew_deadline:g}s)"
            )
        if self.settings.renew_deadline <= 1.2 * self.settings.retry_period:
            errors.append(
                "--leader-elect-renew-deadline: must be greater than 1.2 x "
                f"--leader-elect-retry-period ({self.settings.renew_deadline:g}s <= "
                f"{1.2 * self.settings.retry_period:g}s)"
            )
        for flag, value in (
            ("leader-elect-resource-name", self.settings.resource_name),
            ("leader-elect-resource-namespace", self.settings.resource_namespace),
        ):
            if not value:
                errors.append(f"--{flag} cannot be empty when --leader-elect is true")
        return errors

    def apply_to(self, config: ManagerConfig) -> None:
        config.leader_election = dataclasses.replace(self.settings)
