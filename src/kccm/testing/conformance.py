"""The provider conformance kit: a pytest class every provider package subclasses.

Usage, in a provider's test suite::

    import pytest
    from kccm.testing.conformance import CloudProviderConformance

    class TestMyCloud(CloudProviderConformance):
        @pytest.fixture
        def cloud(self):
            return MyCloud(...)

The class checks the behaviour the controllers depend on (see each test's docstring). Tests
for a capability the provider does not support are skipped. Providers whose clouds need real
machines override ``lb_nodes`` (Nodes the load balancer may target) and ``known_node`` (a Node
whose instance exists); without ``known_node`` the existing-instance checks are skipped.

Economy and repair (issue 16): a provider exposing its cloud requests through
``cloud_api_calls()`` (:class:`~kccm.cloudprovider.apicalls.APICallReporter`) is checked to
make no mutating request for an ensure or update that changes nothing. A provider that
supplies the ``load_balancer_tamper`` fixture (a :class:`LoadBalancerTamper`, which changes
or deletes its balancer behind its back, as an operator in the cloud console would) is checked
to repair the change, and re-create the deleted balancer, with the next ensure. Without the
ledger or the fixture those checks are skipped, with the reason.

Optional describe calls (issue 27, ``kccm explain``): a provider implementing
``describe_load_balancer`` is checked to list the listeners of an ensured balancer (one per
Service port) and nothing for a deleted one, with no mutating request; one implementing
``describe_instance`` to say that a ``known_node``'s machine exists and that an unknown
providerID's does not. Without them those checks are skipped, with the reason.

Optional address retention (issue 39, :mod:`.conformance_retention`): a provider implementing
``AddressRetainer`` is checked to keep a released balancer's address, give it back to a
re-created Service of the same namespace/name, and release it on demand.

Optional drain (issue 39, :mod:`.conformance_drain`): a provider implementing
``TargetDrainer`` is checked to keep a draining Node a target (described as draining) until
it is left out, and never to add a draining Node it did not target.

Optional shared balancers (issue 39, :mod:`.conformance_sharing`): a provider implementing
``BalancerSharer`` is checked to give two Services of one share group one address, keep one
Service's listeners when the other is deleted, and leave nothing after the last.
Sync and async providers are both supported: every call goes through the thread-pool
adapter the framework uses. The tests are ``async`` and marked for pytest-asyncio (strict or
auto mode both work).
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Protocol, TypeVar

import pytest

from kccm.api.wellknown import ANNOTATION_TARGET_NODE_SELECTOR
from kccm.cloudprovider import (
    APICallCounts,
    CloudAPICalls,
    InstanceNotFound,
    Instances,
    InstancesV2,
    Interface,
    LoadBalancer,
    LoadBalancerStatus,
    MaybeAwaitable,
    Node,
    Route,
    Routes,
    Service,
    ThreadPoolAdapter,
    as_api_call_reporter,
    as_instance_describer,
    as_load_balancer_describer,
)
from kccm.testing.conformance_drain import TargetDrainConformance
from kccm.testing.conformance_objects import make_node, make_service
from kccm.testing.conformance_retention import AddressRetentionConformance
from kccm.testing.conformance_sharing import BalancerSharingConformance
from kccm.testing.conformance_targets import targeted_nodes

__all__ = ["CloudProviderConformance", "LoadBalancerTamper", "make_node", "make_service"]

T = TypeVar("T")

_CLUSTER = "kccm-conformance"


class LoadBalancerTamper(Protocol):
    """What a provider's test supplies (fixture ``load_balancer_tamper``) so the kit can check
    that an ensure repairs drift: changes made to the balancer in the cloud, not through the
    provider. Each method may be ``async def`` or plain ``def``."""

    def change(self, cloud: Interface, cluster_name: str, service: Service) -> MaybeAwaitable[None]:
        """Change the ensured balancer of ``service`` so it no longer serves what was asked
        (e.g. drop a listener or the backends, change a port or a health check)."""
        ...

    def delete(self, cloud: Interface, cluster_name: str, service: Service) -> MaybeAwaitable[None]:
        """Delete the balancer of ``service`` (and what belongs to it) outside the provider."""
        ...

    def is_intact(
        self, cloud: Interface, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> MaybeAwaitable[bool]:
        """Whether the balancer of ``service`` exists and serves what ``service`` and
        ``nodes`` ask for (ports, backends, ...), read from the cloud."""
        ...


def _usable(status: LoadBalancerStatus) -> bool:
    return bool(status.ingress) and all(i.ip or i.hostname for i in status.ingress)


class CloudProviderConformance(
    AddressRetentionConformance, TargetDrainConformance, BalancerSharingConformance
):
    """Subclass it (with a ``Test`` name) and provide the ``cloud`` fixture."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.asyncio]

    max_load_balancer_name_length: ClassVar[int] = 32
    """Longest name ``get_load_balancer_name`` may return (32 fits every major cloud)."""
    route_cidrs: ClassVar[tuple[str, ...]] = ("10.244.7.0/24", "10.244.8.0/24")
    """Pod CIDRs the route round trip uses."""

    # -- fixtures a provider package supplies or overrides ------------------------------------

    @pytest.fixture
    def cloud(self) -> Interface:
        """The provider under test (override this)."""
        pytest.fail("override the `cloud` fixture to return the provider under test")

    @pytest.fixture
    def lb_nodes(self) -> list[Node]:
        """Nodes a load balancer may send traffic to."""
        return [make_node(f"conformance-node-{i}", address=f"10.0.0.{i + 1}") for i in range(3)]

    @pytest.fixture
    def known_node(self) -> Node | None:
        """A Node whose instance exists and runs (``None``: skip those checks)."""
        return None

    @pytest.fixture
    def unknown_provider_id(self, cloud: Interface) -> str:
        """A providerID in this provider's own format that names no instance. The default,
        ``<name>://kccm-conformance-<random>``, suits providers whose IDs are free-form;
        override it where the format is checked (e.g. aws: ``aws:///<zone>/i-<17 hex>``, as
        an ID the provider cannot parse is an error upstream, never "does not exist")."""
        return f"{cloud.provider_name()}://kccm-conformance-{uuid.uuid4().hex}"

    @pytest.fixture
    def load_balancer_tamper(self) -> LoadBalancerTamper | None:
        """Changes the provider's balancers behind its back (``None``: skip the repair checks)."""
        return None

    @pytest.fixture
    def call(self) -> Iterator[ThreadPoolAdapter]:
        """Runs provider methods as the framework does (sync ones in a thread pool)."""
        adapter = ThreadPoolAdapter(max_workers=4)
        yield adapter
        adapter.close()

    # -- helpers -----------------------------------------------------------------------------

    @staticmethod
    def _need(capability: T | None, name: str) -> T:
        if capability is None:
            pytest.skip(f"the provider does not support {name}")
        return capability

    def _lb(self, cloud: Interface) -> LoadBalancer:
        return self._need(cloud.load_balancer(), "LoadBalancer")

    @asynccontextmanager
    async def _balancer(
        self, cloud: Interface, name: str, call: ThreadPoolAdapter
    ) -> AsyncIterator[tuple[LoadBalancer, Service]]:
        """The provider's LoadBalancer and a Service ``name``; its balancer is deleted after."""
        lb, svc = self._lb(cloud), make_service(name)
        try:
            yield lb, svc
        finally:
            await call.call("delete", lb.ensure_load_balancer_deleted, _CLUSTER, svc)

    def _v2(self, cloud: Interface) -> InstancesV2:
        return self._need(cloud.instances_v2(), "InstancesV2")

    def _v1(self, cloud: Interface) -> Instances:
        return self._need(cloud.instances(), "Instances")

    def _routes(self, cloud: Interface) -> Routes:
        return self._need(cloud.routes(), "Routes")

    @staticmethod
    def _ledger(cloud: Interface) -> CloudAPICalls:
        reporter = as_api_call_reporter(cloud)
        if reporter is None:
            pytest.skip(
                "the provider exposes no cloud_api_calls() ledger "
                "(kccm.cloudprovider.apicalls.APICallReporter)"
            )
        return reporter.cloud_api_calls()

    @staticmethod
    def _tamper(tamper: LoadBalancerTamper | None) -> LoadBalancerTamper:
        if tamper is None:
            pytest.skip(
                "no load_balancer_tamper fixture: supply a LoadBalancerTamper that changes and "
                "deletes this provider's balancer behind its back"
            )
        return tamper

    # -- Interface ---------------------------------------------------------------------------

    async def test_provider_name_is_a_providerid_scheme(self, cloud: Interface) -> None:
        """provider_name is non-empty lowercase, usable as ``<name>://`` in providerIDs."""
        name = cloud.provider_name()
        assert name
        assert name == name.lower()
        assert "://" not in name

    # -- LoadBalancer ------------------------------------------------------------------------

    async def test_ensure_load_balancer_is_idempotent(
        self, cloud: Interface, lb_nodes: list[Node], call: ThreadPoolAdapter
    ) -> None:
        """Ensuring twice succeeds, returns a usable status, and the same one both times."""
        async with self._balancer(cloud, "conf-idempotent", call) as (lb, svc):
            first = await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
            second = await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
            assert _usable(first), f"status has no ip or hostname: {first}"
            assert first.ingress == second.ingress

    async def test_get_after_ensure_reports_the_balancer(
        self, cloud: Interface, lb_nodes: list[Node], call: ThreadPoolAdapter
    ) -> None:
        """get_load_balancer reports an ensured balancer as existing, with a usable status."""
        async with self._balancer(cloud, "conf-get", call) as (lb, svc):
            await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
            status, exists = await call.call("get", lb.get_load_balancer, _CLUSTER, svc)
            assert exists
            assert status is not None
            assert _usable(status)

    async def test_update_with_a_changed_node_set(
        self, cloud: Interface, lb_nodes: list[Node], call: ThreadPoolAdapter
    ) -> None:
        """update_load_balancer accepts a different node set, including an empty one."""
        async with self._balancer(cloud, "conf-update", call) as (lb, svc):
            await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes[:2])
            await call.call("update", lb.update_load_balancer, _CLUSTER, svc, lb_nodes[1:])
            await call.call("update", lb.update_load_balancer, _CLUSTER, svc, [])
            _, exists = await call.call("get", lb.get_load_balancer, _CLUSTER, svc)
            assert exists

    async def test_an_ensure_or_update_with_nothing_changed_makes_no_mutating_call(
        self, cloud: Interface, lb_nodes: list[Node], call: ThreadPoolAdapter
    ) -> None:
        """Read-compare-write: once a balancer is ensured, ensuring it again (as every start
        does) and updating it with the same nodes (in another order) send the cloud no
        mutating request."""
        ledger = self._ledger(cloud)
        async with self._balancer(cloud, "conf-economy", call) as (lb, svc):
            await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
            before = ledger.snapshot()
            await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
            nodes = list(reversed(lb_nodes))
            await call.call("update", lb.update_load_balancer, _CLUSTER, svc, nodes)
            made = ledger.snapshot().since(before)
            assert dict(made.writes) == {}, f"mutating requests with nothing changed: {made}"

    async def test_a_balancer_changed_behind_the_providers_back_is_repaired(
        self,
        cloud: Interface,
        lb_nodes: list[Node],
        call: ThreadPoolAdapter,
        load_balancer_tamper: LoadBalancerTamper | None,
    ) -> None:
        """The next ensure reads the balancer, finds what was changed in the cloud, and
        repairs it (with a ledger: by mutating requests, after which a further ensure finds
        nothing to do)."""
        tamper = self._tamper(load_balancer_tamper)
        ledger = as_api_call_reporter(cloud)
        async with self._balancer(cloud, "conf-drift", call) as (lb, svc):
            await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
            await call.call("tamper", tamper.change, cloud, _CLUSTER, svc)
            intact = tamper.is_intact
            assert not await call.call("intact", intact, cloud, _CLUSTER, svc, lb_nodes), (
                "the tamper fixture changed nothing is_intact can see"
            )
            before = ledger.cloud_api_calls().snapshot() if ledger else APICallCounts()
            await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
            assert await call.call("intact", intact, cloud, _CLUSTER, svc, lb_nodes), (
                "the ensure did not repair the balancer"
            )
            if ledger is not None:
                repair = ledger.cloud_api_calls().snapshot().since(before)
                assert repair.total_writes > 0, f"repaired without a mutating request? {repair}"
                before = ledger.cloud_api_calls().snapshot()
                await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
                again = ledger.cloud_api_calls().snapshot().since(before)
                assert dict(again.writes) == {}, f"the repair did not converge: {again}"

    async def test_a_balancer_deleted_behind_the_providers_back_is_re_created(
        self,
        cloud: Interface,
        lb_nodes: list[Node],
        call: ThreadPoolAdapter,
        load_balancer_tamper: LoadBalancerTamper | None,
    ) -> None:
        """get_load_balancer reports a balancer deleted in the cloud as absent, and the next
        ensure creates it again, serving what the Service asks for."""
        tamper = self._tamper(load_balancer_tamper)
        async with self._balancer(cloud, "conf-recreate", call) as (lb, svc):
            await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
            await call.call("tamper", tamper.delete, cloud, _CLUSTER, svc)
            _, exists = await call.call("get", lb.get_load_balancer, _CLUSTER, svc)
            assert not exists, "the tamper fixture's delete left the balancer in place"
            status = await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
            assert _usable(status), f"status has no ip or hostname: {status}"
            _, exists = await call.call("get", lb.get_load_balancer, _CLUSTER, svc)
            assert exists
            intact = tamper.is_intact
            assert await call.call("intact", intact, cloud, _CLUSTER, svc, lb_nodes)

    @pytest.mark.parametrize(
        "ensure_first",
        [
            pytest.param(True, id="delete-twice-is-fine"),
            pytest.param(False, id="delete-of-a-never-created-balancer-is-fine"),
        ],
    )
    async def test_delete_is_idempotent_and_get_reports_absent(
        self, cloud: Interface, lb_nodes: list[Node], call: ThreadPoolAdapter, ensure_first: bool
    ) -> None:
        """ensure_load_balancer_deleted returns normally when there is nothing to delete, and
        get_load_balancer then reports the balancer absent without raising."""
        lb, svc = self._lb(cloud), make_service("conf-delete")
        if ensure_first:
            await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
        await call.call("delete", lb.ensure_load_balancer_deleted, _CLUSTER, svc)
        await call.call("delete", lb.ensure_load_balancer_deleted, _CLUSTER, svc)
        _, exists = await call.call("get", lb.get_load_balancer, _CLUSTER, svc)
        assert not exists

    async def test_describe_load_balancer_lists_the_listeners_of_an_ensured_balancer(
        self, cloud: Interface, lb_nodes: list[Node], call: ThreadPoolAdapter
    ) -> None:
        """Optional (``describe_load_balancer``): an ensured balancer's view has one listener
        per Service port (port and protocol), targets with a known health word, and no view
        once deleted; describing sends no mutating request."""
        lb = self._lb(cloud)
        describer = as_load_balancer_describer(lb)
        if describer is None:
            pytest.skip("the provider does not implement describe_load_balancer (optional)")
        svc = make_service("conf-describe", ports=(80, 443))
        try:
            await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
            reporter = as_api_call_reporter(cloud)
            before = reporter.cloud_api_calls().snapshot() if reporter else None
            view = await call.call("describe", describer.describe_load_balancer, _CLUSTER, svc)
            if reporter is not None and before is not None:
                spent = reporter.cloud_api_calls().snapshot().since(before)
                assert spent.total_writes == 0, f"describe made mutating calls: {spent.writes}"
            assert view is not None, "no view of an ensured balancer"
            listed = sorted((li.port, li.protocol.upper()) for li in view.listeners)
            assert listed == [(80, "TCP"), (443, "TCP")]
            for listener in view.listeners:
                for target in listener.targets:
                    assert target.health in ("healthy", "unhealthy", "unknown"), target
            assert view.to_dict()["listeners"], "to_dict shows the listeners"
        finally:
            await call.call("delete", lb.ensure_load_balancer_deleted, _CLUSTER, svc)
        gone = await call.call("describe", describer.describe_load_balancer, _CLUSTER, svc)
        assert gone is None, f"a deleted balancer still described: {gone}"

    async def test_the_balancer_targets_exactly_the_nodes_it_is_given(
        self, cloud: Interface, lb_nodes: list[Node], call: ThreadPoolAdapter
    ) -> None:
        """Target Nodes per Service (docs/behaviour.md): the framework applies a Service's
        ``service.kccm.io/target-node-selector`` and passes only the Nodes it chose, so an
        ensure or update must target exactly the Nodes it is given (never Nodes the provider
        finds by itself) and a Service carrying kccm's own annotations must be ensured as any
        other. The targets are read through ``describe_load_balancer`` when the provider
        implements it; otherwise only the ensure is checked."""
        if len(lb_nodes) < 2:
            pytest.skip("needs at least two lb_nodes")
        svc = make_service("conf-selected")
        svc["metadata"]["annotations"] = {ANNOTATION_TARGET_NODE_SELECTOR: "kccm-conf=picked"}
        lb = self._lb(cloud)
        describer = as_load_balancer_describer(lb)
        chosen, everyone, args = lb_nodes[1:2], lb_nodes, (_CLUSTER, svc)
        try:
            status = await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, chosen)
            assert _usable(status), f"no usable status for an annotated Service: {status}"
            if describer is not None:
                for given in (chosen, everyone):
                    await call.call("update", lb.update_load_balancer, _CLUSTER, svc, given)
                    view = await call.call("describe", describer.describe_load_balancer, *args)
                    assert targeted_nodes(view, lb_nodes) == {n["metadata"]["name"] for n in given}
        finally:
            await call.call("delete", lb.ensure_load_balancer_deleted, _CLUSTER, svc)

    async def test_describe_instance_tells_a_known_machine_from_an_unknown_one(
        self,
        cloud: Interface,
        known_node: Node | None,
        unknown_provider_id: str,
        call: ThreadPoolAdapter,
    ) -> None:
        """Optional (``describe_instance``): a ``known_node``'s machine exists, an unknown
        providerID's does not (or the provider cannot tell: ``None``); never an error."""
        describer = as_instance_describer(self._v2(cloud))
        if describer is None:
            pytest.skip("the provider does not implement describe_instance (optional)")
        unknown = make_node("conf-describe-unknown", provider_id=unknown_provider_id)
        view = await call.call("describe", describer.describe_instance, unknown)
        assert view is None or view.exists is False, view
        if known_node is None:
            pytest.skip("no known_node fixture")
        known = await call.call("describe", describer.describe_instance, known_node)
        assert known is not None
        assert known.exists, known

    @pytest.mark.parametrize(
        ("name", "namespace"),
        [
            pytest.param("web", "default", id="short-name"),
            pytest.param("s" * 63, "n" * 63, id="longest-service-and-namespace"),
        ],
    )
    async def test_load_balancer_name_is_stable_unique_and_short(
        self, cloud: Interface, call: ThreadPoolAdapter, name: str, namespace: str
    ) -> None:
        """Names are deterministic per service, distinct between services, and within the
        length limit (``max_load_balancer_name_length``)."""
        lb = self._lb(cloud)
        svc = make_service(name, namespace=namespace)
        other = make_service(name, namespace=namespace)  # same name, new UID: a new service
        first = await call.call("name", lb.get_load_balancer_name, _CLUSTER, svc)
        again = await call.call("name", lb.get_load_balancer_name, _CLUSTER, svc)
        different = await call.call("name", lb.get_load_balancer_name, _CLUSTER, other)
        assert first == again
        assert first != different
        assert 0 < len(first) <= self.max_load_balancer_name_length

    # -- instances ---------------------------------------------------------------------------

    foreign_provider_ids: ClassVar[tuple[str, ...]] = (
        "aws:///us-east-1a/i-0123456789abcdef0",
        "gce://project/zone/instance-1",
        "azure:///subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/v",
    )
    """providerIDs of other providers: never "does not exist" for these."""

    @pytest.mark.parametrize("index", range(3), ids=["aws", "gce", "azure"])
    async def test_instance_exists_never_says_no_for_another_providers_node(
        self, cloud: Interface, call: ThreadPoolAdapter, index: int
    ) -> None:
        """A Node whose providerID has another scheme is not this provider's to judge:
        instance_exists must not return False and must not raise InstanceNotFound (either
        makes the lifecycle controller delete the Node). Raise another error instead; the
        controller then logs it and leaves the Node alone."""
        v2 = self._v2(cloud)
        pid = self.foreign_provider_ids[index]
        if pid.startswith(f"{cloud.provider_name()}://"):
            pytest.skip(f"{pid} has this provider's own scheme")
        node = make_node("conformance-foreign", provider_id=pid)
        answer = await _answer(call, "exists", v2.instance_exists, node)
        assert answer is not False, f"instance_exists said False for {pid}"
        assert not isinstance(answer, InstanceNotFound), f"InstanceNotFound for {pid}"

    @pytest.mark.parametrize("index", range(3), ids=["aws", "gce", "azure"])
    async def test_legacy_exists_never_says_no_for_another_providers_id(
        self, cloud: Interface, call: ThreadPoolAdapter, index: int
    ) -> None:
        """The legacy Instances API follows the same rule for another provider's providerID."""
        v1 = self._v1(cloud)
        pid = self.foreign_provider_ids[index]
        if pid.startswith(f"{cloud.provider_name()}://"):
            pytest.skip(f"{pid} has this provider's own scheme")
        answer = await _answer(call, "exists", v1.instance_exists_by_provider_id, pid)
        assert answer is not False, f"instance_exists_by_provider_id said False for {pid}"
        assert not isinstance(answer, InstanceNotFound), f"InstanceNotFound for {pid}"

    async def test_instance_exists_is_false_for_an_unknown_provider_id(
        self, cloud: Interface, call: ThreadPoolAdapter, unknown_provider_id: str
    ) -> None:
        """An unknown instance does not exist: false without an error (never InstanceNotFound)."""
        v2 = self._v2(cloud)
        node = make_node("conformance-ghost", provider_id=unknown_provider_id)
        assert await call.call("exists", v2.instance_exists, node) is False

    async def test_legacy_exists_is_false_for_an_unknown_provider_id(
        self, cloud: Interface, call: ThreadPoolAdapter, unknown_provider_id: str
    ) -> None:
        """The legacy Instances API agrees: an unknown providerID does not exist."""
        v1 = self._v1(cloud)
        answer = v1.instance_exists_by_provider_id
        assert await call.call("exists", answer, unknown_provider_id) is False

    async def test_instance_id_of_a_missing_instance_is_instance_not_found(
        self, cloud: Interface, call: ThreadPoolAdapter
    ) -> None:
        """instance_id raises InstanceNotFound (and nothing else) for a missing instance."""
        v1 = self._v1(cloud)
        with pytest.raises(InstanceNotFound):
            await call.call("id", v1.instance_id, f"kccm-conformance-{uuid.uuid4().hex}")

    async def test_a_known_instance_exists_runs_and_has_metadata(
        self, cloud: Interface, known_node: Node | None, call: ThreadPoolAdapter
    ) -> None:
        """A running instance exists, is not shut down, and its metadata carries a providerID
        with the provider's scheme."""
        v2 = self._v2(cloud)
        if known_node is None:
            pytest.skip("no known_node fixture")
        assert await call.call("exists", v2.instance_exists, known_node) is True
        assert await call.call("shutdown", v2.instance_shutdown, known_node) is False
        meta = await call.call("metadata", v2.instance_metadata, known_node)
        assert meta is not None
        assert meta.provider_id.startswith(f"{cloud.provider_name()}://")

    # -- routes ------------------------------------------------------------------------------

    async def test_routes_create_list_delete_round_trip(
        self, cloud: Interface, lb_nodes: list[Node], call: ThreadPoolAdapter
    ) -> None:
        """Created routes are listed with their CIDR and target; deleted ones disappear."""
        routes = self._routes(cloud)
        target = str(lb_nodes[0]["metadata"]["name"])
        wanted = [Route(target_node=target, destination_cidr=c) for c in self.route_cidrs]
        for i, route in enumerate(wanted):
            await call.call("create", routes.create_route, _CLUSTER, f"hint-{i}", route)
        listed = await call.call("list", routes.list_routes, _CLUSTER)
        assert _targets(listed) >= _targets(wanted)
        for route in [r for r in listed if _key(r) in _targets(wanted)]:
            await call.call("delete", routes.delete_route, _CLUSTER, route)
        remaining = await call.call("list", routes.list_routes, _CLUSTER)
        assert not _targets(remaining) & _targets(wanted)


async def _answer(call: ThreadPoolAdapter, method: str, fn: Any, *args: Any) -> Any:
    """What ``fn(*args)`` returned, or the exception it raised."""
    try:
        return await call.call(method, fn, *args)
    except Exception as err:
        return err


def _key(route: Route) -> tuple[str, str]:
    return (route.target_node, str(ipaddress.ip_network(route.destination_cidr)))


def _targets(routes: Sequence[Route]) -> set[tuple[str, str]]:
    return {_key(r) for r in routes}
