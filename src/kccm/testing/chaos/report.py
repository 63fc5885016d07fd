"""The chaos bench's final ledger: faults, takeovers, the cloud's balancer calls, what was left,
leadership violations, wall time and the machine's load."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from kccm.testing.chaos.leadership import EXIT_SLACK

__all__ = ["Ledger"]


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values):.2f} s, max {max(values):.2f} s"


@dataclass
class Ledger:
    provider: str
    mode: str
    faults: int
    seed: int
    kills: int = 0
    takeovers: int = 0
    takeover_seconds: list[float] = field(default_factory=list)
    takeover_standbys: list[int] = field(default_factory=list)
    """For each kill: how many other processes were already campaigning (0: the takeover had
    to wait for a replacement to start)."""
    restarts: int = 0
    restart_seconds: list[float] = field(default_factory=list)
    reconnect_seconds: list[float] = field(default_factory=list)
    partitions: int = 0
    lingered_seconds: list[float] = field(default_factory=list)
    """``partition``: how long each cut-off leader lived after the bench saw its successor
    take over (0: it had exited by then)."""
    exits: list[str] = field(default_factory=list)
    """Daemons that exited on their own (not killed by the bench), replaced."""
    processes: int = 0
    leaderships: int = 0
    lease_transitions: int = 0
    mutations: int = 0
    per_process: dict[str, int] = field(default_factory=dict)
    made: int = 0
    deleted: int = 0
    final: dict[str, int] = field(default_factory=dict)
    final_detail: list[str] = field(default_factory=list)
    converged_after: float = 0.0
    after_delete: int = -1
    after_delete_detail: list[str] = field(default_factory=list)
    double_leaders: int = 0
    violations: list[str] = field(default_factory=list)
    winding_down: int = 0
    workload: dict[str, int] = field(default_factory=dict)
    workload_failures: dict[str, int] = field(default_factory=dict)
    wall: float = 0.0
    load_start: float = 0.0
    load_middle: float = 0.0
    load_end: float = 0.0

    @property
    def leftovers(self) -> int:
        return sum(v for k, v in self.final.items()) + max(self.after_delete, 0)

    @property
    def clean(self) -> bool:
        """Zero leftovers, zero double leaders, zero violations, every fault healed."""
        healed = {
            "kill": self.takeovers == self.kills,
            "partition": self.takeovers == self.partitions,
        }.get(self.mode, len(self.reconnect_seconds) == self.restarts)
        return (
            healed
            and self.after_delete == 0
            and not any(self.final.values())
            and self.double_leaders == 0
            and not self.violations
        )

    def progress(self) -> str:
        if self.mode == "partition":
            return (
                f"partitions {self.partitions}, takeovers {self.takeovers}, cut-off leader "
                f"already gone at the takeover {self.lingered_seconds.count(0.0)} times, "
                f"else exited {_spread([t for t in self.lingered_seconds if t])} after it"
            )
        if self.mode == "kill":
            ready = [
                t for t, n in zip(self.takeover_seconds, self.takeover_standbys, strict=False) if n
            ]
            return (
                f"kills {self.kills}, takeovers {self.takeovers} "
                f"({_spread(self.takeover_seconds)}; with a standby already campaigning: "
                f"{len(ready)}, {_spread(ready)})"
            )
        return (
            f"apiserver restarts {self.restarts} ({_spread(self.restart_seconds)}), leader "
            f"renewed after {_spread(self.reconnect_seconds)}, exits {len(self.exits)}"
        )

    def render(self) -> str:
        lines = [
            f"chaos ledger: provider={self.provider} mode={self.mode} faults={self.faults} "
            f"seed={self.seed}",
            f"  faults        {self.progress()}",
            f"  daemons       {self.processes} processes, {self.leaderships} leaderships, "
            f"lease transitions {self.lease_transitions}, own exits {len(self.exits)}"
            + (f" {self.exits}" if self.exits else ""),
            f"  cloud         {self.mutations} mutating calls from {len(self.per_process)} "
            f"processes (most from one: {max(self.per_process.values(), default=0)}); "
            f"balancers made {self.made}, deleted {self.deleted}",
            f"  workload      {self.workload}; failed calls {sum(self.workload_failures.values())}",
            f"  converged     after {self.converged_after:.1f} s: without "
            f"{self.final.get('without')}, stale {self.final.get('stale')}, duplicated "
            f"{self.final.get('duplicated')}, leaked {self.final.get('leaked')}, pending "
            f"{self.final.get('pending')}",
            f"  after delete  {self.after_delete} left",
            f"  leadership    double leaders {self.double_leaders}, calls outside leadership "
            f"{len(self.violations)} (and {self.winding_down} within {EXIT_SLACK:g} s of a "
            "lost line, before the successor: winding down)",
            f"  wall          {self.wall:.0f} s; load (1 min) start {self.load_start:.2f}, "
            f"middle {self.load_middle:.2f}, end {self.load_end:.2f}",
            f"  verdict       {'CLEAN' if self.clean else 'NOT CLEAN'}",
        ]
        for detail in (self.final_detail + self.after_delete_detail + self.violations)[:40]:
            lines.append(f"    ! {detail}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "clean": self.clean, "leftovers": self.leftovers}
