"""Fixtures for the unit layer. ``collector_restored`` leaves the test process's cycle collector
as it found it (callbacks, freeze, threshold, enabled): for tests of :mod:`kccm.util.gcpolicy`
and of what calls it.

The unit layer never needs a binary built from Go (the control plane, vcsim): ``make test`` runs
it while those are still compiling on a cold machine, so a unit test that asked for one would
fail there and pass on every warm one. Collecting such a test is an error naming it; its home is
tests/integration."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

BUILT_FIXTURES = frozenset({"control_plane", "control_plane_kcm", "vcsim"})
"""Fixtures that need the Go-built control plane or vcsim (kccm.testing.pytest_plugin); a test
asking for ``kube`` or ``kube_namespace`` asks for ``control_plane`` through them."""


def built_fixtures_asked(items: list[pytest.Item]) -> list[str]:
    """The ids of the unit tests asking for a Go-built binary, with the fixtures they ask for."""
    found = []
    for item in items:
        asked = BUILT_FIXTURES & set(getattr(item, "fixturenames", ()))
        if asked:
            found.append(f"{item.nodeid} ({', '.join(sorted(asked))})")
    return found


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    unit = [item for item in items if "tests/unit/" in item.nodeid.replace("\\", "/")]
    found = built_fixtures_asked(unit)
    if found:
        raise pytest.UsageError(
            "unit tests asking for a Go-built binary (move them to tests/integration): "
            + "; ".join(found)
        )


@pytest.fixture
def collector_restored() -> Iterator[None]:
    assert gc.get_freeze_count() == 0, "something else froze this test process"
    threshold, callbacks, enabled = gc.get_threshold(), list(gc.callbacks), gc.isenabled()
    yield
    gc.callbacks[:] = callbacks
    gc.unfreeze()
    gc.set_threshold(*threshold)
    if enabled:
        gc.enable()
