"""What every running cloud emulator answers (kccm.emulators.CloudEmulator), checked the same way
for the Python emulators in the unit layer and for vcsim, a Go binary, in the integration layer."""

from __future__ import annotations

from kccm.emulators import CloudEmulator
from kccm.emulators.process import EmulatorProcess


def check_running_shape(emulator: object) -> None:
    """Assert that ``emulator`` is a running CloudEmulator answering every part of the shape."""
    assert isinstance(emulator, CloudEmulator)
    assert isinstance(emulator, EmulatorProcess)
    assert emulator.url.startswith(("http://127.0.0.1:", "https://127.0.0.1:"))
    assert all(isinstance(n, int) for n in emulator.call_counts().values())
    emulator.clear_faults()
    baseline = emulator.state()
    emulator.assert_clean(baseline)
    assert emulator.process.poll() is None
