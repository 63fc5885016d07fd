"""kccm's own section "cloud call gate": budgets for calls into the provider."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kccm.app.config import (
    GateSettings,
    ManagerConfig,
)
from kccm.app.flags import FlagSet, go_quote
from kccm.app.options.checks import (
    not_negative,
    positive,
)
from kccm.cloudprovider.gate import METHOD_GROUPS


@dataclass
class GateOptions:
    """Section "cloud call gate" (kccm's own): budgets for calls into the provider."""

    settings: GateSettings = field(default_factory=GateSettings)

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("cloud call gate")
        groups = ", ".join(sorted(set(METHOD_GROUPS.values())))
        s.number(
            self.settings,
            "qps",
            "cloud-call-qps",
            "kccm: calls per second into the cloud provider, per method group; 0 means no budget.",
        )
        s.integer(
            self.settings,
            "burst",
            "cloud-call-burst",
            "kccm: burst of every cloud call budget (--cloud-call-qps and --cloud-call-group-qps).",
        )
        s.map_float(
            self.settings,
            "group_qps",
            "cloud-call-group-qps",
            "kccm: per-group budgets overriding --cloud-call-qps, e.g. "
            f"load_balancer=5,instances=20 (0: unlimited). Groups: {groups}.",
        )
        s.integer(
            self.settings,
            "provider_threads",
            "provider-threads",
            "kccm: size of the thread pool that runs a provider's blocking (def) methods.",
        )

    def validate(self) -> list[str]:
        errors = not_negative("cloud-call-qps", self.settings.qps)
        if self.settings.qps > 0:
            errors += positive("cloud-call-burst", self.settings.burst)
        known = set(METHOD_GROUPS.values())
        for group, qps in sorted(self.settings.group_qps.items()):
            if group not in known:
                errors.append(
                    f"--cloud-call-group-qps: unknown method group {go_quote(group)} "
                    f"(known: {', '.join(sorted(known))})"
                )
            errors += not_negative(f"cloud-call-group-qps {group}", qps)
        return errors + positive("provider-threads", self.settings.provider_threads)

    def apply_to(self, config: ManagerConfig) -> None:
        config.gate = dataclasses.replace(self.settings, group_qps=dict(self.settings.group_qps))
