"""A leader-election candidate process for tests: ``python -m kccm.testing.election_candidate``.

Prints one JSON line per event to stdout — ``{"event": "started"|"stopped"|"lost",
"identity": ..., "t": <CLOCK_MONOTONIC seconds>}`` — so a test can compare leadership
intervals across processes (CLOCK_MONOTONIC is system-wide on Linux).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.runtime.leaderelection import LeaderElectionConfig, LeaderElector


def _emit(event: str, identity: str) -> None:
    line = json.dumps({"event": event, "identity": identity, "t": time.monotonic()})
    print(line, flush=True)


async def _main(args: argparse.Namespace) -> int:
    client = KubeApiClient(load_cluster_config(args.kubeconfig))
    config = LeaderElectionConfig(
        namespace=args.namespace,
        name=args.name,
        identity=args.identity,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )

    async def lead() -> None:
        _emit("started", args.identity)
        await asyncio.Event().wait()

    elector = LeaderElector(
        client,
        config,
        on_started_leading=lead,
        on_stopped_leading=lambda: _emit("stopped", args.identity),
    )
    _emit("candidate", args.identity)
    try:
        kept = await elector.run()
    finally:
        await client.close()
    if not kept:
        _emit("lost", args.identity)
    return 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--namespace", default="kube-system")
    parser.add_argument("--name", default="kccm-election-test")
    parser.add_argument("--lease-duration", type=float, default=15.0)
    parser.add_argument("--renew-deadline", type=float, default=10.0)
    parser.add_argument("--retry-period", type=float, default=2.0)
    return asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
