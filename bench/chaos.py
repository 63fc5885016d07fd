"""Issue 28, "a hundred kills": SIGKILL the leading kccm (or restart the kube-apiserver) at
random moments while Services are created, changed and deleted and Nodes come and go; then
check the cloud: 0 leaked, 0 duplicated, 0 stale balancers, 0 Services without one, 0 double
leaders. Prints the final ledger (and writes it as JSON with ``--json``).

    .venv/bin/python bench/chaos.py --provider local --mode kill --faults 100 --seed 1
    .venv/bin/python bench/chaos.py --provider aws --mode apiserver

``local``: every daemon shares one state file (kccm.testing.chaos.local); ``aws``: moto in
server mode behind the fault proxy, each daemon with its own access key id
(bench/chaos_aws.py). How leadership is judged: kccm.testing.chaos.leadership.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import tempfile
from pathlib import Path

from kccm.testing.chaos import ChaosSettings, ChaosWorld, LocalWorld, run_chaos
from kccm.testing.controlplane import ControlPlane
from kccm.testing.modules import load_module

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=("local", "aws"), default="local")
    parser.add_argument("--mode", choices=("kill", "apiserver", "partition"), default="kill")
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    print(f"chaos: provider {args.provider}, mode {args.mode}, {args.faults} faults, seed {seed}")
    with tempfile.TemporaryDirectory(prefix="kccm-chaos-") as tmp, ControlPlane() as plane:
        run = f"c{secrets.token_hex(3)}"
        world: ChaosWorld
        if args.provider == "local":
            world = LocalWorld(Path(tmp), run)
        else:
            chaos_aws = load_module("chaos_aws", ROOT / "bench" / "chaos_aws.py")
            world = chaos_aws.AwsWorld.start(Path(tmp), run)
        settings = ChaosSettings(
            args.mode, args.faults, seed, args.replicas, ROOT / "deploy" / "rbac.yaml"
        )
        clean = False
        try:
            ledger = asyncio.run(run_chaos(plane, world, Path(tmp), settings, run))
            print(ledger.render())
            if args.json:
                args.json.write_text(json.dumps(ledger.as_json(), indent=2))
            clean = ledger.clean
        finally:
            if not clean:
                for log in sorted(Path(tmp).glob("kccm-*.log")):
                    kept = Path(f"/tmp/kccm-chaos-{run}-{log.name}")
                    kept.write_bytes(log.read_bytes())
                print(f"daemon logs kept in /tmp/kccm-chaos-{run}-*.log")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
