"""The moto emulator: moto's server in a process of its own, with kccm's teachings applied
there, a request log, per-call faults set over its API, its reset and the leak check."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import botocore.exceptions
import botocore.parsers
import pytest

from kccm.emulators.aws import (
    MotoEmulator,
    add_instances,
    build_world,
    clients,
    html_500,
    moto_emulator,
    topology_fault,
)
from kccm.emulators.aws.faults import HTML_500_BODY


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoEmulator]:
    with moto_emulator(default_amis=False) as running:
        yield running


def _topology(moto: MotoEmulator) -> Any:
    ec2, _ = clients(moto.url)
    return ec2.describe_instance_topology()


def test_the_taught_topology_call_answers(moto: MotoEmulator) -> None:
    world = build_world(moto.url, "c-taught", instances=0)
    [instance] = add_instances(world, 1, instance_type="p5.48xlarge")
    listed = _topology(moto)["Instances"]
    assert [i["InstanceId"] for i in listed] == [instance]
    assert len(listed[0]["NetworkNodes"]) == 3


@pytest.mark.parametrize(
    ("fault", "raised", "status"),
    [
        pytest.param(
            lambda url: topology_fault(url, "UnsupportedOperation"),
            botocore.exceptions.ClientError,
            400,
            id="error-code-is-a-client-error",
        ),
        pytest.param(
            lambda url: html_500(url),
            botocore.parsers.ResponseParserError,
            500,
            id="html-500-is-no-aws-answer",
        ),
    ],
)
def test_a_fault_holds_inside_its_block_only(
    moto: MotoEmulator, fault: Any, raised: type[Exception], status: int
) -> None:
    seq = len(moto.requests())
    with fault(moto.url), pytest.raises(raised):
        _topology(moto)
    _topology(moto)
    logged = [(r["action"], r["status"]) for r in moto.requests(seq)]
    assert logged == [("DescribeInstanceTopology", status), ("DescribeInstanceTopology", 200)]


def test_the_html_500_is_werkzeugs_page(moto: MotoEmulator) -> None:
    ec2, _ = clients(moto.url)
    with html_500(moto.url), pytest.raises(botocore.parsers.ResponseParserError) as caught:
        ec2.describe_instance_topology()
    assert "invalid XML" in str(caught.value)
    assert HTML_500_BODY.startswith("<!doctype html>")


def test_call_counts_name_service_and_action(moto: MotoEmulator) -> None:
    before = moto.call_counts().get("ec2:DescribeInstanceTopology", 0)
    _topology(moto)
    assert moto.call_counts()["ec2:DescribeInstanceTopology"] == before + 1


def test_the_leak_check_names_what_was_left(moto: MotoEmulator) -> None:
    world = build_world(moto.url, "c-leak", instances=0)
    baseline = moto.state()
    _, elbv2 = clients(moto.url)
    group = elbv2.create_target_group(
        Name="k8s-left", Protocol="TCP", Port=80, VpcId=world.vpc_id, TargetType="instance"
    )["TargetGroups"][0]["TargetGroupArn"]
    with pytest.raises(AssertionError, match="k8s-left"):
        moto.assert_clean(baseline)
    elbv2.delete_target_group(TargetGroupArn=group)
    moto.assert_clean(baseline)


def test_a_reset_empties_moto(moto: MotoEmulator) -> None:
    world = build_world(moto.url, "c-reset", instances=1)
    moto.reset()
    ec2, _ = clients(moto.url)
    assert world.vpc_id not in {vpc["VpcId"] for vpc in ec2.describe_vpcs()["Vpcs"]}
    assert ec2.describe_instances()["Reservations"] == []
