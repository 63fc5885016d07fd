"""What moto cannot show: AWS refusing to delete a security group a balancer still holds
(``DependencyViolation``) makes kccm retry after 5 s, as upstream's
``deleteSecurityGroupsWithBackoff`` polls, for 10 minutes as upstream; gone groups are fine.
The refusal is made here (a stand-in API, or moto's answer replaced)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aws_lb import lb_of, nodes
from test_aws_classic import service as classic_service
from test_aws_nlb_security import nlb_service

from kccm.cloudprovider import CloudProviderError, RetryError, default_load_balancer_name
from kccm.emulators.aws import World, clients
from kccm.emulators.aws.readback import elb_client
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.api import AWSAPIError
from kccm.providers.aws.config import load_aws_config
from kccm.providers.aws.securitygroups import (
    DELETE_GIVE_UP_SECONDS,
    DELETE_RETRY_SECONDS,
    SecurityGroups,
)
from kccm.providers.aws.tags import ClusterTagging
from kccm.util.clock import FakeClock


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


def groups(api: RefusingAPI, clock: FakeClock | None = None) -> SecurityGroups:
    return SecurityGroups(
        api,  # type: ignore[arg-type]
        ClusterTagging("c"),
        lambda: "vpc-1",
        clock=clock or FakeClock(),
    )


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


async def test_a_group_in_use_for_ten_minutes_is_given_up_as_upstream() -> None:
    """Upstream ``deleteSecurityGroupsWithBackoff`` polls for 10 minutes, then fails and
    leaves the group: kccm retries for as long, then gives the group up (an error, no more
    retries after 5 s), so that a Service's delete does not hang for ever on a group someone
    else uses."""
    clock = FakeClock()
    api = RefusingAPI({"sg-busy": "DependencyViolation"})
    sg = groups(api, clock)
    for step in (DELETE_GIVE_UP_SECONDS / 2, DELETE_GIVE_UP_SECONDS / 2 - 1, 1):
        with pytest.raises(RetryError):
            sg.delete_groups(["sg-busy"], "a123")
        assert sg.abandoned == set()
        await clock.advance(step)
    with pytest.raises(CloudProviderError, match="sg-busy of a123: still in use after 10") as e:
        sg.delete_groups(["sg-busy"], "a123")
    assert not isinstance(e.value, RetryError)
    assert sg.abandoned == {"sg-busy"}


async def test_a_group_deleted_in_time_starts_the_clock_afresh() -> None:
    clock = FakeClock()
    api = RefusingAPI({"sg-1": "DependencyViolation"})
    sg = groups(api, clock)
    with pytest.raises(RetryError):
        sg.delete_groups(["sg-1"], "a123")
    await clock.advance(DELETE_GIVE_UP_SECONDS - 1)
    api.codes.clear()
    sg.delete_groups(["sg-1"], "a123")
    api.codes["sg-1"] = "DependencyViolation"  # a group of that ID busy again, much later
    await clock.advance(DELETE_GIVE_UP_SECONDS)
    with pytest.raises(RetryError):
        sg.delete_groups(["sg-1"], "a123")
    assert sg.abandoned == set()


def _delete_nlb(world: World, svc: dict[str, Any]) -> None:
    _, elbv2 = clients(world.url)
    found = elbv2.describe_load_balancers(Names=[default_load_balancer_name(svc)])
    elbv2.delete_load_balancer(LoadBalancerArn=found["LoadBalancers"][0]["LoadBalancerArn"])


def _delete_classic(world: World, svc: dict[str, Any]) -> None:
    elb_client(world.url).delete_load_balancer(LoadBalancerName=default_load_balancer_name(svc))


@pytest.mark.parametrize(
    ("make", "delete_behind_kccms_back", "mode"),
    [
        pytest.param(nlb_service, _delete_nlb, "Managed", id="nlb-managed-group"),
        pytest.param(classic_service, _delete_classic, "", id="classic-elb-group"),
    ],
)
async def test_a_group_still_in_use_after_ten_minutes_no_longer_holds_the_delete(
    world: World,
    aws_env: None,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[], dict[str, Any]],
    delete_behind_kccms_back: Callable[[World, dict[str, Any]], None],
    mode: str,
) -> None:
    """The balancer is gone, AWS still holds its own group: the balancer "exists" for the
    service controller (which calls delete again) for 10 minutes; then the delete fails once,
    as upstream's, and the balancer no longer exists, so the finalizer can go (the group is
    left, as upstream leaves it)."""
    clock = FakeClock()
    config = world.cloud_config(APIMaxAttempts="1", NLBSecurityGroupMode=mode)
    cloud = AWSCloud(load_aws_config(config), clock=clock)
    real = cloud.api.call

    def call(service: str, operation: str, **params: Any) -> dict[str, Any]:
        if operation == "delete_security_group":
            raise AWSAPIError(
                "ec2 delete_security_group: DependencyViolation", "DependencyViolation"
            )
        return real(service, operation, **params)

    svc = make()
    lb = lb_of(cloud)
    lb.ensure_load_balancer("kubernetes", svc, nodes(world))
    monkeypatch.setattr(cloud.api, "call", call)
    delete_behind_kccms_back(world, svc)
    with pytest.raises(RetryError):
        lb.ensure_load_balancer_deleted("kubernetes", svc)
    await clock.advance(DELETE_GIVE_UP_SECONDS - 1)
    assert lb.get_load_balancer("kubernetes", svc) == (None, True)
    with pytest.raises(RetryError):
        lb.ensure_load_balancer_deleted("kubernetes", svc)
    await clock.advance(1)
    with pytest.raises(CloudProviderError, match="still in use after 10 minutes") as failed:
        lb.ensure_load_balancer_deleted("kubernetes", svc)
    assert not isinstance(failed.value, RetryError)
    assert lb.get_load_balancer("kubernetes", svc) == (None, False)
