"""The ``kccm`` command line."""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:2] == ["dev", "up"]:
        from kccm.app.devup import run_dev_up

        return run_dev_up(args[2:])
    print("usage: kccm dev up [--check]", file=sys.stderr)
    return 2
