"""``kccm local dataplane``: the local provider's data plane in the foreground."""

from __future__ import annotations

from kccm.providers.local.dataplane import main

__all__ = ["run_dataplane_cli"]


def run_dataplane_cli(args: list[str]) -> int:
    """Run the data plane until SIGTERM (``--state-file PATH``, ``--help`` for the rest)."""
    return main(args)
