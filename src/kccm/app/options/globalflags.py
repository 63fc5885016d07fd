"""Section "global": --help and --version."""

from __future__ import annotations

from dataclasses import dataclass

from kccm.app.config import (
    ManagerConfig,
)
from kccm.app.flags import FlagSet


@dataclass
class GlobalOptions:
    """Section "global": --version and --help (handled by the CLI before validation)."""

    version: bool = False
    help: bool = False

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("global")
        s.boolean(self, "help", "help", "help for kccm")
        fs.set_shorthand("help", "h")
        s.boolean(self, "version", "version", "Print version information and quit")

    def validate(self) -> list[str]:
        return []

    def apply_to(self, config: ManagerConfig) -> None:
        return None
