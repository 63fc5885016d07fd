"""``python -m kccm.testing.openstack``: see :mod:`kccm.testing.openstack.server`."""

from __future__ import annotations

import sys

from kccm.testing.openstack.server import main

if __name__ == "__main__":
    sys.exit(main())
