"""A scale bench of bench/ run with ``--quick`` as a subprocess, for the tests that keep each
bench working (the per-cloud ``test_*_bench_smoke.py``): its figures, read from its ``--json``
file, with its configs and logs in the test's own directory (``--workdir``), so a run leaves
nothing in the machine's temporary directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["run_quick_bench"]


def run_quick_bench(script: Path, workdir: Path, *options: str, timeout: float = 280.0) -> Any:
    """Run ``script --quick <options>`` and return its JSON figures; a failed run raises
    ``AssertionError`` carrying the bench's output."""
    out = workdir / "figures.json"
    command = [sys.executable, str(script), "--quick", *options, "--json", str(out)]
    done = subprocess.run(
        [*command, "--workdir", str(workdir / "run")],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(done.stdout + done.stderr[-5000:])
    return json.loads(out.read_text())
