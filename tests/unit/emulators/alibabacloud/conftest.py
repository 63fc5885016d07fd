"""One emulator process per test module; ``clean`` checks that a test leaves it as it found it
(balancers a failed test left behind are removed first, so later tests do not see them, and
named in the failure)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kccm.emulators.alibabacloud import AlibabaEmulator, alibaba_emulator


@pytest.fixture(scope="module")
def emu() -> Iterator[AlibabaEmulator]:
    with alibaba_emulator() as running:
        yield running


@pytest.fixture
def clean(emu: AlibabaEmulator) -> Iterator[AlibabaEmulator]:
    baseline = emu.state()
    yield emu
    emu.clear_faults()
    left = sorted(set(emu.state()["balancers"]) - set(baseline["balancers"]))
    for lb_id in left:
        emu.admin.delete_balancer(lb_id)
    emu.assert_clean(baseline)
    assert not left, f"balancers left behind: {left}"
