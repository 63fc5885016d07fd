"""``python -m kccm.providers.local.dataplane_main``: the detached data plane process."""

from __future__ import annotations

import sys

from kccm.providers.local.dataplane.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
