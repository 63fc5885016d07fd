"""Warm control-plane start time (median of N) and process RSS.

Usage: .venv/bin/python bench/controlplane_start.py [N=5]
"""

from __future__ import annotations

import statistics
import sys
import time

from kccm.testing.controlplane import ControlPlane, find_binaries


def main(runs: int) -> None:
    binaries = find_binaries()
    starts: list[float] = []
    rss: list[dict[str, int]] = []
    for i in range(runs):
        with ControlPlane(binaries=binaries) as plane:
            starts.append(plane.started_in)
            time.sleep(2)  # let start-up hooks settle before reading RSS
            rss.append(plane.rss_bytes())
        print(f"run {i + 1}: ready in {plane.started_in:.2f} s, rss {rss[-1]}", flush=True)
    mib = {k: statistics.median(r[k] for r in rss) / 2**20 for k in rss[0]}
    print(
        f"start to /readyz: median {statistics.median(starts):.2f} s, "
        f"min {min(starts):.2f} s, max {max(starts):.2f} s over {runs} runs"
    )
    print("rss after start (median): " + ", ".join(f"{k} {v:.0f} MiB" for k, v in mib.items()))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
