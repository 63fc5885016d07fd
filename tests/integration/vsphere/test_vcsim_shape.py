"""vcsim answers in the shape every cloud emulator has (the Python emulators are checked in
tests/unit/emulators/test_shape.py; vcsim is a Go-built binary, so its check lives here)."""

from __future__ import annotations

from kccm.emulators.vsphere.vcsim import Vcsim
from kccm.testing.emulatorshape import check_running_shape


def test_vcsim_answers_in_the_shape(vcsim: Vcsim) -> None:
    check_running_shape(vcsim)
