"""Upstream ``DebuggingOptions``: accepted, ignored."""

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
class DebuggingOptions:
    """Section "debugging": accepted, ignored (kccm serves no /debug/pprof)."""

    profiling: bool = True
    contention_profiling: bool = False

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("debugging")
        s.boolean(
            self,
            "profiling",
            "profiling",
            "Enable profiling via web interface host:port/debug/pprof/. kccm serves no "
            f"pprof endpoints. {IGNORED}",
        )
        s.boolean(
            self,
            "contention_profiling",
            "contention-profiling",
            f"Enable block profiling, if profiling is enabled. {IGNORED}",
        )

    def validate(self) -> list[str]:
        return []

    def apply_to(self, config: ManagerConfig) -> None:
        if self.contention_profiling:
            config.warn("--contention-profiling is ignored: kccm serves no /debug/pprof endpoints")
