"""Client-side QPS limiting holds against the real apiserver (timestamps on the clock seam)."""

from __future__ import annotations

import asyncio

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NAMESPACES
from kccm.testing.controlplane import ControlPlane
from kccm.util.clock import FakeClock

QPS, BURST, REQUESTS = 20.0, 30, 100


async def _drive(clock: FakeClock, tasks: list[asyncio.Task[object]]) -> None:
    """Move fake time to each limiter wake-up; otherwise wait for real I/O to finish."""
    pending = set(tasks)
    while pending:
        deadline = clock.next_deadline()
        if deadline is not None:
            await clock.advance(deadline - clock.monotonic())
        else:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        pending = {t for t in pending if not t.done()}


def _violations(stamps: list[float]) -> list[tuple[int, int]]:
    """Pairs (i, j) where more requests went out in [t_i, t_j] than the bucket allows."""
    bad = []
    for i in range(len(stamps)):
        for j in range(i, len(stamps)):
            allowed = BURST + QPS * (stamps[j] - stamps[i]) + 1e-9
            if j - i + 1 > allowed:
                bad.append((i, j))
    return bad


async def test_hundred_requests_respect_qps_and_burst(control_plane: ControlPlane) -> None:
    clock = FakeClock()
    stamps: list[float] = []
    client = KubeApiClient(
        load_cluster_config(str(control_plane.admin_kubeconfig)),
        qps=QPS,
        burst=BURST,
        clock=clock,
        on_request=lambda method, path: stamps.append(clock.monotonic()),
    )
    start = clock.monotonic()
    try:
        tasks: list[asyncio.Task[object]] = [
            asyncio.create_task(client.get(NAMESPACES, "default")) for _ in range(REQUESTS)
        ]
        await _drive(clock, tasks)
        results = await asyncio.gather(*tasks)
    finally:
        await client.close()

    assert all(r["metadata"]["name"] == "default" for r in results)  # type: ignore[index]
    offsets = sorted(s - start for s in stamps)
    assert len(offsets) == REQUESTS
    assert sum(1 for t in offsets if t == 0) == BURST, "exactly the burst goes out at once"
    assert _violations(offsets) == []
    assert abs(offsets[-1] - (REQUESTS - BURST) / QPS) < 1e-6, "the last one waits 3.5 s"
