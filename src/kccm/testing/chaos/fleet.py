"""The chaos bench's daemons (:class:`Fleet`: started, SIGKILLed, replaced, each with its own
log and cloud credentials) and its view of the leader-election Lease (:class:`LeaseWatch`)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kccm.kube.interface import KubeClient, WatchEventType
from kccm.kube.resources import LEASES
from kccm.testing.chaos.leadership import LeaseHolding, ProcessLog, lease_time, read_process_log
from kccm.testing.chaos.partition import Forwarder, forwarded_kubeconfig
from kccm.testing.daemon import Daemon, Daemons

__all__ = ["Fleet", "LeaseSighting", "LeaseWatch", "Member"]

RELIST_PAUSE = 0.2
"""Seconds between two attempts to list the Lease while the apiserver does not answer."""


@dataclass
class Member:
    """One daemon process of the fleet."""

    index: int
    daemon: Daemon
    started: float
    killed: float | None = None
    exited: float | None = None
    exit_code: int | None = None

    @property
    def death(self) -> float | None:
        return self.killed if self.killed is not None else self.exited

    def log(self) -> ProcessLog:
        return read_process_log(self.daemon.log)


@dataclass
class Fleet:
    """Daemons of one provider config; ``env_for(index)`` gives each process its own
    environment (e.g. its own cloud credentials, so the cloud's ledger names the caller)."""

    daemons: Daemons
    provider: str
    cloud_config: Path
    kubeconfig: Path
    flags: Sequence[str]
    env_for: Callable[[int], Mapping[str, str]]
    forward_to: int | None = None
    """The apiserver's port: each process then reaches it through a :class:`Forwarder` of its
    own (``forwarders[index]``), which the ``partition`` fault cuts."""
    members: list[Member] = field(default_factory=list)
    forwarders: dict[int, Forwarder] = field(default_factory=dict)

    async def start(self) -> Member:
        index = len(self.members)
        kubeconfig = self.kubeconfig
        if self.forward_to is not None:
            forwarder = await Forwarder(self.forward_to).start()
            self.forwarders[index] = forwarder
            into = self.daemons.tmp / f"kubeconfig-{index}.yaml"
            kubeconfig = forwarded_kubeconfig(self.kubeconfig, forwarder.port, into)
        daemon = self.daemons.start(
            self.provider,
            self.cloud_config,
            kubeconfig,
            *self.flags,
            env=self.env_for(index),
            unset=("AWS_PROFILE",),
        )
        member = Member(index, daemon, time.time())
        self.members.append(member)
        return member

    def live(self) -> list[Member]:
        return [m for m in self.members if m.death is None]

    def by_identity(self, identity: str) -> Member | None:
        for member in self.live():
            if member.log().identity == identity:
                return member
        return None

    def kill(self, member: Member) -> float:
        """SIGKILL ``member`` and reap it; the moment the signal was sent."""
        at = time.time()
        member.daemon.proc.send_signal(signal.SIGKILL)
        member.killed = at
        member.exit_code = member.daemon.proc.wait(10)
        return at

    def reap(self) -> list[Member]:
        """The live members whose process has exited on its own since the last look."""
        gone = []
        for member in self.live():
            code = member.daemon.proc.poll()
            if code is not None:
                member.exited, member.exit_code = time.time(), code
                gone.append(member)
        return gone

    async def close_forwarders(self) -> None:
        for forwarder in self.forwarders.values():
            await forwarder.stop()

    def stop_all(self, grace: float) -> None:
        """SIGTERM every live daemon at once (so no standby takes a lease the leader releases
        on its way out), then wait for each."""
        for member in self.live():
            if member.daemon.proc.poll() is None:
                member.daemon.proc.terminate()
        for member in self.live():
            member.daemon.stop(grace)
            member.exited = time.time()
            member.exit_code = member.daemon.proc.returncode


@dataclass(frozen=True)
class LeaseSighting:
    """One state of the Lease the watch delivered, and when the bench received it."""

    seen: float
    holder: str
    acquired: float | None
    renewed: float | None
    transitions: int


@dataclass
class LeaseWatch:
    """Lists and watches one Lease for as long as it runs, again after every error (the
    apiserver restarts under it); keeps every distinct state in ``sightings`` and wakes
    :meth:`wait_for` callers on each one."""

    kube: KubeClient
    namespace: str
    name: str
    sightings: list[LeaseSighting] = field(default_factory=list)
    errors: int = 0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="lease watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def current(self) -> LeaseSighting | None:
        return self.sightings[-1] if self.sightings else None

    def holdings(self) -> list[LeaseHolding]:
        """Each holder change, with the acquireTime the new holder wrote."""
        found: list[LeaseHolding] = []
        for s in self.sightings:
            if s.holder and s.acquired is not None and (not found or found[-1].holder != s.holder):
                found.append(LeaseHolding(s.holder, s.acquired))
        return found

    async def wait_for(
        self, probe: Callable[[LeaseSighting], bool], within: float
    ) -> LeaseSighting:
        """The first sighting from now on (the current one included) that ``probe`` accepts."""
        async with asyncio.timeout(within), self._changed:
            start = max(len(self.sightings) - 1, 0)
            while True:
                for sighting in self.sightings[start:]:
                    if probe(sighting):
                        return sighting
                start = len(self.sightings)
                await self._changed.wait()

    async def _note(self, lease: Mapping[str, object]) -> None:
        spec = lease.get("spec") or {}
        assert isinstance(spec, dict)
        sighting = LeaseSighting(
            time.time(),
            str(spec.get("holderIdentity") or ""),
            lease_time(spec.get("acquireTime")),
            lease_time(spec.get("renewTime")),
            int(spec.get("leaseTransitions") or 0),
        )
        last = self.current
        if last is not None and (last.holder, last.renewed, last.acquired) == (
            sighting.holder,
            sighting.renewed,
            sighting.acquired,
        ):
            return
        async with self._changed:
            self.sightings.append(sighting)
            self._changed.notify_all()

    async def _run(self) -> None:
        selector = f"metadata.name={self.name}"
        while True:
            try:
                listed = await self.kube.list(
                    LEASES, namespace=self.namespace, field_selector=selector
                )
                for lease in listed.items:
                    await self._note(lease)
                version = listed.resource_version
                async for event in self.kube.watch(
                    LEASES,
                    resource_version=version,
                    namespace=self.namespace,
                    field_selector=selector,
                    timeout_seconds=30,
                ):
                    if event.type in (WatchEventType.ADDED, WatchEventType.MODIFIED):
                        await self._note(event.object)
            except asyncio.CancelledError:
                raise
            except Exception:  # the apiserver restarting: list again
                self.errors += 1
                await asyncio.sleep(RELIST_PAUSE)
