"""Shut down = not powered on (upstream ``IsActive``); an unreported power state is an error."""

from __future__ import annotations

import pytest

from kccm.cloudprovider import CloudProviderError
from kccm.providers.vsphere.instances import _shut_down
from kccm.providers.vsphere.inventory import VMInfo


def _vm(power_state: str) -> VMInfo:
    return VMInfo(
        vcenter="vc",
        moref="vm-1",
        name="vm",
        uuid="u",
        hostname="h",
        power_state=power_state,
        guest_id="",
        num_cpu=1,
        memory_mb=1024,
        nics=(),
        guestinfo={},
        datacenter="DC0",
        chains=(),
    )


@pytest.mark.parametrize(
    ("power_state", "shut_down"),
    [
        pytest.param("poweredOn", False, id="powered-on-runs"),
        pytest.param("poweredOff", True, id="powered-off-is-shut-down"),
        pytest.param("suspended", True, id="suspended-is-shut-down"),
        pytest.param("", None, id="unreported-is-an-error-not-shut-down"),
    ],
)
def test_power_state(power_state: str, shut_down: bool | None) -> None:
    if shut_down is None:
        with pytest.raises(CloudProviderError, match="reported no power state"):
            _shut_down(_vm(power_state))
    else:
        assert _shut_down(_vm(power_state)) is shut_down
