"""``kccm addresses list|release``: the addresses kept by address retention
(docs/behaviour.md, "Keeping a balancer's address"), through the provider.

The command builds the provider as the daemon does (``--cloud-provider``, ``--cloud-config``)
without initializing it (no controller, no data plane, no informers) and calls its optional
:class:`~kccm.cloudprovider.interface.AddressRetainer`: run it where the daemon's cloud
credentials are (its pod, or a machine with the same cloud config). A provider without the
capability is refused by name (exit status 1); a usage error exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from kccm.cloudprovider import (
    AddressRetainer,
    RetainedAddress,
    as_address_retainer,
    init_cloud_provider,
)
from kccm.cloudprovider.adapter import ThreadPoolAdapter
from kccm.controllers.base import DEFAULT_CLUSTER_NAME

__all__ = ["ADDRESSES_USAGE", "run_addresses"]

ADDRESSES_USAGE = """\
The addresses kept by address retention (service.kccm.io/retain-address,
--default-retain-address): list them, or give one back to the cloud.

Usage:
  kccm addresses list --cloud-provider NAME [--cloud-config FILE] [--cluster-name NAME] [-o json]
  kccm addresses release ADDRESS --cloud-provider NAME [--cloud-config FILE] [--cluster-name NAME]
      ADDRESS is the IP or the cloud's ID of it (eipalloc-..., a floating IP's ID)
"""


class _Refused(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kccm addresses", usage=ADDRESSES_USAGE, add_help=True)
    parser.add_argument("verb", choices=("list", "release"))
    parser.add_argument("address", nargs="?", default="")
    parser.add_argument("--cloud-provider", required=True)
    parser.add_argument("--cloud-config", default=None)
    parser.add_argument("--cluster-name", default=DEFAULT_CLUSTER_NAME)
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    return parser


def _retainer(provider: str, config: str | None) -> AddressRetainer:
    cloud = init_cloud_provider(provider, config)
    if cloud is None:
        raise _Refused(f"--cloud-provider {provider!r} names no provider")
    retainer = as_address_retainer(cloud.load_balancer())
    if retainer is None:
        raise _Refused(f"provider {provider!r} does not implement address retention")
    return retainer


async def _call(fn: Any, *args: Any) -> Any:
    adapter = ThreadPoolAdapter(max_workers=1)
    try:
        return await adapter.call(fn.__name__, fn, *args)
    finally:
        adapter.close()


def _render(kept: Sequence[RetainedAddress], output: str, out: TextIO) -> None:
    if output == "json":
        json.dump([a.to_dict() for a in kept], out, indent=2)
        out.write("\n")
        return
    rows = [("ADDRESS", "ID", "OWNER", "MARK")]
    rows += [(a.address, a.id or "-", a.owner, a.detail or "-") for a in kept]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")


def _run(args: argparse.Namespace, out: TextIO) -> int:
    retainer = _retainer(args.cloud_provider, args.cloud_config)
    if args.verb == "list":
        kept = asyncio.run(_call(retainer.list_retained_addresses, args.cluster_name))
        _render(kept, args.output, out)
        return 0
    released = asyncio.run(
        _call(retainer.release_retained_address, args.cluster_name, args.address)
    )
    if not released:
        raise _Refused(f"{args.address} is no retained address of cluster {args.cluster_name}")
    out.write(f"released {args.address}\n")
    return 0


def run_addresses(argv: Sequence[str], out: TextIO | None = None) -> int:
    """``kccm addresses ...``; the exit status."""
    args = _parser().parse_args(list(argv))
    if (args.verb == "release") != bool(args.address):
        print(ADDRESSES_USAGE, end="", file=sys.stderr)
        return 2
    try:
        return _run(args, out or sys.stdout)
    except _Refused as err:
        print(f"kccm addresses: {err}", file=sys.stderr)
        return 1
