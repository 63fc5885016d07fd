"""classify(): every error kind of the contract, alone and chained, maps to the reason a user
acts on; the new contract errors keep their messages and attributes."""

from __future__ import annotations

import pytest

import kccm.cloudprovider as cp
from kccm.cloudprovider import (
    CloudConfigError,
    CloudProviderError,
    InstanceNotFound,
    InvalidServiceConfig,
    PermissionDenied,
    QuotaExceeded,
    Reason,
    RetryError,
    StillProvisioning,
    Throttled,
    classify,
)
from kccm.cloudprovider.reasons import error_chain


class ControllerStepError(Exception):
    """Stands for a controller's own wrapper (ServiceSyncError, SyncError)."""


def raised_from(outer: BaseException, cause: BaseException) -> BaseException:
    try:
        raise outer from cause
    except BaseException as err:
        return err


def raised_during(outer: BaseException, context: BaseException) -> BaseException:
    try:
        try:
            raise context
        except BaseException:
            raise outer  # noqa: B904 - the implicit __context__ is the point
    except BaseException as err:
        return err


def raised_from_none(outer: BaseException, context: BaseException) -> BaseException:
    try:
        try:
            raise context
        except BaseException:
            raise outer from None
    except BaseException as err:
        return err


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        pytest.param(QuotaExceeded(), Reason.QUOTA, id="quota"),
        pytest.param(Throttled("slow down", retry_after=3), Reason.THROTTLED, id="throttled"),
        pytest.param(PermissionDenied(), Reason.PERMISSION, id="permission"),
        pytest.param(InvalidServiceConfig("a/b", "bad"), Reason.INVALID, id="invalid-service"),
        pytest.param(CloudConfigError(["[Global] x: bad"]), Reason.INVALID, id="cloud-config"),
        pytest.param(StillProvisioning(), Reason.WAITING, id="still-provisioning"),
        pytest.param(RetryError("later", 7), Reason.WAITING, id="retry-error"),
        pytest.param(CloudProviderError("500 from the API"), Reason.CLOUD_API, id="cloud-api"),
        pytest.param(InstanceNotFound(), Reason.CLOUD_API, id="other-contract-error"),
        pytest.param(RuntimeError("bug"), Reason.OTHER, id="not-the-clouds"),
        pytest.param(
            raised_from(ControllerStepError("failed to ensure"), QuotaExceeded()),
            Reason.QUOTA,
            id="quota-under-a-controller-error",
        ),
        pytest.param(
            raised_from(
                ControllerStepError("sync"),
                raised_from(CloudProviderError("provider"), PermissionDenied()),
            ),
            Reason.PERMISSION,
            id="two-levels-deep",
        ),
        pytest.param(
            raised_during(ControllerStepError("cleanup failed"), Throttled()),
            Reason.THROTTLED,
            id="implicit-context",
        ),
        pytest.param(
            raised_from_none(ControllerStepError("no detail"), QuotaExceeded()),
            Reason.OTHER,
            id="context-suppressed-by-from-none",
        ),
        pytest.param(
            raised_from(CloudProviderError("wrapper"), RuntimeError("socket")),
            Reason.CLOUD_API,
            id="cloud-error-over-a-plain-cause",
        ),
        pytest.param(
            raised_from(InvalidServiceConfig("k", "outer"), QuotaExceeded()),
            Reason.INVALID,
            id="outermost-kind-wins",
        ),
        pytest.param(
            raised_from(ControllerStepError("x"), StillProvisioning("PENDING_CREATE", 10)),
            Reason.WAITING,
            id="waiting-under-a-controller-error",
        ),
    ],
)
def test_classify(error: BaseException, reason: Reason) -> None:
    assert classify(error) is reason


def test_a_cause_cycle_ends() -> None:
    a, b = ControllerStepError("a"), ControllerStepError("b")
    a.__cause__, b.__cause__ = b, a
    assert [str(e) for e in error_chain(a)] == ["a", "b"]
    assert classify(a) is Reason.OTHER


@pytest.mark.parametrize(
    ("error", "message"),
    [
        pytest.param(QuotaExceeded(), "cloud quota or limit exceeded", id="quota-default"),
        pytest.param(PermissionDenied(), "cloud permission denied", id="permission-default"),
        pytest.param(
            InvalidServiceConfig("example.com/x", "'y' is not a number"),
            "example.com/x: 'y' is not a number",
            id="invalid-names-its-key",
        ),
        pytest.param(
            InvalidServiceConfig("example.com/x", "annotation example.com/x: bad"),
            "annotation example.com/x: bad",
            id="invalid-key-named-once",
        ),
        pytest.param(InvalidServiceConfig("", "no ports"), "no ports", id="invalid-without-key"),
        pytest.param(StillProvisioning(), "still provisioning", id="provisioning-default"),
    ],
)
def test_messages(error: cp.CloudProviderError, message: str) -> None:
    assert str(error) == message == error.message


def test_still_provisioning_is_a_retry_with_its_delay() -> None:
    error = StillProvisioning("PENDING_CREATE", 12)
    assert isinstance(error, RetryError)
    assert error.retry_after == 12.0
    assert StillProvisioning().retry_after == 5.0


def test_invalid_service_config_keeps_its_key() -> None:
    assert InvalidServiceConfig("spec.ports", "none").key == "spec.ports"


@pytest.mark.parametrize(
    "name",
    [
        "QuotaExceeded",
        "PermissionDenied",
        "InvalidServiceConfig",
        "StillProvisioning",
        "Reason",
        "classify",
        "BackendNodeSelector",
        "NodeExclusion",
        "as_backend_node_selector",
    ],
)
def test_exported_from_the_contract(name: str) -> None:
    assert name in cp.__all__
    assert hasattr(cp, name)


def test_reason_values_are_stable() -> None:
    assert {r.name: str(r) for r in Reason} == {
        "QUOTA": "quota-exceeded",
        "THROTTLED": "throttled",
        "PERMISSION": "permission-denied",
        "INVALID": "invalid-config",
        "CLOUD_API": "cloud-api-error",
        "NO_NODES": "no-eligible-nodes",
        "WAITING": "waiting-on-cloud",
        "OTHER": "error",
    }
