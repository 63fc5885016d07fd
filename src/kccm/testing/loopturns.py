"""How many turns another task got while one piece of work was awaited: for tests that a long
pass (a relist, a refresh over thousands of Nodes, a node sync over thousands of Services)
lets the loop run, so /metrics, /healthz and watches are not held up."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["turns_during"]

_T = TypeVar("_T")


async def turns_during(work: Awaitable[_T]) -> tuple[_T, int]:
    """Await ``work``; returns its result and how often a task spinning beside it ran."""
    turns = 0
    running = True

    async def spin() -> None:
        nonlocal turns
        while running:
            turns += 1
            await asyncio.sleep(0)

    spinner = asyncio.create_task(spin())
    await asyncio.sleep(0)
    before = turns
    try:
        result = await work
    finally:
        running = False
        await spinner
    return result, turns - before
