"""Issue 28: a daemon that loses its lease exits at once, as upstream's cloud-controller-manager
does (``OnStoppedLeading``: ``klog.ErrorS(nil, "leaderelection lost")`` then
``klog.FlushAndExit(klog.ExitFlushTimeout, 1)``), instead of first winding down controllers,
the event flush and the provider calls still running in worker threads while a successor may
already lead."""

from __future__ import annotations

import logging
from typing import cast

import pytest

from kccm.app.config import ManagerConfig
from kccm.app.manager import EXIT_LOST_LEASE, Manager
from kccm.app.shutdown import ExitDeadline
from kccm.cloudprovider.gated import GatedCloud
from kccm.kube.fake import FakeKube


def test_losing_the_lease_ends_the_process_with_the_lost_lease_status(
    caplog: pytest.LogCaptureFixture,
) -> None:
    codes: list[int] = []
    manager = Manager(ManagerConfig(cloud_provider="fake"), deadline=ExitDeadline(codes.append))
    elector = manager._elector(FakeKube(), cast(GatedCloud, None))  # type: ignore[arg-type]
    assert elector is not None
    with caplog.at_level(logging.ERROR):
        elector._on_lost()  # type: ignore[misc]  # what the elector calls at the renew deadline
    assert codes == [EXIT_LOST_LEASE]
    assert "leaderelection lost" in caplog.text
