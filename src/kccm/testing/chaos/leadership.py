"""Who led when, and whether anyone acted while not leading (issue 28's "0 double leaders").

Sources, all on this machine's clock (one host, so wall-clock times are comparable):

- each daemon's JSON log (``--logging-format=json``): ``leader election on lease ... as <id>``
  (which identity the process campaigns as), ``successfully acquired lease`` (it leads from
  then on: its controllers start only after this line), ``leaderelection lost`` or
  ``leader election lost`` (it gave up renewing; the daemon exits next), ``released lease``
  (a graceful stop gave the lease up, after the controllers stopped);
- the Lease, watched by :class:`~kccm.testing.chaos.fleet.LeaseWatch`: every holder change
  with the ``acquireTime`` the new holder wrote (before its write, so no later than the
  moment it starts acting);
- the kills and exits the bench itself caused or saw;
- the cloud's ledger of mutating calls, each attributed to one process (for ``local`` the
  provider's ``state file write`` debug lines in that process's log, timed after the write
  committed; for ``aws`` the fault proxy's record of the request, timed on arrival, and the
  process's own access key id).

Definitions (what :func:`judge` counts):

- **Believed leadership** of process P: from each ``successfully acquired lease`` line to the
  first of P's lost or released lines, its SIGKILL, or its exit. Two processes whose
  believed leaderships overlap are a *double leader* ("two processes both believe they
  lead").
- **Leadership interval** of P, used to judge its cloud calls: its believed leadership, cut
  at the ``acquireTime`` of the next *other* holder the Lease shows. This is client-go's
  contract with the renew-deadline semantics: a leader that fails to renew stops acting
  within the renew deadline (< lease duration) of its last renewal, while another candidate
  takes the lease only a lease duration after it last saw a renewal; so a correct leader
  has stopped before its successor's ``acquireTime``.
- **Violation**: a mutating cloud call attributed to P outside every leadership interval of
  P. A process cannot act after its death, but a request it sent just before may reach the
  proxy a moment later: a call up to :data:`DEATH_SLACK` after P's kill or exit (and before
  the successor's ``acquireTime``) is not a violation. Likewise a process that logged its lost
  line is still winding down: upstream's ``OnStoppedLeading`` logs
  ``leaderelection lost`` and calls ``klog.FlushAndExit``, and the flush runs while other
  goroutines (a provider call in flight) still run; kccm exits the same way, its provider
  threads running until ``os._exit``. A call up to :data:`EXIT_SLACK` after that line (and
  before the successor's ``acquireTime``) is not a violation, and is counted apart: no two
  processes act at once. A ``released lease`` line gets no such slack.
  No slack anywhere else, and none past the successor's ``acquireTime``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "DEATH_SLACK",
    "EXIT_SLACK",
    "Belief",
    "Judgement",
    "LeaseHolding",
    "Mutation",
    "ProcessLog",
    "judge",
    "lease_time",
    "read_process_log",
]

DEATH_SLACK = 1.0
"""Seconds after a process's SIGKILL (or exit) during which a call it sent may still be
recorded by the cloud."""
EXIT_SLACK = 0.25
"""Seconds after a process's ``leaderelection lost`` line during which a call is still its
winding down (the partition runs saw 1-11 ms: a provider thread's request while the process
flushed its logs before exiting). None after ``released lease``: a graceful stop logs it once
its controllers have stopped."""
ELECTION_AS = "leader election on lease "
ATTEMPTING = "attempting to acquire leader lease"
ACQUIRED = "successfully acquired lease"
LOST = ("leader election lost", "leaderelection lost")
RELEASED = "released lease"
LOCAL_WRITE = "state file write "


@dataclass(frozen=True)
class Mutation:
    """One mutating cloud call: which process (its index in the fleet), when, what."""

    process: int
    at: float
    operation: str
    subject: str = ""
    outcome: str = ""


@dataclass
class ProcessLog:
    """What one daemon's log says: its identity, when it acquired and lost the lease, and
    (``local``) the balancer writes it made."""

    identity: str = ""
    campaigning: float | None = None
    """When it started campaigning (``attempting to acquire leader lease``)."""
    acquired: list[float] = field(default_factory=list)
    lost: list[float] = field(default_factory=list)
    released: list[float] = field(default_factory=list)
    """Graceful stops (``released lease``: logged once the controllers have stopped)."""
    writes: list[tuple[float, str, str, str]] = field(default_factory=list)


def read_process_log(path: Path) -> ProcessLog:
    """Parse a daemon's JSON log (lines that are not JSON, e.g. a traceback, are skipped)."""
    found = ProcessLog()
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return found
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        msg, ts = str(entry.get("msg", "")), float(entry.get("ts", 0.0))
        if msg.startswith(ELECTION_AS) and " as " in msg:
            found.identity = msg.rsplit(" as ", 1)[1].strip()
        elif msg.startswith(ATTEMPTING) and found.campaigning is None:
            found.campaigning = ts
        elif msg.startswith(ACQUIRED):
            found.acquired.append(ts)
        elif msg.startswith(LOST):
            found.lost.append(ts)
        elif msg.startswith(RELEASED):
            found.released.append(ts)
        elif msg.startswith(LOCAL_WRITE):
            parts = msg[len(LOCAL_WRITE) :].split(" ")
            parts += [""] * (3 - len(parts))
            found.writes.append((ts, parts[0], parts[1], parts[2]))
    return found


def lease_time(text: str | None) -> float | None:
    """Epoch seconds of a Lease's MicroTime (``2026-11-26T22:09:06.123456Z``)."""
    if not text:
        return None
    for pattern in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, pattern).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    return None


@dataclass(frozen=True)
class LeaseHolding:
    """A holder the Lease showed, from the ``acquireTime`` it wrote."""

    holder: str
    acquired: float


@dataclass(frozen=True)
class Belief:
    process: int
    start: float
    end: float
    slack: float = 0.0
    """How long after ``end`` a call still counts as the process's own: :data:`DEATH_SLACK`
    after its death, :data:`EXIT_SLACK` after its lost line, none after a release."""
    exiting: bool = False
    """Ended by its lost line: a call after ``end`` is the process winding down."""


@dataclass
class Judgement:
    beliefs: list[Belief]
    overlaps: list[tuple[Belief, Belief]]
    violations: list[tuple[Mutation, str]]
    mutations: int
    winding_down: int = 0
    """Calls allowed only by :data:`EXIT_SLACK` (after their process's lost line)."""


def _believed(index: int, log: ProcessLog, died: float | None) -> list[Belief]:
    """Each leadership from its acquired line to the first end after it: its death (first when
    at the same moment as a line), its lost line or its released line."""
    ends = [(t, 1, EXIT_SLACK, True) for t in log.lost] + [(t, 1, 0.0, False) for t in log.released]
    if died is not None:
        ends.append((died, 0, DEATH_SLACK, False))
    beliefs = []
    for start in sorted(log.acquired):
        end, _, slack, exiting = min(
            (e for e in ends if e[0] >= start), default=(math.inf, 0, 0.0, False)
        )
        beliefs.append(Belief(index, start, end, slack, exiting))
    return beliefs


def judge(
    logs: Mapping[int, ProcessLog],
    deaths: Mapping[int, float],
    holdings: Sequence[LeaseHolding],
    mutations: Iterable[Mutation],
) -> Judgement:
    """Apply the module's definitions. ``deaths``: when the bench SIGKILLed each process or
    saw it exit; ``holdings``: the Lease's holders in order."""
    beliefs = sorted(
        (b for i, log in logs.items() for b in _believed(i, log, deaths.get(i))),
        key=lambda b: b.start,
    )
    overlaps = [
        (a, b)
        for n, a in enumerate(beliefs)
        for b in beliefs[n + 1 :]
        if a.process != b.process and b.start < a.end
    ]
    identity = {i: log.identity for i, log in logs.items()}

    def successor_acquired(process: int, start: float) -> float:
        """The ``acquireTime`` of the first holder other than ``process`` after ``start``."""
        mine = identity.get(process, "")
        later = [h.acquired for h in holdings if h.holder != mine and h.acquired > start]
        return min(later, default=math.inf)

    violations: list[tuple[Mutation, str]] = []
    counted = winding_down = 0
    for mutation in mutations:
        counted += 1
        own = [b for b in beliefs if b.process == mutation.process]
        allowed = False
        for belief in own:
            cut = successor_acquired(mutation.process, belief.start)
            if belief.start <= mutation.at <= min(belief.end + belief.slack, cut):
                allowed = True
                if belief.exiting and mutation.at > belief.end:
                    winding_down += 1
                break
        if not allowed:
            why = (
                "never led"
                if not own
                else "outside its leadership ("
                + ", ".join(f"{b.start:.3f}-{b.end:.3f}" for b in own)
                + ")"
            )
            violations.append((mutation, why))
    return Judgement(beliefs, overlaps, violations, counted, winding_down)
