"""warn_service reaches the collecting scope through the thread pool, the call gate and tasks;
outside a scope it is logged."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider.adapter import ThreadPoolAdapter
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.servicewarnings import (
    ServiceWarning,
    collect_service_warnings,
    warn_service,
)

W = ServiceWarning("Reason", "message")


def plain_provider_method() -> None:
    warn_service(W.reason, W.message)


async def async_provider_method() -> None:
    await asyncio.gather(asyncio.create_task(asyncio.to_thread(plain_provider_method)))


async def test_a_plain_method_in_the_thread_pool_reaches_the_scope() -> None:
    adapter = ThreadPoolAdapter(2)
    try:
        with collect_service_warnings() as warnings:
            await adapter.call("ensure_load_balancer", plain_provider_method)
    finally:
        adapter.close()
    assert list(warnings) == [W]


async def test_the_call_gate_and_a_task_the_provider_starts_reach_the_scope() -> None:
    gate = CallGate(registry=CollectorRegistry())
    try:
        with collect_service_warnings() as warnings:
            await gate.call("ensure_load_balancer", async_provider_method)
    finally:
        gate.close()
    assert list(warnings) == [W]


async def test_scopes_of_concurrent_calls_stay_apart() -> None:
    async def one(reason: str) -> list[ServiceWarning]:
        with collect_service_warnings() as warnings:
            await asyncio.sleep(0)
            warn_service(reason, "m")
            await asyncio.sleep(0)
        return list(warnings)

    first, second = await asyncio.gather(one("A"), one("B"))
    assert (first, second) == ([ServiceWarning("A", "m")], [ServiceWarning("B", "m")])


@pytest.mark.parametrize("after_the_call", [False, True], ids=["no-scope", "scope-closed"])
def test_without_an_open_scope_the_warning_is_logged(
    caplog: pytest.LogCaptureFixture, after_the_call: bool
) -> None:
    if after_the_call:
        with collect_service_warnings() as warnings:
            pass
        warnings_seen = warnings
    with caplog.at_level(logging.WARNING, logger="kccm.cloudprovider.servicewarnings"):
        warn_service("Late", "too late")
    assert "Late: too late" in caplog.text
    if after_the_call:
        assert len(warnings_seen) == 0
