"""OpenStack errors as the contract's kinds (kccm explain's reasons): Octavia's 403 quota and
policy answers, Neutron's 409 OverQuota, Nova's 413, annotation errors naming the annotation,
a balancer still PENDING when the wait ends, and the node selector. On the emulator: its
faults answer what a real cloud answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from os_lb_support import CLUSTER, LBWorld, lb_world, service

from kccm.cloudprovider import (
    CloudProviderError,
    PermissionDenied,
    Reason,
    RetryError,
    StillProvisioning,
    Throttled,
    as_backend_node_selector,
    classify,
)
from kccm.providers.openstack.api import (
    OpenStackAPIError,
    OpenStackConflict,
    OpenStackNotFound,
    OpenStackPermissionDenied,
    OpenStackQuotaExceeded,
    mapped_error,
)
from kccm.providers.openstack.loadbalancer.annotations import LBAnnotationError
from kccm.providers.openstack.loadbalancer.octavia import (
    PENDING_RETRY_AFTER,
    OctaviaStillPending,
    OctaviaWaitError,
)

LB = "loadbalancer.openstack.org/"
OCTAVIA_QUOTA = "Quota has been met for resources: Load Balancer"
NEUTRON_QUOTA = "Quota exceeded for resources: ['floatingip']."
POLICY = "Policy does not allow this request to be performed."


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world() as made:
        yield made


@pytest.mark.parametrize(
    ("status", "text", "retry_after", "kind", "reason"),
    [
        pytest.param(403, OCTAVIA_QUOTA, None, OpenStackQuotaExceeded, Reason.QUOTA,
                     id="octavia-403-quota"),
        pytest.param(409, NEUTRON_QUOTA, None, OpenStackQuotaExceeded, Reason.QUOTA,
                     id="neutron-409-overquota"),
        pytest.param(413, "Quota exceeded for instances", None, OpenStackQuotaExceeded,
                     Reason.QUOTA, id="nova-413-without-retry-after"),
        pytest.param(413, "Over limit", 5.0, Throttled, Reason.THROTTLED,
                     id="nova-413-with-retry-after-is-throttling"),
        pytest.param(403, POLICY, None, OpenStackPermissionDenied, Reason.PERMISSION,
                     id="policy-403"),
        pytest.param(409, "Load Balancer x is immutable", None, OpenStackConflict,
                     Reason.CLOUD_API, id="conflict-stays-a-conflict"),
        pytest.param(500, "boom", None, OpenStackAPIError, Reason.CLOUD_API, id="500"),
        pytest.param(404, "gone", None, OpenStackNotFound, Reason.CLOUD_API, id="404"),
        pytest.param(429, "slow down", 2.0, Throttled, Reason.THROTTLED, id="429"),
    ],
)  # fmt: skip
def test_statuses_and_texts_map_to_the_contracts_kinds(
    status: int, text: str, retry_after: float | None, kind: type[Exception], reason: Reason
) -> None:
    error = mapped_error(status, text, retry_after)
    assert type(error) is kind
    assert classify(error) is reason
    assert text in str(error)


def test_a_quota_409_is_no_conflict_to_wait_out() -> None:
    assert not isinstance(mapped_error(409, NEUTRON_QUOTA), OpenStackConflict)


def test_the_new_kinds_keep_the_openstack_base() -> None:
    denied = mapped_error(403, POLICY)
    assert isinstance(denied, OpenStackAPIError)
    assert isinstance(denied, PermissionDenied)
    assert denied.status == 403


@pytest.mark.parametrize(
    ("service_name", "method", "path", "body", "reason"),
    [
        pytest.param("load-balancer", "POST", r"/loadbalancers$", {"faultstring": OCTAVIA_QUOTA},
                     Reason.QUOTA, id="octavia-quota"),
        pytest.param("load-balancer", "POST", r"/loadbalancers$", {"faultstring": POLICY},
                     Reason.PERMISSION, id="octavia-policy"),
        pytest.param("network", "POST", r"/floatingips$",
                     {"NeutronError": {"type": "OverQuota", "message": NEUTRON_QUOTA,
                                       "detail": ""}},
                     Reason.QUOTA, id="neutron-floating-ip-quota"),
    ],
)  # fmt: skip
def test_the_emulators_refusals_fail_the_ensure_with_the_kind(
    world: LBWorld,
    service_name: str,
    method: str,
    path: str,
    body: dict[str, object],
    reason: Reason,
) -> None:
    """The provider may wrap the error (``error creating LB floatingip: ...``): the kind is
    found through the chain."""
    balancers = world.balancers()
    status = 409 if service_name == "network" else 403
    world.emu.admin.fault(service_name, method, path, status=status, body=body, times=0)
    svc = service()
    try:
        with pytest.raises(CloudProviderError) as caught:
            balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
        assert classify(caught.value) is reason
    finally:
        world.emu.admin.clear_faults()
        balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


@pytest.mark.parametrize(
    ("annotations", "key"),
    [
        pytest.param({LB + "class": "nope"}, LB + "class", id="unknown-class"),
        pytest.param({LB + "lb-method": "RANDOM"}, LB + "lb-method", id="choice"),
    ],
)
def test_a_bad_annotation_is_an_invalid_config_naming_it(
    world: LBWorld, annotations: dict[str, str], key: str
) -> None:
    balancers = world.balancers()
    svc = service(annotations=annotations)
    with pytest.raises(LBAnnotationError) as caught:
        balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert classify(caught.value) is Reason.INVALID
    assert caught.value.key == key
    assert key in str(caught.value)
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_a_balancer_still_pending_when_the_wait_ends_asks_for_a_retry(
    world: LBWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OCCM_WAIT_LB_ACTIVE_STEPS", "3")
    balancers = world.balancers()
    world.emu.admin.set_config(lb_active_delay=2.0)
    try:
        created = balancers.octavia.create_load_balancer(
            {"name": "slow", "vip_subnet_id": world.ids["private_subnet_id"]}
        )
        with pytest.raises(OctaviaStillPending, match="still PENDING_CREATE") as caught:
            balancers.octavia.wait_active(created["id"])
    finally:
        world.emu.admin.set_config(lb_active_delay=0.05)
    error = caught.value
    assert isinstance(error, OctaviaWaitError)
    assert isinstance(error, StillProvisioning)
    assert isinstance(error, RetryError)
    assert error.retry_after == PENDING_RETRY_AFTER
    assert classify(error) is Reason.WAITING
    monkeypatch.delenv("OCCM_WAIT_LB_ACTIVE_STEPS")
    balancers.octavia.wait_active(created["id"])
    balancers.octavia.delete_load_balancer(created["id"], cascade=True)


@pytest.mark.parametrize(
    ("selector", "labels", "why"),
    [
        pytest.param("pool=web", {"pool": "web"}, None, id="matches"),
        pytest.param(
            "pool=web", {"pool": "db"},
            f"does not match annotation {LB}node-selector pool=web", id="annotation",
        ),
        pytest.param(
            "gpu", {}, f"does not match annotation {LB}node-selector gpu", id="key-only",
        ),
    ],
)  # fmt: skip
def test_the_node_selector_names_the_nodes_left_out(
    world: LBWorld, selector: str, labels: dict[str, str], why: str | None
) -> None:
    found = as_backend_node_selector(world.balancers())
    assert found is not None
    exclusion = found.backend_node_exclusion(service(annotations={LB + "node-selector": selector}))
    assert exclusion is not None
    assert exclusion({"metadata": {"name": "n", "labels": labels}}) == why


def test_the_configured_node_selector_is_named_as_such(world: LBWorld) -> None:
    found = as_backend_node_selector(world.balancers(**{"node-selector": "pool=web"}))
    assert found is not None
    exclusion = found.backend_node_exclusion(service())
    assert exclusion is not None
    assert exclusion({"metadata": {"name": "n", "labels": {}}}) == (
        "does not match [LoadBalancer] node-selector pool=web"
    )
    bare = as_backend_node_selector(world.balancers())
    assert bare is not None
    assert bare.backend_node_exclusion(service()) is None
