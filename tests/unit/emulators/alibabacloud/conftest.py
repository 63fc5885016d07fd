"""One emulator process per test module; ``clean`` checks that a test leaves it as it found it
(balancers and NLB server groups a failed test left behind are removed first, so later tests do
not see them, and named in the failure)."""

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
    state = emu.state()
    left = sorted(set(state["balancers"]) - set(baseline["balancers"]))
    for lb_id in left:
        emu.admin.delete_balancer(lb_id)
    left_nlb = sorted(set(state["nlb_balancers"]) - set(baseline["nlb_balancers"]))
    for lb_id in left_nlb:
        emu.admin.delete_nlb(lb_id)
    left_groups = sorted(set(state["nlb_server_groups"]) - set(baseline["nlb_server_groups"]))
    for group_id in left_groups:
        emu.admin.delete_server_group(group_id)
    left += left_nlb + left_groups
    emu.admin.set_job_reads(1)
    emu.assert_clean(baseline)
    assert not left, f"balancers left behind: {left}"
