"""kccm's Octavia emulator against the real Octavia API (issue 26: "the emulator ... must be
shown honest").

The real API is octavia from PyPI (``make octavia-api``: hack/openstack/octavia-api.sh) on
SQLite, noauth, the amphora provider with no-op drivers; the emulator is
``kccm.emulators.openstack``. Each row is a sequence of the requests the provider makes (the
shapes OCCM v1.36.0 sends through gophercloud: pkg/openstack/loadbalancer.go
``createFullyPopulatedOctaviaLoadBalancer``, ``ensureOctaviaListener``, ``ensureOctaviaPool``
with the batch member update, ``ensureOctaviaHealthMonitor``, ``GetLoadbalancerByName``,
``deleteLoadBalancer`` with cascade); it runs on both, and the transcripts (status, body,
error text, provisioning_status at each step) must be equal once ids, timestamps and the VIP
are masked (octavia_pair.normalise). ``Settle()`` lets the provider finish, on both at the
same point: the real API's driver-agent status update (serve.py ``/_kccm/settle``), the
emulator's ``/_emu/settle`` (its own timer is set beyond the test).

A difference is fixed in the emulator, never allowed for here: each one the comparison found
is cited where the emulator now answers as Octavia does (kccm.emulators.openstack.octavia_wsme
and the comments that name this test).

Without the installed API the test is skipped, or fails under KCCM_REQUIRE_CONTROL_PLANE=1.
Every sequence leaves both servers without a load balancer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from octavia_pair import (
    LB,
    EmulatedOctavia,
    OctaviaNotInstalled,
    RealOctavia,
    Step,
    differences,
    emulator_token,
    octavia_venv,
    run,
    start_real_octavia,
)
from octavia_sequences import SEQUENCES

from kccm.emulators.openstack.launcher import Emulator, openstack_emulator
from kccm.testing.pytest_plugin import require_control_plane

LB_ACTIVE_DELAY = 86400.0
"""The emulator's provider delay: never, within a test; ``Settle()`` finishes the changes."""

OCTAVIA_KINDS = ("loadbalancers", "listeners", "pools", "members", "healthmonitors")


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def octavia_installed() -> None:
    """Skip (fail under KCCM_REQUIRE_CONTROL_PLANE=1) before anything starts when the real
    API is not installed."""
    try:
        octavia_venv()
    except OctaviaNotInstalled as exc:
        if require_control_plane():
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def emulator(octavia_installed: None) -> Iterator[Emulator]:
    with openstack_emulator(lb_active_delay=LB_ACTIVE_DELAY) as emu:
        yield emu


@pytest.fixture(scope="module")
def real_octavia(
    emulator: Emulator, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealOctavia]:
    state_dir: Path = tmp_path_factory.mktemp("octavia-api")
    real = start_real_octavia(state_dir, str(emulator.config["project_id"]))
    try:
        yield real
    finally:
        real.stop()


@pytest.fixture
def emulated(emulator: Emulator) -> EmulatedOctavia:
    token = emulator_token(emulator.auth_url, emulator.config)
    return EmulatedOctavia(f"{emulator.base_url}/load-balancer", token, emulator.admin)


def _remove_all(backend: RealOctavia | EmulatedOctavia) -> None:
    """Delete every balancer (cascade) once it is not pending, and let the deletes finish."""
    backend.settle()
    status, answer = backend.call("GET", LB, None, None)
    assert status == 200, answer
    for lb in answer["loadbalancers"]:
        status, body = backend.call("DELETE", f"{LB}/{lb['id']}", None, {"cascade": "true"})
        assert status == 204, body
    backend.settle()


@pytest.fixture
def pair(
    real_octavia: RealOctavia, emulated: EmulatedOctavia, emulator: Emulator
) -> Iterator[tuple[RealOctavia, EmulatedOctavia]]:
    yield real_octavia, emulated
    for backend in (real_octavia, emulated):
        _remove_all(backend)
    assert real_octavia.state() == {}
    left = {k: v for k, v in emulator.admin.state().items() if k in OCTAVIA_KINDS and v}
    assert left == {}


# -- the test -----------------------------------------------------------------------------------


@pytest.mark.parametrize("steps", SEQUENCES)
def test_same_answers(
    steps: list[Step], pair: tuple[RealOctavia, EmulatedOctavia], emulator: Emulator
) -> None:
    real, emulated = pair
    names = {
        "subnet": str(emulator.config["private_subnet_id"]),
        "network": str(emulator.config["private_network_id"]),
        "project": str(emulator.config["project_id"]),
    }
    want = run(real, steps, names)
    got = run(emulated, steps, names)
    found = [
        f"step {a['step']} {a['request']}: {line}"
        for a, b in zip(want, got, strict=True)
        for line in differences(
            {"status": a["status"], "body": a["body"]}, {"status": b["status"], "body": b["body"]}
        )
    ]
    assert not found, "the emulator differs from Octavia:\n" + "\n".join(found)
