"""The daemon's event loop: uvloop where it is installed (a core dependency on Linux and
macOS), else asyncio's own.

uvloop runs the loop, its timers and its TCP and TLS transports in C (libuv): every API
request, watch event and timer of the daemon goes through them, and at 1,000 Node
initialisations the pure-Python loop was about a fifth of kccm's CPU. Behaviour is asyncio's
(uvloop implements the same loop API); tests that run the daemon as a process run it on
uvloop too, so both loops are exercised: unit tests run in-process on asyncio's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_loop"]

_T = TypeVar("_T")


def run_loop(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)`` on the daemon's loop."""
    try:
        import uvloop
    except ImportError:  # Windows, or a platform without wheels
        return asyncio.run(main)
    return uvloop.run(main)
