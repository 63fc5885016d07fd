"""The aws provider on moto: what a restart costs with N unchanged balancers.

Usage: .venv/bin/python bench/aws_restart.py [--services 300] [--kind nlb|classic]
       [--nodes 3] [--workers 8]

Starts moto (server mode), ensures N LoadBalancer Services (one balancer each, two ports,
every node a target: an NLB with ``aws-load-balancer-type: nlb``, else upstream's default, a
Classic ELB with its own security group and node rule), then builds a fresh provider, as a
restarted kccm would, and ensures every Service again, as the service controller does at
start: wall time, AWS requests per balancer, and the mutating ones (expected: none). Then
one balancer of each ten is changed behind the provider's back (a listener deleted) and a
third round repairs them: mutating requests per repaired balancer.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3

from kccm.cloudprovider import default_load_balancer_name
from kccm.cloudprovider.apicalls import APICallCounts
from kccm.emulators import aws as support
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.annotations import TYPE
from kccm.providers.aws.config import load_aws_config


def service(i: int, kind: str) -> dict[str, Any]:
    annotations = {TYPE: "nlb"} if kind == "nlb" else {}
    return {
        "metadata": {
            "name": f"web-{i}",
            "namespace": "bench",
            "uid": str(uuid.uuid4()),
            "annotations": annotations,
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30000 + 2 * i},
                {"name": "https", "port": 443, "protocol": "TCP", "nodePort": 30001 + 2 * i},
            ],
        },
    }


def ensure_all(
    cloud: AWSCloud, services: list[dict[str, Any]], nodes: list[Any], workers: int
) -> tuple[float, APICallCounts]:
    lb = cloud.load_balancer()
    assert lb is not None
    before = cloud.cloud_api_calls().snapshot()
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda svc: lb.ensure_load_balancer("bench", svc, nodes), services))
    return time.perf_counter() - start, cloud.cloud_api_calls().snapshot().since(before)


def drift(url: str, services: list[dict[str, Any]], kind: str) -> int:
    """Delete the first listener of every tenth balancer; returns how many were changed."""
    _, elbv2 = support.clients(url)
    changed = services[::10]
    for svc in changed:
        name = default_load_balancer_name(svc)
        if kind == "classic":
            elb = boto3.client(
                "elb",
                region_name=support.REGION,
                endpoint_url=url,
                aws_access_key_id=support.CREDENTIALS["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=support.CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            )
            elb.delete_load_balancer_listeners(LoadBalancerName=name, LoadBalancerPorts=[80])
            continue
        arn = elbv2.describe_load_balancers(Names=[name])["LoadBalancers"][0]["LoadBalancerArn"]
        listener = elbv2.describe_listeners(LoadBalancerArn=arn)["Listeners"][0]
        elbv2.delete_listener(ListenerArn=listener["ListenerArn"])
    return len(changed)


def report(label: str, count: int, elapsed: float, calls: APICallCounts) -> None:
    print(
        f"{label:<9} {count} balancers in {elapsed:6.1f} s: {calls.total_reads / count:.1f} "
        f"reads and {calls.total_writes / count:.2f} writes per balancer; writes "
        f"{dict(sorted(calls.writes.items())) or 'none'}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=300)
    parser.add_argument("--kind", choices=("nlb", "classic"), default="nlb")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    os.environ.update(support.CREDENTIALS)
    os.environ.pop("AWS_PROFILE", None)
    with support.moto_emulator() as moto:
        url = moto.url
        world = support.build_world(url, f"bench{uuid.uuid4().hex[:6]}", instances=args.nodes)
        nodes = [support.node_for(world, i) for i in world.instances]
        services = [service(i, args.kind) for i in range(args.services)]
        config = world.cloud_config()
        elapsed, calls = ensure_all(
            AWSCloud(load_aws_config(config)), services, nodes, args.workers
        )
        report("create", len(services), elapsed, calls)
        restarted = AWSCloud(load_aws_config(config))  # a fresh provider: nothing in memory
        elapsed, calls = ensure_all(restarted, services, nodes, args.workers)
        report("restart", len(services), elapsed, calls)
        changed = drift(url, services, args.kind)
        elapsed, calls = ensure_all(restarted, services, nodes, args.workers)
        report("repair", len(services), elapsed, calls)
        print(f"repair    {changed} balancers had drifted (a listener deleted)", flush=True)


if __name__ == "__main__":
    main()
