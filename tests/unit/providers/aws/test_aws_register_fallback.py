"""The NLB target registration's fallback when ``RegisterTargets`` answers ``InvalidTarget``
(an instance stopped between the node list and the request, which AWS refuses to register):
kccm asks EC2 which of the targets are running and registers only those
(``TargetGroups._register``). The error is injected at the API seam, :meth:`AWSAPI.call`,
which moto cannot produce by itself (it registers stopped instances)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from aws_lb import nodes
from test_aws_loadbalancer import service, state

from kccm.cloudprovider import CloudProviderError
from kccm.emulators.aws import World, clients
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.api import AWSAPIError

Call = Callable[..., dict[str, Any]]


class RefusingRegistrations:
    """Wraps ``AWSAPI.call``: the first ``register_targets`` stops ``stop`` instances in moto
    and answers ``code`` (as AWS does for a stopped instance); every call is recorded."""

    def __init__(self, call: Call, world: World, stop: list[str], code: str) -> None:
        self._call, self._world, self._stop, self._code = call, world, stop, code
        self.refused = False
        self.registered: list[list[str]] = []
        self.after_refusal: Counter[str] = Counter()

    def __call__(self, service: str, operation: str, **params: Any) -> dict[str, Any]:
        if self.refused:
            filters = sorted(f["Name"] for f in params.get("Filters", ()))
            self.after_refusal[f"{operation}{filters}" if filters else operation] += 1
        if operation == "register_targets":
            ids = sorted(str(t["Id"]) for t in params["Targets"])
            if not self.refused:
                self.refused = True
                if self._stop:
                    ec2, _ = clients(self._world.url)
                    ec2.stop_instances(InstanceIds=self._stop)
                raise AWSAPIError(
                    f"elbv2 register_targets: {self._code}: The following targets are not in "
                    f"a running state and cannot be registered: '{','.join(self._stop)}'",
                    self._code,
                )
            self.registered.append(ids)
        return self._call(service, operation, **params)


@pytest.mark.parametrize(
    ("stopped", "registered"),
    [
        pytest.param(1, [2], id="one-stopped-the-running-two-registered"),
        pytest.param(3, [], id="all-stopped-nothing-registered-no-second-call"),
    ],
)
def test_invalid_target_registers_only_the_running_instances(
    cloud: AWSCloud,
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    stopped: int,
    registered: list[int],
) -> None:
    ids = sorted(world.instances)
    stop = ids[:stopped]
    spy = RefusingRegistrations(cloud.api.call, world, stop, "InvalidTarget")
    monkeypatch.setattr(cloud.api, "call", spy)
    lb = cloud.load_balancer()
    assert lb is not None
    svc = service()
    lb.ensure_load_balancer("k", svc, nodes(world))  # the ensure itself succeeds
    assert spy.refused
    assert [len(r) for r in spy.registered] == registered
    running = sorted(set(ids) - set(stop))
    assert spy.registered == ([running] if running else [])
    running_query = "describe_instances['instance-id', 'instance-state-name']"
    assert spy.after_refusal[running_query] == 1  # which targets run, asked from EC2 once
    (targets,) = state(world, svc)["targets"].values()
    assert [target for target, _ in targets] == running


def test_another_registration_error_is_not_swallowed(
    cloud: AWSCloud, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = RefusingRegistrations(cloud.api.call, world, [], "ValidationError")
    monkeypatch.setattr(cloud.api, "call", spy)
    lb = cloud.load_balancer()
    assert lb is not None
    with pytest.raises(CloudProviderError, match="ValidationError"):
        lb.ensure_load_balancer("k", service(), nodes(world))
    assert spy.registered == []
