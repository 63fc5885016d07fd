"""Processes by pid."""

from __future__ import annotations

import os

__all__ = ["pid_exists"]


def pid_exists(pid: int) -> bool:
    """``kill(pid, 0)`` finds the process (perhaps a zombie, perhaps another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
