"""A test helper process (vcsim, the OpenStack emulator): its ready line and its stop.

Such a process announces that it listens with one JSON object on its first stdout line (its
URL and what a client needs besides). :func:`read_ready` waits for that line in a thread, so a
process that hangs before writing it cannot hang the test: after ``timeout`` seconds, or when
the process ends without writing it, the process is killed and the caller's error raised.
:func:`stop_process` ends it: SIGTERM, SIGKILL after a grace period, its stdout pipe closed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from typing import Any

__all__ = ["read_ready", "stop_process"]


def read_ready(
    process: subprocess.Popen[str], *, timeout: float, name: str, error: type[Exception]
) -> dict[str, Any]:
    """The JSON object of ``process``'s first stdout line; ``error`` (saying whether ``name``
    did not start within ``timeout`` s or exited first, with its status) when there is none."""
    result: dict[str, str] = {}

    def read() -> None:
        assert process.stdout is not None
        result["line"] = process.stdout.readline()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    line = result.get("line") or ""
    if not line:
        timed_out = reader.is_alive()  # before the kill, which ends the read too
        process.kill()
        code = process.wait()
        if timed_out:
            raise error(f"{name} did not start within {timeout:g}s")
        raise error(f"{name} exited ({code}) before it listened")
    return dict(json.loads(line))


def stop_process(process: subprocess.Popen[str], grace: float = 10.0) -> None:
    """SIGTERM, SIGKILL after ``grace`` seconds; then its stdout pipe is closed."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()
