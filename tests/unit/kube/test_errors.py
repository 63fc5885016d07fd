from __future__ import annotations

from typing import Any

import pytest

from kccm.kube import errors as e


@pytest.mark.parametrize(
    ("status", "http_code", "expected"),
    [
        pytest.param({"code": 404, "reason": "NotFound"}, 404, e.NotFound, id="404-not-found"),
        pytest.param(
            {"code": 409, "reason": "AlreadyExists"}, 409, e.AlreadyExists, id="409-already-exists"
        ),
        pytest.param({"code": 409, "reason": "Conflict"}, 409, e.Conflict, id="409-conflict"),
        pytest.param({"code": 410, "reason": "Expired"}, 200, e.Gone, id="watch-error-expired"),
        pytest.param({"code": 410, "reason": "Gone"}, 410, e.Gone, id="410-gone"),
        pytest.param({"code": 403, "reason": "Forbidden"}, 403, e.Forbidden, id="403-forbidden"),
        pytest.param({"code": 401}, 401, e.Unauthorized, id="401-unauthorized"),
        pytest.param({"code": 422, "reason": "Invalid"}, 422, e.Invalid, id="422-invalid"),
        pytest.param({"code": 429}, 429, e.TooManyRequests, id="429-throttled"),
        pytest.param({"code": 504, "reason": "Timeout"}, 504, e.ServerTimeout, id="504-timeout"),
        pytest.param({"code": 500, "reason": "Timeout"}, 500, e.ServerTimeout, id="reason-wins"),
        pytest.param({}, 500, e.InternalError, id="no-body-uses-http-code"),
        pytest.param({"code": 418}, 418, e.ApiError, id="unknown-code-is-generic"),
    ],
)
def test_status_maps_to_error_class(
    status: dict[str, Any], http_code: int, expected: type[e.ApiError]
) -> None:
    error = e.error_from_status(status, http_code=http_code)
    assert type(error) is expected
    assert isinstance(error, e.KubeError)


def test_invalid_carries_field_causes() -> None:
    status = {
        "code": 422,
        "reason": "Invalid",
        "message": 'Node "x" is invalid',
        "details": {
            "causes": [{"field": "spec.podCIDR", "reason": "FieldValueInvalid", "message": "bad"}]
        },
    }
    error = e.error_from_status(status)
    assert error.causes == (e.StatusCause("spec.podCIDR", "FieldValueInvalid", "bad"),)
    assert str(error) == 'Node "x" is invalid (422 Invalid)'


@pytest.mark.parametrize(
    ("details", "header", "expected"),
    [
        pytest.param({"retryAfterSeconds": 3}, None, 3.0, id="from-status-details"),
        pytest.param({}, 7.0, 7.0, id="from-retry-after-header"),
        pytest.param({}, None, None, id="absent"),
    ],
)
def test_too_many_requests_retry_after(
    details: dict[str, Any], header: float | None, expected: float | None
) -> None:
    error = e.error_from_status({"code": 429, "details": details}, retry_after=header)
    assert isinstance(error, e.TooManyRequests)
    assert error.retry_after == expected
