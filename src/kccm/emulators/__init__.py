"""The clouds kccm's providers are tested against: one emulator per cloud, one shape.

``kccm.emulators.openstack`` (Keystone, Nova, Neutron, Octavia on one aiohttp port),
``kccm.emulators.vsphere`` (govmomi's vcsim, built from ``hack/vcsim`` by ``make vcsim``),
``kccm.emulators.aws`` (moto's server with kccm's teachings) and ``kccm.emulators.azure``
(ADFS sign-in, ARM Compute and Network, IMDS on aiohttp). Each runs as a child process
on a port of its own (:mod:`kccm.emulators.process`: ``python -m kccm.emulators.<cloud>``, or
the built binary), is awaited until it says it listens, and offers a :class:`CloudEmulator`:
its URL, the calls it answered, per-call faults, a leak check and a stop.

This package is the cloud, not kccm: it imports no provider, controller, runtime, app or
devtools module (an import-linter contract), and no provider imports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

__all__ = ["CloudEmulator", "leaked"]


@runtime_checkable
class CloudEmulator(Protocol):
    """What every emulator offers its tests (beside its own cloud's controls)."""

    @property
    def url(self) -> str:
        """Where clients reach it."""
        ...

    def call_counts(self) -> dict[str, int]:
        """The calls it answered since it started, counted per operation (its request
        log)."""
        ...

    def clear_faults(self) -> None:
        """Every injected fault removed: calls are answered as the cloud answers them."""
        ...

    def state(self) -> dict[str, list[str]]:
        """What tests make and must remove, by kind (the leak check's snapshot)."""
        ...

    def assert_clean(self, baseline: Mapping[str, Iterable[str]]) -> None:
        """AssertionError naming what :meth:`state` holds that ``baseline`` did not."""
        ...

    def stop(self) -> None:
        """Its process ended and what it wrote on disk removed."""
        ...


def leaked(
    now: Mapping[str, Iterable[str]], baseline: Mapping[str, Iterable[str]]
) -> dict[str, list[str]]:
    """By kind, what ``now`` holds that ``baseline`` did not (kinds with nothing left out)."""
    found = {kind: sorted(set(now[kind]) - set(baseline.get(kind, ()))) for kind in now}
    return {kind: names for kind, names in found.items() if names}
