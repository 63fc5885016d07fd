"""``python -m kccm.emulators.azure``: see :mod:`kccm.emulators.azure.server`."""

from __future__ import annotations

import sys

from kccm.emulators.azure.server import main

if __name__ == "__main__":
    sys.exit(main())
