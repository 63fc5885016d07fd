"""Section "cloud client": OCCM's ``--user-agent`` (its "OpenStack Client" section)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kccm.app.config import ManagerConfig
from kccm.app.flags import FlagSet


@dataclass
class CloudClientOptions:
    """Section "cloud client"."""

    user_agent: list[str] = field(default_factory=list)

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("cloud client")
        s.repeated(
            self,
            "user_agent",
            "user-agent",
            "Extra data to add to the cloud client's user-agent. Use multiple times to add "
            "more than one component (OCCM's flag; the openstack provider puts them in front "
            "of its own User-Agent, the last one first, as OCCM does; other providers ignore "
            "it).",
            type_name="stringArray",
        )

    def validate(self) -> list[str]:
        return []

    def apply_to(self, config: ManagerConfig) -> None:
        config.user_agent = tuple(self.user_agent)
