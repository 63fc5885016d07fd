"""What moto cannot show: AWS refusing to delete a security group a balancer still holds
(``DependencyViolation``) makes kccm retry after 5 s, as upstream's
``deleteSecurityGroupsWithBackoff`` polls; gone groups are fine."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.cloudprovider import RetryError
from kccm.providers.aws.api import AWSAPIError
from kccm.providers.aws.securitygroups import DELETE_RETRY_SECONDS, SecurityGroups
from kccm.providers.aws.tags import ClusterTagging


class RefusingAPI:
    """Answers ``delete_security_group`` with the error code given per group."""

    def __init__(self, codes: dict[str, str]) -> None:
        self.codes = codes
        self.deleted: list[str] = []

    def call(self, service: str, operation: str, **params: Any) -> dict[str, Any]:
        assert (service, operation) == ("ec2", "delete_security_group")
        code = self.codes.get(params["GroupId"], "")
        if code:
            raise AWSAPIError(f"ec2 delete_security_group: {code}", code)
        self.deleted.append(params["GroupId"])
        return {}


def groups(api: RefusingAPI) -> SecurityGroups:
    return SecurityGroups(api, ClusterTagging("c"), lambda: "vpc-1")  # type: ignore[arg-type]


def test_a_group_still_in_use_is_retried_after_five_seconds() -> None:
    api = RefusingAPI({"sg-busy": "DependencyViolation", "sg-gone": "InvalidGroup.NotFound"})
    with pytest.raises(RetryError, match="sg-busy") as caught:
        groups(api).delete_groups(["sg-busy", "sg-gone", "sg-free"], "a123")
    assert caught.value.retry_after == DELETE_RETRY_SECONDS == 5.0
    assert api.deleted == ["sg-free"]


def test_any_other_refusal_is_an_error() -> None:
    api = RefusingAPI({"sg-x": "UnauthorizedOperation"})
    with pytest.raises(AWSAPIError, match="UnauthorizedOperation"):
        groups(api).delete_groups(["sg-x"], "a123")
