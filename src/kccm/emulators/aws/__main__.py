"""``python -m kccm.emulators.aws``: see :mod:`kccm.emulators.aws.server`."""

from __future__ import annotations

import sys

from kccm.emulators.aws.server import main

if __name__ == "__main__":
    sys.exit(main())
