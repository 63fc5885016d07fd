"""Two Services ensured at once on the one shared balancer and security group both survive:
in one process (the per-resource lock) and from two processes that both read before either
writes (If-Match: the second write gets 412, reads again and merges)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from azlb_fake_arm import NET, FakeArm, seed_network, seed_vm, service, settings

from kccm.providers.azure.loadbalancer import AzureLoadBalancers

CLUSTER = "kubernetes"
LB = f"{NET}/loadBalancers/kubernetes"
NSG = f"{NET}/networkSecurityGroups/nsg"
UIDS = ("11111111-0000-4000-8000-000000000001", "22222222-0000-4000-8000-000000000002")


class RacingArm(FakeArm):
    """Holds each thread's first read of the shared resources until both threads made it,
    so both compute their write from the same ETag."""

    def __init__(self, racers: int) -> None:
        super().__init__()
        self.shared = (LB.lower(), NSG.lower())
        self.barriers = {path: threading.Barrier(racers, timeout=10) for path in self.shared}
        self.seen: set[tuple[int, str]] = set()

    def get(self, path: str) -> dict[str, Any] | None:
        found = super().get(path)
        key = (threading.get_ident(), path.lower())
        if path.lower() in self.shared and key not in self.seen:
            self.seen.add(key)
            self.barriers[path.lower()].wait()
        return found


def _both(run: Callable[[int], object]) -> None:
    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(run, index) for index in range(2)]:
            future.result()


def _check_both_survive(arm: FakeArm) -> None:
    lb = arm.resource(LB)["properties"]
    bases = ["a" + uid.replace("-", "")[:31] for uid in UIDS]
    assert sorted(f["name"] for f in lb["frontendIPConfigurations"]) == sorted(bases)
    assert sorted(r["name"] for r in lb["loadBalancingRules"]) == sorted(
        f"{base}-TCP-{80 + i}" for i, base in enumerate(bases)
    )
    rules = arm.resource(NSG)["properties"]["securityRules"]
    assert sorted(r["properties"]["destinationPortRanges"][0] for r in rules) == ["80", "81"]


def _service(index: int) -> dict[str, Any]:
    return service(uid=UIDS[index], name=f"web{index}", ports=(("TCP", 80 + index, 30080 + index),))


@pytest.mark.parametrize("racers", [1, 2], ids=["one-process", "two-processes"])
def test_two_services_at_once_both_survive(racers: int) -> None:
    arm = RacingArm(2) if racers == 2 else FakeArm()
    seed_network(arm)
    nodes = [seed_vm(arm, "vm-0", "10.0.1.4")]
    arm.seed(LB, {"location": "westus", "sku": {"name": "Standard"}, "properties": {}})
    instances = [AzureLoadBalancers(arm, settings()) for _ in range(racers)]
    _both(lambda i: instances[i % racers].ensure_load_balancer(CLUSTER, _service(i), nodes))
    _check_both_survive(arm)
    if isinstance(arm, RacingArm):
        assert ("412", LB) in arm.calls
        assert ("412", NSG) in arm.calls
        arm.shared = ()
    arm.calls.clear()
    for i in range(2):
        instances[0].ensure_load_balancer(CLUSTER, _service(i), nodes)
    assert arm.mutating() == []
