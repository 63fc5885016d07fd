"""The fake's faults: each kind a cloud can cause, injected per method (fail_with) or per
Service (the fake.kccm.io/fail annotation), classified as kccm explain shows it."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.cloudprovider import (
    CloudProviderError,
    InvalidServiceConfig,
    Reason,
    RetryError,
    classify,
)
from kccm.providers.fake import FAULT_ANNOTATION, FAULT_KINDS, FakeCloud, FakeCloudError, fault

RAISED = (CloudProviderError, FakeCloudError)

KINDS = {
    "quota-exceeded": Reason.QUOTA,
    "throttled": Reason.THROTTLED,
    "permission-denied": Reason.PERMISSION,
    "invalid-config": Reason.INVALID,
    "waiting-on-cloud": Reason.WAITING,
    "cloud-api-error": Reason.CLOUD_API,
    "error": Reason.OTHER,
}


def service(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
    }


def test_every_kind_is_a_reason() -> None:
    assert set(FAULT_KINDS) == set(KINDS) == {str(r) for r in Reason} - {"no-eligible-nodes"}


@pytest.mark.parametrize(("kind", "reason"), [pytest.param(k, r, id=k) for k, r in KINDS.items()])
async def test_fail_with_raises_the_kind(kind: str, reason: Reason) -> None:
    cloud = FakeCloud()
    cloud.fail_with("ensure_load_balancer", kind, times=1)
    with pytest.raises(RAISED) as caught:
        await cloud.ensure_load_balancer("k", service(), [])
    assert classify(caught.value) is reason
    await cloud.ensure_load_balancer("k", service(), [])  # once only
    assert len(cloud.balancers) == 1


@pytest.mark.parametrize(("kind", "reason"), [pytest.param(k, r, id=k) for k, r in KINDS.items()])
@pytest.mark.parametrize("method", ["ensure_load_balancer", "update_load_balancer"])
async def test_the_annotation_fails_the_services_writes(
    kind: str, reason: Reason, method: str
) -> None:
    cloud = FakeCloud()
    await cloud.ensure_load_balancer("k", service(), [])
    with pytest.raises(RAISED) as caught:
        await getattr(cloud, method)("k", service({FAULT_ANNOTATION: kind}), [])
    assert classify(caught.value) is reason
    await getattr(cloud, method)("k", service(), [])  # the annotation gone, it works


async def test_an_unknown_fault_is_an_invalid_annotation_naming_it() -> None:
    with pytest.raises(InvalidServiceConfig) as caught:
        await FakeCloud().ensure_load_balancer("k", service({FAULT_ANNOTATION: "meteor"}), [])
    assert caught.value.key == FAULT_ANNOTATION
    assert str(caught.value).startswith(f"annotation {FAULT_ANNOTATION}: unknown fault 'meteor'")


def test_waiting_asks_for_a_retry() -> None:
    error = fault("waiting-on-cloud")
    assert isinstance(error, RetryError)
    assert error.retry_after == 5.0


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault 'x'"):
        fault("x")


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_message_of_ones_own(kind: str) -> None:
    assert "mine" in str(fault(kind, "mine"))
