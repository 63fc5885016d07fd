"""pytest plugin (entry point ``pytest11: kccm``): a real control plane for integration tests.

Fixtures:
- ``control_plane`` (session): a running :class:`~kccm.testing.controlplane.ControlPlane`
  (etcd + kube-apiserver). Without binaries the test is skipped with the reason; with
  ``KCCM_REQUIRE_CONTROL_PLANE=1`` it fails instead (CI sets it, so a missing control plane
  can never pass silently).
- ``control_plane_kcm`` (session, opt-in): a second, separate control plane that also runs
  kube-controller-manager (``--cloud-provider=external``; namespace, garbage collector, node
  lifecycle with a 5 s grace period, service-account tokens). Separate so that its node
  lifecycle controller never marks the Nodes of ``control_plane``'s tests (which post no
  heartbeats) NotReady, and so that tests which do not ask for it pay nothing.
- ``kube`` (async): a :class:`~kccm.kube.client.KubeApiClient` authenticated as admin.
- ``kube_namespace`` (async): a fresh namespace for the test, deleted afterwards.
- ``kube_cleanup`` (async): register cluster-scoped objects (Nodes, ...) to delete afterwards.
- ``controller_runs`` (async): open :class:`~kccm.testing.controllers.ControllerRun` s (a
  controller context on the control plane, its controllers stopped at the test's end).
- ``vcsim`` (module): a vCenter simulator (:mod:`kccm.emulators.vsphere.vcsim`): 1
  datacenter, 1 cluster of 3 hosts, 2 VMs per pool; skipped (or failed, as above) without
  the binary, which ``make vcsim`` builds.

Tests that use either are marked ``integration`` automatically.

Leak check: on the shared control planes (the two above), a test or module must leave no
LoadBalancer Service, no Service holding a finalizer and no Node that was not there before it
(:mod:`kccm.testing.leaks`: each would be acted on by every later daemon). A test's check runs
after its own fixtures' teardown; a module's after the module-scoped fixtures'. A leak fails
that test (an error at teardown naming the objects) and the objects are removed, so the next
test starts clean. ``kube_namespace`` deletes the Services in its namespace before the
namespace; a Service still holding its finalizer then is the test's leak (its controller was
stopped before the Service was deleted).
"""

from __future__ import annotations

import contextlib
import os
import resource as rlimits
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pytest

from kccm.cloudprovider.interface import Interface
from kccm.emulators.vsphere.vcsim import Vcsim, VcsimError, start_vcsim
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.errors import NotFound
from kccm.kube.resources import NAMESPACES, SERVICES, Resource
from kccm.testing import leaks
from kccm.testing.controllers import ControllerRun, controller_run, delete_until_gone
from kccm.testing.controlplane import ControlPlane, ControlPlaneError, find_binaries

__all__ = [
    "KubeCleanup",
    "OpenControllerRun",
    "require_control_plane",
    "unavailable",
    "unique_name",
]

REQUIRE_ENV = "KCCM_REQUIRE_CONTROL_PLANE"
RELEASE_WAIT = 30.0
"""How long ``kube_namespace`` waits for its deleted Services to let go of their finalizers."""

OpenControllerRun = Callable[..., Awaitable[ControllerRun]]
"""The ``controller_runs`` fixture's type: ``await controller_runs(cloud, grace=...)``."""


def require_control_plane() -> bool:
    """True when a missing control plane must fail tests instead of skipping them."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0", "false")


def unique_name(prefix: str = "kccm") -> str:
    """A DNS-1123 name unique to this call (the API server never garbage-collects here)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def pytest_configure(config: pytest.Config) -> None:
    _raise_open_files_limit()
    config.addinivalue_line(
        "markers", "integration: needs the real etcd + kube-apiserver control plane"
    )


def _raise_open_files_limit(wanted: int = 8192) -> None:
    """Port claims (kccm.testing.ports), control planes, daemons and their pipes hold files:
    lift a low soft limit (1024 on many machines) towards the hard one."""
    soft, hard = rlimits.getrlimit(rlimits.RLIMIT_NOFILE)
    target = wanted if hard == rlimits.RLIM_INFINITY else min(wanted, hard)
    if soft != rlimits.RLIM_INFINITY and soft < target:
        rlimits.setrlimit(rlimits.RLIMIT_NOFILE, (target, hard))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if {"control_plane", "control_plane_kcm"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


_SHARED: list[ControlPlane] = []
"""The running shared control planes (``control_plane``, ``control_plane_kcm``)."""


def _snapshot() -> dict[int, set[leaks.Leftover]]:
    return {id(plane): leaks.leftovers(plane) for plane in _SHARED}


def _leaked(before: dict[int, set[leaks.Leftover]]) -> str:
    """What the running shared planes hold that ``before`` did not (removed); "" if nothing."""
    found = []
    for plane in list(_SHARED):
        new = leaks.leftovers(plane) - before.get(id(plane), set())
        if new:
            leaks.remove(plane, new)
            found.append(leaks.describe(new))
    return "; ".join(found)


_MODULE_BASELINE: dict[str, dict[int, set[leaks.Leftover]]] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    module = item.nodeid.split("::")[0]
    if module not in _MODULE_BASELINE:  # before the module's fixtures are set up
        _MODULE_BASELINE.clear()
        _MODULE_BASELINE[module] = _snapshot()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    module = item.nodeid.split("::")[0]
    leaked = ""
    try:
        return (yield)
    finally:
        if nextitem is None or nextitem.nodeid.split("::")[0] != module:
            baseline = _MODULE_BASELINE.pop(module, {})
            leaked = _leaked(baseline)  # the module's fixtures are torn down now
        if leaked:  # after the teardown's own error, if any, which pytest reports first
            pytest.fail(f"{module} left on the shared control plane: {leaked}", pytrace=False)


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """Fails the test that leaves a LoadBalancer Service, a finalizer or a Node behind."""
    before = _snapshot()  # after higher-scoped fixtures, before the test's own
    yield
    leaked = _leaked(before)
    if leaked:
        pytest.fail(f"the test left on the shared control plane: {leaked}", pytrace=False)


def unavailable(what: str, reason: str) -> NoReturn:
    """Skip the test for want of ``what``, or fail it under ``KCCM_REQUIRE_CONTROL_PLANE=1``
    (where ``make test`` has built everything a test needs)."""
    if require_control_plane():
        pytest.fail(f"{REQUIRE_ENV}=1 but {what} is unavailable: {reason}")
    pytest.skip(f"{what} unavailable: {reason}")


def _unavailable(reason: str) -> NoReturn:
    unavailable("the control plane", reason)


def start_vcsim_or_skip(**shape: Any) -> Vcsim:
    """:func:`~kccm.emulators.vsphere.vcsim.start_vcsim`, or the test skipped (failed with
    ``KCCM_REQUIRE_CONTROL_PLANE=1``: ``make test`` builds vcsim) when it cannot start."""
    try:
        return start_vcsim(**shape)
    except VcsimError as exc:
        unavailable("vcsim", str(exc))


@pytest.fixture(scope="module")
def vcsim() -> Iterator[Vcsim]:
    """One vcsim per test module (1 datacenter, 1 cluster of 3 hosts, 2 VMs)."""
    with start_vcsim_or_skip() as sim:
        yield sim


def _running_plane(*, controller_manager: bool) -> Iterator[ControlPlane]:
    try:
        binaries = find_binaries(controller_manager=controller_manager)
    except ControlPlaneError as exc:
        _unavailable(str(exc))
    plane = ControlPlane(binaries=binaries, controller_manager=controller_manager)
    try:
        plane.start()
    except ControlPlaneError as exc:
        _unavailable(str(exc))
    _SHARED.append(plane)
    try:
        yield plane
    finally:
        _SHARED.remove(plane)
        plane.stop()


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """A real etcd + kube-apiserver shared by the whole test session."""
    yield from _running_plane(controller_manager=False)


@pytest.fixture(scope="session")
def control_plane_kcm() -> Iterator[ControlPlane]:
    """Another etcd + kube-apiserver, with kube-controller-manager, started on first use."""
    yield from _running_plane(controller_manager=True)


@dataclass
class KubeCleanup:
    """Objects to delete when the test ends (NotFound is fine)."""

    client: KubeApiClient
    items: list[tuple[Resource, str, str | None]] = field(default_factory=list)

    def add(self, resource: Resource, name: str, namespace: str | None = None) -> str:
        self.items.append((resource, name, namespace))
        return name

    async def run(self) -> None:
        for resource, name, namespace in reversed(self.items):
            with contextlib.suppress(NotFound):
                await self.client.delete(resource, name, namespace=namespace)
        self.items.clear()


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - the async fixtures need pytest-asyncio
    pass
else:

    @pytest_asyncio.fixture
    async def kube(control_plane: ControlPlane) -> AsyncIterator[KubeApiClient]:
        """An admin client on the session's control plane (no client-side rate limit)."""
        config = load_cluster_config(str(control_plane.admin_kubeconfig))
        client = KubeApiClient(config, qps=0, burst=0)
        try:
            yield client
        finally:
            await client.close()

    @pytest_asyncio.fixture
    async def kube_namespace(kube: KubeApiClient) -> AsyncIterator[str]:
        """A namespace of the test's own, deleted afterwards."""
        name = unique_name("kccm-test")
        await kube.create(NAMESPACES, {"metadata": {"name": name}})
        try:
            yield name
        finally:
            services = [
                s["metadata"]["name"] for s in (await kube.list(SERVICES, namespace=name)).items
            ]
            # a controller the test still runs (a fixture set up before this one) releases its
            # finalizers meanwhile; a test that stopped it leaves them, and the leak check says so
            with contextlib.suppress(TimeoutError):
                await delete_until_gone(kube, SERVICES, services, name, within=RELEASE_WAIT)
            with contextlib.suppress(NotFound):
                await kube.delete(NAMESPACES, name)

    @pytest_asyncio.fixture
    async def kube_cleanup(kube: KubeApiClient) -> AsyncIterator[KubeCleanup]:
        """``kube_cleanup.add(NODES, name)`` deletes the Node when the test ends."""
        cleanup = KubeCleanup(kube)
        try:
            yield cleanup
        finally:
            await cleanup.run()

    @pytest_asyncio.fixture
    async def controller_runs(kube: KubeApiClient) -> AsyncIterator[OpenControllerRun]:
        """``run = await controller_runs(cloud)``: a :class:`ControllerRun` on the test's
        control plane (see :func:`kccm.testing.controllers.controller_run`); every run opened
        is stopped when the test ends (a test may also stop one earlier)."""
        async with contextlib.AsyncExitStack() as stack:

            async def open_run(cloud: Interface, **options: Any) -> ControllerRun:
                return await stack.enter_async_context(controller_run(kube, cloud, **options))

            yield open_run
