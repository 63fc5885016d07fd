"""Upstream ``LeaderMigrationOptions``: kccm rejects leader migration."""

from __future__ import annotations

from dataclasses import dataclass

from kccm.app.config import (
    ManagerConfig,
)
from kccm.app.flags import FlagSet
from kccm.app.options.checks import (
    IGNORED,
)


@dataclass
class LeaderMigrationOptions:
    """Section "leader-migration": kccm does not implement leader migration."""

    enable_leader_migration: bool = False
    leader_migration_config: str = ""

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("leader-migration")
        s.boolean(
            self,
            "enable_leader_migration",
            "enable-leader-migration",
            "Whether to enable controller leader migration (moving cloud loops out of "
            "kube-controller-manager). Not supported by kccm: true is "
            "rejected.",
        )
        s.string(
            self,
            "leader_migration_config",
            "leader-migration-config",
            "Path to the config file for controller leader migration. Only read when "
            f"--enable-leader-migration is true. {IGNORED}",
        )

    def validate(self) -> list[str]:
        if not self.enable_leader_migration:
            return []
        return [
            "--enable-leader-migration: kccm does not implement leader migration; finish the "
            "migration with upstream's cloud-controller-manager first"
        ]

    def apply_to(self, config: ManagerConfig) -> None:
        if self.leader_migration_config:
            config.warn(
                "--leader-migration-config is ignored: it is only read with "
                "--enable-leader-migration, which kccm does not support"
            )
