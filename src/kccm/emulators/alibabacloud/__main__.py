"""``python -m kccm.emulators.alibabacloud``: see :mod:`kccm.emulators.alibabacloud.server`."""

from __future__ import annotations

import sys

from kccm.emulators.alibabacloud.server import main

if __name__ == "__main__":
    sys.exit(main())
