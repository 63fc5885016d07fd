"""The leak check of a moto emulator the tests share: what kccm creates in AWS (load balancers,
NLB and Classic ELB, target groups, its ``k8s-*`` security groups) must be gone when the test
(or module) that made it ends, or a later test's balancer listing, adoption or leftover search
sees it. :func:`no_leaked_balancers` wraps a fixture's moto; on a leak it removes what was
left and fails that fixture's test with the list."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import boto3

from kccm.emulators.aws.clients import CREDENTIALS, REGION

__all__ = ["made_by_kccm", "no_leaked_balancers"]


def _client(service: str, url: str) -> Any:
    return boto3.client(
        service,
        region_name=REGION,
        endpoint_url=url,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def made_by_kccm(url: str) -> set[tuple[str, str]]:
    """(kind, id) of every balancer, target group and ``k8s-*`` security group in moto."""
    elbv2, elb, ec2 = _client("elbv2", url), _client("elb", url), _client("ec2", url)
    found = {
        ("nlb", lb["LoadBalancerArn"]) for lb in elbv2.describe_load_balancers()["LoadBalancers"]
    }
    found |= {
        ("target-group", g["TargetGroupArn"])
        for g in elbv2.describe_target_groups()["TargetGroups"]
    }
    found |= {
        ("elb", lb["LoadBalancerName"])
        for lb in elb.describe_load_balancers()["LoadBalancerDescriptions"]
    }
    found |= {
        ("security-group", g["GroupId"])
        for g in ec2.describe_security_groups()["SecurityGroups"]
        if g["GroupName"].startswith("k8s-")
    }
    return found


def _remove(url: str, left: set[tuple[str, str]]) -> None:
    elbv2, elb, ec2 = _client("elbv2", url), _client("elb", url), _client("ec2", url)
    order = {"nlb": 0, "elb": 0, "target-group": 1, "security-group": 2}
    for kind, ident in sorted(left, key=lambda item: order[item[0]]):
        with contextlib.suppress(Exception):
            if kind == "nlb":
                elbv2.delete_load_balancer(LoadBalancerArn=ident)
            elif kind == "elb":
                elb.delete_load_balancer(LoadBalancerName=ident)
            elif kind == "target-group":
                elbv2.delete_target_group(TargetGroupArn=ident)
            else:
                ec2.delete_security_group(GroupId=ident)


@contextlib.contextmanager
def no_leaked_balancers(url: str) -> Iterator[None]:
    """AssertionError (after removing them) when what kccm made in moto outlives the
    block."""
    before = made_by_kccm(url)
    yield
    left = made_by_kccm(url) - before
    if left:
        _remove(url, left)
        raise AssertionError(f"left in moto: {sorted(left)}")
