"""Upstream ``NodeControllerOptions`` (options/nodecontroller.go)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kccm.app.config import (
    ManagerConfig,
)
from kccm.app.flags import FlagSet
from kccm.app.options.checks import (
    not_negative,
    positive,
)
from kccm.controllers.node import NodeControllerOptions


@dataclass
class NodeControllerFlags:
    """Section "cloud-node-controller": binds to the controller's own options."""

    node: NodeControllerOptions = field(default_factory=NodeControllerOptions)

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("cloud-node-controller")
        s.integer(
            self.node,
            "concurrent_node_syncs",
            "concurrent-node-syncs",
            "Number of workers concurrently synchronizing nodes (kccm default 32; upstream 1).",
        )
        s.integer(
            self.node,
            "concurrent_node_status_updates",
            "concurrent-node-status-updates",
            "Number of workers concurrently updating node statuses; 0 means use "
            "--concurrent-node-syncs.",
        )

    def validate(self) -> list[str]:
        errors = positive("concurrent-node-syncs", self.node.concurrent_node_syncs)
        return errors + not_negative(
            "concurrent-node-status-updates", self.node.concurrent_node_status_updates
        )

    def apply_to(self, config: ManagerConfig) -> None:
        return None  # the flags write the controller's options directly
