"""Section "misc": API server location and the node status cadence."""

from __future__ import annotations

from dataclasses import dataclass, field

from kccm.app.config import (
    ManagerConfig,
)
from kccm.app.flags import FlagSet
from kccm.app.options.checks import (
    not_negative,
    positive,
    readable,
)
from kccm.controllers.node import NodeControllerOptions


@dataclass
class MiscOptions:
    """Section "misc"."""

    master: str = ""
    kubeconfig: str = ""
    node: NodeControllerOptions = field(default_factory=NodeControllerOptions)

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("misc")
        s.string(
            self,
            "master",
            "master",
            "The address of the Kubernetes API server (overrides any value in kubeconfig).",
        )
        s.string(
            self,
            "kubeconfig",
            "kubeconfig",
            "Path to kubeconfig file with authorization and master location "
            "information. Empty: in-cluster configuration.",
        )
        s.duration(
            self.node,
            "node_status_update_frequency",
            "node-status-update-frequency",
            "Specifies how often the controller updates nodes' status.",
        )
        s.duration(
            self.node,
            "node_metadata_refresh_period",
            "node-metadata-refresh-period",
            "kccm, opt-in: the least time between two periodic cloud metadata reads of one "
            "initialised node, the reads spread evenly over it (fewer calls for providers "
            "without list_instance_metadata; a changed address then takes up to this long to "
            "reach the Node). 0 (default): every node at start and at every "
            "--node-status-update-frequency tick, as upstream; providers with "
            "list_instance_metadata answer each tick for all nodes in one call.",
        )

    def validate(self) -> list[str]:
        errors = readable("kubeconfig", self.kubeconfig)
        errors += not_negative(
            "node-metadata-refresh-period", self.node.node_metadata_refresh_period
        )
        return errors + positive(
            "node-status-update-frequency", self.node.node_status_update_frequency
        )

    def apply_to(self, config: ManagerConfig) -> None:
        config.master = self.master
        config.kubeconfig = self.kubeconfig
