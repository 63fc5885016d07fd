"""The daemon's collector policy around the initial sync (kccm.util.gcpolicy): survivors are
frozen while the caches fill, and no longer once they have synced or the sync failed."""

from __future__ import annotations

import asyncio
import gc
from typing import cast

import pytest

from kccm.app.config import ManagerConfig
from kccm.app.manager import Manager
from kccm.runtime.informers import SharedInformerFactory
from kccm.util import gcpolicy

pytestmark = pytest.mark.usefixtures("collector_restored")


class Informers:
    """Records whether survivors were being frozen when the informers started."""

    def __init__(self, synced: bool) -> None:
        self.synced = synced
        self.freezing_at_start: bool | None = None

    def start(self) -> None:
        self.freezing_at_start = gcpolicy._FREEZER in gc.callbacks

    async def wait_for_sync(self) -> None:
        if not self.synced:
            raise asyncio.CancelledError  # the daemon stopped during the sync


async def sync(informers: Informers, *, freeze_gc: bool) -> None:
    manager = Manager(ManagerConfig(cloud_provider="fake"), freeze_gc=freeze_gc)
    await manager._sync(cast(SharedInformerFactory, informers))


async def test_the_daemon_freezes_survivors_while_syncing_then_the_caches() -> None:
    informers = Informers(synced=True)
    await sync(informers, freeze_gc=True)
    assert informers.freezing_at_start is True
    assert gcpolicy._FREEZER not in gc.callbacks
    assert gc.get_freeze_count() > 0


async def test_a_failed_sync_stops_the_freezing() -> None:
    informers = Informers(synced=False)
    with pytest.raises(asyncio.CancelledError):
        await sync(informers, freeze_gc=True)
    assert informers.freezing_at_start is True
    assert gcpolicy._FREEZER not in gc.callbacks


async def test_a_manager_inside_another_program_leaves_its_collector_alone() -> None:
    informers = Informers(synced=True)
    await sync(informers, freeze_gc=False)
    assert informers.freezing_at_start is False
    assert gc.get_freeze_count() == 0
