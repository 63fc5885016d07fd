"""Fixtures of the vsphere tests (``vcsim`` itself comes from kccm's pytest plugin)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from vsphere_admin import VCAdmin

from kccm.emulators.vsphere.vcsim import Vcsim


@pytest.fixture(scope="module")
def admin(vcsim: Vcsim) -> Iterator[VCAdmin]:
    admin = VCAdmin(vcsim)
    try:
        yield admin
    finally:
        admin.close()
