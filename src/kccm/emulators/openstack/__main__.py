"""``python -m kccm.emulators.openstack``: see :mod:`kccm.emulators.openstack.server`."""

from __future__ import annotations

import sys

from kccm.emulators.openstack.server import main

if __name__ == "__main__":
    sys.exit(main())
