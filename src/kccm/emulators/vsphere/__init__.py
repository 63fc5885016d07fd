"""vSphere's emulator: govmomi's vcsim (``hack/vcsim``, built by ``make vcsim``) and its
runner (:mod:`~kccm.emulators.vsphere.vcsim`), and a fake of the shared session manager the
CPI can take its vCenter sessions from (:mod:`~kccm.emulators.vsphere.sessionmanager`)."""

from kccm.emulators.vsphere.sessionmanager import FakeSessionManager
from kccm.emulators.vsphere.vcsim import (
    GOVMOMI_VERSION,
    Vcsim,
    VcsimError,
    start_vcsim,
    vcsim_binary,
)

__all__ = [
    "GOVMOMI_VERSION",
    "FakeSessionManager",
    "Vcsim",
    "VcsimError",
    "start_vcsim",
    "vcsim_binary",
]
